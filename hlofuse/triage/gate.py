"""`explain --fail-on COND`: a CI gate over the groups of boundaries.

A condition is one term, or several joined with `&` (all must hold for one group):

    RULE      a rule id, name or glob (`PF-UNPROFITABLE`, `concat-multi-user`, `CPU-*`), or
              `unknown`: the group's rule is one of them;
    TAG       a rule tag or a library tag (`concat`, `reduction`, `rng`, `ynn`): the group's
              tags hold it (a reference that is both a tag and a rule name means the rules);
    bytes>N   the group's bytes per run exceed N (suffixes K, M, G: powers of 1024);
    us>N      the group's modelled time per run exceeds N µs.

The command exits with EXIT_GATE (10) when any condition matches any group, after printing its
report; the JSON carries `fail_on` (each condition and the groups it matched).  An unknown rule
or tag is an error before any work (exit 4), a malformed term a usage error (exit 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import OptionError, UnknownRuleRef

#: Library tags boundaries carry besides their rule's tags (rules/boundaries.py _LIBRARIES).
LIBRARY_TAGS = frozenset({"rng", "triton", "cublas", "gemm", "cudnn", "ynn", "onednn", "lapack", "cusolver", "fft",
                          "topk", "sort", "library"})
_THRESHOLD = re.compile(r"^(bytes|us)\s*(>=|>)\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kmgKMG](?:i?[bB])?)?$")
_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


@dataclass(frozen=True)
class Term:
    text: str
    rules: frozenset[str] | None = None
    tag: str | None = None
    measure: str | None = None  # bytes | us
    at_least: bool = False
    threshold: float = 0.0

    def holds(self, group) -> bool:
        if self.rules is not None:
            return group.rule in self.rules
        if self.tag is not None:
            return self.tag in group.tags
        value = group.bytes_per_run if self.measure == "bytes" else group.modelled_us
        if value is None:
            return False
        return value >= self.threshold if self.at_least else value > self.threshold


@dataclass(frozen=True)
class Condition:
    text: str
    terms: tuple[Term, ...]

    def matches(self, group) -> bool:
        return all(t.holds(group) for t in self.terms)


def parse_conditions(texts) -> tuple[Condition, ...]:
    return tuple(parse_condition(t) for t in texts)


def parse_condition(text: str) -> Condition:
    parts = [p.strip() for p in text.split("&")]
    if not text.strip() or any(not p for p in parts):
        raise OptionError(f"--fail-on {text!r}: expected RULE, TAG, bytes>N or us>N, joined with &")
    return Condition(text, tuple(_term(p) for p in parts))


def _term(text: str) -> Term:
    m = _THRESHOLD.match(text)
    if m:
        measure, op, number, unit = m.groups()
        value = float(number)
        if unit:
            if measure != "bytes":
                raise OptionError(f"--fail-on {text!r}: a unit only applies to bytes (us>N is in µs)")
            value *= _UNITS[unit[0].lower()]
        return Term(text, measure=measure, at_least=op == ">=", threshold=value)
    if re.match(r"^\s*(bytes|us)\b", text):
        raise OptionError(f"--fail-on {text!r}: expected bytes>N or us>N (N a number; bytes may end in K, M or G)")
    if text == "unknown":
        return Term(text, rules=frozenset({"unknown"}))
    from ..rules import find

    try:
        matched = find([text])
    except UnknownRuleRef:
        if text.lower() in LIBRARY_TAGS:
            return Term(text, tag=text.lower())
        raise
    from ..rules import load_all

    rules = load_all()
    if text.upper() not in rules and all(r.name != text.lower() for r in matched) \
            and not any(ch in text for ch in "*?["):
        return Term(text, tag=text.lower())  # a tag: groups carry their rule's tags
    return Term(text, rules=frozenset(r.id for r in matched))


def check_gate(groups, conditions) -> list[tuple[Condition, object]]:
    """(condition, group) for every group (groups.Group) a condition matches, in order."""
    return [(c, g) for g in groups for c in conditions if c.matches(g)]


def gate_dict(groups, conditions, matches) -> dict:
    index = {id(g): i for i, g in enumerate(groups)}
    return {"conditions": [c.text for c in conditions], "failed": bool(matches),
            "matches": [{"condition": c.text, "group": index[id(g)], "rule": g.rule,
                         "source": g.source.short() if g.source is not None else None} for c, g in matches]}


def gate_message(matches) -> str:
    first_condition, first = matches[0]
    where = f" at {first.source.short()}" if first.source is not None and first.source.short() else ""
    groups = len({id(g) for _, g in matches})
    return (f"--fail-on {first_condition.text}: {groups} group(s) of boundaries match, the first {first.rule}{where} "
            f"({first.count} boundaries)")

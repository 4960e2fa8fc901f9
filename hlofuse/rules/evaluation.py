"""Asking rules about a candidate pair, with XLA's FusionDecision semantics: the rules of a
list are asked in order, the first objection that is not relaxed decides, relaxed objections
are noted and the asking goes on (`FusionDecision::All`).

Its own module, apart from the registry (rules/__init__.py re-exports it), so that the compiled
core (hlofuse.native) can compile it: every pass asks it for every candidate pair, hundreds of
thousands of times on a large module, and the passes that call it are compiled too.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from . import Candidate, Rule


@dataclass(frozen=True, slots=True, init=False)
class Outcome:
    """The result of asking rules about a candidate: `blocked_by` is None when it may fuse.
    (Its own `__init__`: compiled, the one dataclasses writes for a frozen class would be the
    interpreter's; this one stores the fields directly.)"""

    blocked_by: Rule | None
    facts: Mapping[str, Any]
    relaxed: tuple[str, ...]

    def __init__(self, blocked_by: Rule | None, facts: Mapping[str, Any], relaxed: tuple[str, ...]) -> None:
        object.__setattr__(self, "blocked_by", blocked_by)
        object.__setattr__(self, "facts", facts)
        object.__setattr__(self, "relaxed", relaxed)

    def __reduce__(self) -> tuple:
        return Outcome, (self.blocked_by, self.facts, self.relaxed)

    @property
    def allowed(self) -> bool:
        return self.blocked_by is None


def evaluate(rule_ids: Sequence[str], candidate: Candidate, relaxed: frozenset[str] = frozenset()) -> Outcome:
    """Ask rules in order; the first objection not relaxed decides (XLA's `FusionDecision::All`)."""
    compiled = _compiled.get(id(rule_ids))
    if compiled is None or compiled[0] is not rule_ids:
        compiled = _compile(rule_ids)
    relaxed_hits: list[str] | None = None
    for rid, check, r in compiled[1]:
        facts = check(candidate)
        if facts is None:
            continue
        if rid in relaxed:
            if relaxed_hits is None:
                relaxed_hits = []
            relaxed_hits.append(rid)
            continue
        return Outcome(r, dict(facts), tuple(relaxed_hits) if relaxed_hits else ())
    return Outcome(None, _NO_FACTS, tuple(relaxed_hits)) if relaxed_hits else _ALLOWED


#: Rule lists already asked (passes ask the same few lists again and again), by value
#: (the tuple → (the first tuple of that value, its (id, check, rule) triples)) and, that
#: first tuple, by identity (id → the same pair; the entry keeps the tuple alive, so its id
#: is not reused).  A list written out where it is asked (`("IF-PRODUCER-NOT-FUSIBLE",)`) is
#: a new tuple at every question in compiled code: it is found by value, without an import,
#: an entry by identity or a clearing of them.
_compiled: dict[int, tuple[Any, tuple[tuple[str, Any, Any], ...]]] = {}
_compiled_by_value: dict[tuple, tuple[Any, tuple[tuple[str, Any, Any], ...]]] = {}


def _compile(rule_ids: Sequence[str]) -> tuple[Any, tuple[tuple[str, Any, Any], ...]]:
    key = rule_ids if type(rule_ids) is tuple else tuple(rule_ids)
    found = _compiled_by_value.get(key)
    if found is None:
        from . import REGISTRY

        found = _compiled_by_value[key] = (key, tuple((rid, REGISTRY[rid].check, REGISTRY[rid]) for rid in key))
    if found[0] is rule_ids:  # (a list may be edited later: only a tuple is remembered by identity)
        _compiled[id(rule_ids)] = found
    return found


def rule_reason(message: str, facts: Mapping[str, Any]) -> str:
    """A rule's sentence: its message with the facts of an objection filled in (the message
    itself where a fact it names is missing).  Here, compiled: every refusal kept is worded.
    The same sentence as `message.format(**facts)`, from the message's parts parsed once
    (`_template`): parsing the markup again for every refusal was most of the cost."""
    parts = _templates.get(message)
    if parts is None:
        parts = _templates[message] = _template(message)
    try:
        if not parts:  # (markup `_template` does not take apart: str.format itself)
            return message.format(**facts)
        pieces: list[str] = []
        for literal, field, spec in parts:
            pieces.append(literal)
            if field:
                pieces.append(format(facts[field], spec))
        return "".join(pieces)
    except (KeyError, IndexError, ValueError):
        return message


#: message → its parts (literal text, field name or "" after the last field, format spec);
#: an empty tuple for a message with markup the parts do not cover (conversions, positional,
#: attribute or item fields, nested specs), which is formatted by str.format every time.
_templates: dict[str, tuple[tuple[str, str, str], ...]] = {}


def _template(message: str) -> tuple[tuple[str, str, str], ...]:
    import string

    parts: list[tuple[str, str, str]] = []
    try:
        parsed = list(string.Formatter().parse(message))
    except ValueError:
        return ()
    for literal, field, spec, conversion in parsed:
        if field is None:
            parts.append((literal, "", ""))
            continue
        if conversion is not None or not field.isidentifier() or "{" in (spec or ""):
            return ()
        parts.append((literal, field, spec or ""))
    if not parts:  # (the empty message)
        parts.append(("", "", ""))
    return tuple(parts)


#: The answer to most questions (asked hundreds of thousands of times on a large module): one
#: shared, read-only value.
_NO_FACTS: Final[Mapping[str, Any]] = MappingProxyType({})
_ALLOWED: Final = Outcome(None, _NO_FACTS, ())


def objection(**facts: Any) -> dict:
    """What a rule returns when it objects: the facts its message is built from."""
    return facts

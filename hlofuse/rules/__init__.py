"""The rule registry: every fusion rule hlofuse replays, with a stable id, its XLA reference,
and whether a user may relax it.

A rule is a function decorated with `@rule(...)`, living in `rules/<area>.py`.  It receives a
`Candidate` (producer, consumer, the pass context, and as typed slots the facts its pass family
hands over: rules/candidates.py) and returns None when it has no objection, or a dict of facts
when it objects — never a bare bool, so a refusal always carries
its rule and facts.  Passes (hlofuse/passes/) ask rules in XLA's order through `evaluate`,
which implements XLA's `FusionDecision` semantics: the first objection that is not relaxed
blocks; relaxed objections are recorded and evaluation goes on.

The docstring of a rule is its user documentation, with these headings:
    <one-line summary>
    What it checks: ...
    Why XLA does this: ...
    Example: <minimal HLO>
    Relaxing: <what changes; why it is safe or only a performance trade>
`hlofuse rules ID` prints it.
"""

from __future__ import annotations

import fnmatch
import functools
import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import NotRelaxable, UnknownRuleRef
# Asking rules (XLA's FusionDecision semantics) lives in its own module, which the compiled
# core compiles; it is part of this package's interface.
from .evaluation import Outcome, evaluate, objection, rule_reason  # noqa: F401
# What rules are asked about: compiled with them (rules/candidates.py), part of this interface.
from .candidates import Candidate  # noqa: F401

#: The XLA commits rule references are pinned to, per pipeline.
XLA_COMMITS = {
    # jaxlib 0.4.35 (paper-era legacy GPU pipeline); docs/xla/legacy-gpu-pipeline.md
    "legacy": "76da730179313b3bebad6dea6861768421b7358c",
    # jaxlib 0.10.2 (priority fusion, XLA:CPU); docs/xla/priority-fusion.md, docs/xla/cpu-fusion.md
    "priority": "5a9e73cbd92530cac2ac36f4736a774b2412afe2",
    "cpu": "5a9e73cbd92530cac2ac36f4736a774b2412afe2",
    # XLA of 2025-01-15 ("N"), which shared/corpus/fusion's horizontal and MOF cases come from; only
    # the N variant of HorizontalLoopFusion (rules/horizontal_fusion.py) cites it
    "corpus": "84d7260817c4081b13f68266a6a17210fcb6f3d9",
}

_ID_RE = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)+$")
_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
HEADINGS = ("What it checks:", "Why XLA does this:", "Example:", "Relaxing:")


@dataclass(frozen=True)
class XlaRef:
    """Where XLA implements a rule, and what XLA says when it refuses (verbatim)."""

    file: str
    function: str
    message: str | None
    commit: str

    def to_dict(self) -> dict:
        return {"file": self.file, "function": self.function, "message": self.message, "commit": self.commit}


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    summary: str
    doc: str
    passes: tuple[str, ...]
    pipelines: tuple[str, ...]
    tags: frozenset[str]
    relaxable: bool
    xla: XlaRef
    message: str
    check: Callable[["Candidate"], Mapping[str, Any] | None] = field(repr=False, compare=False)
    status: str = "stable"
    source: tuple[str, int] = ("", 0)

    def reason(self, facts: Mapping[str, Any]) -> str:
        return rule_reason(self.message, facts)

    def to_dict(self) -> dict:
        return {
            "id": self.id, "name": self.name, "summary": self.summary, "doc": self.doc,
            "passes": list(self.passes), "pipelines": list(self.pipelines), "tags": sorted(self.tags),
            "relaxable": self.relaxable, "status": self.status, "xla": self.xla.to_dict(),
            "message": self.message, "source": {"file": self.source[0], "line": self.source[1]},
        }


REGISTRY: dict[str, Rule] = {}


def rule(*, id: str, name: str, passes: Sequence[str], pipelines: Sequence[str], tags: Iterable[str],
         relaxable: bool, xla: XlaRef, message: str, status: str = "stable") -> Callable:
    """Register a rule function (see the module docstring)."""

    def register(fn: Callable) -> Callable:
        if not _ID_RE.match(id):
            raise ValueError(f"rule id {id!r} must be upper kebab case, e.g. IF-PRODUCER-FUSION")
        if not _NAME_RE.match(name):
            raise ValueError(f"rule name {name!r} must be lower kebab case")
        if id in REGISTRY:
            raise ValueError(f"rule id {id} registered twice")
        if any(r.name == name for r in REGISTRY.values()):
            raise ValueError(f"rule name {name} registered twice")
        doc, file, line = _doc_and_place(fn)
        summary = doc.splitlines()[0] if doc else name
        REGISTRY[id] = Rule(id, name, summary, doc, tuple(passes), tuple(pipelines), frozenset(tags), relaxable,
                            xla, message, fn, status, (_relative(file), line))
        return fn

    return register


def _doc_and_place(fn: Callable) -> tuple[str, str, int]:
    """A rule function's docstring, source file and first line (its first decorator's).  A
    function compiled by mypyc (hlofuse.native) keeps neither: they are read from its module's
    source, which the compiled core is checked to match."""
    if fn.__doc__ is not None or not _is_compiled(fn):
        try:
            return inspect.cleandoc(fn.__doc__ or ""), inspect.getsourcefile(fn) or "", inspect.getsourcelines(fn)[1]
        except (OSError, TypeError):
            return inspect.cleandoc(fn.__doc__ or ""), "", 0
    from .. import native

    path = native.source_path(fn.__module__)
    found = _module_functions(str(path)).get(fn.__name__)
    if found is None:
        return "", "", 0
    return found[0], str(path), found[1]


def _is_compiled(fn: Callable) -> bool:
    return not hasattr(fn, "__code__")


@functools.lru_cache(maxsize=None)
def _module_functions(path: str) -> dict[str, tuple[str, int]]:
    """name -> (docstring, first line) of each top-level function of a source file."""
    import ast

    tree = ast.parse(Path(path).read_text(), path)
    return {node.name: (inspect.cleandoc(ast.get_docstring(node, clean=False) or ""),
                        min([node.lineno, *(d.lineno for d in node.decorator_list)]))
            for node in tree.body if isinstance(node, ast.FunctionDef)}


def _relative(path: str) -> str:
    marker = "hlofuse/"
    idx = path.rfind(marker)
    return path[idx:] if idx >= 0 else path


def load_all() -> Mapping[str, Rule]:
    """Import every rules module (they register themselves) and return the registry."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return REGISTRY


# ------------------------------------------------------------------------------------------
# Selecting rules: `--relax concat`, `hlofuse rules IF-*`
# ------------------------------------------------------------------------------------------


def find(refs: Iterable[str]) -> list[Rule]:
    """Rules matching references, by priority: exact id > name > tag > glob on id or name.
    An unknown reference is an error naming close matches."""
    rules = load_all()
    out: list[Rule] = []
    for ref in refs:
        matched = _match(ref, rules)
        if not matched:
            raise UnknownRuleRef(_unknown_message(ref, rules))
        for r in matched:
            if r not in out:
                out.append(r)
    return out


def _match(ref: str, rules: Mapping[str, Rule]) -> list[Rule]:
    upper = ref.upper()
    if upper in rules:
        return [rules[upper]]
    by_name = [r for r in rules.values() if r.name == ref.lower()]
    if by_name:
        return by_name
    by_tag = [r for r in rules.values() if ref.lower() in r.tags]
    if by_tag:
        return sorted(by_tag, key=lambda r: r.id)
    if any(ch in ref for ch in "*?["):
        return sorted((r for r in rules.values()
                       if fnmatch.fnmatchcase(r.id, upper) or fnmatch.fnmatchcase(r.name, ref.lower())),
                      key=lambda r: r.id)
    return []


def _unknown_message(ref: str, rules: Mapping[str, Rule]) -> str:
    import difflib

    words = list(rules) + [r.name for r in rules.values()] + sorted({t for r in rules.values() for t in r.tags})
    close = difflib.get_close_matches(ref, words, n=5, cutoff=0.5) or \
        difflib.get_close_matches(ref.upper(), words, n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `hlofuse rules` lists them"
    return f"no rule matches {ref!r}{hint}"


def resolve_relax(refs: Iterable[str], pipeline: str | None = None) -> frozenset[str]:
    """Ids of the rules `--relax REF...` turns off.  A tag or glob relaxes its relaxable rules;
    naming a rule that protects correctness, or a tag with no relaxable rule, is an error."""
    chosen: set[str] = set()
    for ref in refs:
        matched = find([ref])
        if pipeline is not None:
            in_pipeline = [r for r in matched if pipeline in r.pipelines]
            matched = in_pipeline or matched
        relaxable = [r for r in matched if r.relaxable]
        if not relaxable:
            names = ", ".join(f"{r.id} ({r.name})" for r in matched)
            raise NotRelaxable(f"{ref!r} names rules that protect correctness and cannot be relaxed: {names}")
        single = len(matched) == 1 and (ref.upper() == matched[0].id or ref.lower() == matched[0].name)
        if single and not matched[0].relaxable:
            raise NotRelaxable(f"{matched[0].id} ({matched[0].name}) protects correctness and cannot be relaxed")
        chosen.update(r.id for r in relaxable)
    return frozenset(chosen)


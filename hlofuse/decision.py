"""What the fusion replay produces: one Decision per candidate pair, and the kernels of the
fused module.  Data only; the rules and passes that fill them live in rules/ and passes/.
Compiled by hlofuse.native: the passes build hundreds of thousands of Decisions."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Final, Mapping

from . import ir
from .native import mypyc_attr


class Verdict(str, Enum):
    FUSED = "fused"
    BLOCKED = "blocked"
    #: A relaxable rule objected, the user relaxed it (`--relax`), and the pair was fused.
    RELAXED = "relaxed"


#: Decision's default facts: a fresh empty dict each (the dataclass's default_factory=dict).
_NO_FACTS: Final[Mapping[str, Any]] = MappingProxyType({})
_set_attribute = object.__setattr__


def _compiled() -> bool:
    """Whether this module runs compiled (hlofuse.native): a compiled function has no code object."""
    return not hasattr(_compiled, "__code__")


#: Compiled, Decision is a native class: its constructor writes the fields into the object's
#: own slots.  From source it is a frozen dataclass whose constructor sets the instance's dict
#: at once.
_NATIVE: Final = _compiled()


@dataclass(frozen=True, init=False)
class Decision:
    """The outcome of considering one producer→consumer (or sibling) pair in one pass.

    `reason` is our sentence with the concrete facts; `xla_reason` is the string XLA itself
    reports for the same refusal (verbatim), so users can grep XLA's source and logs.

    The constructor is written by hand: one is made per pair considered (hundreds of
    thousands on a large module).  Compiled, the class is native and the constructor stores
    each field in its slot (the frozen dataclass's __setattr__, which refuses every assignment
    from outside, is not in that path); from source it sets the instance's dict once, where
    the dataclass's would make 13 object.__setattr__ calls.  Fields, defaults, equality, repr
    and immutability are the dataclass's; it pickles as its fields (`__reduce__`), so an
    entry of the result cache written compiled loads from source and the other way round."""

    pass_name: str
    producer: str
    consumer: str
    verdict: Verdict
    rule: str | None = None
    reason: str = ""
    xla_reason: str | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)
    #: Rules that objected but were relaxed by the user (verdict RELAXED or FUSED after them).
    relaxed: tuple[str, ...] = ()
    computation: str | None = None
    #: Input-module instructions standing behind producer and consumer (fusions: their members).
    producer_members: tuple[str, ...] = ()
    consumer_members: tuple[str, ...] = ()
    source: ir.SourceLocation | None = None

    def __init__(self, pass_name: str, producer: str, consumer: str, verdict: Verdict, rule: str | None = None,
                 reason: str = "", xla_reason: str | None = None, facts: Mapping[str, Any] = _NO_FACTS,
                 relaxed: tuple[str, ...] = (), computation: str | None = None,
                 producer_members: tuple[str, ...] = (), consumer_members: tuple[str, ...] = (),
                 source: ir.SourceLocation | None = None) -> None:
        if _NATIVE:
            # (mypy reads these as assignments to frozen fields; compiled they are slot writes)
            self.pass_name = pass_name  # type: ignore[misc]
            self.producer = producer  # type: ignore[misc]
            self.consumer = consumer  # type: ignore[misc]
            self.verdict = verdict  # type: ignore[misc]
            self.rule = rule  # type: ignore[misc]
            self.reason = reason  # type: ignore[misc]
            self.xla_reason = xla_reason  # type: ignore[misc]
            self.facts = {} if facts is _NO_FACTS else facts  # type: ignore[misc]
            self.relaxed = relaxed  # type: ignore[misc]
            self.computation = computation  # type: ignore[misc]
            self.producer_members = producer_members  # type: ignore[misc]
            self.consumer_members = consumer_members  # type: ignore[misc]
            self.source = source  # type: ignore[misc]
            return
        _set_attribute(self, "__dict__", {
            "pass_name": pass_name, "producer": producer, "consumer": consumer, "verdict": verdict,
            "rule": rule, "reason": reason, "xla_reason": xla_reason,
            "facts": {} if facts is _NO_FACTS else facts, "relaxed": relaxed, "computation": computation,
            "producer_members": producer_members, "consumer_members": consumer_members, "source": source})

    def __reduce__(self) -> tuple:
        return Decision, (self.pass_name, self.producer, self.consumer, self.verdict, self.rule, self.reason,
                          self.xla_reason, self.facts, self.relaxed, self.computation, self.producer_members,
                          self.consumer_members, self.source)

    def to_dict(self) -> dict:
        return {
            "pass": self.pass_name,
            "computation": self.computation,
            "producer": self.producer,
            "consumer": self.consumer,
            "verdict": self.verdict.value,
            "rule": self.rule,
            "reason": self.reason,
            "xla_reason": self.xla_reason,
            "relaxed": list(self.relaxed),
            "facts": {k: v if type(v) in _PLAIN else _jsonable(v) for k, v in self.facts.items()},
            "source": _source_dict(self.source),
        }


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _jsonable(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def _source_dict(loc: ir.SourceLocation | None) -> dict | None:
    if loc is None:
        return None
    return {"file": loc.file, "line": loc.line, "function": loc.function}


@mypyc_attr(native_class=False)  # (few, and pickled by the result cache as from source)
@dataclass(frozen=True)
class Kernel:
    """One kernel of a fused module: a fusion, a library call, or an unfused instruction."""

    name: str
    kind: str  # kLoop | kInput | kOutput | kCustom | library | unfused op's opcode
    computation: str
    #: Names of the input module's instructions this kernel computes.
    instructions: tuple[str, ...]
    root: str
    #: Names of the input module's instructions whose values it writes (a multi-output
    #: fusion's outputs, in order; empty where unknown).
    outputs: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "computation": self.computation,
                "instructions": list(self.instructions), "root": self.root}


@mypyc_attr(native_class=False)
@dataclass(frozen=True)
class FusionResult:
    """The replay of a fusion pipeline on one module."""

    module: ir.Module  # the fused module
    input: ir.Module
    backend: str
    pipeline: str
    passes: tuple[str, ...]
    gpu: str | None
    relaxed: tuple[str, ...]
    kernels: tuple[Kernel, ...]
    decisions: tuple[Decision, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "module": self.input.name,
            "backend": self.backend,
            "pipeline": self.pipeline,
            "passes": list(self.passes),
            "gpu": self.gpu,
            "relaxed": list(self.relaxed),
            "kernels": [k.to_dict() for k in self.kernels],
            "decisions": [d.to_dict() for d in self.decisions],
            "notes": list(self.notes),
        }

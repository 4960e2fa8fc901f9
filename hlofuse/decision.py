"""What the fusion replay produces: one Decision per candidate pair, and the kernels of the
fused module.  Data only; the rules and passes that fill them live in rules/ and passes/."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Mapping

from . import ir


class Verdict(str, Enum):
    FUSED = "fused"
    BLOCKED = "blocked"
    #: A relaxable rule objected, the user relaxed it (`--relax`), and the pair was fused.
    RELAXED = "relaxed"


#: Decision's default facts: a fresh empty dict each (the dataclass's default_factory=dict).
_NO_FACTS: Mapping[str, Any] = MappingProxyType({})
_set_attribute = object.__setattr__


@dataclass(frozen=True, init=False)
class Decision:
    """The outcome of considering one producer→consumer (or sibling) pair in one pass.

    `reason` is our sentence with the concrete facts; `xla_reason` is the string XLA itself
    reports for the same refusal (verbatim), so users can grep XLA's source and logs.

    The constructor is written by hand: one is made per pair considered (hundreds of
    thousands on a large module), and the generated one of a frozen dataclass sets each of
    the 13 fields with its own object.__setattr__ call; this one sets the instance's dict
    once.  Fields, defaults, equality, repr and immutability are the dataclass's."""

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
        _set_attribute(self, "__dict__", {
            "pass_name": pass_name, "producer": producer, "consumer": consumer, "verdict": verdict,
            "rule": rule, "reason": reason, "xla_reason": xla_reason,
            "facts": {} if facts is _NO_FACTS else facts, "relaxed": relaxed, "computation": computation,
            "producer_members": producer_members, "consumer_members": consumer_members, "source": source})

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

"""The records an explanation is made of (frozen dataclasses; renderers read only these)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping

from .. import ir

UNKNOWN = "unknown"

# ------------------------------------------------------------------------------------------
# Records
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceRef:
    """Where the user's program made an instruction (metadata or the stack-frame tables)."""

    file: str | None
    line: int | None
    op_name: str | None = None
    function: str | None = None

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "op_name": self.op_name, "function": self.function}

    def short(self) -> str:
        if self.file is None and self.line is None:
            return ""
        return f"{self.file or '?'}:{self.line if self.line is not None else '?'}"


@dataclass(frozen=True)
class KernelInfo:
    """One kernel: a fusion, a library call, a copy, or another unfused instruction."""

    name: str
    kind: str  # kLoop | kInput | kOutput | kCustom | library | <opcode>
    label: str  # "loop fusion", "library call (cuBLAS GEMM)", "copy", ...
    computation: str
    role: str  # role of its computation: entry, while_body, while_condition, branch, call, async
    instructions: tuple[str, ...]  # what it computes (a fusion: its fused instructions)
    root: str
    library: str | None
    bytes_out: int
    source: SourceRef | None
    #: One launch's modelled time in µs (launch overhead and run time; hlofuse/triage), and
    #: how often it is launched per run of the program; None where nothing prices the backend.
    modelled_us: float | None = None
    launches: int | None = None
    priced_by: str | None = None  # cost-model | roofline


@dataclass(frozen=True)
class Boundary:
    """One producer→consumer edge that crosses a kernel boundary, and why."""

    producer: str  # the instruction whose value crosses (inside the producer kernel)
    consumer: str  # the instruction that reads it (inside the consumer kernel), or the buffer
    producer_kernel: str
    consumer_kernel: str | None  # None when the consumer is a buffer (tuple) or control flow
    producer_computation: str
    consumer_computation: str
    crossing: tuple[str, ...]  # () within a computation; loop-carried, loop-input, ...
    rule: str
    tags: tuple[str, ...]
    reason: str
    relaxable: bool | None
    bytes: int
    source: SourceRef | None
    hint: str | None
    xla_reason: str | None  # XLA's own reason, from its fusion log when the dump has one
    agrees_with_xla: bool | None
    explained_by: str  # boundary-rule | replay | pipeline | xla-log | none
    facts: Mapping[str, Any] = field(default_factory=dict)
    via: tuple[str, ...] = ()  # buffers and views the value passes through
    consumer_source: SourceRef | None = None
    #: Which output of a tuple-shaped producer kernel crosses (a multi-output fusion's or a
    #: custom call's tuple index path); () for a kernel with one output.
    output: tuple[int, ...] = ()
    #: The pass whose decision kept the two apart (priority-fusion, fusion, fusion_merger, ...),
    #: "copy-insertion" for a copy added after fusion; None where no pass decided (a loop).
    decided_in: str | None = None
    #: The words XLA uses for our decision (what its log would say), for comparing with
    #: `xla_reason`.
    rule_xla_reason: str | None = None
    #: What later passes did to the same pair, and structural facts that also hold, in order
    #: (classify.Later: pass, rule, reason).
    then: tuple = ()
    #: Which hint (hints.Hint.kind) applies, when one does: rng-in-loop, packed-state,
    #: unroll, xla-flag.
    hint_kind: str | None = None
    hint_detail: Any = field(default=None, repr=False, compare=False)  # the hints.Hint
    #: What the boundary costs per run in µs (hlofuse/triage/pricing.py: writing the value,
    #: reading it back, the launch it adds), and those parts (a pricing.BoundaryCost).
    modelled_us: float | None = None
    cost: Any = None


@dataclass(frozen=True)
class ComputationSummary:
    name: str
    role: str
    kernels: int
    by_kind: Mapping[str, int]
    #: How often the computation runs per execution of the program (None: unknown trip count).
    runs: int | None


@dataclass(frozen=True)
class LoopSummary:
    """A while loop: its kernels per iteration and in total."""

    name: str
    computation: str
    body: str
    condition: str
    trip_count: int | None
    trip_count_from: str | None  # backend_config | condition | None
    body_kernels: int  # kernels of the body itself (nested loops' kernels not included)
    condition_kernels: int
    #: Whether the runtime evaluates the condition every iteration: not when the trip count is
    #: in backend_config (XLA's WhileThunk then runs the body trip-count times; GPU and CPU).
    condition_launched: bool
    kernels_per_iteration: int  # launched per iteration, nested loops included when known
    kernels_total: int | None  # launched by the whole loop, per execution of its computation
    source: SourceRef | None
    max_kernel_bytes: int = 0  # the largest output written by a kernel of the body


@dataclass(frozen=True)
class Explanation:
    module: str
    backend: str
    pipeline: str | None
    gpu: str | None
    input: str | None
    stage: str  # "fused" (explained as given) | "replayed" (fused by hlofuse first)
    kernels: tuple[KernelInfo, ...]
    boundaries: tuple[Boundary, ...]
    computations: tuple[ComputationSummary, ...]
    loops: tuple[LoopSummary, ...]
    detected: str = ""  # why this backend/pipeline, when they were not given
    notes: tuple[str, ...] = ()
    xla_log: str | None = None
    fused_module: ir.Module | None = field(default=None, repr=False, compare=False)
    #: What the replay behind the reasons started from (the dump's snapshot before fusion, the
    #: module with its fusions inlined, the input itself); None without a replay.
    replayed_from: str | None = None
    #: The replay behind the reasons (a FusionResult: its input is the module before fusion
    #: that predicted fixes replay again); None without one.
    replay_result: Any = field(default=None, repr=False, compare=False)
    #: The triage (hlofuse/triage): the modelled time of the module (a pricing.ModuleCost),
    #: the boundaries grouped by cause and ranked by cost, and what happened to predictions.
    cost: Any = field(default=None, repr=False, compare=False)
    groups: tuple = ()
    predictions: str | None = None
    #: Seconds the predictions' replays took (not in the JSON: it differs run to run).
    prediction_seconds: float | None = field(default=None, compare=False)
    #: The graph.Program of `fused_module` the explainer built (its rules asked it), for the
    #: triage to price the same nodes; None once priced or when none was built.
    fused_program: Any = field(default=None, repr=False, compare=False)

    def by_rule(self) -> Counter:
        return Counter(b.rule for b in self.boundaries)

    @property
    def unknown(self) -> int:
        return sum(1 for b in self.boundaries if b.rule == UNKNOWN)

    def summary(self) -> dict:
        """The summary numbers every renderer shows (plain data)."""
        runs = {c.name: c.runs for c in self.computations}
        launches = _launches_total(self)
        bytes_static = sum(b.bytes for b in self.boundaries)
        bytes_run: int | None = 0
        for b in self.boundaries:
            r = runs.get(b.consumer_computation)
            if r is None or bytes_run is None:
                bytes_run = None
            else:
                bytes_run += b.bytes * r
        by_rule = self.by_rule()
        cost = self.cost
        comp_us = cost.by_computation() if cost is not None else {}
        loop_us = cost.loops if cost is not None else {}
        return {
            "kernels": len(self.kernels),
            "kernels_launched": launches,
            "kernels_per_computation": [
                {"computation": c.name, "role": c.role, "kernels": c.kernels, "by_kind": dict(c.by_kind),
                 "runs": _num(c.runs), "modelled_us": _us(comp_us.get(c.name)),
                 "modelled_us_per_run": _us(comp_us[c.name] * (1 if c.runs is None else c.runs)
                                             if c.name in comp_us else None)}
                for c in self.computations],
            "loops": [
                {"while": lp.name, "computation": lp.computation, "body": lp.body, "condition": lp.condition,
                 "trip_count": lp.trip_count, "trip_count_from": lp.trip_count_from,
                 "body_kernels": lp.body_kernels, "condition_kernels": lp.condition_kernels,
                 "condition_launched": lp.condition_launched,
                 "kernels_per_iteration": lp.kernels_per_iteration, "kernels_total": lp.kernels_total,
                 "modelled_us_per_iteration": _us(loop_us[lp.name][0] if lp.name in loop_us else None),
                 "modelled_us_per_run": _us(loop_us[lp.name][1] if lp.name in loop_us else None)}
                for lp in self.loops],
            "boundaries": len(self.boundaries),
            "boundaries_by_rule": dict(sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0]))),
            "unknown": self.unknown,
            "bytes_across_boundaries": bytes_static,
            "bytes_across_boundaries_per_run": _num(bytes_run),
            "disagreements_with_xla": sum(1 for b in self.boundaries if b.agrees_with_xla is False),
            "agreements_with_xla": sum(1 for b in self.boundaries if b.agrees_with_xla is True),
            "decided_in": dict(sorted(Counter(b.decided_in or "-" for b in self.boundaries).items(),
                                      key=lambda kv: (-kv[1], kv[0]))),
            "modelled": self._modelled(),
        }

    def _modelled(self) -> dict | None:
        """The triage's totals: the target, µs per run of the kernels and of the boundaries,
        the groups, and what happened to predictions (None without a triage)."""
        if self.cost is None:
            return None
        priced = [b.modelled_us for b in self.boundaries if b.modelled_us is not None]
        return {**self.cost.summary(), "boundaries_us_per_run": _us(sum(priced)), "groups": len(self.groups),
                "predictions": self.predictions}


def _num(value):
    if value is None or isinstance(value, int):
        return value  # counts stay exact integers, however large (float() of them may overflow)
    return int(value) if float(value).is_integer() else value


def _us(value):
    return None if value is None else round(value, 4)


def _launches_total(ex: Explanation) -> int | None:
    total = 0
    for c in ex.computations:
        if c.runs is None:
            return None
        total += c.kernels * c.runs
    return total

"""Explain a fused module: its kernels, and for every value that crosses from one kernel to
another, which rule keeps the two apart — in words, with the user's source line and a hint.

Pure functions from a module (or a replay's FusionResult) to an `Explanation`; nothing here
prints.  The flow:

  1. a module before fusion is replayed first (`pipeline.replay`); a fused one is taken as is;
  2. kernels: every instruction that launches work in an executed computation (entry, while
     bodies and conditions, branches, calls) — fusions, library calls, copies, unfused ops;
     parameters, constants, tuples, get-tuple-element and bitcasts are buffers or views;
  3. edges: each kernel's operands (and each tuple's, and each control-flow operand) are traced
     back through get-tuple-element / tuple / bitcast, through while-loop, conditional and call
     parameters, to the kernel that really produced the value;
  4. each edge asks, first match wins: the boundary rules (hlofuse/rules/boundaries.py: loop
     and computation crossings, tuples, control flow, library calls, copies added after
     fusion), the replay's own decision for the pair, the pipeline's
     `explain_boundary(producer, consumer, ctx)` (the same registry `fuse` uses, evaluated on
     the fused graph), XLA's own fusion log; what none explains is rule `unknown`;
  5. summaries: kernels per computation, launches per loop iteration and in total (trip counts
     from `known_trip_count` or the loop condition), boundaries by rule, bytes across them.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from . import attributes, ir
from .kernels import CONTROL, executed_computations, is_kernel

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


@dataclass(frozen=True)
class ComputationSummary:
    name: str
    role: str
    kernels: int
    by_kind: Mapping[str, int]
    #: How often the computation runs per execution of the program (None: unknown trip count).
    runs: float | None


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
        bytes_run: float | None = 0
        for b in self.boundaries:
            r = runs.get(b.consumer_computation)
            if r is None or bytes_run is None:
                bytes_run = None
            else:
                bytes_run += b.bytes * r
        by_rule = self.by_rule()
        return {
            "kernels": len(self.kernels),
            "kernels_launched": launches,
            "kernels_per_computation": [
                {"computation": c.name, "role": c.role, "kernels": c.kernels, "by_kind": dict(c.by_kind),
                 "runs": _num(c.runs)} for c in self.computations],
            "loops": [
                {"while": lp.name, "computation": lp.computation, "body": lp.body, "condition": lp.condition,
                 "trip_count": lp.trip_count, "trip_count_from": lp.trip_count_from,
                 "body_kernels": lp.body_kernels, "condition_kernels": lp.condition_kernels,
                 "condition_launched": lp.condition_launched,
                 "kernels_per_iteration": lp.kernels_per_iteration, "kernels_total": lp.kernels_total}
                for lp in self.loops],
            "boundaries": len(self.boundaries),
            "boundaries_by_rule": dict(sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0]))),
            "unknown": self.unknown,
            "bytes_across_boundaries": bytes_static,
            "bytes_across_boundaries_per_run": _num(bytes_run),
            "disagreements_with_xla": sum(1 for b in self.boundaries if b.agrees_with_xla is False),
        }


def _agrees(rule, verdict, pipeline: str | None) -> bool | None:
    """Whether our rule says what XLA's log says: for a cost-model rejection, whether our rule
    is a cost-model rule; otherwise whether its XLA string (or, for a boundary rule, one of the
    strings XLA uses for that situation in this pipeline) occurs in XLA's reason."""
    from .rules.boundaries import XLA_REASONS

    if rule is None or verdict is None or verdict.reason is None:
        return None
    if getattr(verdict, "status", None) == "unprofitable":
        return "cost-model" in rule.tags
    xla_reason = verdict.reason
    expected: tuple[str, ...] = ()
    if rule.id in XLA_REASONS:
        table = XLA_REASONS[rule.id]
        expected = table.get(pipeline or "", ()) or tuple(x for v in table.values() for x in v)
    elif rule.xla.message:
        expected = (rule.xla.message,)
    if not expected:
        # XLA named a reason where our rule says only the cost model objected: they differ
        return False if "cost-model" in rule.tags and rule.xla.message is None else None
    text = xla_reason.strip().lower()
    return any(e.strip().lower() in text for e in expected)


def _num(value):
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value


def _launches_total(ex: Explanation) -> int | None:
    total: float = 0
    for c in ex.computations:
        if c.runs is None:
            return None
        total += c.kernels * c.runs
    return int(total)


# ------------------------------------------------------------------------------------------
# Dump context: what else the dump folder knows (snapshots, XLA's log)
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DumpContext:
    """The dump folder around the explained file: its module's files and the chosen one."""

    folder: Path
    files: tuple  # dumps.DumpFile of the chosen module
    chosen: Any  # dumps.DumpFile

    @property
    def device(self) -> str | None:
        for f in self.files:
            if f.device:
                return f.device
        return None

    def stage_is_fused(self) -> bool | None:
        """True for after_optimizations and snapshots taken after the main fusion pass
        (`fusion`, `priority-fusion`); False before it; None when the names do not say."""
        f = self.chosen
        if f.stage == "after_optimizations":
            return True
        if f.stage == "before_optimizations":
            return False
        if f.stage != "pass":
            return None
        verdict = _snapshot_is_fused(f)
        if verdict is not None:
            return verdict
        fused_steps = [x.step for x in self.files if x.stage == "pass" and _snapshot_is_fused(x)]
        if fused_steps and f.step is not None and f.step > min(fused_steps):
            return True
        return None

    def after_fusion_snapshot(self):
        from .dumpdir import fusion_snapshot

        return fusion_snapshot(list(self.files), "after_fusion")

    def xla_log(self):
        from .dumpdir import priority_fusion_log

        return priority_fusion_log(list(self.files))


#: Passes that run before the main fusion pass, the main fusion passes, and those after it.
_PRE_FUSION = frozenset({"variadic-op-splitter", "sort-iota-fusion"})
_MAIN_FUSION = frozenset({"fusion", "priority-fusion"})


def _snapshot_is_fused(f) -> bool | None:
    """A per-pass snapshot `after_X.before_Y` holds a fused module once the main fusion pass
    ran: X is a fusion pass other than the pre-fusion ones, or Y comes after the main pass."""
    from .dumpdir import FUSION_PASSES

    passes = {p for names in FUSION_PASSES.values() for p in names}
    if f.after_pass in passes - _PRE_FUSION:
        return True
    if f.before_pass in passes - _PRE_FUSION - _MAIN_FUSION:
        return True
    if f.before_pass in _PRE_FUSION | _MAIN_FUSION:
        return False
    return None


def dump_context(path: str, module: str | None = None, stage: str | None = None,
                 pipeline: str | None = None) -> DumpContext | None:
    """The DumpContext of a dump folder input (or of the folder holding an input file)."""
    from .dumpdir import choose_module, choose_stage, classify, scan

    p = Path(path)
    if path == "-" or not p.exists():
        return None
    if p.is_dir():
        files = choose_module(scan(p), module, path)
        return DumpContext(p, tuple(files), choose_stage(files, stage, pipeline))
    chosen = classify(p)
    if chosen is None:
        return None
    siblings = [f for f in scan(p.parent) if f.key == chosen.key]
    return DumpContext(p.parent, tuple(siblings), chosen)


# ------------------------------------------------------------------------------------------
# Entry points
# ------------------------------------------------------------------------------------------


def explain(module: ir.Module, *, backend: str | None = None, pipeline: str | None = None,
            gpu: str | None = None, dump: DumpContext | None = None, fused: bool | None = None,
            relax: tuple[str, ...] = ()) -> Explanation:
    """Explain `module`.  A module before fusion (or `fused=False`) is replayed first with the
    pipeline; a fused one (after_optimizations, a snapshot after fusion) is explained as given."""
    detected = _detect(module, dump, backend, pipeline, gpu)
    if fused is None:
        fused = dump.stage_is_fused() if dump is not None else None
    if fused is None:
        fused = _looks_fused(module)
    if not fused:
        from .pipeline import Options, replay

        result = replay(module, Options(backend=detected.backend, pipeline=detected.pipeline,
                                        gpu=detected.gpu, relax=tuple(relax)))
        ex = explain_result(result, dump=dump, detected=detected.why)
        if dump is not None and dump.chosen.stage == "before_optimizations":
            from dataclasses import replace

            ex = replace(ex, notes=ex.notes + (
                "this is XLA's module before any optimization: the replay skips XLA's passes before fusion "
                "(simplification, layout assignment, ...), so its kernels only approximate XLA's; prefer "
                "--stage before_fusion (dump with --xla_dump_hlo_pass_re) or the after_optimizations file",))
        return ex
    return _Explainer(module, detected, dump, stage="fused").run()


def explain_result(result, *, dump: DumpContext | None = None, detected: str = "") -> Explanation:
    """Explain a replay's FusionResult: the fused module, with the replay's own decisions
    preferred for the boundaries they formed."""
    info = _Detected(result.backend, result.pipeline, result.gpu, detected or "replayed")
    return _Explainer(result.module, info, dump, stage="replayed", replay=result).run()


def _looks_fused(module: ir.Module) -> bool:
    """Without a dump file name: fused when an executed computation holds a fusion that is not a
    library (kCustom) fusion."""
    for comp in executed_computations(module):
        for instr in comp.instructions:
            if instr.opcode == "fusion" and instr.fusion_kind != "kCustom":
                return True
    return False


# ------------------------------------------------------------------------------------------
# Backend, pipeline and GPU
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Detected:
    backend: str
    pipeline: str | None
    gpu: str | None
    why: str


#: Compute capability → the shipped GPU description used when the dump names only an `sm_X`.
_GPU_BY_CC = {(7, 5): "rtx2080ti", (9, 0): "h100_sxm", (8, 0): "a100_sxm_80", (8, 6): "a6000",
              (7, 0): "v100", (6, 0): "p100"}


def _detect(module: ir.Module, dump: DumpContext | None, backend: str | None, pipeline: str | None,
            gpu: str | None) -> _Detected:
    why: list[str] = []
    found = _detect_with_backend_module(module, dump) if backend is None or pipeline is None else None
    if found is not None:
        b, p, reason = found
        if backend is None:
            backend = b
        if pipeline is None and backend == b:
            pipeline = p
            era, era_why = _pipeline_from_metadata(module)
            # A GPU dump without per-pass files says nothing about the XLA era; its metadata does.
            if b == "gpu" and p == "priority" and era == "legacy" and \
                    not any(x in reason for x in ("priority-fusion", "sort-iota-fusion", "priority_fusion_dump")):
                pipeline, reason = era, f"{reason}; {era_why}"
        why.append(reason)
    if backend is None:
        backend, reason = _guess_backend(module, dump)
        why.append(reason)
    if pipeline is None:
        pipeline, reason = _guess_pipeline(module, dump, backend)
        if reason:
            why.append(reason)
    if backend == "gpu" and gpu is None:
        gpu = _guess_gpu(dump)
    return _Detected(backend, pipeline, gpu, "; ".join(w for w in why if w))


def _detect_with_backend_module(module, dump):
    """hlofuse/backend.py's detection (file names of the dump folder, then the module's
    contents): (backend, pipeline, why), or None when it is not available."""
    try:
        from . import backend as backend_mod
    except ImportError:
        return None
    fn = getattr(backend_mod, "detect", None)
    if fn is None:
        return None
    try:
        found = fn(module, dump.folder if dump is not None else None)
    except Exception:  # noqa: BLE001 - a detection failure must not stop explain
        return None
    b = getattr(found, "backend", None)
    if b is None:
        return None
    return b, getattr(found, "pipeline", None), getattr(found, "why", "")


def _guess_backend(module: ir.Module, dump: DumpContext | None) -> tuple[str, str]:
    if dump is not None and dump.device:
        b = "cpu" if dump.device.startswith("cpu") else "gpu"
        return b, f"backend {b}: the dump's file names say {dump.device}"
    gpu_hints = cpu_hints = 0
    for _, instr in module.instructions():
        config = instr.attr("backend_config") or ""
        if "operation_queue_id" in config or "fusion_backend_config" in config:
            gpu_hints += 1
        if "outer_dimension_partitions" in config or "__ynn_fusion" in config:
            cpu_hints += 1
        target = instr.custom_call_target or ""
        if target.startswith(("__cublas", "__cudnn", "cu_", "__gpu")):
            gpu_hints += 1
    if cpu_hints > gpu_hints:
        return "cpu", "backend cpu: XLA:CPU backend configs in the module"
    if gpu_hints:
        return "gpu", "backend gpu: XLA:GPU backend configs in the module"
    return "gpu", "backend gpu: assumed (nothing in the module says; use --backend)"


def _guess_pipeline(module: ir.Module, dump: DumpContext | None, backend: str) -> tuple[str | None, str]:
    if backend == "cpu":
        return "cpu", ""
    if dump is not None:
        passes = {f.after_pass for f in dump.files if f.stage == "pass"} | \
                 {f.before_pass for f in dump.files if f.stage == "pass"}
        if dump.xla_log() is not None or "priority-fusion" in passes:
            return "priority", "pipeline priority: the dump has PriorityFusion's files"
        if "fusion_merger" in passes or "horizontal_loop_fusion" in passes:
            return "legacy", "pipeline legacy: the dump has FusionMerger's files"
    return _pipeline_from_metadata(module)


def _pipeline_from_metadata(module: ir.Module) -> tuple[str | None, str]:
    """jaxlib 0.4.35 (the legacy pipeline's era) writes source_file/source_line metadata;
    jaxlib 0.10.2 (priority fusion) writes stack_frame_id and a stack-frame table."""
    for _, instr in module.instructions():
        meta = instr.attr("metadata") or ""
        if "stack_frame_id" in meta or "scheduling_name" in meta:
            return "priority", "pipeline priority: the metadata is jaxlib 0.10.2's (stack frames)"
        if "source_file" in meta:
            return "legacy", "pipeline legacy: the metadata is jaxlib 0.4.35's (source_file, no stack frames)"
    return None, ""


def _guess_gpu(dump: DumpContext | None) -> str | None:
    import re

    if dump is None or not dump.device:
        return None
    m = re.match(r"sm_(\d+)\.(\d+)", dump.device)
    if m is None:
        return None
    return _GPU_BY_CC.get((int(m.group(1)), int(m.group(2))))


# ------------------------------------------------------------------------------------------
# Tracing values back to the kernel that produced them
# ------------------------------------------------------------------------------------------

#: Instructions a value passes through unchanged (a view or an alias of operand 0).
_PASS_THROUGH = frozenset({"bitcast", "add-dependency", "domain", "opt-barrier"})


@dataclass(frozen=True)
class _Source:
    comp: str
    name: str  # the producing kernel
    path: tuple[int, ...]  # which output of a tuple-shaped kernel
    crossing: tuple[str, ...]
    via: tuple[str, ...]
    loop: str | None


class _Tracer:
    """Finds, for a value in a computation, the kernels that produced it."""

    def __init__(self, module: ir.Module):
        self.m = module
        self.executed = {c.name for c in executed_computations(module)}

    def sources(self, comp: str, name: str, *, local: bool = False) -> list[_Source]:
        out: list[_Source] = []
        seen: set = set()
        stack = [(comp, name, (), (), (), None)]
        while stack:
            comp, name, path, crossing, via, loop = stack.pop()
            key = (comp, name, path, crossing)
            if key in seen:
                continue
            seen.add(key)
            c = self.m.by_name.get(comp)
            if c is None or name not in c:
                continue
            instr = c[name]
            op = instr.opcode
            if op == "get-tuple-element":
                idx = attributes.integer(instr, "index", 0)
                stack.append((comp, instr.operands[0], (idx,) + path, crossing, via + (name,), loop))
            elif op == "tuple":
                if path:
                    if path[0] < len(instr.operands):
                        stack.append((comp, instr.operands[path[0]], path[1:], crossing, via + (name,), loop))
                else:
                    for operand in dict.fromkeys(instr.operands):
                        stack.append((comp, operand, (), crossing, via + (name,), loop))
            elif op in _PASS_THROUGH:
                if instr.operands:
                    stack.append((comp, instr.operands[0], path, crossing, via + (name,), loop))
            elif op == "parameter":
                if not local:
                    stack.extend(self._through_parameter(c, instr, path, crossing, via, loop))
            elif op == "while":
                if not local:
                    body = instr.attr("body", "").lstrip("%")
                    if body in self.m.by_name:
                        stack.append((body, self.m[body].root_name, path, _cross(crossing, "loop-output"),
                                      via + (name,), loop or name))
            elif op in ("conditional", "call", "async-done", "async-update"):
                if not local:
                    kind = {"conditional": "branch", "call": "call"}.get(op, "async")
                    for callee in self._callees_with_result(instr):
                        stack.append((callee, self.m[callee].root_name, path, _cross(crossing, f"{kind}-output"),
                                      via + (name,), loop))
            elif is_kernel(instr):
                out.append(_Source(comp, name, path, crossing, via, loop))
        return out

    def _callees_with_result(self, instr: ir.Instruction) -> list[str]:
        if instr.opcode == "conditional":
            return [c for c in instr.called if c in self.m.by_name]
        if instr.opcode == "call":
            return [c for c in instr.called[:1] if c in self.m.by_name]
        # async-done: the wrapped computation of its async-start
        comp_calls = [c for c in instr.called if c in self.m.by_name]
        return comp_calls[:1]

    def _through_parameter(self, comp: ir.Computation, param: ir.Instruction, path, crossing, via, loop):
        """Where a computation's parameter comes from: the caller's operand, and for a while
        body or condition also the body's root (the previous iteration)."""
        number = param.parameter_number
        via = via + (param.name,)
        for caller_comp, caller_name, key in self.m.callers.get(comp.name, ()):
            caller = self.m[caller_comp][caller_name]
            op = caller.opcode
            if op == "while":
                if caller.operands:
                    yield (caller_comp, caller.operands[0], path, _cross(crossing, "loop-input"),
                           via + (caller_name,), loop or caller_name)
                body = caller.attr("body", "").lstrip("%")
                if body in self.m.by_name:
                    yield (body, self.m[body].root_name, path, _cross(crossing, "loop-carried"),
                           via, loop or caller_name)
            elif op == "conditional":
                for branch_index, callee in enumerate(caller.called):
                    if callee == comp.name and branch_index + 1 < len(caller.operands):
                        yield (caller_comp, caller.operands[branch_index + 1], path, _cross(crossing, "branch-input"),
                               via + (caller_name,), loop)
            elif op == "call" or op.startswith("async"):
                kind = "call" if op == "call" else "async"
                if number < len(caller.operands):
                    yield (caller_comp, caller.operands[number], path, _cross(crossing, f"{kind}-input"),
                           via + (caller_name,), loop)


def _cross(crossing: tuple[str, ...], kind: str) -> tuple[str, ...]:
    return crossing if kind in crossing else crossing + (kind,)


def _subshape(shape: ir.Shape, path: tuple[int, ...]) -> ir.Shape:
    for i in path:
        if not shape.is_tuple or i >= len(shape.tuple_shapes):
            break
        shape = shape.tuple_shapes[i]
    return shape


# ------------------------------------------------------------------------------------------
# The explainer
# ------------------------------------------------------------------------------------------


@dataclass
class _Edge:
    source: _Source
    consumer_comp: str
    consumer: str  # the consuming kernel, tuple or control-flow instruction
    operand_index: int


class _Explainer:
    def __init__(self, module: ir.Module, detected: _Detected, dump: DumpContext | None, stage: str,
                 replay=None):
        self.m = module
        self.detected = detected
        self.dump = dump
        self.stage = stage
        self.replay = replay
        self.notes: list[str] = []
        self.tracer = _Tracer(module)
        self.executed = executed_computations(module)
        self._program = None
        self._pipeline_ctx = None
        self._pipeline_spec = None
        self._pipeline_ready = False
        self._loops: dict[str, LoopSummary] = {}
        self._loop_by_comp: dict[str, LoopSummary] | None = None
        self._runs: dict[str, float | None] = {}
        self._xla_log = None
        self._xla_log_ready = False

    # -- driver ----------------------------------------------------------------------------
    def run(self) -> Explanation:
        from .rules import load_all

        load_all()
        kernels = self._kernels()
        self._kernel_index = {(k.computation, k.name): k for k in kernels}
        loops = self._loop_summaries()
        computations = self._computation_summaries()
        self._inserted = self._inserted_copies()
        boundaries = sorted((self._boundary(edge) for edge in self._edges()), key=self._order())
        log = self.dump.xla_log() if self.dump is not None else None
        return Explanation(
            module=self.m.name, backend=self.detected.backend, pipeline=self.detected.pipeline,
            gpu=self.detected.gpu, input=str(self.dump.chosen.path) if self.dump is not None else self.m.path,
            stage=self.stage, kernels=tuple(kernels), boundaries=tuple(boundaries),
            computations=tuple(computations), loops=tuple(loops), detected=self.detected.why,
            notes=tuple(dict.fromkeys(self.notes)), xla_log=str(log.path) if log is not None else None,
            fused_module=self.m)

    def _order(self):
        """Boundaries by computation, then what users ask about first: kernel-to-kernel
        boundaries inside a computation, then buffers and control flow, then loop crossings;
        within each, in the order the consumers run."""
        comp_index = {c.name: i for i, c in enumerate(self.executed)}
        position = {(c.name, instr.name): i for c in self.executed for i, instr in enumerate(c.post_order)}

        def key(b: Boundary):
            if b.crossing:
                group = 2 if "loop-carried" in b.crossing else 3
            else:
                group = 0 if b.consumer_kernel is not None else 1
            consumer = b.consumer_kernel or b.consumer
            return (comp_index.get(b.consumer_computation, 0), group,
                    position.get((b.consumer_computation, consumer), 0), b.producer_kernel, b.output)

        return key

    # -- kernels ---------------------------------------------------------------------------
    def _kernels(self) -> list[KernelInfo]:
        from .rules.boundaries import library_of

        members = {}
        if self.replay is not None:
            members = {(k.computation, k.name): k.instructions for k in self.replay.kernels}
        out = []
        for comp in self.executed:
            role = self.m.role(comp.name)
            for instr in comp.post_order:
                if not is_kernel(instr):
                    continue
                node = self._node(comp.name, instr.name)
                lib = library_of(node) if node is not None else None
                body = self.m.by_name.get(instr.fused_computation or "")
                if instr.opcode == "fusion" and body is not None:
                    inside = tuple(i.name for i in body.post_order if i.opcode != "parameter")
                    root = body.root_name
                else:
                    inside = (instr.name,)
                    root = instr.name
                inside = members.get((comp.name, instr.name), inside)
                out.append(KernelInfo(
                    name=instr.name, kind=_kind(instr), label=_label(instr, lib), computation=comp.name,
                    role=role, instructions=tuple(inside), root=root, library=lib[1] if lib else None,
                    bytes_out=instr.shape.byte_size, source=self._source(comp.name, instr.name)))
        return out

    # -- edges -----------------------------------------------------------------------------
    def _edges(self) -> list[_Edge]:
        edges: list[_Edge] = []
        seen: set = set()

        def add(src: _Source, comp: str, consumer: str, index: int) -> None:
            if not src.crossing and src.comp == comp and src.name == consumer:
                return
            key = (src.comp, src.name, src.path, comp, consumer, src.crossing)
            if key in seen:
                return
            seen.add(key)
            edges.append(_Edge(src, comp, consumer, index))

        for comp in self.executed:
            for instr in comp.post_order:
                if is_kernel(instr):
                    for index, operand in enumerate(instr.operands):
                        for src in self.tracer.sources(comp.name, operand):
                            add(src, comp.name, instr.name, index)
                elif instr.opcode == "tuple":
                    for index, operand in enumerate(instr.operands):
                        for src in self.tracer.sources(comp.name, operand, local=True):
                            add(src, comp.name, instr.name, index)
                elif instr.opcode in CONTROL:
                    for index, operand in enumerate(instr.operands):
                        if comp[operand].opcode == "tuple":
                            continue  # the tuple's own edges cover it
                        for src in self.tracer.sources(comp.name, operand, local=True):
                            add(src, comp.name, instr.name, index)
        return edges

    # -- one boundary ----------------------------------------------------------------------
    def _boundary(self, edge: _Edge) -> Boundary:
        from .hints import HintInput, hint_for
        from .rules import REGISTRY

        src = edge.source
        producer_kernel = self.m[src.comp][src.name]
        consumer_instr = self.m[edge.consumer_comp][edge.consumer]
        producer = _value_instruction(self.m, producer_kernel, src.path)
        consumer_is_kernel = is_kernel(consumer_instr)
        consumer = _reader(self.m, consumer_instr, edge.operand_index) if consumer_is_kernel else consumer_instr.name
        nbytes = _subshape(producer_kernel.shape, src.path).byte_size
        loop = self._loop_of(edge)
        facts: dict[str, Any] = {
            "crossing": src.crossing, "bytes": nbytes,
            "producer_name": _display(producer, src.name, src.path if producer == src.name else ()),
            "consumer_name": _display(consumer, edge.consumer),
            "loop": _loop_words(loop) if loop else "the while loop",
            "tuple_role": self._tuple_role(edge.consumer_comp, consumer_instr),
            "inserted_copies": self._inserted, "copy_reasons": self._copy_reasons,
            "pipeline": self.detected.pipeline,
        }
        outcome = self._ask(edge, facts, producer_kernel, consumer_instr)
        rule_id, reason, rule_facts, explained_by = outcome
        rule = REGISTRY.get(rule_id)
        tags = tuple(sorted(rule.tags)) if rule is not None else ()
        extra_tags = self._extra_tags(src, edge)
        tags = tuple(sorted(set(tags) | extra_tags))
        verdict = self._xla_verdict(src, edge)
        xla_reason = verdict.reason if verdict is not None else None
        agrees = _agrees(rule, verdict, self.detected.pipeline) if verdict is not None else None
        source = self._source(src.comp, producer) or self._source(src.comp, src.name) \
            or self._source(edge.consumer_comp, consumer) or self._context_source(edge, loop)
        consumer_source = self._source(edge.consumer_comp, consumer) or self._source(edge.consumer_comp, edge.consumer)
        hint = hint_for(HintInput(
            rule=rule_id, tags=tags, crossing=src.crossing,
            producer_opcode=_opcode_in(self.m, producer_kernel, producer),
            producer_op_name=_op_name_in(self.m, producer_kernel, producer),
            producer_library=self._library_tag(src.comp, src.name),
            consumer_library=self._library_tag(edge.consumer_comp, edge.consumer) if consumer_is_kernel else None,
            producer_kernel_opcodes=_opcodes_of(self.m, producer_kernel),
            consumer_kernel_opcodes=_opcodes_of(self.m, consumer_instr) if consumer_is_kernel else frozenset(),
            in_loop=self._enclosing_loop(edge.consumer_comp) or self._enclosing_loop(src.comp),
            consumer_is_buffer=not consumer_is_kernel,
        ))
        clean_facts = {k: v for k, v in dict(rule_facts).items()
                       if k not in ("inserted_copies", "copy_reasons", "pipeline") and not callable(v)}
        return Boundary(
            producer=producer, consumer=consumer, producer_kernel=src.name,
            consumer_kernel=edge.consumer if consumer_is_kernel else None,
            producer_computation=src.comp, consumer_computation=edge.consumer_comp, crossing=src.crossing,
            rule=rule_id, tags=tags, reason=reason, relaxable=rule.relaxable if rule is not None else None,
            bytes=nbytes, source=source, hint=hint, xla_reason=xla_reason, agrees_with_xla=agrees,
            explained_by=explained_by, facts=clean_facts, via=src.via, consumer_source=consumer_source,
            output=src.path)

    def _ask(self, edge: _Edge, facts: dict, producer_kernel: ir.Instruction,
             consumer_instr: ir.Instruction) -> tuple[str, str, Mapping, str]:
        """(rule id, reason, facts, who explained it), first match wins."""
        from .rules import Candidate, evaluate
        from .rules.boundaries import ORDER

        pnode = self._node(edge.source.comp, producer_kernel.name)
        cnode = self._node(edge.consumer_comp, consumer_instr.name)
        if pnode is not None and cnode is not None:
            outcome = evaluate(ORDER, Candidate(pnode, cnode, self, dict(facts)))
            if outcome.blocked_by is not None:
                r = outcome.blocked_by
                return r.id, r.reason(outcome.facts), outcome.facts, "boundary-rule"
        if edge.source.crossing or not is_kernel(consumer_instr):
            return UNKNOWN, "no rule explains this boundary", {}, "none"
        decisions = self._replay_decisions(edge)
        if decisions:
            decision = decisions[-1]  # the last pass that considered the pair has the final word
            facts = dict(decision.facts)
            if len(decisions) > 1:
                facts["history"] = [f"{d.pass_name}: {d.rule}: {d.reason}" for d in decisions]
            return decision.rule or UNKNOWN, decision.reason, facts, "replay"
        decision = self._pipeline_decision(pnode, cnode)
        if decision is not None and decision.rule:
            return decision.rule, decision.reason, dict(decision.facts), "pipeline"
        from_log = self._rule_from_xla_log(edge)
        if from_log is not None:
            return from_log
        return UNKNOWN, "no rule explains this boundary", {}, "none"

    # -- the replay's decisions, the pipeline, XLA's log ------------------------------------
    def _replay_decisions(self, edge: _Edge) -> list:
        """The replay's refusals between the two kernels' instructions, in the order made."""
        if self.replay is None:
            return []
        from .decision import Verdict

        kernels = {k.name: set(k.instructions) for k in self.replay.kernels
                   if k.computation in (edge.source.comp, edge.consumer_comp)}
        pm = kernels.get(edge.source.name, {edge.source.name})
        cm = kernels.get(edge.consumer, {edge.consumer})
        found = []
        for d in self.replay.decisions:
            if d.verdict != Verdict.BLOCKED:
                continue
            dp = set(d.producer_members) or {d.producer}
            dc = set(d.consumer_members) or {d.consumer}
            if dp & pm and dc & cm:
                found.append(d)
        return found

    def _pipeline_decision(self, pnode, cnode):
        if pnode is None or cnode is None:
            return None
        spec, ctx = self._pipeline()
        if spec is None or spec.explain_boundary is None:
            return None
        try:
            return spec.explain_boundary(pnode, cnode, ctx)
        except Exception as err:  # noqa: BLE001 - a pipeline bug must not stop the explanation
            self.notes.append(f"the {spec.backend}/{spec.name} pipeline's explain_boundary failed "
                              f"({type(err).__name__}: {err}); such boundaries are left unknown")
            return None

    def _pipeline(self):
        if not self._pipeline_ready:
            self._pipeline_ready = True
            from .errors import HlofuseError
            from .pipeline import Options, get_pipeline, make_context

            d = self.detected
            try:
                spec = get_pipeline(d.backend, d.pipeline)
                ctx = make_context(Options(backend=d.backend, pipeline=spec.name, gpu=d.gpu))
                ctx.pipeline = spec.name
                ctx.pass_name = "explain"
                self._pipeline_spec, self._pipeline_ctx = spec, ctx
                if spec.explain_boundary is None:
                    self.notes.append(f"the {d.backend}/{spec.name} pipeline has no explain_boundary yet; "
                                      "boundaries decided by its passes are left unknown")
            except HlofuseError as err:
                self.notes.append(f"{err}; boundaries decided by fusion passes are left unknown")
        return self._pipeline_spec, self._pipeline_ctx

    def _log(self):
        if not self._xla_log_ready:
            self._xla_log_ready = True
            log = self.dump.xla_log() if self.dump is not None else None
            if log is not None:
                self._xla_log = _load_xla_log(log.path, self.notes)
        return self._xla_log

    def _xla_verdict(self, src: _Source, edge: _Edge):
        """XLA's logged refusal for the pair (an xla_log.XlaVerdict with a reason), or None."""
        log = self._log()
        if log is None or src.crossing:
            return None
        return _xla_log_verdict(log, self.m, src, edge, self.notes)

    def _rule_from_xla_log(self, edge: _Edge):
        """A rule of the registry whose XLA string is the one XLA's log gives for this pair."""
        from .rules import REGISTRY

        verdict = self._xla_verdict(edge.source, edge)
        reason = verdict.reason if verdict is not None else None
        if not reason:
            return None
        pipeline = self.detected.pipeline
        for r in REGISTRY.values():
            if r.xla.message and r.xla.message.strip() == reason.strip() and \
                    (pipeline is None or pipeline in r.pipelines):
                return r.id, f"XLA's fusion log: {reason}", {"xla_log": reason}, "xla-log"
        return None

    # -- graph nodes for the rules ---------------------------------------------------------
    def _node(self, comp: str, name: str):
        if self._program is None:
            from .graph import Program

            self._program = Program.from_module(self.m)
        graph = self._program.graphs.get(comp)
        return graph.get(name) if graph is not None else None

    # -- copies added after fusion -----------------------------------------------------------
    def _inserted_copies(self) -> frozenset[str]:
        """Unfused copies that copy insertion added after fusion (see BND-COPY-INSERTED)."""
        copies = [(comp, instr) for comp in self.executed for instr in comp.instructions if instr.opcode == "copy"]
        self._copy_reasons = {instr.name: self._copy_reason(comp, instr) for comp, instr in copies}
        if self.stage == "replayed":
            return frozenset()  # the replay's input already had every copy fusion saw
        snapshot_names = self._after_fusion_copy_names()
        out = set()
        for comp, instr in copies:
            if snapshot_names is not None:
                if instr.name not in snapshot_names:
                    out.add(instr.name)
            elif not attributes.metadata(instr).op_name:
                out.add(instr.name)
        return frozenset(out)

    def _after_fusion_copy_names(self) -> set[str] | None:
        if self.dump is None or self.dump.chosen.stage != "after_optimizations":
            return None
        snap = self.dump.after_fusion_snapshot()
        if snap is None:
            return None
        from .parse import parse_text

        try:
            text = snap.path.read_text(encoding="utf-8", errors="replace")
            module = parse_text(text, str(snap.path))
        except Exception:  # noqa: BLE001 - fall back to the metadata test
            return None
        return {i.name for _, i in module.instructions() if i.opcode == "copy"}

    def _copy_reason(self, comp: ir.Computation, instr: ir.Instruction) -> str:
        role = self.m.role(comp.name)
        users = comp.users.get(instr.name, ())
        for user in users:
            u = comp[user]
            if u.opcode == "tuple" and u.name == comp.root_name and role == "while_body":
                return "the loop state is updated in place while its old value may still be read"
            if u.opcode == "tuple" and any(comp[x].opcode == "while" for x in comp.users.get(u.name, ())):
                operand = comp[instr.operands[0]] if instr.operands else None
                what = {"parameter": "an entry parameter", "constant": "a constant"}.get(
                    operand.opcode if operand is not None else "", "a value still used elsewhere")
                return f"the loop's initial state must not overwrite {what}"
        if instr.operands and comp[instr.operands[0]].opcode in ("get-tuple-element", "parameter") \
                and role == "while_body":
            return "the loop state is read after the next state is written"
        return "a buffer must not be shared"

    # -- loops and how often each computation runs ------------------------------------------
    def _loop_summaries(self) -> list[LoopSummary]:
        counts = {c.name: sum(1 for i in c.instructions if is_kernel(i)) for c in self.executed}
        out = []
        for comp in self.executed:
            for instr in comp.instructions:
                if instr.opcode != "while":
                    continue
                body = (instr.attr("body") or "").lstrip("%")
                cond = (instr.attr("condition") or "").lstrip("%")
                trip, from_ = trip_count(self.m, comp, instr)
                launched = from_ != "backend_config"
                out.append(LoopSummary(
                    name=instr.name, computation=comp.name, body=body, condition=cond, trip_count=trip,
                    trip_count_from=from_, body_kernels=counts.get(body, 0), condition_kernels=counts.get(cond, 0),
                    condition_launched=launched, kernels_per_iteration=0, kernels_total=None,
                    source=self._source(comp.name, instr.name),
                    max_kernel_bytes=max((i.shape.byte_size for i in self.m[body].instructions
                                          if is_kernel(i)), default=0) if body in self.m.by_name else 0))
        self._loops = {lp.name: lp for lp in out}
        # launches per iteration include loops nested in the body (when their count is known)
        done: dict[str, LoopSummary] = {}
        for lp in out:
            done[lp.name] = self._with_totals(lp, counts, done)
        self._loops = {lp.name: done[lp.name] for lp in out}
        self._loop_by_comp = None
        return [done[lp.name] for lp in out]

    def _with_totals(self, lp: LoopSummary, counts, done) -> LoopSummary:
        from dataclasses import replace

        nested = 0
        nested_known = True
        for comp_name in (lp.body,) + ((lp.condition,) if lp.condition_launched else ()):
            comp = self.m.by_name.get(comp_name)
            if comp is None:
                continue
            for instr in comp.instructions:
                if instr.opcode == "while" and instr.name in self._loops:
                    inner = done.get(instr.name) or self._with_totals(self._loops[instr.name], counts, done)
                    if inner.kernels_total is None:
                        nested_known = False
                    else:
                        nested += inner.kernels_total
        per_iteration = lp.body_kernels + (lp.condition_kernels if lp.condition_launched else 0) + nested
        total = None
        if lp.trip_count is not None and nested_known:
            total = lp.trip_count * per_iteration
            if lp.condition_launched:
                total += lp.condition_kernels  # the last test, which ends the loop
        return replace(lp, kernels_per_iteration=per_iteration, kernels_total=total)

    def _computation_summaries(self) -> list[ComputationSummary]:
        out = []
        for comp in self.executed:
            kinds: Counter = Counter()
            for instr in comp.instructions:
                if is_kernel(instr):
                    kinds[_label_kind(instr)] += 1
            out.append(ComputationSummary(comp.name, self.m.role(comp.name), sum(kinds.values()),
                                          dict(kinds), self._runs_of(comp.name, set())))
        return out

    def _runs_of(self, comp: str, visiting: set) -> float | None:
        if comp in self._runs:
            return self._runs[comp]
        if comp == self.m.entry_name:
            return 1
        if comp in visiting:
            return None
        visiting = visiting | {comp}
        total: float = 0
        callers = self.m.callers.get(comp, ())
        if not callers:
            return None
        for caller_comp, caller_name, key in callers:
            caller = self.m[caller_comp][caller_name]
            runs = self._runs_of(caller_comp, visiting)
            if runs is None:
                self._runs[comp] = None
                return None
            if caller.opcode == "while":
                lp = self._loops.get(caller_name)
                if lp is None or lp.trip_count is None:
                    self._runs[comp] = None
                    return None
                if key == "body":
                    total += runs * lp.trip_count
                elif lp.condition_launched:
                    total += runs * (lp.trip_count + 1)
            else:
                total += runs  # a branch runs at most this often; a call exactly
        self._runs[comp] = total
        return total

    def _loop_of(self, edge: _Edge) -> LoopSummary | None:
        name = edge.source.loop
        if name and name in self._loops:
            return self._loops[name]
        return None

    def _enclosing_loop(self, comp: str) -> LoopSummary | None:
        if self._loop_by_comp is None:
            self._loop_by_comp = {}
            for lp in self._loops.values():
                self._loop_by_comp.setdefault(lp.body, lp)
                self._loop_by_comp.setdefault(lp.condition, lp)
        return self._loop_by_comp.get(comp)

    def _context_source(self, edge: _Edge, loop: LoopSummary | None) -> SourceRef | None:
        """For values without metadata of their own (copies XLA added, tuples): the source of
        the loop they belong to (the crossed loop, the loop a tuple initialises, the loop whose
        body holds the edge)."""
        if loop is not None and loop.source is not None:
            return loop.source
        comp = self.m[edge.consumer_comp]
        for user in comp.users.get(edge.consumer, ()):
            if comp[user].opcode in ("while", "conditional", "call"):
                found = self._source(edge.consumer_comp, user)
                if found is not None:
                    return found
        enclosing = self._enclosing_loop(edge.consumer_comp) or self._enclosing_loop(edge.source.comp)
        return enclosing.source if enclosing is not None else None

    # -- small helpers -----------------------------------------------------------------------
    def _tuple_role(self, comp_name: str, instr: ir.Instruction) -> str:
        if instr.opcode != "tuple":
            return ""
        comp = self.m[comp_name]
        role = self.m.role(comp_name)
        if instr.name == comp.root_name:
            if role == "while_body":
                loop = self._enclosing_loop(comp_name)
                return f"the state {loop.name if loop else 'the loop'} carries to its next iteration"
            if role == "entry":
                return "the program's outputs"
            if role == "branch":
                return "the branch's result"
            return "the computation's result"
        for user in comp.users.get(instr.name, ()):
            if comp[user].opcode == "while":
                return f"the initial state of {user}"
            if comp[user].opcode in ("conditional", "call"):
                return f"the arguments of {user}"
        return "a tuple"

    def _extra_tags(self, src: _Source, edge: _Edge) -> set[str]:
        tags = set()
        for comp, name in ((src.comp, src.name), (edge.consumer_comp, edge.consumer)):
            tag = self._library_tag(comp, name)
            if tag:
                tags.add(tag)
        return tags

    def _library_tag(self, comp: str, name: str) -> str | None:
        from .rules.boundaries import library_of

        node = self._node(comp, name)
        lib = library_of(node) if node is not None else None
        return lib[2] if lib else None

    def _source(self, comp: str, name: str) -> SourceRef | None:
        """The user's source of an instruction: its own metadata, else (for copies and views)
        that of the value it copies, else None.  Names inside fusions are looked up in the
        fused computations of the kernel's module."""
        found = _find_instruction(self.m, comp, name)
        hops = 0
        while found is not None and hops < 8:
            c, instr = found
            loc = attributes.source_location(self.m, instr)
            meta = attributes.metadata(instr)
            if loc is not None and (loc.file or loc.line):
                return SourceRef(loc.file, loc.line, meta.op_name, loc.function)
            if instr.opcode in ("copy", "bitcast", "get-tuple-element", "reshape") and instr.operands:
                found = (c, c[instr.operands[0]])
                hops += 1
                continue
            if instr.opcode == "fusion":
                body = self.m.by_name.get(instr.fused_computation or "")
                if body is not None:
                    found = (body, body.root)
                    hops += 1
                    continue
            return None
        return None


# ------------------------------------------------------------------------------------------
# Trip counts
# ------------------------------------------------------------------------------------------


def trip_count(module: ir.Module, comp: ir.Computation, loop: ir.Instruction) -> tuple[int | None, str | None]:
    """(trip count, where it came from): `backend_config` (XLA's `known_trip_count`, which the
    runtime uses to skip the condition), `condition` (a compare of a counter against a
    constant, with a constant start and step), or (None, None)."""
    config = attributes.backend_config(loop)
    known = config.get("known_trip_count") if isinstance(config, Mapping) else None
    if isinstance(known, Mapping) and "n" in known:
        try:
            return int(known["n"]), "backend_config"
        except (TypeError, ValueError):
            pass
    found = _trip_count_from_condition(module, comp, loop)
    return (found, "condition") if found is not None else (None, None)


_COMPARE = {"LT": lambda i, n: i < n, "LE": lambda i, n: i <= n, "GT": lambda i, n: i > n,
            "GE": lambda i, n: i >= n, "NE": lambda i, n: i != n}


def _trip_count_from_condition(module: ir.Module, comp: ir.Computation, loop: ir.Instruction) -> int | None:
    cond = module.by_name.get((loop.attr("condition") or "").lstrip("%"))
    body = module.by_name.get((loop.attr("body") or "").lstrip("%"))
    if cond is None or body is None or not loop.operands:
        return None
    compare = _as_expression(module, cond, cond.root)
    if compare is None or compare[0] != "compare":
        return None
    _, direction, lhs, rhs = compare
    if lhs[0] == "const" and rhs[0] == "elem":
        lhs, rhs = rhs, lhs
        direction = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE"}.get(direction, direction)
    if lhs[0] != "elem" or rhs[0] != "const" or direction not in _COMPARE:
        return None
    index, bound = lhs[1], rhs[1]
    init = _constant_element(module, comp, loop.operands[0], index)
    step_expr = _body_update(module, body, index)
    if init is None or step_expr is None or step_expr == 0:
        return None
    i, n, test = init, 0, _COMPARE[direction]
    # Closed form for the usual count-up loop; a bounded walk otherwise.
    if direction in ("LT", "NE") and step_expr > 0 and bound >= i and (direction != "NE" or (bound - i) % step_expr == 0):
        return math.ceil((bound - i) / step_expr)
    while test(i, bound) and n < 10_000_000:
        i += step_expr
        n += 1
    return n if n < 10_000_000 else None


def _as_expression(module: ir.Module, comp: ir.Computation, instr: ir.Instruction, depth: int = 0):
    """A tiny symbolic reading of a scalar: ('elem', k) for get-tuple-element k of the
    parameter, ('const', v), ('compare', dir, a, b), ('add', a, b); looks into fusions."""
    if depth > 12:
        return None
    op = instr.opcode
    if op == "get-tuple-element" and comp[instr.operands[0]].opcode == "parameter":
        return ("elem", attributes.integer(instr, "index", 0))
    if op == "constant" and instr.shape.is_scalar and instr.literal is not None:
        try:
            return ("const", int(float(instr.literal)))
        except ValueError:
            return None
    if op in ("copy", "bitcast", "convert", "reshape") and instr.operands:
        return _as_expression(module, comp, comp[instr.operands[0]], depth + 1)
    if op == "compare" and len(instr.operands) == 2:
        a = _as_expression(module, comp, comp[instr.operands[0]], depth + 1)
        b = _as_expression(module, comp, comp[instr.operands[1]], depth + 1)
        if a is None or b is None:
            return None
        return ("compare", instr.attr("direction", ""), a, b)
    if op == "add" and len(instr.operands) == 2:
        a = _as_expression(module, comp, comp[instr.operands[0]], depth + 1)
        b = _as_expression(module, comp, comp[instr.operands[1]], depth + 1)
        if a is None or b is None:
            return None
        return ("add", a, b)
    if op == "fusion":
        fused = module.by_name.get(instr.fused_computation or "")
        if fused is None:
            return None
        return _in_fusion(module, comp, instr, fused, fused.root, depth + 1)
    return None


def _in_fusion(module, comp, fusion, fused, instr, depth):
    if instr.opcode == "parameter":
        n = instr.parameter_number
        if n < len(fusion.operands):
            return _as_expression(module, comp, comp[fusion.operands[n]], depth + 1)
        return None
    if instr.opcode in ("compare", "add") and len(instr.operands) == 2:
        a = _in_fusion(module, comp, fusion, fused, fused[instr.operands[0]], depth + 1)
        b = _in_fusion(module, comp, fusion, fused, fused[instr.operands[1]], depth + 1)
        if a is None or b is None:
            return None
        return ("compare", instr.attr("direction", ""), a, b) if instr.opcode == "compare" else ("add", a, b)
    if instr.opcode in ("copy", "bitcast", "convert", "reshape") and instr.operands:
        return _in_fusion(module, comp, fusion, fused, fused[instr.operands[0]], depth + 1)
    if instr.opcode == "constant":
        return _as_expression(module, fused, instr, depth + 1)
    return None


def _constant_element(module: ir.Module, comp: ir.Computation, name: str, index: int) -> int | None:
    instr = comp[name]
    for _ in range(8):
        if instr.opcode == "tuple" and index < len(instr.operands):
            value = comp[instr.operands[index]]
            while value.opcode in ("copy", "bitcast") and value.operands:
                value = comp[value.operands[0]]
            expr = _as_expression(module, comp, value)
            return expr[1] if expr is not None and expr[0] == "const" else None
        if instr.opcode in ("copy", "bitcast") and instr.operands:
            instr = comp[instr.operands[0]]
            continue
        return None
    return None


def _body_update(module: ir.Module, body: ir.Computation, index: int) -> int | None:
    """The constant step by which the body changes loop element `index`."""
    root = body.root
    if root.opcode != "tuple" or index >= len(root.operands):
        return None
    expr = _as_expression(module, body, body[root.operands[index]])
    if expr is None or expr[0] != "add":
        return None
    _, a, b = expr
    if a == ("elem", index) and b[0] == "const":
        return b[1]
    if b == ("elem", index) and a[0] == "const":
        return a[1]
    return None


# ------------------------------------------------------------------------------------------
# Instruction helpers
# ------------------------------------------------------------------------------------------


def _kind(instr: ir.Instruction) -> str:
    if instr.opcode == "fusion":
        return instr.fusion_kind or "kLoop"
    if instr.opcode == "custom-call":
        return "library"
    return instr.opcode


def _label_kind(instr: ir.Instruction) -> str:
    if instr.opcode == "fusion":
        return {"kLoop": "loop fusion", "kInput": "input fusion", "kOutput": "output fusion",
                "kCustom": "library fusion"}.get(instr.fusion_kind or "kLoop", "fusion")
    if instr.opcode == "custom-call":
        return "library call"
    return instr.opcode


def _label(instr: ir.Instruction, lib) -> str:
    base = _label_kind(instr)
    if lib is not None:
        return f"{base} ({lib[1]})"
    return base


def _value_instruction(module: ir.Module, kernel: ir.Instruction, path: tuple[int, ...]) -> str:
    """The instruction inside a kernel that computes output `path` (a fusion's root, or the
    root tuple's operand for a multi-output fusion)."""
    if kernel.opcode != "fusion":
        return kernel.name
    body = module.by_name.get(kernel.fused_computation or "")
    if body is None:
        return kernel.name
    instr = body.root
    for i in path:
        if instr.opcode == "tuple" and i < len(instr.operands):
            instr = body[instr.operands[i]]
        else:
            break
    return instr.name


def _reader(module: ir.Module, kernel: ir.Instruction, operand_index: int) -> str:
    """The instruction inside a consumer kernel that reads operand `operand_index` (through
    bitcasts); the kernel itself when it is not a fusion."""
    if kernel.opcode != "fusion":
        return kernel.name
    body = module.by_name.get(kernel.fused_computation or "")
    if body is None:
        return kernel.name
    params = body.parameters
    if operand_index >= len(params):
        return kernel.name
    name = params[operand_index].name
    for _ in range(16):
        users = body.users.get(name, ())
        if not users:
            return name
        user = body[users[0]]
        if user.opcode == "bitcast":
            name = user.name
            continue
        return user.name
    return name


def _find_instruction(module: ir.Module, comp: str, name: str):
    c = module.by_name.get(comp)
    if c is not None and name in c:
        return c, c[name]
    # inside one of this computation's fusions
    if c is not None:
        for instr in c.instructions:
            if instr.opcode == "fusion":
                body = module.by_name.get(instr.fused_computation or "")
                if body is not None and name in body:
                    return body, body[name]
                if body is not None:
                    nested = _find_instruction(module, body.name, name)
                    if nested is not None:
                        return nested
    return None


def _opcode_in(module: ir.Module, kernel: ir.Instruction, name: str) -> str:
    if name == kernel.name:
        return kernel.opcode
    body = module.by_name.get(kernel.fused_computation or "")
    if body is not None and name in body:
        instr = body[name]
        while instr.opcode == "bitcast" and instr.operands and instr.operands[0] in body:
            instr = body[instr.operands[0]]
        return instr.opcode
    return kernel.opcode


def _op_name_in(module: ir.Module, kernel: ir.Instruction, name: str) -> str:
    found = None
    if name == kernel.name:
        found = kernel
    else:
        body = module.by_name.get(kernel.fused_computation or "")
        if body is not None and name in body:
            found = body[name]
    meta = attributes.metadata(found or kernel)
    return meta.op_name or attributes.metadata(kernel).op_name or ""


def _opcodes_of(module: ir.Module, kernel: ir.Instruction) -> frozenset[str]:
    if kernel.opcode != "fusion":
        return frozenset({kernel.opcode})
    out: set[str] = set()
    stack = [kernel.fused_computation]
    seen = set()
    while stack:
        name = stack.pop()
        if name in seen or name not in module.by_name:
            continue
        seen.add(name)
        for instr in module[name].instructions:
            out.add(instr.opcode)
            if instr.opcode == "fusion" and instr.fused_computation:
                stack.append(instr.fused_computation)
    return frozenset(out)


def _display(instr: str, kernel: str, output: tuple[int, ...] = ()) -> str:
    if instr != kernel:
        return f"{instr} (in {kernel})"
    return f"{kernel} (output {'.'.join(map(str, output))})" if output else kernel


def _loop_words(loop: LoopSummary) -> str:
    trip = f" ({loop.trip_count} iterations)" if loop.trip_count is not None else ""
    return f"while loop {loop.name}{trip}"


# ------------------------------------------------------------------------------------------
# XLA's own fusion log (*.priority_fusion_dump.txt), through hlofuse/xla_log.py
# ------------------------------------------------------------------------------------------


def _load_xla_log(path, notes: list[str]):
    try:
        from . import xla_log
    except ImportError:
        notes.append("XLA's fusion log is in the dump, but hlofuse.xla_log is not available to read it")
        return None
    try:
        log = xla_log.load(path)
    except Exception as err:  # noqa: BLE001 - the log is an extra; explain goes on without it
        notes.append(f"could not read XLA's fusion log {path}: {type(err).__name__}: {err}")
        return None
    return _LogIndex(log)


class _LogIndex:
    """XLA's fusion log with the names it knows (the module before PriorityFusion, after XLA's
    rename-instructions pass gave most instructions a `.0` suffix)."""

    _NAME = __import__("re").compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=", __import__("re").M)

    def __init__(self, log):
        self.log = log
        text = getattr(log, "module_before_fusion", None) or ""
        self.known = frozenset(self._NAME.findall(text))

    def names(self, names) -> frozenset[str]:
        """The log's names for instructions of a fused module: the same name, or for clones
        XLA made while fusing (`add.23.1`, `x.4.clone.1`) the original `add.23.0`."""
        out = set()
        for name in names:
            for candidate in _log_candidates(name):
                if not self.known or candidate in self.known:
                    out.add(candidate)
                    break
        return frozenset(out)


_CLONE = __import__("re").compile(r"(\.clone(\.\d+)?)+$")
_SUFFIX = __import__("re").compile(r"\.\d+$")


def _log_candidates(name: str) -> list[str]:
    base = _CLONE.sub("", name)
    out = [name, base]
    stripped = _SUFFIX.sub("", base)
    out += [stripped + ".0", stripped]
    return list(dict.fromkeys(out))


def _xla_log_verdict(index: "_LogIndex", module: ir.Module, src: _Source, edge: _Edge, notes: list[str]):
    """What XLA's log says about keeping the producer kernel apart from the consumer kernel,
    matching both by the instructions they compute; None unless it gives a reason."""
    producer = module[src.comp][src.name]
    consumer = module[edge.consumer_comp][edge.consumer]
    p = index.names(_kernel_members(module, producer))
    c = index.names(_kernel_members(module, consumer))
    if not p or not c:
        return None
    try:
        verdict = index.log.verdict(p, c)
    except Exception as err:  # noqa: BLE001
        notes.append(f"hlofuse.xla_log could not answer for {producer.name} → {consumer.name}: {err}")
        return None
    if verdict is None or verdict.status not in ("ineligible", "unprofitable") or not verdict.reason:
        return None
    return verdict


def _kernel_members(module: ir.Module, kernel: ir.Instruction) -> list[str]:
    if kernel.opcode != "fusion":
        return [kernel.name]
    body = module.by_name.get(kernel.fused_computation or "")
    if body is None:
        return [kernel.name]
    return [i.name for i in body.instructions if i.opcode != "parameter"]

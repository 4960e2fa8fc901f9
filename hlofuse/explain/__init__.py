"""Explain a fused module: its kernels, and for every value that crosses from one kernel to
another, which rule keeps the two apart — in words, with the user's source line and a hint.

Pure functions from a module (or a replay's FusionResult) to an `Explanation`; nothing here
prints.  The flow, one module per step:

  1. a module before fusion is replayed first (`pipeline.replay`); a fused one is taken as is
     (`dumpctx`: which dump stages are fused; `detect`: backend, pipeline and GPU);
  2. kernels: every instruction that launches work in an executed computation (entry, while
     bodies and conditions, branches, calls) — fusions, library calls, copies, unfused ops;
     parameters, constants, tuples, get-tuple-element and bitcasts are buffers or views;
  3. edges (`trace`): each kernel's operands (and each tuple's, and each control-flow operand)
     are traced back through get-tuple-element / tuple / bitcast, through while-loop,
     conditional and call parameters, to the kernel that really produced the value;
  4. each edge asks (`explainer`), first match wins: the boundary rules
     (hlofuse/rules/boundaries.py: loop and computation crossings, tuples, control flow,
     library calls, copies added after fusion), the replay's own decision for the pair, the
     pipeline's `explain_boundary(producer, consumer, ctx)` (the same registry `fuse` uses,
     evaluated on the fused graph), XLA's own fusion log (`xlalog`); what none explains is
     rule `unknown`;
  5. summaries (`records`, `loops`): kernels per computation, launches per loop iteration and
     in total (trip counts from `known_trip_count` or the loop condition), boundaries by rule,
     bytes across them.
"""

from __future__ import annotations

from .. import ir
from ..kernels import executed_computations
from .detect import Detected, detect
from .dumpctx import DumpContext, dump_context
from .loops import trip_count
from .explainer import Explainer
from .records import (UNKNOWN, Boundary, ComputationSummary, Explanation, KernelInfo, LoopSummary,
                      SourceRef)

__all__ = [
    "UNKNOWN", "Boundary", "ComputationSummary", "DumpContext", "Explanation", "KernelInfo", "LoopSummary",
    "SourceRef", "dump_context", "explain", "explain_result", "trip_count",
]


def explain(module: ir.Module, *, backend: str | None = None, pipeline: str | None = None,
            gpu: str | None = None, dump: DumpContext | None = None, fused: bool | None = None,
            relax: tuple[str, ...] = (), xla_flags: tuple[str, ...] = ()) -> Explanation:
    """Explain `module`.  A module before fusion (or `fused=False`) is replayed first with the
    pipeline; a fused one (after_optimizations, a snapshot after fusion) is explained as given."""
    detected = detect(module, dump, backend, pipeline, gpu)
    if fused is None:
        fused = dump.stage_is_fused() if dump is not None else None
    if fused is None:
        fused = looks_fused(module)
    if not fused:
        from ..pipeline import Options, replay

        result = replay(module, Options(backend=detected.backend, pipeline=detected.pipeline,
                                        gpu=detected.gpu, relax=tuple(relax), xla_flags=tuple(xla_flags)))
        ex = explain_result(result, dump=dump, detected=detected.why)
        if dump is not None and dump.chosen.stage == "before_optimizations":
            from dataclasses import replace

            ex = replace(ex, notes=ex.notes + (
                "this is XLA's module before any optimization: the replay skips XLA's passes before fusion "
                "(simplification, layout assignment, ...), so its kernels only approximate XLA's; prefer "
                "--stage before_fusion (dump with --xla_dump_hlo_pass_re) or the after_optimizations file",))
        return ex
    from ..verify import verify

    verify(module)
    return Explainer(module, detected, dump, stage="fused").run()


def explain_result(result, *, dump: DumpContext | None = None, detected: str = "") -> Explanation:
    """Explain a replay's FusionResult: the fused module, with the replay's own decisions
    preferred for the boundaries they formed."""
    info = Detected(result.backend, result.pipeline, result.gpu, detected or "replayed")
    return Explainer(result.module, info, dump, stage="replayed", replay=result).run()


def looks_fused(module: ir.Module) -> bool:
    """Without a dump file name: fused when an executed computation holds a fusion that is not a
    library (kCustom) fusion."""
    for comp in executed_computations(module):
        for instr in comp.instructions:
            if instr.opcode == "fusion" and instr.fusion_kind != "kCustom":
                return True
    return False

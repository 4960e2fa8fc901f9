"""Explain a fused module: its kernels, and for every value that crosses from one kernel to
another, the decision that kept the two apart — in the pass that made it, with XLA's own words,
the cost model's numbers, the user's source line and a hint.

Pure functions from a module (or a replay's FusionResult) to an `Explanation`; nothing here
prints, and the module given is only read.  The flow, one module per step:

  1. evidence, gathered once (`evidence`): the fusion pipeline is replayed — from the dump's
     snapshot before fusion, else from the module with its fusions inlined (`unfused`), or
     from the input itself when it is a module before fusion — and every kernel of the
     explained module is mapped onto the instructions the replay started from
     (hlofuse/check.py's matching); XLA's fusion log (`xlalog`), the dump's stages
     (`dumpctx`) and the copies added after fusion complete it;
  2. kernels: every instruction that launches work in an executed computation (entry, while
     bodies and conditions, branches, calls) — fusions, library calls, copies, unfused ops;
  3. edges (`trace`): each kernel's operands (and each tuple's, and each control-flow operand)
     are traced back through get-tuple-element / tuple / bitcast, through while-loop,
     conditional and call parameters, to the kernel that really produced the value;
  4. each edge is classified (`classify`, a pure function of the edge and the evidence): the
     primary reason is the replay's earliest decision that kept the two sides apart, what
     later passes did to the pair follows in `then`; the boundary rules
     (hlofuse/rules/boundaries.py) answer where no fusion decision was asked (loops, calls,
     copies added after fusion), the pipeline's `explain_boundary` on the fused graph and
     XLA's log where the replay differs from XLA; what none explains is rule `unknown`;
  5. hints (hlofuse/hints.py), from the finished boundaries;
  6. summaries (`records`, `loops`): kernels per computation, launches per loop iteration and
     in total, boundaries by rule, bytes across them, agreement with XLA's log.
"""

from __future__ import annotations

from .. import ir
from ..kernels import executed_computations
from .detect import Detected, detect, from_detection
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
            relax: tuple[str, ...] = (), xla_flags: tuple[str, ...] = (), detection=None) -> Explanation:
    """Explain `module`.  A module before fusion (or `fused=False`) is replayed first with the
    pipeline; a fused one (after_optimizations, a snapshot after fusion) is explained as given.
    `detection` (a backend.Detection, as hlofuse.inputs.resolve decides it) replaces the
    detection from `backend`, `pipeline`, `gpu` and `dump`.  XLA:TPU modules are explained by
    structure only: their passes are not replayed."""
    from ..errors import BackendUnavailable, OptionError

    detected = from_detection(detection) if detection is not None else detect(module, dump, backend, pipeline, gpu)
    if fused is None:
        fused = dump.stage_is_fused() if dump is not None else None
    if fused is None:
        fused = looks_fused(module)
    if not fused:
        if detected.backend == "tpu":
            raise BackendUnavailable(f"{module.name} is an XLA:TPU module before fusion: XLA:TPU's fusion passes "
                                     "are not replayed; explain its fused module (after_optimizations)")
        from ..pipeline import Options
        from ..result_cache import cached_replay

        result = cached_replay(module, Options(backend=detected.backend, pipeline=detected.pipeline,
                                        gpu=detected.gpu, relax=tuple(relax), xla_flags=tuple(xla_flags)))
        ex = explain_result(result, dump=dump, detected=detected.why)
        if dump is not None and dump.chosen.stage == "before_optimizations":
            from dataclasses import replace

            ex = replace(ex, notes=ex.notes + (
                "this is XLA's module before any optimization: the replay skips XLA's passes before fusion "
                "(simplification, layout assignment, ...), so its kernels only approximate XLA's; prefer "
                "--stage before_fusion (dump with --xla_dump_hlo_pass_re) or the after_optimizations file",))
        return ex
    if relax:
        raise OptionError("relax changes a replay, and this module is already fused: explain the module before "
                          "fusion (a dump's snapshot before fusion) to relax rules")
    from ..verify import verify

    verify(module)
    ex = Explainer(module, detected, dump, stage="fused", xla_flags=tuple(xla_flags)).run()
    return _structure_only(ex) if detected.backend == "tpu" else ex


def _structure_only(ex: Explanation) -> Explanation:
    """An XLA:TPU explanation: the explainer's note that no pipeline exists for the backend is
    replaced by what it means (the passes are not replayed, boundaries they made stay unknown)."""
    from dataclasses import replace

    from ..backend import TPU_NOT_REPLAYED
    from ..errors import HlofuseError
    from ..pipeline import get_pipeline

    try:
        get_pipeline("tpu", None)
        missing = None
    except HlofuseError as err:
        missing = str(err)
    notes = tuple(n for n in ex.notes if missing is None or not n.startswith(missing))
    return replace(ex, notes=notes + (TPU_NOT_REPLAYED,))


def explain_result(result, *, dump: DumpContext | None = None, detected: str = "") -> Explanation:
    """Explain a replay's FusionResult: the fused module, each boundary by the replay's own
    earliest decision between its two sides."""
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

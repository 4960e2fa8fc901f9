"""Which backend, pipeline and GPU a module comes from, when the user did not say: through
hlofuse/backend.py (dump file names, module contents), with the metadata's era (jaxlib 0.4.35's
source_file vs 0.10.2's stack frames) deciding legacy vs priority when no pass file does."""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from .dumpctx import DumpContext

@dataclass(frozen=True)
class Detected:
    backend: str
    pipeline: str | None
    gpu: str | None
    why: str


#: Compute capability → the shipped GPU description used when the dump names only an `sm_X`.
_GPU_BY_CC = {(7, 5): "rtx2080ti", (9, 0): "h100_sxm", (8, 0): "a100_sxm_80", (8, 6): "a6000",
              (7, 0): "v100", (6, 0): "p100"}


def detect(module: ir.Module, dump: DumpContext | None, backend: str | None, pipeline: str | None,
            gpu: str | None) -> Detected:
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
    return Detected(backend, pipeline, gpu, "; ".join(w for w in why if w))


def _detect_with_backend_module(module, dump):
    """hlofuse/backend.py's detection (file names of the dump folder, then the module's
    contents): (backend, pipeline, why), or None when it is not available."""
    try:
        from .. import backend as backend_mod
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

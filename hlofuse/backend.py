"""Which XLA backend (and fusion pipeline) produced a dump, when the user did not say.

Evidence, strongest first:
  1. dump file names: `cpu_after_optimizations` / `sm_9.0a_gpu_after_optimizations`, and the
     passes that per-pass snapshots name (`fusion-wrapper` and `HLO_passes_after_layout_assignment`
     only exist in XLA:CPU; `priority-fusion` in today's XLA:GPU; `fusion_merger` and
     `horizontal_loop_fusion` in the legacy XLA:GPU pipeline);
  2. the module's contents: backend_config keys (GPU `operation_queue_id`,
     `fusion_backend_config`; CPU `outer_dimension_partitions`), library fusion kinds
     (`__ynn_fusion`, `__onednn_fusion` on CPU; `__triton_gemm` on GPU) and custom-call
     targets (`__cublas$gemm`, `__cudnn$...`, `cu_threefry2x32`, ...).
`detect_backend` returns the backend, the pipeline to replay and one line saying why, which the
CLI prints when `--backend` is not given.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from . import ir

#: Per-pass snapshot names (pipeline or pass parts of the file name) that only one backend has.
_CPU_PASSES = ("fusion-wrapper", "HLO_passes_after_layout_assignment", "reshape-decomposer",
               "dot-library-rewriter", "dot-library-passes")
_GPU_PRIORITY_PASSES = ("priority-fusion", "sort-iota-fusion", "priority_fusion_dump")
_GPU_LEGACY_PASSES = ("fusion_merger", "horizontal_loop_fusion", "horizontal_input_fusion")
_GPU_FUSION_PASS = re.compile(r"\.fusion\.after_fusion\.|\.fusion\.after_[^.]+\.before_fusion\.txt$")

_GPU_CONFIG_KEYS = ("operation_queue_id", "wait_on_operation_queues", "fusion_backend_config",
                    "force_earliest_schedule", "cudnn_conv_backend_config", "gemm_backend_config",
                    "collective_backend_config", "reification_cost")
_CPU_CONFIG_KEYS = ("outer_dimension_partitions",)
_CPU_LIBRARY_KINDS = ("__ynn_fusion", "__onednn_fusion", "__xnn_fusion")
_GPU_TARGETS = re.compile(r"^(__cublas\$|__cudnn\$|__gpu\$|__triton|cu_threefry2x32|cuda_threefry2x32|"
                          r"__nvshmem|xla\.gpu\.|__cub\$|CuDnn|cusolver|cublas)", re.IGNORECASE)
_CPU_TARGETS = re.compile(r"^(__onednn\$|__xla_cpu|xla\.cpu\.|__ynn)")


@dataclass(frozen=True)
class Detection:
    backend: str  # gpu | cpu
    pipeline: str  # priority | legacy | cpu
    why: str  # one line, e.g. "XLA:CPU: the file name says cpu_after_optimizations"

    def message(self) -> str:
        return f"backend: {self.backend} (pipeline {self.pipeline}); {self.why}; --backend overrides"


def detect_backend(path: str | Path | None = None, module: ir.Module | None = None) -> Detection:
    """The backend and pipeline a dump file, dump folder or module comes from."""
    by_name = _from_names(_names(path)) if path is not None else None
    if by_name is not None and by_name.backend == "cpu":
        return by_name
    by_content = _from_module(module) if module is not None else None
    if by_name is not None:
        if by_name.pipeline == "priority" and by_content is not None and by_content.backend == "gpu" \
                and by_content.pipeline == "legacy":
            return by_content
        return by_name
    if by_content is not None:
        return by_content
    return Detection("gpu", "priority", "no backend-specific file names or module contents; assuming today's XLA:GPU")


def _names(path: str | Path) -> list[str]:
    p = Path(path)
    if str(path) == "-":
        return []
    if p.is_dir():
        return sorted(f.name for f in p.rglob("*.txt"))
    return [p.name]


def _from_names(names: list[str]) -> Detection | None:
    for name in names:
        if "cpu_after_optimizations" in name:
            return Detection("cpu", "cpu", f"XLA:CPU: the dump file {name} says cpu_after_optimizations")
    for name in names:
        hit = next((p for p in _CPU_PASSES if p in name), None)
        if hit:
            return Detection("cpu", "cpu", f"XLA:CPU: the dump file {name} names {hit}, an XLA:CPU pass")
    legacy = next(((n, p) for n in names for p in _GPU_LEGACY_PASSES if p in n), None)
    if legacy is None:
        # GpuInstructionFusion's pass is named plain `fusion` (today's pipeline has no such pass)
        legacy = next(((n, "fusion") for n in names if _GPU_FUSION_PASS.search(n)), None)
    if legacy:
        return Detection("gpu", "legacy", f"XLA:GPU legacy pipeline: the dump file {legacy[0]} names {legacy[1]}")
    priority = next(((n, p) for n in names for p in _GPU_PRIORITY_PASSES if p in n), None)
    if priority:
        return Detection("gpu", "priority", f"XLA:GPU priority fusion: the dump file {priority[0]} names {priority[1]}")
    gpu = next((n for n in names if re.search(r"_gpu_after_optimizations", n)), None)
    if gpu:
        device = re.search(r"\.([^.]*(?:\.[0-9]+[a-z]*)?_gpu)_after_optimizations", gpu)
        label = device.group(1) if device else "a GPU"
        return Detection("gpu", "priority", f"XLA:GPU: the dump file {gpu} was compiled for {label}")
    return None


def _from_module(module: ir.Module) -> Detection | None:
    gpu_reason = cpu_reason = None
    for comp, instr in module.instructions():
        config = instr.attr("backend_config")
        if config:
            keys = _config_keys(config)
            if cpu_reason is None:
                hit = next((k for k in _CPU_CONFIG_KEYS if k in keys), None)
                kind = next((k for k in _CPU_LIBRARY_KINDS if k in config), None)
                if kind:
                    cpu_reason = f"{instr.name} is a {kind} library fusion"
                elif hit:
                    cpu_reason = f"{instr.name} has the XLA:CPU backend_config key {hit}"
            if gpu_reason is None:
                hit = next((k for k in _GPU_CONFIG_KEYS if k in keys), None)
                if hit:
                    gpu_reason = f"{instr.name} has the XLA:GPU backend_config key {hit}"
                elif "__triton" in config:
                    gpu_reason = f"{instr.name} is a Triton fusion"
        if instr.opcode == "custom-call":
            target = instr.custom_call_target or ""
            if gpu_reason is None and _GPU_TARGETS.search(target):
                gpu_reason = f"{instr.name} calls the GPU library target {target}"
            if cpu_reason is None and _CPU_TARGETS.search(target):
                cpu_reason = f"{instr.name} calls the CPU library target {target}"
        if gpu_reason and cpu_reason:
            break
    if cpu_reason and not gpu_reason:
        return Detection("cpu", "cpu", f"XLA:CPU: {cpu_reason}")
    if gpu_reason:
        return Detection("gpu", "priority", f"XLA:GPU: {gpu_reason}")
    return None


def _config_keys(text: str) -> set[str]:
    text = text.strip()
    if text.startswith('"'):
        try:
            text = json.loads(text)
        except ValueError:
            text = text[1:-1]
    try:
        value = json.loads(text)
    except ValueError:
        return set(re.findall(r'"(\w+)"\s*:', text))
    keys: set[str] = set()

    def walk(v):
        if isinstance(v, dict):
            for k, sub in v.items():
                keys.add(k)
                walk(sub)
        elif isinstance(v, list):
            for sub in v:
                walk(sub)

    walk(value)
    return keys


def detect(first=None, second=None) -> Detection:
    """`detect_backend` taking the module and the path in either order (`hlofuse.explain`
    passes the module first, `hlofuse fuse` the path)."""
    if isinstance(first, ir.Module) or isinstance(second, (str, Path)):
        first, second = second, first
    return detect_backend(first, second)

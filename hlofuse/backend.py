"""Which XLA compiler made a module (XLA:GPU, XLA:CPU or XLA:TPU), which of its fusion
pipelines ran, and for which GPU: decided once, from the strongest evidence there is, with one
line in plain words per decision (hlofuse/inputs.py asks; every command and the API use it).

Evidence, strongest first:
  1. what the user said (`--backend`, `--pipeline`, `--gpu`);
  2. the file names XLA gave the module's own dump files: `sm_9.0a_gpu_after_optimizations`
     (XLA:GPU, and the compute capability), `cpu_after_optimizations` (XLA:CPU),
     `tpu_comp_env` and `cl_<N>.after_optimizations` (XLA:TPU);
  3. the module's contents: backend_config kinds (XLA:GPU's `fusion_backend_config`,
     `operation_queue_id`, cuBLAS / cuDNN / Triton calls; XLA:CPU's
     `outer_dimension_partitions` and library (YNNPACK, oneDNN) fusions), and TPU tiled
     layouts (`{1,0:T(8,128)}`: no GPU or CPU layout carries tiles) and TPU custom calls;
  4. weaker hints: which passes wrote snapshots.  Many pass names are shared
     (`reshape-decomposer`, `fusion-wrapper` and `fusion` run in the GPU and the CPU
     pipelines), so only names one compiler has count, and only after 2 and 3.
The fusion pipeline of XLA:GPU: priority-fusion's snapshots or log (priority), fusion_merger's
or GpuInstructionFusion's (legacy), else the era of the metadata (a guess, said so).  The GPU:
the device XLA's fusion log describes, else the compute capability of the file name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from . import ir

BACKENDS = ("gpu", "cpu", "tpu")
COMPILER = {"gpu": "XLA:GPU", "cpu": "XLA:CPU", "tpu": "XLA:TPU"}
#: What `explain` and `fuse` say about XLA:TPU, whose passes are closed source.
TPU_NOT_REPLAYED = ("XLA:TPU's fusion passes are not replayed (they are not public): only the structure "
                    "is explained (boundary rules); other boundaries stay unknown")

_GPU_CONFIG_KEYS = ("fusion_backend_config", "operation_queue_id", "wait_on_operation_queues",
                    "force_earliest_schedule", "cudnn_conv_backend_config", "gemm_backend_config",
                    "collective_backend_config", "reification_cost")
_CPU_CONFIG_KEYS = ("outer_dimension_partitions",)
_CPU_LIBRARY_KINDS = ("__ynn_fusion", "__onednn_fusion", "__xnn_fusion")
_GPU_TARGETS = re.compile(r"^(__cublas\$|__cudnn\$|__gpu\$|__triton|cu_threefry2x32|cuda_threefry2x32|"
                          r"__nvshmem|xla\.gpu\.|__cub\$|CuDnn|cusolver|cublas)", re.IGNORECASE)
_CPU_TARGETS = re.compile(r"^(__onednn\$|__xla_cpu|xla\.cpu\.|__ynn)")
_TPU_TARGETS = re.compile(r"^(tpu_custom_call|MosaicTPU|__tpu)", re.IGNORECASE)

#: Snapshot names only one compiler writes (pipeline or pass part of the file name).  Shared
#: names (reshape-decomposer, fusion-wrapper, fusion, dce, ...) are left out on purpose.
_CPU_ONLY_PASSES = ("HLO_passes_after_layout_assignment", "dot-library-rewriter", "dot-library-passes")
_GPU_ONLY_PASSES = ("priority-fusion", "sort-iota-fusion", "fusion_merger", "horizontal_loop_fusion",
                    "horizontal_input_fusion", "variadic-op-splitter", "nvptx_post-layout_assignment_part_1")
_PRIORITY_PASSES = ("priority-fusion", "sort-iota-fusion")
_LEGACY_PASSES = ("fusion_merger", "horizontal_loop_fusion", "horizontal_input_fusion")
_TPU_FILE_NAMES = re.compile(r"\.(tpu_comp_env|cl_\d+\.after_optimizations)")


@dataclass(frozen=True)
class Detection:
    """The compiler, pipeline and GPU of a module, and one line of evidence per decision."""

    backend: str  # gpu | cpu | tpu
    pipeline: str | None  # legacy | priority | cpu; None for tpu (not replayed)
    gpu: str | None  # a shipped GPU description name or a .txtpb file (gpu only)
    evidence: tuple[str, ...]

    @property
    def why(self) -> str:
        return "; ".join(self.evidence)

    def message(self) -> str:
        return f"{self.why} (--backend, --pipeline, --gpu override)"


@dataclass(frozen=True)
class DumpClues:
    """What a dump says about one module besides its text: the names of the module's own files
    (HLO snapshots and the rest), and XLA's priority-fusion log when there is one."""

    names: tuple[str, ...] = ()
    fusion_log: Path | None = None


def detect(module: ir.Module | None, *, file: str | None = None, clues: DumpClues = DumpClues(),
           backend: str | None = None, pipeline: str | None = None, gpu: str | None = None) -> Detection:
    """Decide backend, pipeline and GPU for `module` (read from `file`, a display name)."""
    where = Path(file).name if file and file != "-" else "<stdin>" if file == "-" else "the module"
    evidence: list[str] = []
    if pipeline == "cpu" and backend is None:
        backend, said = "cpu", "--pipeline cpu"
    elif pipeline in ("legacy", "priority") and backend is None:
        backend, said = "gpu", f"--pipeline {pipeline}"
    else:
        said = f"--backend {backend}" if backend else ""
    if backend is not None:
        evidence.append(f"{COMPILER[backend]} ({said})")
    else:
        backend, line = _backend(module, where, clues)
        evidence.append(line)
    if backend == "cpu":
        return Detection("cpu", "cpu", None, tuple(evidence))
    if backend == "tpu":
        return Detection("tpu", None, None, tuple(evidence) + (TPU_NOT_REPLAYED,))
    if pipeline is None:
        pipeline, line = _gpu_pipeline(module, where, clues)
    else:
        line = f"pipeline {pipeline} (--pipeline)"
    evidence.append(line)
    if gpu is None:
        gpu, line = _gpu(clues)
    else:
        line = f"GPU {Path(gpu).stem if gpu.endswith('.txtpb') else gpu} (--gpu)"
    evidence.append(line)
    return Detection("gpu", pipeline, gpu, tuple(evidence))


# ------------------------------------------------------------------------------------------
# XLA:GPU, XLA:CPU or XLA:TPU
# ------------------------------------------------------------------------------------------


def _backend(module: ir.Module | None, where: str, clues: DumpClues) -> tuple[str, str]:
    found = _from_file_names(clues.names)
    if found is None and module is not None:
        found = _from_contents(module, where)
    if found is None:
        found = _from_pass_names(clues.names)
    if found is None:
        return "gpu", (f"XLA:GPU assumed: nothing in {where} or its dump's file names says which compiler "
                       "made it (--backend to choose)")
    return found


def _from_file_names(names: Iterable[str]) -> tuple[str, str] | None:
    for name in names:
        m = re.search(r"\.((sm_\d+\.\d+[a-z]*|[A-Za-z0-9]+)_gpu)_after_optimizations", name)
        if m:
            device = m.group(2)
            return "gpu", f"XLA:GPU for {device} (from the file name {name})"
        if ".cpu_after_optimizations" in name:
            return "cpu", f"XLA:CPU (from the file name {name})"
        if _TPU_FILE_NAMES.search(name):
            return "tpu", f"XLA:TPU (from the file name {name})"
    return None


def _from_contents(module: ir.Module, where: str) -> tuple[str, str] | None:
    """The first decisive instruction of each kind; a TPU tiled layout outranks the rest
    (XLA:GPU and XLA:CPU never tile a layout), XLA:GPU's backend configs outrank XLA:CPU's."""
    gpu = cpu = None
    for _, instr in module.instructions():
        tiled = _tiled_layout(instr.shape)
        if tiled is not None:
            return "tpu", f"XLA:TPU (in {where}: {instr.name} has the TPU tiled layout {tiled})"
        if instr.opcode == "custom-call":
            target = instr.custom_call_target or ""
            if _TPU_TARGETS.search(target):
                return "tpu", f"XLA:TPU (in {where}: {instr.name} calls {target})"
            if gpu is None and _GPU_TARGETS.search(target):
                gpu = f"{instr.name} calls the GPU library {target}"
            if cpu is None and _CPU_TARGETS.search(target):
                cpu = f"{instr.name} calls the CPU library {target}"
        config = instr.attr("backend_config")
        if config:
            keys = _config_keys(config)
            if gpu is None:
                key = next((k for k in _GPU_CONFIG_KEYS if k in keys), None)
                if key:
                    gpu = f"{instr.name} has XLA:GPU's backend_config {key}"
                elif "__triton" in config:
                    gpu = f"{instr.name} is a Triton fusion"
            if cpu is None:
                kind = next((k for k in _CPU_LIBRARY_KINDS if k in config), None)
                key = next((k for k in _CPU_CONFIG_KEYS if k in keys), None)
                if kind:
                    cpu = f"{instr.name} is a {kind} library fusion"
                elif key:
                    cpu = f"{instr.name} has XLA:CPU's backend_config {key}"
    if gpu:
        return "gpu", f"XLA:GPU (in {where}: {gpu})"
    if cpu:
        return "cpu", f"XLA:CPU (in {where}: {cpu})"
    return None


def _tiled_layout(shape: ir.Shape) -> str | None:
    if shape.is_tuple:
        for sub in shape.tuple_shapes:
            found = _tiled_layout(sub)
            if found is not None:
                return found
        return None
    layout = shape.layout
    if layout is not None and layout.extra.startswith("T("):
        return str(layout)
    return None


def _from_pass_names(names: Iterable[str]) -> tuple[str, str] | None:
    names = list(names)
    for name in names:
        hit = next((p for p in _CPU_ONLY_PASSES if f".{p}." in name or f"_{p}." in name), None)
        if hit:
            return "cpu", f"XLA:CPU (the dump has a snapshot of {hit}, which only XLA:CPU runs: {name})"
    for name in names:
        hit = next((p for p in _GPU_ONLY_PASSES if f"_{p}." in name or f".{p}." in name), None)
        if hit:
            return "gpu", f"XLA:GPU (the dump has a snapshot of {hit}, which only XLA:GPU runs: {name})"
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
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            keys.update(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return keys


# ------------------------------------------------------------------------------------------
# XLA:GPU's pipeline and device
# ------------------------------------------------------------------------------------------


def _gpu_pipeline(module: ir.Module | None, where: str, clues: DumpClues) -> tuple[str, str]:
    from .dumpdir import classify

    passes = [(name, f) for name in clues.names if (f := classify(Path(name))) is not None and f.stage == "pass"]
    for name, f in passes:
        if {f.after_pass, f.before_pass} & set(_PRIORITY_PASSES):
            return "priority", f"pipeline priority (the dump has priority fusion's snapshot {name})"
    if clues.fusion_log is not None:
        return "priority", f"pipeline priority (the dump has XLA's priority fusion log {clues.fusion_log.name})"
    for name, f in passes:
        # GpuInstructionFusion is the pass named plain `fusion` inside the pipeline `fusion`;
        # today's XLA:GPU has no such pass (its `fusion` is the pipeline's name only).
        hit = next((p for p in _LEGACY_PASSES if p in (f.after_pass, f.before_pass)), None)
        if hit is None and f.pipeline == "fusion" and "fusion" in (f.after_pass, f.before_pass):
            hit = "fusion (GpuInstructionFusion)"
        if hit and f.pipeline in ("fusion", "horizontal_fusion"):
            return "legacy", f"pipeline legacy (the dump has a snapshot of {hit}: {name})"
    era = _era(module) if module is not None else None
    if era == "legacy":
        return "legacy", (f"pipeline legacy, a guess: the metadata in {where} is jax 0.4's (source_file lines, "
                          "no stack frames) and no snapshot names a fusion pass (--pipeline priority if "
                          "priority fusion ran)")
    if era == "priority":
        return "priority", (f"pipeline priority (the metadata in {where} has a stack-frame table, as jax 0.10 "
                            "writes; jax 0.4.35, the legacy pipeline's last, wrote source_file lines)")
    return "priority", ("pipeline priority (XLA:GPU's default since 2024; --pipeline legacy for XLA run with "
                        "xla_gpu_enable_priority_fusion=False)")


def _era(module: ir.Module) -> str | None:
    """jaxlib 0.4.35 (the legacy pipeline's era) writes source_file/source_line metadata;
    jaxlib 0.10.2 (priority fusion) writes stack_frame_id and a stack-frame table."""
    for _, instr in module.instructions():
        meta = instr.attr("metadata") or ""
        if "stack_frame_id" in meta or "scheduling_name" in meta:
            return "priority"
        if "source_file" in meta:
            return "legacy"
    return None


def _gpu(clues: DumpClues) -> tuple[str, str]:
    from .device import DEFAULT_GPU, gpu_for_capability, spec_in_fusion_log

    if clues.fusion_log is not None:
        name = spec_in_fusion_log(clues.fusion_log)
        if name is not None:
            return name, f"GPU {name} (the device XLA's fusion log {clues.fusion_log.name} describes)"
    for file_name in clues.names:
        m = re.search(r"\.sm_(\d+)\.(\d+)[a-z]*_gpu_after_optimizations", file_name)
        if m:
            cc = (int(m.group(1)), int(m.group(2)))
            name = gpu_for_capability(cc)
            if name is not None:
                return name, f"GPU {name} (sm_{cc[0]}.{cc[1]} in the file name)"
            return DEFAULT_GPU, (f"GPU {DEFAULT_GPU} (default: no shipped description for sm_{cc[0]}.{cc[1]}; "
                                 "--gpu FILE.txtpb to give one)")
    return DEFAULT_GPU, f"GPU {DEFAULT_GPU} (default: nothing names the device; --gpu to choose)"

"""`--xla_dump_to` folders: which modules and stages they hold, from XLA's file names.

XLA names its dump files (xla/service/dump.cc):
  module_0001.jit_f.before_optimizations.txt
  module_0001.jit_f.sm_9.0a_gpu_after_optimizations.txt     (GPU; cpu_after_optimizations on CPU)
  module_0001.jit_f.0004.fusion.after_dce.before_multi_output_fusion.txt   (per-pass snapshot)
  module_0001.jit_f.priority_fusion_dump.txt                 (PriorityFusion's log)
  module_0001.jit_f.cl_612345678.after_optimizations.txt      (XLA:TPU, beside jit_f.tpu_comp_env.txt)
Everything else there (protos, .dot, .html, .ll, .ptx, buffer assignment, memory reports,
debug options, object files) is not HLO text and is skipped.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError

_MODULE_RE = re.compile(r"module_(\d+)\.(.+)\.txt\Z")
_PASS_RE = re.compile(r"(.+)\.(\d{4})\.(.+?)\.after_(.+?)\.before_(.+)\Z")
# The device prefix of after_optimizations: cpu, sm_<major>.<minor>[a]_gpu (CUDA), gfx..._gpu
# (ROCm), or none (XLA before 2021).  Device names may hold a dot, module names may too.
_TPU_AFTER_OPT_RE = re.compile(r"(.+?)\.cl_\d+\.after_optimizations\Z")
_AFTER_OPT_RE = re.compile(
    r"(.+?)\.(?:(cpu|sm_[0-9]+\.[0-9]+[a-z]*_gpu|[A-Za-z0-9]+_gpu|[A-Za-z0-9_]+?)_)?after_optimizations\Z")
# Text files XLA writes beside the HLO that are not HLO (matched at the end of the name, so a
# module called `jit_schedule` is still read).  Other extensions (.pb, .dot, .html, .ll, .ptx,
# .json, ...) never match _MODULE_RE.
_NOT_HLO = re.compile(
    r"(?:-buffer-assignment|-memory-usage-report|-live[-_]range|\.thunk_sequence[\w\-]*|"
    r"\.debug_options|\.autotune_results|\.execution_options|\.gpu_target_config|\.tpu_comp_env|"
    r"\.hlo_module_config|\.target_arguments|\.transfer_stats|\.basic_compiler_metadata)\Z"
)

#: The passes each fusion pipeline runs, by the names XLA gives them in dump file names.
FUSION_PASSES = {
    "legacy": ("variadic-op-splitter", "fusion", "fusion_merger", "multi_output_fusion",
               "horizontal_loop_fusion", "horizontal_input_fusion"),
    "priority": ("variadic-op-splitter", "sort-iota-fusion", "priority-fusion", "multi_output_fusion"),
    "cpu": ("fusion", "fusion-wrapper"),
}

#: The XLA pipelines (as dump file names spell them) that run those passes on GPU.  Later
#: pipelines reuse pass names: legacy XLA's `horizontal-loop-fusion-for-copy` runs a
#: `horizontal_loop_fusion` after copy insertion, scheduling runs a `fusion-wrapper`; their
#: snapshots are never the module right after fusion.
GPU_FUSION_PIPELINES = {"legacy": ("fusion", "horizontal_fusion"), "priority": ("fusion",)}


@dataclass(frozen=True)
class DumpFile:
    """One HLO text file of a dump folder."""

    path: Path
    module_id: int
    module: str  # the module's name, e.g. jit_f
    stage: str  # before_optimizations | after_optimizations | pass | priority_fusion_dump
    step: int | None = None  # per-pass snapshots: XLA's step counter
    pipeline: str | None = None
    after_pass: str | None = None
    before_pass: str | None = None
    device: str | None = None  # `cpu`, `sm_9.0a_gpu`, `gfx942_gpu`...

    @property
    def key(self) -> str:
        return f"module_{self.module_id:04d}.{self.module}"

    @property
    def backend(self) -> str | None:
        if self.device is None:
            return None
        if self.device == "tpu":
            return "tpu"
        return "cpu" if self.device.startswith("cpu") else "gpu"

    @property
    def label(self) -> str:
        if self.stage == "pass":
            return f"{self.step:04d} after {self.after_pass} (before {self.before_pass})"
        return self.stage


def classify(path: Path) -> DumpFile | None:
    """What an XLA dump file is, or None when it is not HLO text."""
    m = _MODULE_RE.match(path.name)
    if m is None:
        return None
    module_id, rest = int(m.group(1)), m.group(2)
    if _NOT_HLO.search(rest):
        return None
    if rest.endswith(".before_optimizations"):
        return DumpFile(path, module_id, rest[: -len(".before_optimizations")], "before_optimizations")
    if rest.endswith(".priority_fusion_dump"):
        return DumpFile(path, module_id, rest[: -len(".priority_fusion_dump")], "priority_fusion_dump")
    m_pass = _PASS_RE.match(rest)
    if m_pass is not None:
        module, step, pipeline, after, before = m_pass.groups()
        return DumpFile(path, module_id, module, "pass", int(step), pipeline, after, before)
    m_tpu = _TPU_AFTER_OPT_RE.match(rest)
    if m_tpu is not None:
        return DumpFile(path, module_id, m_tpu.group(1), "after_optimizations", device="tpu")
    m_after = _AFTER_OPT_RE.match(rest)
    if m_after is not None:
        module, device = m_after.groups()
        return DumpFile(path, module_id, module, "after_optimizations", device=device or None)
    return None


def scan(folder: str | os.PathLike) -> list[DumpFile]:
    """Every HLO text file of a dump folder, ordered by module and step."""
    root = Path(folder)
    files = [f for f in (classify(p) for p in root.iterdir() if p.is_file()) if f is not None]
    order = {"before_optimizations": 0, "pass": 1, "after_optimizations": 2, "priority_fusion_dump": 3}
    return sorted(files, key=lambda f: (f.module_id, f.module, order[f.stage], f.step or 0))


def modules(files: list[DumpFile]) -> list[str]:
    seen: list[str] = []
    for f in files:
        if f.key not in seen:
            seen.append(f.key)
    return seen


def choose_module(files: list[DumpFile], module: str | None, folder: str) -> list[DumpFile]:
    """The files of one module (see pick_module)."""
    key, _ = pick_module(files, module, folder)
    return [f for f in files if f.key == key]


def pick_module(files: list[DumpFile], module: str | None, folder: str) -> tuple[str, str]:
    """The key of one module, and why it was chosen: the one named (`jit_f`, `module_0001` or
    the full key `module_0001.jit_f`; a name several modules share is an error listing them),
    the only module, or the one with the most text."""
    keys = modules(files)
    if not keys:
        raise InputError(f"{folder}: no HLO text files from --xla_dump_to found here")
    if module is not None:
        if module in keys:
            return module, f"module {module} (--module)"
        matches = [k for k in keys if module in (k.split(".", 1)[1], k.split(".", 1)[0])]
        if not matches:
            raise InputError(f"{folder}: no module {module!r}; modules here: {', '.join(keys)}")
        if len(matches) > 1:
            raise InputError(f"{folder}: --module {module!r} matches {len(matches)} modules: {', '.join(matches)}; "
                             f"name one in full (--module {matches[-1]})")
        return matches[0], f"module {matches[0]} (--module {module})"
    if len(keys) == 1:
        return keys[0], f"module {keys[0]} (the only one here)"

    def size(k):
        return max(f.path.stat().st_size for f in files if f.key == k)

    key = max(keys, key=size)
    return key, f"module {key} (the largest of {len(keys)} modules here; --module to choose)"


def other_files(folder: str | os.PathLike, key: str) -> list[str]:
    """Names of a module's files that are not HLO text (protos, configs, XLA:TPU's
    tpu_comp_env, ...): they say which compiler wrote the dump."""
    prefix = key + "."
    return sorted(p.name for p in Path(folder).iterdir() if p.name.startswith(prefix) and classify(p) is None)


STAGES = ("before_optimizations", "before_fusion", "after_fusion", "after_optimizations", "last")
#: Short names every command accepts: `before` the module right before fusion, `after` (or
#: `fused`) the default, XLA's final module.
STAGE_ALIASES = {"before": "before_fusion", "after": None, "fused": None}


def canonical_stage(stage: str | None) -> str | None:
    return STAGE_ALIASES.get(stage, stage) if stage is not None else None


def choose_stage(files: list[DumpFile], stage: str | None, pipeline: str | None = None) -> DumpFile:
    """One file of a module by stage name (see STAGES and STAGE_ALIASES), step number or pass
    name (`after_P`)."""
    stage = canonical_stage(stage)
    hlo = [f for f in files if f.stage != "priority_fusion_dump"]
    if not hlo:
        raise InputError("this module has no HLO text files")
    passes = [f for f in hlo if f.stage == "pass"]
    by_stage = {f.stage: f for f in hlo if f.stage != "pass"}
    if stage is None or stage == "last":
        if stage is None and "after_optimizations" in by_stage:
            return by_stage["after_optimizations"]
        return passes[-1] if passes else hlo[-1]
    if stage in ("before_optimizations", "after_optimizations"):
        if stage not in by_stage:
            raise InputError(f"this dump has no {stage} file; stages here: {describe(files)}")
        return by_stage[stage]
    if stage in ("before_fusion", "after_fusion"):
        found = fusion_snapshot(files, stage, pipeline)
        if found is None:
            raise InputError(f"this dump has no snapshot {stage.replace('_', ' ')} passes; dump with "
                             f"--xla_dump_hlo_pass_re to get one (stages here: {describe(files)})")
        return found
    if stage.isdigit():
        for f in passes:
            if f.step == int(stage):
                return f
    for f in reversed(passes):
        if stage in (f"after_{f.after_pass}", f.after_pass):
            return f
    raise InputError(f"no stage {stage!r}; stages here: {describe(files)}")


def fusion_snapshot(files: list[DumpFile], which: str, pipeline: str | None = None) -> DumpFile | None:
    """The per-pass snapshot right before the first fusion pass, or right after the last one."""
    passes = [f for f in files if f.stage == "pass"]
    if pipeline in GPU_FUSION_PIPELINES or (pipeline is None and any(f.pipeline == "fusion" for f in passes)):
        allowed = set(GPU_FUSION_PIPELINES.get(pipeline) or sum(GPU_FUSION_PIPELINES.values(), ()))
        passes = [f for f in passes if f.pipeline in allowed]
    names = set()
    for key, value in FUSION_PASSES.items():
        if pipeline is None or key == pipeline:
            names.update(value)
    if which == "before_fusion":
        for f in passes:
            if f.before_pass in names and f.after_pass not in names:
                return f
        return None
    if pipeline == "priority" or (pipeline is None and any(
            {f.after_pass, f.before_pass} & {"priority-fusion", "sort-iota-fusion"} for f in passes)):
        # cse and dce run inside the priority fusion pipeline; when multi_output_fusion changes
        # nothing, XLA's last snapshot is `after_dce.before_multi_output_fusion`.
        names = names | {"cse", "dce"}
    before = fusion_snapshot(files, "before_fusion", pipeline)
    # A snapshot after a fusion pass, or one taken between fusion passes (e.g. legacy XLA's
    # `horizontal_fusion.after_pipeline-start.before_horizontal_loop_fusion`, the module after
    # vertical fusion when later snapshots were identical and not written or not kept).
    after = [f for f in passes if f.after_pass in names or
             (f.before_pass in names and before is not None and f.step > before.step)]
    return after[-1] if after else None


def describe(files: list[DumpFile]) -> str:
    return ", ".join(f.label for f in files if f.stage != "priority_fusion_dump")


def priority_fusion_log(files: list[DumpFile]) -> DumpFile | None:
    return next((f for f in files if f.stage == "priority_fusion_dump"), None)


def read_input(path: str, module: str | None = None, stage: str | None = None,
               pipeline: str | None = None) -> tuple[str, str]:
    """(text, display name) of a file, a dump folder (module/stage chosen), or "-" for stdin."""
    if path == "-":
        stdin = getattr(sys.stdin, "buffer", None)
        if stdin is None:  # replaced by a text stream (tests, notebooks)
            return sys.stdin.read(), "<stdin>"
        return decode(stdin.read(), "<stdin>"), "<stdin>"
    p = Path(path)
    if p.is_dir():
        chosen = choose_stage(choose_module(scan(p), module, path), stage, pipeline)
        return read_text(chosen.path), str(chosen.path)
    if not p.exists():
        raise InputError(f"{path}: no such file or folder")
    return read_text(p), path


def read_text(path: Path) -> str:
    """A file's text; HloSyntaxError when its bytes are not text (see parse/sniff.py)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as err:
        raise InputError(f"{path}: {err.strerror}") from None
    return decode(data, str(path))


def decode(data: bytes, name: str) -> str:
    """UTF-8 text (a stray byte that is not UTF-8 becomes U+FFFD), unless `data` is binary."""
    from .errors import HloSyntaxError
    from .parse.sniff import binary_bytes, binary_message

    binary = binary_bytes(data)
    if binary is not None:
        raise HloSyntaxError(binary_message(binary), path=name)
    return data.decode("utf-8", errors="replace")

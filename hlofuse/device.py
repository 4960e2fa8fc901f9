"""GPU descriptions in XLA's own format (GpuTargetConfigProto text, as in
xla/tools/hlo_opt/gpu_specs/), for the rules and the cost model that depend on the device.
`--gpu NAME|FILE` takes a file, or a name of hlofuse/data/gpu_specs/ without its extension."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import InputError

SPEC_DIR = Path(__file__).resolve().parent / "data" / "gpu_specs"
DEFAULT_GPU = "rtx2080ti"  # the paper's GPU


@dataclass(frozen=True)
class DeviceSpec:
    """The fields of `gpu_device_info` that XLA's fusion passes and cost model read."""

    name: str
    description: str
    threads_per_block_limit: int
    threads_per_warp: int
    shared_memory_per_block: int
    shared_memory_per_core: int
    threads_per_core_limit: int
    core_count: int
    fpus_per_core: int
    block_dim_limit_x: int
    block_dim_limit_y: int
    block_dim_limit_z: int
    memory_bandwidth: int  # bytes/s
    l2_cache_size: int
    clock_rate_ghz: float
    device_memory_size: int
    shared_memory_per_block_optin: int
    compute_capability: tuple[int, int]
    registers_per_core_limit: int
    registers_per_block_limit: int
    platform: str = "CUDA"

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


_FIELD_RE = re.compile(r"^\s*([a-z_0-9]+)\s*:\s*(\"[^\"]*\"|[-0-9.eE+]+)", re.M)

#: What the cost models divide by or count a device's lanes with.  XLA's own descriptions never
#: carry 0 there; a 0 would make every estimate undefined (a division by zero deep in a replay).
_POSITIVE = ("core_count", "memory_bandwidth", "clock_rate_ghz", "threads_per_warp",
             "threads_per_block_limit", "threads_per_core_limit", "fpus_per_core")


def parse_spec(text: str, name: str, path: str | None = None) -> DeviceSpec:
    """The description in `text` (`path`, when given, places errors in the file)."""
    fields: dict[str, str] = {}
    places: dict[str, int] = {}
    for match in _FIELD_RE.finditer(text):
        key, value = match.groups()
        if key not in fields:
            fields[key], places[key] = value, match.start(2)
    # `minor` is left out when it is 0 (proto text omits default values: h100_sxm says only `major: 9`).
    cc = re.search(r"cuda_compute_capability\s*\{\s*major:\s*(\d+)(?:\s*minor:\s*(\d+))?", text)

    def num(key, default=0, kind=int):
        if key not in fields:
            return default
        try:
            value = kind(fields[key].strip('"'))
        except ValueError:
            raise bad(key, "is not a number") from None
        if value < 0 or (value == 0 and key in _POSITIVE) or (kind is float and not math.isfinite(value)):
            wanted = "positive" if key in _POSITIVE else "non-negative"
            raise bad(key, f"must be a finite {wanted} number, got {fields[key]}")
        return value

    def bad(key: str, what: str) -> InputError:
        at = places[key]
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
        where = f"{path}:{line}:{column}: " if path else ""
        return InputError(f"{where}GPU description {name}: {key} {what}")

    if "core_count" not in fields or "memory_bandwidth" not in fields:
        raise InputError(f"GPU description {name}: expected XLA's GpuTargetConfigProto text "
                         "(gpu_device_info { core_count: ... memory_bandwidth: ... })")
    return DeviceSpec(
        name=name,
        description=fields.get("device_description_str", f'"{name}"').strip('"'),
        threads_per_block_limit=num("threads_per_block_limit", 1024),
        threads_per_warp=num("threads_per_warp", 32),
        shared_memory_per_block=num("shared_memory_per_block", 49152),
        shared_memory_per_core=num("shared_memory_per_core", 65536),
        threads_per_core_limit=num("threads_per_core_limit", 2048),
        core_count=num("core_count"),
        fpus_per_core=num("fpus_per_core", 128),
        block_dim_limit_x=num("block_dim_limit_x", 2147483647),
        block_dim_limit_y=num("block_dim_limit_y", 65535),
        block_dim_limit_z=num("block_dim_limit_z", 65535),
        memory_bandwidth=num("memory_bandwidth"),
        l2_cache_size=num("l2_cache_size", 0),
        clock_rate_ghz=num("clock_rate_ghz", 1.0, float),
        device_memory_size=num("device_memory_size", 0),
        shared_memory_per_block_optin=num("shared_memory_per_block_optin", 0),
        compute_capability=(int(cc.group(1)), int(cc.group(2) or 0)) if cc else (0, 0),
        registers_per_core_limit=num("registers_per_core_limit", 65536),
        registers_per_block_limit=num("registers_per_block_limit", 65536),
        platform=fields.get("platform_name", '"CUDA"').strip('"'),
    )


def available() -> list[str]:
    return sorted(p.stem for p in SPEC_DIR.glob("*.txtpb"))


@lru_cache(maxsize=None)
def load_gpu(name_or_file: str | None = None) -> DeviceSpec:
    """A shipped description by name (`a6000`, `h100_sxm`, `rtx2080ti`) or a .txtpb file."""
    ref = name_or_file or DEFAULT_GPU
    path = Path(ref)
    if path.suffix in (".txtpb", ".pbtxt", ".txt") and path.exists():
        return parse_spec(path.read_text(), path.stem, str(path))
    candidate = SPEC_DIR / f"{ref}.txtpb"
    if candidate.exists():
        return parse_spec(candidate.read_text(), ref, str(candidate))
    if path.exists():
        return parse_spec(path.read_text(), path.stem, str(path))
    import difflib

    close = difflib.get_close_matches(ref, available(), n=3, cutoff=0.4)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise InputError(f"unknown GPU {ref!r}{hint}; known: {', '.join(available())}, or give a .txtpb file")


#: Compute capability → the shipped description XLA would most likely have compiled for.
GPU_BY_CAPABILITY = {(6, 0): "p100", (7, 0): "v100", (7, 5): "rtx2080ti", (8, 0): "a100_sxm_80",
                     (8, 6): "a6000", (9, 0): "h100_sxm"}


def gpu_for_capability(cc: tuple[int, int]) -> str | None:
    return GPU_BY_CAPABILITY.get(cc)


def spec_in_fusion_log(path: str | Path) -> str | None:
    """The shipped description matching the device PriorityFusion's log describes (its
    `gpu_device_info` block), or None."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None
    block = re.search(r"gpu_device_info\s*\{", text)
    if block is None:
        return None
    try:
        seen = parse_spec(text[block.start(): block.start() + 4000], "dump")
    except InputError:
        return None
    for name in available():
        spec = load_gpu(name)
        if (spec.core_count, spec.memory_bandwidth) == (seen.core_count, seen.memory_bandwidth):
            return name
    return None

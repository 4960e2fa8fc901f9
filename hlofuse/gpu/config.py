"""Which GPU and which XLA an analysis answers for.

XLA's GPU predicates read a few device fields (shared memory per block, warp size, core
count...) and a few debug options (the MLIR emitter level, reduction epilogue fusion), and
their code changed between the XLA of jaxlib 0.4.35 and that of jaxlib 0.10.2.  A `GpuConfig`
carries all of that explicitly, so the same function answers for either era.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..device import DeviceSpec, load_gpu

#: XLA 76da7301 (jaxlib 0.4.35): GpuInstructionFusion, FusionMerger, MultiOutputFusion, horizontal fusion.
ERA_LEGACY = "2024"
#: XLA 5a9e73cb (jaxlib 0.10.2): PriorityFusion and MultiOutputFusion.
ERA_PRIORITY = "2026"

#: `xla_gpu_mlir_emitter_level` as jax runs each era's XLA.  XLA 76da7301 sets its default of 4
#: under `#if GOOGLE_CUDA` in debug_options_flags.cc, and jaxlib 0.4.35 compiles that file
#: without it: its CUDA compiles run level 0, the pre-MLIR emitters (a f32[64,128,2] transpose
#: {1,0,2} is a loop fusion there, an input_transpose_fusion with the flag set to 3 or 4, and the
#: merger's IR-size check doubles per basic-block split, as only levels below 4 do).  XLA's unit
#: tests, built with CUDA, run 4.  XLA 5a9e73cb has no such flag: only MLIR emitters (4).
JAX_MLIR_EMITTER_LEVEL = {ERA_LEGACY: 0, ERA_PRIORITY: 4}

_ERA_OF_PIPELINE = {"legacy": ERA_LEGACY, "priority": ERA_PRIORITY}


@dataclass(frozen=True)
class GpuConfig:
    """The device and XLA settings GPU fusion analyses depend on."""

    device: DeviceSpec
    #: "2024" (legacy pipeline's XLA) or "2026" (priority fusion's XLA).
    era: str = ERA_LEGACY
    #: `xla_gpu_mlir_emitter_level`: which emitters (MLIR or older) price and tile a fusion.
    #: 4, XLA's unit tests' level, unless set: replays take JAX_MLIR_EMITTER_LEVEL's.
    mlir_emitter_level: int = 4
    #: `MinThreadsXRowReduction`: 1024, or 512 when XLA found a ptxas older than 12.2.  It sets
    #: the race-free bound of row reductions (16 times this).
    row_reduction_min_threads: int = 1024
    #: `xla_gpu_enable_reduction_epilogue_fusion` (default true).
    reduction_epilogue_fusion: bool = True

    def __post_init__(self) -> None:
        if self.era not in (ERA_LEGACY, ERA_PRIORITY):
            raise ValueError(f"unknown XLA era {self.era!r}; expected {ERA_LEGACY!r} or {ERA_PRIORITY!r}")
        # `token`: the same small int for equal configs, for cache keys asked millions of times
        # on a large module (an int hashes in C; this class's __hash__ is a Python call).
        object.__setattr__(self, "token", _TOKENS.setdefault(self, len(_TOKENS)))

    def __hash__(self) -> int:
        # Analyses key their caches by config, hundreds of thousands of times per replay;
        # hashing every device field each time was a measurable share of a large replay.
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(dataclasses.astuple(self))
            object.__setattr__(self, "_hash", cached)
        return cached

    @property
    def legacy(self) -> bool:
        return self.era == ERA_LEGACY

    @property
    def warp_size(self) -> int:
        """The warp size reduction heuristics use: a constant 32 in 2024, the device's in 2026."""
        return 32 if self.legacy else self.device.threads_per_warp

    def replace(self, **changes) -> "GpuConfig":
        return dataclasses.replace(self, **changes)


#: Every distinct config made so far → its token (a handful per process).
_TOKENS: dict[GpuConfig, int] = {}


#: XLA flags the GPU analyses read: flag name → (GpuConfig field, value parser).
MODELLED_FLAGS = {
    "xla_gpu_mlir_emitter_level": ("mlir_emitter_level", int),
    "xla_gpu_enable_reduction_epilogue_fusion": ("reduction_epilogue_fusion",
                                                 lambda v: {"true": True, "false": False}[v.lower()]),
}


def parse_xla_flags(flags) -> tuple[dict, list[str]]:
    """XLA_FLAGS text (`--xla_gpu_mlir_emitter_level=4 --xla_...`, one string or several) →
    ({GpuConfig field: value} of the flags hlofuse models, [the other flags' names])."""
    fields: dict = {}
    ignored: list[str] = []
    for token in " ".join(flags).split():
        name, sep, value = token.lstrip("-").partition("=")
        if name not in MODELLED_FLAGS:
            ignored.append(name)
            continue
        field_name, parse = MODELLED_FLAGS[name]
        try:
            fields[field_name] = parse(value if sep else "true")
        except (KeyError, ValueError):
            raise ValueError(f"--{name}={value}: not a value XLA takes for this flag") from None
    return fields, ignored


def gpu_config(ctx) -> GpuConfig:
    """The GpuConfig of a replay context: `ctx.gpu_config` when a caller set one (the
    conformance runner does), else built from the context's device and pipeline, with the
    XLA flags of its options applied over jax's defaults (and kept there)."""
    cached = ctx.gpu_config
    if cached is None:
        device = ctx.device or load_gpu(None)
        era = _ERA_OF_PIPELINE.get(ctx.pipeline, ERA_LEGACY)
        fields, _ = parse_xla_flags(getattr(ctx.options, "xla_flags", ()))
        cached = GpuConfig(device, era, **{"mlir_emitter_level": JAX_MLIR_EMITTER_LEVEL[era], **fields})
        ctx.gpu_config = cached
    return cached


def test_device() -> DeviceSpec:
    """The device XLA's GPU unit tests use (`TestGpuDeviceInfo::RTXA6000DeviceInfo()`).

    It differs from the shipped a6000.txtpb (clock 1.41 GHz, not 1.8; compute capability 8.9,
    not 8.6), and those differences change the cost model's answers (legacy contract §10.1)."""
    base = load_gpu("a6000")
    return dataclasses.replace(
        base, name="a6000-xla-tests", description="RTX A6000 as in XLA's unit tests",
        threads_per_block_limit=1024, threads_per_warp=32, shared_memory_per_block=49152,
        shared_memory_per_block_optin=101376, shared_memory_per_core=102400,
        threads_per_core_limit=1536, core_count=84, fpus_per_core=128,
        memory_bandwidth=768096000000, l2_cache_size=6291456, clock_rate_ghz=1.41,
        device_memory_size=51050250240, compute_capability=(8, 9),
    )

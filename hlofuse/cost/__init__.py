"""XLA:GPU's cost model, as the priority fusion pass of jaxlib 0.10.2 (XLA 5a9e73cb) uses it.

    analysis.py         GpuHloCostAnalysis: flops, bytes read and written, operand utilisation,
                        IR size, per instruction and per fusion (utilisation propagation)
    profiles.py         measured cycles per element of elementwise ops, per GPU generation
    fusion_analysis.py  HloFusionAnalysis: emitter kind and heroes of an instruction, a fusion or
                        a producer+consumer pair; the launch grid of each emitter
    coalescing.py       whether a kernel's reads are coalesced, and the cost when they are not
    model.py            GpuPerformanceModel: run time of a kernel alone and with a producer
                        fused in, with launch overhead; priority = time unfused - time fused
    durations.py        absl::Duration ticks and float32 emulation, so ties break as in XLA
    tiling.py           how a generic Triton fusion is tiled: tiles per instruction, valid tiles
    tiled.py            the tiled cost of a Triton fusion and the search for its best tile
    legacy.py           (the 2024 formulas FusionMerger used; owned by the legacy pipeline)

Entry point: `GpuPerformanceModel(device)` (`hlofuse.device.load_gpu(name)` gives a device).
How close it is to XLA: the µs figures XLA logs in `*.priority_fusion_dump.txt` are reproduced
to within a few quarter-nanosecond ticks for loop, reduction (row, multi-row, column, small
column), transpose and in-place dynamic-update-slice kernels (tests/test_cost_*.py), and for
generic Triton fusions and pairs (tests/test_triton_fusion.py).  Where the
model simplifies XLA, the module that does it says so and what the effect is.
"""

from .analysis import GpuHloCostAnalysis, MAX_IR_SIZE
from .fusion_analysis import FusionAnalysis, LaunchDimensions, analyse, analyse_producer_consumer, launch_dimensions
from .model import KERNEL_LAUNCH_OVERHEAD, GpuPerformanceModel, RunTime, RunTimes
from .profiles import profile_for

__all__ = [
    "GpuHloCostAnalysis", "MAX_IR_SIZE", "FusionAnalysis", "LaunchDimensions", "analyse",
    "analyse_producer_consumer", "launch_dimensions", "KERNEL_LAUNCH_OVERHEAD", "GpuPerformanceModel",
    "RunTime", "RunTimes", "profile_for",
]

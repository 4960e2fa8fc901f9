"""What a kernel costs on the machine a program runs on: XLA:GPU's own performance model for
a GPU, a roofline for the CPU.

A target prices one kernel (a graph node of a fused module) as its launch plus its run time,
and moving bytes through memory (what a boundary adds: the value written by one kernel and
read back by another):

  GpuTarget     the performance model the replay's passes use, for the `--gpu` spec: the
                2026 GpuPerformanceModel for the priority pipeline (cost/model.py), the 2024
                one for the legacy pipeline (cost/legacy.py), with XLA's 1 µs launch overhead
                (kKernelLaunchOverhead).  Library calls the model does not price (cuBLAS,
                cuDNN, RNG custom calls: XLA's cost analysis gives them -1) get a roofline on
                the spec's bandwidth and FP32 rate (2 flops per FPU per cycle);
  CpuRoofline   one core: max(bytes / bandwidth, flops / FLOP rate) plus a launch, with
                matrix products at a library's rate; transcendental ops weigh more than one
                flop per element (OP_FLOPS).  The defaults were measured with
                bench/cpu_roofline.py; every constant can be overridden.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping

from ..graph import Node

# ------------------------------------------------------------------------------------------
# Kernel times
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelTime:
    """One launch of a kernel: its launch overhead and run time (µs), what it computes and
    moves, and what priced it (`cost-model`, `roofline`)."""

    launch_us: float
    exec_us: float
    flops: float
    bytes: int
    priced_by: str

    @property
    def us(self) -> float:
        return self.launch_us + self.exec_us


# ------------------------------------------------------------------------------------------
# The CPU roofline
# ------------------------------------------------------------------------------------------

#: Cost of one element of these ops in flops (adds), measured with bench/cpu_roofline.py on
#: this project's machines (AMD EPYC, one core, the C kernels of hlofuse bench compiled by
#: cc -O2, 2026-11-26): an f32 sine took 9.9 ns per element where an add took 0.44 ns.
#: Other elementwise ops count 1.
OP_FLOPS: Mapping[str, int] = {
    "divide": 2, "sqrt": 3, "rsqrt": 11, "exponential": 11, "log": 11, "sine": 22, "cosine": 29, "tanh": 43,
    "logistic": 31, "power": 50, "exponential-minus-one": 35, "log-plus-one": 32, "atan2": 44, "erf": 24,
    "cbrt": 57, "tan": 33, "remainder": 9,
}


class _CpuProfile:
    """GpuHloCostAnalysis's per-element op costs, for the CPU: OP_FLOPS, else 1."""

    name = "cpu"

    def __init__(self, weights: Mapping[str, int]):
        self._weights = weights

    def flops_per_element(self, opcode: str, element_type: str) -> int:
        return self._weights.get(opcode, 1)


@dataclass(frozen=True)
class CpuRoofline:
    """One CPU core as a roofline.  Defaults measured with bench/cpu_roofline.py on this
    project's development machines (AMD EPYC, 2 cores shared, 2026-11-26, median of 5):
    f32[16M] + 1 moved 25.6 GB/s; 64 fused multiply-adds over f32[64K] ran 2.25 GFLOP/s; an
    unfused f32[1] add took 0.25 µs per kernel; NumPy's f32[512,512] matrix product 91 GFLOP/s."""

    bandwidth: float = 25.6e9  # bytes/s, one core streaming
    flop_rate: float = 2.25e9  # flops/s of fused elementwise code
    dot_flop_rate: float = 91e9  # flops/s of a library matrix product (dot, convolution)
    launch_us: float = 0.25  # µs per kernel: a call into compiled code
    op_flops: Mapping[str, int] = field(default_factory=lambda: dict(OP_FLOPS))

    @property
    def description(self) -> str:
        return (f"CPU roofline (one core: {self.bandwidth / 1e9:g} GB/s, {self.flop_rate / 1e9:g} GFLOP/s, "
                f"dots {self.dot_flop_rate / 1e9:g} GFLOP/s, {self.launch_us:g} µs per kernel)")

    def to_dict(self) -> dict:
        return {"kind": "cpu-roofline", "description": self.description, "bandwidth": self.bandwidth,
                "flop_rate": self.flop_rate, "dot_flop_rate": self.dot_flop_rate, "launch_us": self.launch_us}

    def with_overrides(self, bandwidth: float | None = None, flop_rate: float | None = None,
                       launch_us: float | None = None) -> "CpuRoofline":
        changes = {k: v for k, v in (("bandwidth", bandwidth), ("flop_rate", flop_rate), ("launch_us", launch_us))
                   if v is not None}
        return replace(self, **changes) if changes else self

    def transfer_us(self, nbytes: int) -> float:
        return nbytes / self.bandwidth * 1e6

    def pricer(self) -> "_CpuPricer":
        return _CpuPricer(self)


def _cpu_cost_analysis(roofline: CpuRoofline):
    """XLA's cost analysis with the CPU's per-element op costs; a concatenate only moves data
    (XLA:GPU charges 6 flops per element for its index arithmetic; a CPU copies)."""
    from ..cost.analysis import GpuHloCostAnalysis

    class CpuCostAnalysis(GpuHloCostAnalysis):
        def _instruction(self, node):
            props = super()._instruction(node)
            if node.opcode == "concatenate":
                props.flops = 0.0
            return props

    return CpuCostAnalysis(_CpuProfile(roofline.op_flops), concat_penalty=False)


class _CpuPricer:
    """Prices the kernels of one program on a CpuRoofline (one cost analysis, cached per node)."""

    def __init__(self, roofline: CpuRoofline):
        self.r = roofline
        self.analysis = _cpu_cost_analysis(roofline)

    def kernel(self, node: Node) -> KernelTime:
        r = self.r
        a = self.analysis
        if node.opcode == "fusion" and node.fusion_kind == "kCustom" and node.fused is not None:
            # a library (YNNPACK) fusion computes each op once; the elemental emitter's
            # recomputation, which the fusion's utilisation counts, is not how it runs
            flops = float(sum(max(a.flop_count(inner), 0) for inner in node.fused.nodes()))
        else:
            flops = float(a.flop_count(node))
        dot = _library_flops(node)
        if flops < 0 or node.opcode == "custom-call":
            flops = float(_elements_written(node))
        moved = _bytes_moved(a, node)
        elementwise = max(flops - dot, 0.0)
        compute = dot / r.dot_flop_rate + elementwise / r.flop_rate
        memory = moved / r.bandwidth
        return KernelTime(r.launch_us, max(compute, memory) * 1e6, flops, moved, "roofline")


# ------------------------------------------------------------------------------------------
# XLA:GPU's performance model
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuTarget:
    """XLA:GPU's performance model for one GPU spec, as the pipeline's era uses it."""

    gpu: str
    pipeline: str  # priority | legacy

    @property
    def device(self):
        from ..device import load_gpu

        return load_gpu(self.gpu)

    @property
    def description(self) -> str:
        model = "2026 GpuPerformanceModel" if self.pipeline != "legacy" else "2024 GpuPerformanceModel"
        return f"XLA:GPU's {model} for {self.device.name} (1 µs launch overhead per kernel)"

    def to_dict(self) -> dict:
        d = self.device
        return {"kind": "gpu-cost-model", "description": self.description, "gpu": d.name,
                "pipeline": self.pipeline, "bandwidth": d.memory_bandwidth, "launch_us": self.launch_us}

    @property
    def launch_us(self) -> float:
        return 1.0  # kKernelLaunchOverhead, in both eras

    def transfer_us(self, nbytes: int) -> float:
        return nbytes / self.device.memory_bandwidth * 1e6

    def pricer(self) -> "_GpuPricer":
        return _GpuPricer(self)


class _GpuPricer:
    def __init__(self, target: GpuTarget):
        from ..gpu.config import ERA_LEGACY, ERA_PRIORITY, GpuConfig

        self.t = target
        device = target.device
        self.device = device
        if target.pipeline == "legacy":
            from ..cost.legacy import LegacyPerformanceModel

            self.model = LegacyPerformanceModel(GpuConfig(device, ERA_LEGACY))
            self.legacy = True
        else:
            from ..cost.model import GpuPerformanceModel

            self.model = GpuPerformanceModel(device, GpuConfig(device, ERA_PRIORITY))
            self.legacy = False
        #: FP32 rate: 2 flops per FPU per cycle, every core busy (the model's ComputeTime).
        self.peak_flops = 2 * device.clock_rate_ghz * 1e9 * device.core_count * device.fpus_per_core

    def kernel(self, node: Node) -> KernelTime:
        from ..cost import durations as dur

        try:
            rt = self.model.run_time(node) if self.legacy else self.model.estimate(node)
            exec_us = dur.to_us(rt.exec_time)
            flops, written = rt.flops, rt.bytes_written
            read = getattr(rt, "bytes_read", 0)
        except Exception:  # noqa: BLE001 - a kernel the model cannot analyse: the roofline below
            exec_us, flops, written, read = -1.0, -1, -1, 0
        if node.opcode == "custom-call" or flops < 0 or written < 0 or not math.isfinite(exec_us) or exec_us < 0:
            return self._roofline(node)
        return KernelTime(self.t.launch_us, exec_us, float(flops), int(read) + int(written), "cost-model")

    def _roofline(self, node: Node) -> KernelTime:
        flops = _library_flops(node) or float(_elements_written(node))
        moved = sum(_array_bytes(op.shape) for op in node.operands) + _array_bytes(node.shape)
        seconds = max(flops / self.peak_flops, moved / self.device.memory_bandwidth)
        return KernelTime(self.t.launch_us, seconds * 1e6, flops, moved, "roofline")


# ------------------------------------------------------------------------------------------
# Shared counting
# ------------------------------------------------------------------------------------------


def _array_bytes(shape) -> int:
    """Bytes of every array leaf of a shape (a tuple's buffers, not its index table)."""
    if shape.is_tuple:
        return sum(_array_bytes(s) for s in shape.tuple_shapes)
    if not shape.is_array:
        return 0
    return shape.byte_size


def _elements_written(node: Node) -> int:
    def count(shape) -> int:
        if shape.is_tuple:
            return sum(count(s) for s in shape.tuple_shapes)
        return shape.elements if shape.is_array else 0

    return count(node.shape)


def _bytes_moved(analysis, node: Node) -> int:
    """Bytes a kernel moves through memory: each operand read once at most (re-reads hit the
    cache), its outputs written (an in-place update writes only the update)."""
    if node.opcode == "custom-call":
        return sum(_array_bytes(op.shape) for op in node.operands) + _array_bytes(node.shape)
    read = 0
    for i, op in enumerate(node.operands):
        accessed = analysis.operand_bytes_accessed(node, i)
        read += min(_array_bytes(op.shape), max(accessed, 0))
    written = analysis.output_bytes_accessed(node)
    if node.opcode != "fusion" and node.shape.is_tuple:
        written = _array_bytes(node.shape)
    return read + max(written, 0)


def _library_flops(node: Node) -> float:
    """Flops of the matrix products and convolutions a kernel computes (2 per multiply-add):
    a dot or convolution, one inside a fusion, or a cuBLAS GEMM custom call."""
    from .. import attributes

    def dot_flops(n: Node) -> float:
        if n.opcode == "dot":
            lhs = n.operands[0].shape
            width = math.prod(lhs.dims[d] for d in attributes.ints(n, "lhs_contracting_dims") if d < lhs.rank)
            return 2.0 * _elements_written(n) * width
        if n.opcode == "convolution" and len(n.operands) == 2:
            kernel = n.operands[1].shape
            out_features = kernel.dims[-1] if kernel.dims else 1
            return 2.0 * _elements_written(n) * max(kernel.elements // max(out_features, 1), 1)
        if n.opcode == "custom-call":
            config = attributes.backend_config(n)
            gemm = config.get("gemm_backend_config") if isinstance(config, Mapping) else None
            numbers = gemm.get("dot_dimension_numbers") if isinstance(gemm, Mapping) else None
            if isinstance(numbers, Mapping) and n.operands:
                lhs = n.operands[0].shape
                dims = [int(d) for d in numbers.get("lhs_contracting_dimensions", ())]
                width = math.prod(lhs.dims[d] for d in dims if d < lhs.rank)
                out = n.shape.tuple_shapes[0] if n.shape.is_tuple and n.shape.tuple_shapes else n.shape
                return 2.0 * (out.elements if out.is_array else 0) * width
        return 0.0

    if node.opcode == "fusion" and node.fused is not None:
        return sum(dot_flops(inner) for inner in node.fused.nodes())
    return dot_flops(node)


def target_for(backend: str, pipeline: str | None, gpu: str | None,
               cpu: CpuRoofline | None = None):
    """The target that prices a program of `backend` (None for a backend without one: TPU)."""
    if backend == "gpu":
        return GpuTarget(gpu or "rtx2080ti", pipeline or "priority")
    if backend == "cpu":
        return cpu or CpuRoofline()
    return None

"""GpuPerformanceModel: the modelled run time of a kernel, alone or with a producer fused in.

XLA:GPU (xla/service/gpu/model/gpu_performance_model{,_base}.cc at 5a9e73cb;
docs/xla/priority-fusion.md §5.4–5.8) estimates a kernel as

    exec = compute + memory − 0.95 · min(compute, memory)        (they overlap 95%)
    compute = flops / (2 · clock · active FPUs)                  active = min(blocks, SMs) × min(threads, FPUs/SM)
    memory  = Σ_operands read time + bytes written / bandwidth
    read    = first read from DRAM (slowed by uncoalesced access) + re-reads from L2 (×2.5)
              or L1 (×20) when the operand fits, every bandwidth capped at
              blocks × clock × 32 bytes (one 32-byte transaction per block per cycle)

and a producer P fused into a consumer C as the same formula over the fused kernel: C's flops
plus P's flops times how often C uses P's elements, C's reads plus P's reads scaled the same way
(minus what both read elementwise anyway), C's writes, on the fused kernel's launch grid.
PriorityFusion adds 1 µs of launch overhead per kernel.

Times are absl::Duration ticks (quarter nanoseconds) and the float32 intermediates are emulated
(durations.py), so figures match XLA's fusion log to within a tick or two.  Generic Triton
fusions are costed here too, with their Triton launch grid; XLA costs them with its
tiling-based model instead (see fusion_analysis.py) — an approximation whose effect is limited
to the priorities of Triton pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..device import DeviceSpec
from ..graph import Node, first_positions
from ..gpu.config import ERA_PRIORITY, GpuConfig
from . import durations as dur
from .analysis import GpuHloCostAnalysis, shape_size
from .structure import KeyMemo, node_key, pair_key
from .coalescing import coalescing_rate, is_read_coalesced
from .durations import f32
from .fusion_analysis import TRITON, FusionAnalysis, LaunchDimensions, analyse, analyse_producer_consumer, \
    launch_dimensions
from .profiles import profile_for
from .tiled import NO_VALID_TILINGS, BestTiling, best_tiled, estimate_tiled, triton_tiling

#: kKernelLaunchOverhead: 1 µs per kernel.
KERNEL_LAUNCH_OVERHEAD = dur.from_microseconds(1.0)
#: kMemoryComputeParallelism.
MEMORY_COMPUTE_PARALLELISM = 0.95
#: kL2CacheSpeedup / kL1CacheSpeedup: re-reads of data that fits a cache.
L2_CACHE_SPEEDUP = 2.5
L1_CACHE_SPEEDUP = 8.0
#: CUDA defaults of se::DeviceDescription fields the GPU spec files do not carry.
L1_CACHE_SIZE_PER_SM = 2 * 1024
MEMORY_TRANSACTIONS_PER_CLOCK = 32


@dataclass(frozen=True)
class RunTime:
    """EstimateRunTimeData: one kernel's modelled cost (times in ticks, see durations.py)."""

    flops: int
    bytes_read: int
    bytes_written: int
    read_time: int | float
    write_time: int | float
    compute_time: int | float
    exec_time: int | float
    launch: LaunchDimensions | None = None
    coalesced: bool = True

    @property
    def exec_us(self) -> float:
        return dur.to_us(self.exec_time)

    @property
    def is_infinite(self) -> bool:
        return self.exec_time == dur.INFINITE

    def to_dict(self) -> dict:
        return {"flops": self.flops, "bytes_read": self.bytes_read, "bytes_written": self.bytes_written,
                "read_us": dur.to_us(self.read_time), "write_us": dur.to_us(self.write_time),
                "compute_us": dur.to_us(self.compute_time), "exec_us": dur.to_us(self.exec_time),
                "launch": str(self.launch) if self.launch else None, "coalesced": self.coalesced}


@dataclass(frozen=True)
class RunTimes:
    """GpuPerformanceModel::RunTimes: a producer and its consumers, unfused vs fused
    (launch overheads included).  PriorityFusion's priority is their difference."""

    time_unfused: int | float
    time_fused: int | float

    @property
    def priority(self) -> int | float:
        return self.time_unfused - self.time_fused

    @property
    def unfused_us(self) -> float:
        return dur.to_us(self.time_unfused)

    @property
    def fused_us(self) -> float:
        return dur.to_us(self.time_fused)


# ------------------------------------------------------------------------------------------
# The formulas (GpuPerformanceModelBase)
# ------------------------------------------------------------------------------------------


def compute_time(device: DeviceSpec, flops: int, blocks: int, threads: int) -> int | float:
    """ComputeTime: flops at 2 per FPU per cycle over the FPUs the grid occupies."""
    fpus = min(blocks, device.core_count) * min(threads, device.fpus_per_core)
    rate = int(f32(device.clock_rate_ghz) * 2 * fpus)
    if rate <= 0:
        return 0
    return dur.from_nanoseconds(f32(f32(float(flops)) / rate))


def _adjust_bandwidth(device: DeviceSpec, bandwidth: float, blocks: int) -> float:
    """AdjustBandwidth: at most one 32-byte transaction per block per cycle."""
    per_block = f32(f32(f32(device.clock_rate_ghz) * f32(1.0e9)) * MEMORY_TRANSACTIONS_PER_CLOCK)
    return min(bandwidth, f32(blocks * per_block))


def _read_bandwidths(device: DeviceSpec, blocks: int, rate: float, fits: int) -> tuple[float, float]:
    """ReadTimeWithDRAMHeuristic's two bandwidths (DRAM, re-reads), adjusted to the grid;
    `fits` is 2 when the operand fits L1, 1 when it fits L2 only, 0 otherwise."""
    bandwidth = device.memory_bandwidth
    dram_bw = f32(bandwidth * rate)
    rest_bw = f32(float(bandwidth))
    if fits:
        rest_bw = f32(rest_bw * L2_CACHE_SPEEDUP)
        if fits == 2:
            rest_bw = f32(rest_bw * L1_CACHE_SPEEDUP)
    else:
        rest_bw = f32(rest_bw * rate)
    return _adjust_bandwidth(device, dram_bw, blocks), _adjust_bandwidth(device, rest_bw, blocks)


#: _read_bandwidths by (the device fields it reads, blocks, rate, fits): a pure function of its
#: key, asked for every operand of every kernel and pair priced.
_BANDWIDTHS: dict[tuple, tuple[float, float]] = {}


def read_time(device: DeviceSpec, blocks: int, net: int, total: int, rate: float) -> int | float:
    """ReadTimeWithDRAMHeuristic: `net` bytes come from DRAM once, the rest (`total - net`)
    are re-reads served from L2/L1 when the operand fits there."""
    fits = (2 if net < L1_CACHE_SIZE_PER_SM * device.core_count else 1) if net < device.l2_cache_size else 0
    key = (device.memory_bandwidth, device.clock_rate_ghz, blocks, rate, fits)
    found = _BANDWIDTHS.get(key)
    if found is None:
        if len(_BANDWIDTHS) > 65536:
            _BANDWIDTHS.clear()
        found = _BANDWIDTHS[key] = _read_bandwidths(device, blocks, rate, fits)
    dram_bw, rest_bw = found
    dram_bytes = min(net, total)
    cache_bytes = total - dram_bytes
    t: int | float = 0  # ticks; infinite past float32's range
    if dram_bytes:
        t += dur.from_seconds(f32(dram_bytes / dram_bw))
    if cache_bytes:
        t += dur.from_seconds(f32(cache_bytes / rest_bw))
    return t


def write_time(device: DeviceSpec, bytes_written: int) -> int | float:
    return dur.from_seconds(f32(f32(float(bytes_written)) / f32(float(device.memory_bandwidth))))


def combine(compute: int | float, memory: int | float) -> int | float:
    """CombineComputeAndMemoryAccessTime."""
    return compute + memory - dur.scale(min(compute, memory), MEMORY_COMPUTE_PARALLELISM)


# ------------------------------------------------------------------------------------------
# The model with its caches (GpuPerformanceModel + GpuPerformanceModelCache)
# ------------------------------------------------------------------------------------------


class GpuPerformanceModel:
    """Modelled run times of the nodes of one graph, cached per node and per producer/consumer
    pair.  Call `invalidate(node)` when a node changes or disappears."""

    def __init__(self, device: DeviceSpec, config: GpuConfig | None = None, concat_penalty: bool = True):
        self.device = device
        self.config = config or GpuConfig(device, ERA_PRIORITY)
        self.cost = GpuHloCostAnalysis(profile_for(device), concat_penalty=concat_penalty, by_structure=True)
        self._analysis: dict[int, FusionAnalysis] = {}
        self._pair_analysis: dict[tuple[int, int], FusionAnalysis] = {}
        self._runtime: dict[int, RunTime] = {}
        #: producer uid → consumer uid → fused time (GpuPerformanceModelCache's fusion map).
        self._fused: dict[int, dict[int, int | float]] = {}
        self._triton: dict[tuple[int, int], BestTiling] = {}
        #: uid → the pair keys it appears in (both caches above), so forgetting a node does
        #: not scan every pair of the graph.
        self._pairs_of: dict[int, set[tuple[int, int]]] = {}
        #: Run times by structure (hlofuse.cost.structure): the layers of a model repeat the
        #: same kernels and pairs.  Never invalidated: a key names what the answer depends on.
        self._by_structure: dict[tuple, tuple | BestTiling] = {}
        #: node and pair keys, with the state they were made from (structure.node_key, pair_key)
        self._node_keys = KeyMemo()

    # -- analyses ------------------------------------------------------------------------
    def analysis(self, node: Node) -> FusionAnalysis:
        a = self._analysis.get(node.uid)
        if a is None:
            a = analyse(node, self.config)
            self._analysis[node.uid] = a
        return a

    def pair_analysis(self, producer: Node, consumer: Node) -> FusionAnalysis:
        key = (producer.uid, consumer.uid)
        a = self._pair_analysis.get(key)
        if a is None:
            a = analyse_producer_consumer(producer, consumer, self.config)
            self._pair_analysis[key] = a
            self._index_pair(key)
        return a

    def pair_kind(self, producer: Node, consumer: Node) -> str:
        """pair_analysis(producer, consumer).kind, remembered by the pair's structure (the
        kind is a function of what the fused kernel computes)."""
        return self.pair_kinds(producer, consumer)[0]

    def pair_kinds(self, producer: Node, consumer: Node) -> tuple[str, str]:
        """(kind, backend_kind) of pair_analysis(producer, consumer), remembered by the pair's
        structure."""
        analysis = self._pair_analysis.get((producer.uid, consumer.uid))
        if analysis is not None:
            return analysis.kind, analysis.backend_kind
        key = ("kind", pair_key(producer, consumer, self._node_keys))
        found = self._by_structure.get(key)
        if found is None:
            analysis = self.pair_analysis(producer, consumer)
            found = self._by_structure[key] = (analysis.kind, analysis.backend_kind)
        return found

    def _index_pair(self, key: tuple[int, int]) -> None:
        pairs_of = self._pairs_of
        for uid in key:
            keys = pairs_of.get(uid)
            if keys is None:
                pairs_of[uid] = {key}
            else:
                keys.add(key)

    # -- caches ----------------------------------------------------------------------------
    def invalidate(self, node: Node) -> None:
        """Forget what was computed about `node` as instruction, producer and consumer."""
        self._runtime.pop(node.uid, None)
        fused = self._fused
        fused.pop(node.uid, None)
        for op in node.operands:
            source = op.operands[0] if op.opcode == "get-tuple-element" and op.operands else op
            times = fused.get(source.uid)
            if times is not None:
                times.pop(node.uid, None)
        self._analysis.pop(node.uid, None)
        for key in self._pairs_of.pop(node.uid, ()):
            self._pair_analysis.pop(key, None)
            self._triton.pop(key, None)
        self.cost.revisit(node)

    def cached_runtime(self, node: Node) -> RunTime | None:
        return self._runtime.get(node.uid)

    def cached_fused_times(self, producer: Node) -> dict[int, int | float] | None:
        """Fused times cached for a producer, by consumer uid (None if none were computed)."""
        return self._fused.get(producer.uid)

    def set_runtime(self, node: Node, runtime: RunTime) -> None:
        self._runtime[node.uid] = runtime

    def set_fused_time(self, producer: Node, consumer: Node, ticks: int | float) -> None:
        self._fused.setdefault(producer.uid, {})[consumer.uid] = ticks

    # -- estimates -------------------------------------------------------------------------
    def estimate(self, node: Node) -> RunTime:
        """EstimateRunTimeForInstruction (cached)."""
        cached = self._runtime.get(node.uid)
        if cached is not None:
            return cached
        key = ("one", node_key(node, self._node_keys))
        found = self._by_structure.get(key)
        if found is None:
            found = self._by_structure[key] = (self._estimate_instruction(node),)
        runtime = self._runtime[node.uid] = found[0]
        return runtime

    def _estimate_instruction(self, node: Node) -> RunTime:
        analysis = self.analysis(node)
        if analysis.kind == TRITON and analysis.backend_kind == "__triton" and node.fused is not None:
            # XLA costs generic Triton fusions by tiles (GpuPerformanceModelWithIndexingAnalysis)
            tiling = triton_tiling(node)
            if tiling is not None:
                return estimate_tiled(self, node, tiling[0], tiling[1])
            return best_tiled(self, node).runtime
        cost = self.cost
        device = self.device
        flops = cost.flop_count(node)
        written = cost.output_bytes_accessed(node)
        launch = launch_dimensions(analysis)
        compute = compute_time(device, flops, launch.blocks, launch.threads_per_block)
        coalesced = is_read_coalesced(analysis.kind, node, None, self.config)
        read = 0
        read_bytes = 0
        at = first_positions(node)  # (a repeated operand is priced at its first position, as XLA's
        for operand in node.operands:  # operand_index finds it)
            size = shape_size(operand.shape)
            total = cost.operand_bytes_accessed(node, at[operand.uid])
            net = min(size, total)
            read_bytes += total
            read += read_time(device, launch.blocks, net, total,
                              coalescing_rate(operand.shape.element_type, coalesced))
        write = write_time(device, written)
        return RunTime(flops, read_bytes, written, read, write, compute, combine(compute, read + write),
                       launch, coalesced)

    def estimate_fused(self, producer: Node, consumer: Node, producer_writes_side_output: bool = False) -> int | float:
        """EstimateRunTimeForFusion: the time of `consumer` with `producer` fused in (cached;
        with a side output, the producer's result is also written, as MultiOutputFusion asks)."""
        if not producer_writes_side_output:
            cached = self._fused.get(producer.uid, {}).get(consumer.uid)
            if cached is not None:
                return cached
        ticks = self.fused_runtime(producer, consumer, producer_writes_side_output).exec_time
        if not producer_writes_side_output:
            self.set_fused_time(producer, consumer, ticks)
        return ticks

    def fused_runtime(self, producer: Node, consumer: Node, producer_writes_side_output: bool = False) -> RunTime:
        """EstimateRunTimeForFusionImpl, with all its terms (remembered by the pair's structure,
        except for generic Triton pairs: their time depends on whether CanFuse searched a
        tiling for this very pair)."""
        p_rt = self.estimate(producer)
        c_rt = self.estimate(consumer)
        if p_rt.is_infinite or c_rt.is_infinite:
            return RunTime(0, 0, 0, 0, 0, 0, dur.INFINITE)
        key = ("pair", pair_key(producer, consumer, self._node_keys), producer_writes_side_output)
        found = self._by_structure.get(key)
        if found is not None and found[1] is None:
            return found[0]
        runtime = self._fused_runtime(producer, consumer, producer_writes_side_output, p_rt, c_rt)
        analysis = self._pair_analysis.get((producer.uid, consumer.uid))
        triton = analysis is not None and analysis.kind == TRITON and analysis.backend_kind == "__triton"
        self._by_structure[key] = (runtime, True if triton else None)
        return runtime

    def _fused_runtime(self, producer: Node, consumer: Node, producer_writes_side_output: bool,
                       p_rt: RunTime, c_rt: RunTime) -> RunTime:
        cost = self.cost
        device = self.device
        utilization = 0.0
        for i, op in enumerate(consumer.operands):
            if op is producer or (op.opcode == "get-tuple-element" and op.operands and op.operands[0] is producer):
                utilization = f32(utilization + cost.operand_utilization(consumer, i))
        analysis = self.pair_analysis(producer, consumer)
        if analysis.kind == TRITON and analysis.backend_kind == "__triton":
            # CanFuseTriton stores the best tiling's time as the pair's fused time; a pair
            # PriorityFusion never asked CanFuse about (a bitcast user) is priced by the
            # formulas below, on the producer's tiled flops and the Triton launch grid
            found = self._triton.get((producer.uid, consumer.uid))
            if found is not None and found.found:
                return found.runtime
        launch = launch_dimensions(analysis)
        flops = int(f32(f32(p_rt.flops * utilization) + c_rt.flops))
        compute = compute_time(device, flops, launch.blocks, launch.threads_per_block)
        coalesced = is_read_coalesced(analysis.kind, producer, consumer, self.config)
        read = 0
        read_bytes = 0
        consumer_utilization = self.operand_utilization(consumer, producer)
        # each operand's first position, found once: a pair of wide instructions (a concatenate
        # of thousands of operands) would otherwise search its operands for every operand
        at_producer, at_consumer = first_positions(producer), first_positions(consumer)
        for operand in fused_parameters(producer, consumer):
            size = shape_size(operand.shape)
            total = self._shared_operand_bytes(producer, consumer, operand, consumer_utilization,
                                               at_producer, at_consumer)
            net = min(size, total)
            read_bytes += total
            read += read_time(device, launch.blocks, net, total,
                              coalescing_rate(operand.shape.element_type, coalesced))
        written = c_rt.bytes_written
        write = c_rt.write_time
        if producer_writes_side_output:
            written += p_rt.bytes_written
            write += p_rt.write_time
        return RunTime(flops, read_bytes, written, read, write, compute, combine(compute, read + write),
                       launch, coalesced)

    def triton_tiling(self, producer: Node, consumer: Node) -> BestTiling:
        """The best tiling found for a Triton producer+consumer fusion (or why there is none)."""
        key = (producer.uid, consumer.uid)
        found = self._triton.get(key)
        if found is not None:
            return found
        # remembered by the pair's structure too (no scratch fusion built to look the answer
        # up), except a reason naming an instruction of this very pair
        by_structure = ("tiling", pair_key(producer, consumer, self._node_keys))
        tiling = self._by_structure.get(by_structure)
        if tiling is None:
            program = consumer.graph.program if consumer.graph is not None else None
            tiling = best_tiled(self, self.pair_analysis(producer, consumer).node, program)
            if tiling.found or tiling.reason == NO_VALID_TILINGS:
                self._by_structure[by_structure] = tiling
        assert isinstance(tiling, BestTiling)
        self._triton[key] = tiling
        self._index_pair(key)
        if tiling.found:
            # GetCache().Set(producer, consumer, ...): the pair's fused time from now on
            self.set_fused_time(producer, consumer, tiling.runtime.exec_time)
        return tiling

    # -- operand bytes of a fused pair (GpuPerformanceModelBase helpers) ------------------
    def operand_bytes(self, instr: Node, operand: Node) -> int:
        """GetOperandBytesAccessed: 0 when `operand` is not an operand of `instr`."""
        for i, op in enumerate(instr.operands):
            if op is operand:
                return self.cost.operand_bytes_accessed(instr, i)
        return 0

    def operand_utilization(self, instr: Node, operand: Node) -> float:
        """GetOperandUtilization (a multi-output operand: summed over its get-tuple-elements)."""
        if operand.opcode == "fusion" and operand.fused is not None and operand.fused.root.opcode == "tuple":
            total = 0.0
            for i, op in enumerate(instr.operands):
                if op.opcode == "get-tuple-element" and op.operands and op.operands[0] is operand:
                    total = f32(total + self.cost.operand_utilization(instr, i))
            return total
        for i, op in enumerate(instr.operands):
            if op is operand:
                return self.cost.operand_utilization(instr, i)
        return 0.0

    def common_utilization(self, producer: Node, index: int, consumer: Node,
                           at_consumer: dict[int, int] | None = None) -> float:
        """GetCommonUtilization: how much of operand `index` of the producer the consumer reads
        elementwise in step with the producer (those reads are shared once fused).
        `at_consumer`: first_positions(consumer), when the caller has it."""
        from ..gpu.properties import is_elementwise

        operand = producer.operands[index]
        if at_consumer is None:
            at_consumer = first_positions(consumer)
        common_index = at_consumer.get(operand.uid)
        if common_index is None:
            return 0.0
        elementwise_producer = is_elementwise(producer) or (
            producer.opcode == "fusion" and producer.fused is not None
            and self.cost.common_elementwise_utilization(
                producer, producer.fused.parameters[index], producer.fused.root) == 1.0)
        if not elementwise_producer:
            return 0.0
        if consumer.opcode == "fusion" and consumer.fused is not None:
            if producer.opcode == "fusion" and producer.fused is not None and producer.fused.root.opcode == "tuple":
                producer_indices = [i for i, op in enumerate(consumer.operands)
                                    if op.opcode == "get-tuple-element" and op.operands and op.operands[0] is producer]
            else:
                producer_indices = [at_consumer[producer.uid]]
            total = 0.0
            for i in producer_indices:
                total = f32(total + self.cost.common_elementwise_utilization(
                    consumer, consumer.fused.parameters[common_index], consumer.fused.parameters[i]))
            return total
        if is_elementwise(consumer):
            return 1.0
        return 0.0

    def shared_operand_bytes(self, producer: Node, consumer: Node, operand: Node) -> int:
        """GetSharedOperandBytesAccessed: what the fused kernel reads of `operand`."""
        return self._shared_operand_bytes(producer, consumer, operand, self.operand_utilization(consumer, producer))

    def _shared_operand_bytes(self, producer: Node, consumer: Node, operand: Node, utilization: float,
                              at_producer: dict[int, int] | None = None,
                              at_consumer: dict[int, int] | None = None) -> int:
        """shared_operand_bytes, given the consumer's utilization of the producer (the same for
        every operand of the pair) and, optionally, first_positions of both."""
        if at_producer is None:
            at_producer = first_positions(producer)
        if at_consumer is None:
            at_consumer = first_positions(consumer)
        i = at_producer.get(operand.uid)
        j = at_consumer.get(operand.uid)
        by_producer = self.cost.operand_bytes_accessed(producer, i) if i is not None else 0
        by_consumer = self.cost.operand_bytes_accessed(consumer, j) if j is not None else 0
        common = self.common_utilization(producer, i, consumer, at_consumer) if i is not None else 0.0
        size = shape_size(operand.shape)
        return _llround(f32(by_producer * utilization)) + by_consumer - _llround(f32(size * common))

    # -- producer with its consumers ----------------------------------------------------
    def run_times(self, producer: Node, consumers) -> RunTimes:
        """EstimateRunTimes: the producer and `consumers` as separate kernels vs. the producer
        fused into each of them."""
        p_rt = self.estimate(producer)
        consumers = list(consumers)
        unfused = KERNEL_LAUNCH_OVERHEAD * (len(consumers) + 1) + p_rt.exec_time
        fused = KERNEL_LAUNCH_OVERHEAD * len(consumers)
        for consumer in consumers:
            unfused += self.estimate(consumer).exec_time
            fused += self.estimate_fused(producer, consumer)
        return RunTimes(unfused, fused)

    def run_times_multi_output(self, producer: Node, consumer: Node) -> RunTimes:
        """EstimateRunTimesForMultiOutputFusion: the producer kept as a side output."""
        p = self.estimate(producer)
        c = self.estimate(consumer)
        unfused = 2 * KERNEL_LAUNCH_OVERHEAD + p.exec_time + c.exec_time
        fused = KERNEL_LAUNCH_OVERHEAD + self.estimate_fused(producer, consumer, producer_writes_side_output=True)
        return RunTimes(unfused, fused)


def fused_parameters(producer: Node, consumer: Node) -> list[Node]:
    """HloFusionAdaptor::ForProducerConsumer(...).GetParameters(): the consumer's operands other
    than the producer (and its get-tuple-elements), in order and with repeats, then the
    producer's operands not yet listed (those feeding a producer root directly are skipped)."""
    out: list[Node] = []
    for op in consumer.operands:
        source = op.operands[0] if op.opcode == "get-tuple-element" and op.operands else op
        if source is not producer:
            out.append(op)
    seen = {n.uid for n in out}
    skip: set[int] = set()
    if producer.opcode == "fusion" and producer.fused is not None:
        root = producer.fused.root
        roots = list(root.operands) if root.opcode == "tuple" else [root]
        for r in roots:
            if r.opcode == "parameter" and len(r.users) <= 1:
                skip.add(producer.operands[r.parameter_number].uid)
    for op in producer.operands:
        if op.uid in skip or op.uid in seen:
            continue
        seen.add(op.uid)
        out.append(op)
    return out


def _llround(x: float) -> int:
    import math

    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))

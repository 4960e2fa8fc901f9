"""The GPU performance model of the legacy pipeline (XLA 76da7301, jaxlib 0.4.35), as
FusionMerger and MultiOutputFusion use it (docs/xla/legacy-gpu-pipeline.md §6).

It reuses the priority-fusion engineer's GpuHloCostAnalysis (hlofuse/cost/analysis.py: flops,
bytes, utilisation, IR size — the same handlers at both commits) and adds what differs in 2024:

* `estimate_run_times(P, consumers, multi_output)` — GpuPerformanceModel::EstimateRunTimes with
  `GpuPerformanceModelOptions::Default()` (memory/compute parallelism 1.0, no caches).  Unlike
  2026's model, the unfused side is "producer kernel + one launch per consumer + the consumers
  re-reading the producer's output", and the fused side "recompute the producer in every
  consumer" (ProducerInputAccessTime); the consumers' own work is on neither side.
* launch dimensions of the 2024 MLIR emitters (loop, reduction incl. multi-row and small
  column, transpose, concatenate, input slices, scatter) for a fusion, an unfused instruction,
  or a producer previewed inside its consumer;
* `merged_too_large` — ProducerConsumerMergedTooLarge, with the basic-block-split limit the
  pre-MLIR emitters (`xla_gpu_mlir_emitter_level` < 4) add.

Times are absl::Duration ticks (¼ ns) with the float32 intermediates XLA computes in `float`
(hlofuse/cost/durations.py).

Simplifications (expected effect): a multi-root reduction fusion counts one reduction group
(XLA's GroupDisjointReductions may count more, multiplying the blocks of such MOF
candidates); the in-place dynamic-update-slice emitter is assumed whenever every root is a
dynamic-update-slice (XLA also checks the buffers can alias); the legacy (level < 3) emitters'
launch dimensions are not modelled — the MLIR ones are used for every level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import attributes
from ..graph import Graph, Node, Program, add_operand, clone_node, first_positions
from ..fusion_primitives import create_fusion, fuse_instruction
from ..gpu.config import GpuConfig
from ..gpu.emitter import (CONCATENATE, CUDNN, CUSTOM, INPUT_SLICES, REDUCTION, SCATTER, TRANSPOSE, TRITON,
                           FusionShape, analyse, consistent_transpose_hero, emitter_kind, first_reduction_hero)
from ..gpu.fusible import choose_fusion_kind, is_input_fusible_reduction
from ..gpu.properties import is_elementwise, is_multi_output_fusion
from ..gpu.reductions import reduction_dimensions
from ..gpu.shapes import bit_width, byte_width, elements, elements_recursive
from ..gpu.transposes import tiled_transpose, transposes_minor_dimension
from .analysis import GpuHloCostAnalysis, _shape_facts, shape_size
from .durations import f32, from_microseconds, from_nanoseconds, from_seconds
from .profiles import profile_for
from .structure import KeyMemo, body_key, pair_key

#: kKernelLaunchOverhead: 1 µs per kernel launch.
KERNEL_LAUNCH_OVERHEAD = from_microseconds(1)
L2_CACHE_SPEEDUP = 2.5
L1_CACHE_SPEEDUP = 8.0
#: GpuPerformanceModelOptions::Default().memory_compute_parallelism.
MEMORY_COMPUTE_PARALLELISM = 1.0
#: kMaxIRSize / kMaxBasicBlockSplitsPerFusion (gpu_hlo_cost_analysis.h).
MAX_IR_SIZE = 10000
MAX_BASIC_BLOCK_SPLITS = 10
#: ElementalIrEmitter::OpInvalidatesCache.
CACHE_INVALIDATING = frozenset({"concatenate", "dot", "dynamic-update-slice", "pad", "reduce", "reduce-window"})


@dataclass(frozen=True)
class LaunchDimensions:
    blocks: int
    threads: int

    def __post_init__(self):
        # Nothing to compute still launches one thread (XLA's CalculateLaunchDimensions for a
        # shape of no elements); zero-sized arrays reach the replay only from hand-written text.
        if self.blocks < 1 or self.threads < 1:
            object.__setattr__(self, "blocks", max(self.blocks, 1))
            object.__setattr__(self, "threads", max(self.threads, 1))


@dataclass(frozen=True)
class RunTimes:
    """EstimateRunTimes' answer in ticks (¼ ns): fusing is refused when fused > unfused."""

    unfused: int | float
    fused: int | float

    @property
    def unfused_us(self) -> float:
        return self.unfused / 4000

    @property
    def fused_us(self) -> float:
        return self.fused / 4000


@dataclass(frozen=True)
class RunTimeTerms:
    """EstimateRunTimes' answer with its sums over the consumers (ticks): the consumers reading
    the producer's result back (unfused), and the producer's work and reads recomputed inside
    them (fused)."""

    times: RunTimes
    producer: "RunTimeData"
    consumers: int
    read_back: int | float
    recompute: int | float
    reread: int | float


@dataclass(frozen=True)
class RunTimeData:
    """EstimateRunTimeData of one instruction as a kernel of its own (times in ticks), with the
    launch grid it was estimated on."""

    flops: int
    bytes_read: int
    bytes_written: int
    read_time: int | float
    write_time: int | float
    compute_time: int | float
    exec_time: int | float
    blocks: int
    threads: int


class LegacyCostAnalysis(GpuHloCostAnalysis):
    """GpuHloCostAnalysis, with HloCostAnalysis::HandleFusion's treatment of tuple-shaped
    fused parameters: the bytes read are those of the leaves the fusion reads through
    get-tuple-element (each leaf size times its utilisation), not the tuple's index table."""

    def __init__(self, profile):
        # by structure: the tuple-parameter bytes below are a function of the body too (which
        # get-tuple-elements read which leaf), so the edited properties can be shared
        super().__init__(profile, by_structure=True)
        self._versions: dict[int, int] = {}

    def properties(self, node: Node):
        """A fusion's properties are recomputed when its body changed since they were cached,
        so one analysis can serve every pass of a replay."""
        fused = node.fused
        if fused is not None and self._versions.get(node.uid) != fused.version:
            self.revisit(node)
            self._versions[node.uid] = fused.version
        cached = self._props.get(node.uid)
        if cached is not None:
            return cached[1]
        return super().properties(node)

    def _analyse_fusion(self, fusion: Node):
        props = super()._analyse_fusion(fusion)
        info = self._fusions.get(fusion.uid)
        if info is None:
            return props
        for i, param in enumerate(fusion.fused.parameters):
            if param.shape.is_tuple and i < len(props.operand_bytes):
                props.operand_bytes[i] = float(sum(
                    _llround(shape_size(node.shape) * info.props[node.uid].utilization)
                    for node in _leaf_readers(param)))
        return props


def _leaf_readers(param: Node) -> list[Node]:
    """For each array leaf of a tuple parameter, the get-tuple-element reading it (or the
    deepest node of the path that exists), as HandleFusion looks them up."""
    out = []

    def walk(shape, index):
        if shape.is_tuple:
            for k, sub in enumerate(shape.tuple_shapes):
                walk(sub, index + (k,))
            return
        node = param
        for k in index:
            found = next((u for u in node.users if u.opcode == "get-tuple-element"
                          and int(u.attr("index") or -1) == k), None)
            if found is None:
                break
            node = found
        out.append(node)

    walk(param.shape, ())
    return out


class LegacyPerformanceModel:
    """XLA 2024's GpuPerformanceModel over one computation's cost analysis."""

    def __init__(self, cfg: GpuConfig, analysis: GpuHloCostAnalysis | None = None):
        self.cfg = cfg
        self.device = cfg.device
        self.analysis = analysis or LegacyCostAnalysis(profile_for(cfg.device))
        self._previews: dict[tuple, FusionShape] = {}
        self._run_times: dict[tuple, RunTimeData] = {}
        self._shapes: dict[tuple, FusionShape] = {}
        self._launches: dict[tuple, tuple[str, LaunchDimensions]] = {}
        #: basic_block_splits of fused bodies, by body structure (body_key)
        self._splits: dict[object, int] = {}
        # Device constants of the bandwidth formulas (the device is frozen), computed as
        # read_time computes them: float32 products in the same order.
        device = self.device
        self._bandwidth = f32(float(device.memory_bandwidth))
        self._bandwidth_l2 = f32(self._bandwidth * L2_CACHE_SPEEDUP)
        self._bandwidth_l1 = f32(self._bandwidth_l2 * L1_CACHE_SPEEDUP)
        self._l1 = self._l1_bytes
        self._per_block = f32(f32(device.clock_rate_ghz * 1.0e9) * 32)  # memory_transactions_per_clock
        #: blocks → f32(blocks × per-block bandwidth), the cap of _adjust (few distinct values).
        self._block_caps: dict[int, float] = {}
        #: estimate_run_time_terms' answers by the structure of the producer and its consumers
        #: (hlofuse.cost.structure), with the structure keys already made (by uid)
        self._terms: dict[tuple, RunTimeTerms] = {}
        self._node_keys = KeyMemo()
        self._keyed: Program | None = None  # the program those keys are of

    # -- device ---------------------------------------------------------------------------
    @property
    def _l1_bytes(self) -> int:
        return 2048 * self.device.core_count  # l1_cache_size_per_SM() is 2 KiB on CUDA devices

    def _adjust(self, bandwidth: float, blocks: int) -> float:
        cap = self._block_caps.get(blocks)
        if cap is None:
            if len(self._block_caps) > 4096:
                self._block_caps.clear()
            cap = self._block_caps[blocks] = f32(blocks * self._per_block)
        return min(bandwidth, cap)

    def read_time(self, blocks: int, net: int, total: int) -> int | float:
        bandwidth = self._bandwidth
        if net < self.device.l2_cache_size:
            bandwidth = self._bandwidth_l2
            if net < self._l1:
                bandwidth = self._bandwidth_l1
        bandwidth = self._adjust(bandwidth, blocks)
        return from_seconds(f32(total / bandwidth))

    def read_time_dram(self, blocks: int, net: int, total: int, element_type: str, coalesced: bool) -> int | float:
        """ReadTimeWithDRAMHeuristic: the first read from DRAM (wasteful when uncoalesced),
        re-reads from cache when the data fits."""
        rate = 1.0 if coalesced else (4 if element_type in ("tuple", "token") else byte_width(element_type)) / 64
        dram = f32(self.device.memory_bandwidth * rate)
        rest = self._bandwidth
        if net < self.device.l2_cache_size:
            rest = self._bandwidth_l2
            if net < self._l1:
                rest = self._bandwidth_l1
        else:
            rest = f32(rest * rate)
        dram = self._adjust(dram, blocks)
        rest = self._adjust(rest, blocks)
        from_dram = min(net, total)
        from_cache = total - from_dram
        return from_seconds(f32(from_dram / dram)) + from_seconds(f32(from_cache / rest))

    def write_time(self, bytes_written: int) -> int | float:
        return from_seconds(f32(1.0 * bytes_written / self.device.memory_bandwidth))

    def compute_time(self, flops: float, blocks: int, threads: int) -> int | float:
        fpus = min(threads, self.device.fpus_per_core) * min(blocks, self.device.core_count)
        per_ns = int(self.device.clock_rate_ghz * 2) * fpus
        if per_ns == 0:
            return 0
        return from_nanoseconds(f32(1.0 * int(flops) / per_ns))

    @staticmethod
    def combine(compute, memory):
        return compute + memory - min(compute, memory) * MEMORY_COMPUTE_PARALLELISM

    # -- estimates ------------------------------------------------------------------------
    def run_time(self, node: Node) -> RunTimeData:
        """EstimateRunTimeForInstruction: one kernel computing `node` alone (remembered until
        the node changes)."""
        key = (node.uid, _body_version(node), len(node.operands))
        found = self._run_times.get(key)
        if found is None:
            if len(self._run_times) > 65536:
                self._run_times.clear()
            found = self._run_times[key] = self._run_time(node)
        return found

    def shape_of(self, node: Node) -> FusionShape:
        """analyse(node), remembered until the node changes."""
        key = (node.uid, _body_version(node), len(node.operands))
        found = self._shapes.get(key)
        if found is None:
            if len(self._shapes) > 65536:
                self._shapes.clear()
            found = self._shapes[key] = analyse(node, self.cfg)
        return found

    def launch_of(self, node: Node) -> LaunchDimensions:
        """launch_dimensions(shape_of(node)), remembered under shape_of's key: the launch grid
        is computed from that analysis alone, so it is stale exactly when the analysis is."""
        return self._kind_and_launch(node)[1]

    def _kind_and_launch(self, node: Node) -> tuple[str, LaunchDimensions]:
        """(emitter_kind, launch_dimensions) of shape_of(node), remembered under its key."""
        key = (node.uid, _body_version(node), len(node.operands))
        found = self._launches.get(key)
        if found is None:
            if len(self._launches) > 65536:
                self._launches.clear()
            shape = self.shape_of(node)
            kind = emitter_kind(shape, self.cfg)
            found = self._launches[key] = (kind, self._launch_for(shape, kind))
        return found

    def _run_time(self, node: Node) -> RunTimeData:
        a = self.analysis
        flops = a.flop_count(node)
        written = a.output_bytes_accessed(node)
        kind, launch = self._kind_and_launch(node)
        compute = self.compute_time(flops, launch.blocks, launch.threads)
        coalesced = self.read_coalesced(kind, node, None)
        read = bytes_read = 0
        at = first_positions(node)  # (a repeated operand is priced at its first position)
        for operand in node.operands:
            total = a.operand_bytes_accessed(node, at[operand.uid])
            net = min(_shape_facts(operand.shape)[0], total)
            bytes_read += total
            read += self.read_time_dram(launch.blocks, net, total, operand.shape.element_type, coalesced)
        write = self.write_time(written)
        return RunTimeData(flops, bytes_read, written, read, write, compute, self.combine(compute, read + write),
                           launch.blocks, launch.threads)

    def operand_utilization(self, consumer: Node, producer: Node) -> float:
        """GetOperandUtilization: how many times the consumer reads each producer element."""
        a = self.analysis
        if is_multi_output_fusion(producer):
            return sum(a.operand_utilization(consumer, i) for i, op in enumerate(consumer.operands)
                       if op.opcode == "get-tuple-element" and op.operands[0] is producer)
        if not any(op is producer for op in consumer.operands):
            return 0.0
        return a.operand_utilization(consumer, consumer.operand_index(producer))

    def common_utilization(self, producer: Node, index: int, consumer: Node | None,
                           at_consumer: dict[int, int] | None = None) -> float:
        """GetCommonUtilization: how much of operand `index` of the producer the consumer also
        reads elementwise at the same positions (then fusing reads it once).  `at_consumer`:
        first_positions(consumer), when the caller has it."""
        operand = producer.operands[index]
        if consumer is None:
            return 0.0
        if at_consumer is None:
            at_consumer = first_positions(consumer)
        common_index = at_consumer.get(operand.uid)
        if common_index is None:
            return 0.0
        a = self.analysis
        elementwise = is_elementwise(producer) or (
            producer.opcode == "fusion"
            and a.common_elementwise_utilization(producer, producer.fused_parameter(index),
                                                 producer.fused.root) == 1.0)
        if not elementwise:
            return 0.0
        if consumer.opcode == "fusion":
            if is_multi_output_fusion(producer):
                indices = [i for i, op in enumerate(consumer.operands)
                           if op.opcode == "get-tuple-element" and op.operands[0] is producer]
            else:
                indices = [at_consumer[producer.uid]]
            return f32(sum(a.common_elementwise_utilization(consumer, consumer.fused_parameter(common_index),
                                                            consumer.fused_parameter(i)) for i in indices))
        if is_elementwise(consumer):
            return 1.0
        return 0.0

    def producer_input_access_time(self, blocks: int, producer: Node, consumer: Node | None) -> int | float:
        """ProducerInputAccessTime: the producer's reads, repeated as often as the consumer
        reads the producer, minus what the consumer reads anyway."""
        a = self.analysis
        used = self.operand_utilization(consumer, producer) if consumer is not None else 1.0
        total_time = 0
        props = a.properties(producer)  # operand_bytes_accessed / operand_utilization, read once
        all_bytes, all_utilization = props.operand_bytes, props.operand_utilization
        at_consumer = first_positions(consumer) if consumer is not None else None
        for i in range(len(producer.operands)):
            accessed = int(all_bytes[i]) if i < len(all_bytes) else 0
            utilization = all_utilization[i] if i < len(all_utilization) else 0.0
            net = _llround(accessed / max(utilization, 1.0))
            common = self.common_utilization(producer, i, consumer, at_consumer)
            total = int(f32(accessed * f32(used - common)))
            total_time += self.read_time(blocks, net, total)
        return total_time

    def estimate_run_times(self, producer: Node, consumers: list[Node], multi_output: bool = False) -> RunTimes:
        """GpuPerformanceModel::EstimateRunTimes (2024): fused vs unfused time of fusing
        `producer` into every consumer (and, for multi-output fusion, still writing it)."""
        return self.estimate_run_time_terms(producer, consumers, multi_output).times

    def estimate_run_time_terms(self, producer: Node, consumers: list[Node],
                                multi_output: bool = False) -> "RunTimeTerms":
        """EstimateRunTimes with the sums it is made of, so that a refusal can name its terms
        (cost/terms.py) without the model pricing every kernel a second time.

        Remembered by structure: every number here is a function of what the kernels compute
        (the producer's and each consumer's opcode, shapes, attributes and fused body) and of
        how they are wired (which consumer operand is the producer, or one of its outputs, or
        one of its operands: the pair keys), and the layers of a model ask the same question
        once per layer.  (The cost analysis behind it keeps an unfused instruction's properties
        as first computed, but those depend only on its own and its operands' shapes, which a
        node keeps; a fusion's are recomputed whenever its body changed.)"""
        graph = producer.graph
        program = graph.program if graph is not None else None
        if self._keyed is None:
            self._keyed = program
        if program is None or program is not self._keyed:  # (structure keys are made by uid: one program)
            return self._estimate_run_time_terms(producer, consumers, multi_output)
        key = (multi_output, tuple(pair_key(producer, consumer, self._node_keys) for consumer in consumers))
        found = self._terms.get(key)
        if found is None:
            if len(self._terms) > 65536:
                self._terms.clear()
            found = self._terms[key] = self._estimate_run_time_terms(producer, consumers, multi_output)
        return found

    def _estimate_run_time_terms(self, producer: Node, consumers: list[Node], multi_output: bool) -> "RunTimeTerms":
        producer_data = self.run_time(producer)
        read_back = 0
        unfused = KERNEL_LAUNCH_OVERHEAD * (len(consumers) + 1) + producer_data.exec_time
        for consumer in consumers:
            read = self.unfused_read_time(producer_data, producer, consumer)
            read_back += read
            unfused += read
        recompute = reread = 0
        fused = KERNEL_LAUNCH_OVERHEAD * len(consumers)
        for consumer in consumers:
            compute, access = self.fused_consumer_times(producer_data, producer, consumer)
            recompute += compute
            reread += access
            fused += self.combine(compute, access)
        if multi_output:
            fused += producer_data.write_time
        return RunTimeTerms(RunTimes(unfused, fused), producer_data, len(consumers), read_back, recompute, reread)

    def unfused_read_time(self, producer_data: RunTimeData, producer: Node, consumer: Node) -> int | float:
        """EstimateUnfusedExecTime, one consumer: reading the producer's output back."""
        used = self.operand_utilization(consumer, producer)
        launch = self.launch_of(consumer)
        total = _llround(producer_data.bytes_written * used)
        net = min(producer_data.bytes_written, total)
        return self.read_time(launch.blocks, net, total)

    def fused_consumer_times(self, producer_data: RunTimeData, producer: Node, consumer: Node) -> tuple[int, int]:
        """EstimateFusedExecTime, one consumer: (compute, input access) time of the producer's
        work recomputed inside the consumer's kernel."""
        used = self.analysis.operand_utilization(consumer, consumer.operand_index(producer)) \
            if any(op is producer for op in consumer.operands) else 0.0
        launch = self.launch_dimensions(self.preview(producer, consumer))
        compute = self.compute_time(f32(producer_data.flops * used), launch.blocks, launch.threads)
        access = self.producer_input_access_time(launch.blocks, producer, consumer)
        return compute, access

    def merged_too_large(self, producer: Node, consumer: Node) -> tuple[bool, int, int]:
        """ProducerConsumerMergedTooLarge: (refuse?, merged IR size, basic-block splits)."""
        a = self.analysis
        replication = 1
        if consumer.opcode == "fusion":
            replication = int(a.fused_ir_size(consumer, consumer.operand_index(producer)))
        merged = int(a.ir_size(producer)) * replication + int(a.ir_size(consumer))
        splits = 0
        if self.cfg.mlir_emitter_level < 4:  # only the pre-MLIR emitters split basic blocks
            splits = replication * self.basic_block_splits(producer) + self.basic_block_splits(consumer)
            if splits > MAX_BASIC_BLOCK_SPLITS:
                return True, merged, splits
            merged *= 1 << splits
        return merged > MAX_IR_SIZE, merged, splits

    def basic_block_splits(self, node: Node) -> int:
        """IrBasicBlockSplitCount: cache-invalidating ops, counted as often as they are emitted.
        A function of the fused body alone: remembered by its structure (body_key), since the
        merger asks it of every producer and user, once per version of each."""
        body = node.fused
        if node.opcode != "fusion" or body is None:
            return int(node.opcode in CACHE_INVALIDATING)
        key = body_key(body)
        found = self._splits.get(key)
        if found is None:
            if len(self._splits) > 65536:
                self._splits.clear()
            info = self.analysis._fusion_info(node)
            found = self._splits[key] = int(sum(info.props[n.uid].ir_size for n in body.nodes()
                                                if n.opcode in CACHE_INVALIDATING))
        return found

    # -- coalescing -------------------------------------------------------------------------
    def read_coalesced(self, kind: str, producer: Node, consumer: Node | None) -> bool:
        """IsReadCoalescedHeuristic: a transpose of the minor dimension (not of a broadcast or
        iota) outside a transpose emitter breaks coalescing, and so does fusing two reductions."""
        if kind != TRANSPOSE:
            if _bad_transpose(producer) or (consumer is not None and _bad_transpose(consumer)):
                return False
        if (kind == REDUCTION and consumer is not None and is_input_fusible_reduction(producer, self.cfg)
                and is_input_fusible_reduction(consumer, self.cfg)):
            return False
        return True

    # -- launch dimensions ----------------------------------------------------------------
    def launch_dimensions(self, shape: FusionShape) -> LaunchDimensions:
        """EstimateFusionLaunchDimensions: the grid of the emitter GetFusionEmitter picks."""
        return self._launch_for(shape, emitter_kind(shape, self.cfg))

    def _launch_for(self, shape: FusionShape, kind: str) -> LaunchDimensions:
        """launch_dimensions, given the shape's emitter kind.  `xla_gpu_mlir_emitter_level`
        picks the MLIR or the older emitter per kind (loop ≥ 1; concatenate, in-place
        dynamic-update-slice, scatter, input slices ≥ 2; transpose ≥ 3; reduction ≥ 4); their
        grids differ for reductions, transposes, and the unrolling of concatenates and in-place
        dynamic-update-slices."""
        mlir = self.cfg.mlir_emitter_level
        if kind == REDUCTION:
            return self._reduction_launch(shape) if mlir >= 4 else self._legacy_reduction_launch(shape)
        if kind == TRANSPOSE:
            return self._transpose_launch(shape) if mlir >= 3 else self._legacy_transpose_launch(shape)
        if kind in (CUSTOM, TRITON, CUDNN):
            n = elements_recursive(shape.roots[0].shape)
            return LaunchDimensions(-(-n // 128), 128)
        if kind == CONCATENATE:
            largest = max((op.shape for op in shape.heroes[0].operands), key=elements)
            return self._calculate(largest, self._unroll(shape, largest) if mlir >= 2 else 1)
        if kind == INPUT_SLICES:
            operand = shape.roots[0].operands[0].shape
            return self._calculate(operand, max(1, -(-8 // _smallest_bits(shape.roots))))
        if kind == SCATTER:
            scatter = shape.roots[0]
            updates = scatter.operands[(len(scatter.operands) - 1) // 2 + 1 if mlir >= 2 else -1].shape
            return self._calculate(updates, 1)
        if all(r.opcode == "dynamic-update-slice" for r in shape.roots):
            update = shape.roots[0].operands[1].shape
            return self._calculate(update, self._unroll(shape, update) if mlir >= 2 else 1)
        element = _element_shape(shape.roots[0].shape)
        return self._calculate(element, self._unroll(shape, element))

    def _unroll(self, shape: FusionShape, element) -> int:
        """ComputeLoopFusionConfig: unroll 4 or 2 for large kernels that vectorise; at least
        enough elements per thread to fill a byte."""
        n = elements(element)
        unroll = 1
        if n >= self.device.threads_per_core_limit * self.device.core_count and not _may_prevent_vectorization(shape):
            unroll = next((k for k in (4, 2) if n % k == 0), 1)
        return max(unroll, -(-8 // _smallest_bits(shape.roots)))

    def _calculate(self, shape, unroll: int) -> LaunchDimensions:
        """CalculateLaunchDimensions: 4 warps per block, one thread per `unroll` elements."""
        n = elements(shape)
        if n <= 1:
            return LaunchDimensions(1, 1)
        n = -(-n // unroll)
        threads = min(self.device.threads_per_warp * 4, n)
        return LaunchDimensions(-(-n // threads), threads)

    def _vector_size(self, shape: FusionShape, minor: int, threads: int) -> int:
        """GetVectorSizeForMlir."""
        if minor % 2 or threads * 2 > minor:
            return 1
        if any(op.shape.element_type in ("c64", "c128") for h in shape.heroes for op in h.operands):
            return 1
        smallest_input = _smallest_bits(shape.inputs)
        if smallest_input >= 64:
            return 1
        if smallest_input >= 32:
            return 2
        if threads * 4 > minor:
            return 2
        return 4 if minor % 4 == 0 else 2

    def _reduction_launch(self, shape: FusionShape) -> LaunchDimensions:
        hero = first_reduction_hero(shape, self.cfg)
        dims = reduction_dimensions(hero)
        d0, d1, d2 = dims.dims
        groups = 1
        if dims.is_row:
            multi = self._multi_row(shape, d1, d2)
            if multi is not None:
                return LaunchDimensions(multi.blocks * groups, multi.threads)
            reduced = min(self.cfg.row_reduction_min_threads, _round_up(-(-d2 // 16), 32))
            kept = 1
            if reduced * 2 <= 256:
                kept = d1 if d1 * reduced <= 256 else 256 // reduced
            vector = self._vector_size(shape, d2, reduced)
            minor = d2 // vector
            tile = min(16 // vector, -(-minor // reduced))
            blocks = -(-d1 // kept) * -(-minor // (tile * reduced))
            return LaunchDimensions(blocks * groups, kept * reduced)
        if 32 % d2 == 0:
            vector = self._vector_size(shape, d1 * d2, 32)
            threads = 128
            shared_rows = vector * threads // d2
            while shared_rows > 32 and vector > 1:
                vector //= 2
                shared_rows //= 2
            if shared_rows > 32:
                threads //= shared_rows // 32
            return LaunchDimensions(d0 * groups, threads)
        vector = self._vector_size(shape, d2, 32)
        return LaunchDimensions(d0 * -(-d2 // (32 * vector)) * groups, 32 * 32)

    def _multi_row(self, shape: FusionShape, d1: int, d2: int) -> LaunchDimensions | None:
        """MlirMultiRowReductionFusion::TryCreate: rows of a power-of-two size that fit a warp."""
        if d2 & (d2 - 1):
            return None
        smallest_in, smallest_out = _smallest_bits(shape.inputs), _smallest_bits(shape.roots)
        smallest, largest = min(smallest_in, smallest_out), max(smallest_in, smallest_out)
        if largest >= 1 << 30:
            largest = smallest_out
        vector = min(d2, 64 // smallest)
        if largest >= 32:
            vector = min(128 // largest, vector)

        def threads_for(v):
            reduced = d2 // v
            kept = d1 if d1 * reduced <= 256 else 256 // reduced
            return kept, reduced

        if d2 > 32 * vector:
            return None
        while vector > 1 and -(-d1 // threads_for(vector)[0]) < self.device.core_count:
            vector //= 2
        if d2 > 32 * vector:
            return None
        kept, reduced = threads_for(vector)
        return LaunchDimensions(-(-d1 // kept), kept * reduced)

    def _legacy_reduction_launch(self, shape: FusionShape) -> LaunchDimensions:
        """ReductionInfo::Create's tiling, the pre-MLIR reduction emitter (level < 4): rows are
        tiled 16 elements per thread (and up to 8 batch rows per block), a block holds 256
        threads where a row needs fewer; columns take 32 x 32 threads, each summing 128 rows."""
        hero = first_reduction_hero(shape, self.cfg)
        dims = reduction_dimensions(hero)
        d0, d1, d2 = dims.dims
        rows_per_warp = 1
        if dims.is_row:
            tile = (min(d0, 8), 1, 16)
            if d2 < 32 and 32 % d2 == 0:
                rows_per_warp = 32 // d2
            if rows_per_warp > 1:
                threads_x = d2
            else:
                threads_x = min(self.cfg.row_reduction_min_threads, _round_up(-(-d2 // 16), 32))
            threads_y = 1
            if threads_x * 2 <= 256:
                if d1 * threads_x <= 256:
                    threads_y = d1
                    while (threads_x * threads_y) % 32:
                        threads_y += 1
                else:
                    threads_y = 256 // threads_x
        else:
            tile, threads_x, threads_y = (1, 128, 1), 32, 32
        vector = self._legacy_vector_size(shape, dims, threads_x)
        tile_x = 1 if rows_per_warp > 1 else max(tile[2] // vector, 1)
        blocks = -(-d0 // tile[0]) * -(-d1 // (tile[1] * threads_y)) * -(-(d2 // vector) // (tile_x * threads_x))
        return LaunchDimensions(blocks, threads_x * threads_y)

    def _legacy_vector_size(self, shape: FusionShape, dims, threads: int) -> int:
        """GetVectorSize (pre-MLIR): rows of an even length with work for every thread load
        two elements at a time on Volta and newer; columns never vectorise."""
        minor = dims.dims[2]
        if minor % 2 or threads * 2 > minor or _may_prevent_vectorization(shape) or not dims.is_row:
            return 1
        capability = self.device.compute_capability  # (0, 0) on ROCm: no CUDA capability
        if capability >= (7, 0):
            return 2
        if capability >= (6, 0):
            return 2 if _smallest_bits(shape.inputs) <= 32 and minor % (16 * threads) == 0 else 1
        return 1

    def _legacy_transpose_launch(self, shape: FusionShape) -> LaunchDimensions:
        """ComputeTransposeTiling, the pre-MLIR transpose emitter (level < 3): the normalised
        rank-3 input is cut into 32 x 32 tiles of its two swapped dimensions, 4 rows of 32
        threads each, every thread handling 8 elements."""
        desc = tiled_transpose(consistent_transpose_hero(shape, self.cfg), self.cfg)
        perm = desc.permutation
        input_dims = [desc.dimensions[p] for p in perm]
        tile, threads = [1, 1, 1], [1, 1, 32]
        tile[perm[2]], threads[perm[2]] = 8, 4
        blocks = math.prod(-(-input_dims[i] // (tile[i] * threads[i])) for i in range(3))
        return LaunchDimensions(blocks, 128)

    def _transpose_launch(self, shape: FusionShape) -> LaunchDimensions:
        hero = consistent_transpose_hero(shape, self.cfg)
        desc = tiled_transpose(hero, self.cfg)
        perm = list(attributes.dimensions(hero))
        input_shape = list(hero.operands[0].shape.dims)
        rank = len(input_shape)
        unchanged = perm[-1] == rank - 1
        max_bytes, shmem = 0, 0
        for h in shape.heroes:
            if tiled_transpose(h, self.cfg) is not None:
                size = byte_width(h.shape.element_type) * (input_shape[-1] if unchanged else 1)
                max_bytes = max(max_bytes, size)
                shmem += 32 * 33 * size

        def counts(vector):
            block = [1] * rank
            if unchanged:
                block[-1] = vector
                block[rank - 2] = 32
                block[perm[rank - 2]] = 32
            else:
                block[-1] = 32 * vector
                block[perm[-1]] = 32 * vector
            return [-(-input_shape[i] // block[i]) for i in range(rank)]

        del desc
        if unchanged:
            blocks = math.prod(counts(input_shape[-1]))
        else:
            blocks = math.prod(counts(1))
            vec = 4 // max_bytes if max_bytes else 1
            while vec > 1:
                per_thread = vec * vec
                enough_work = blocks * 128 >= per_thread * self.device.core_count * self.device.threads_per_core_limit
                enough_shmem = shmem * per_thread <= self.device.shared_memory_per_block
                aligned = input_shape[-1] % vec == 0 and input_shape[perm[-1]] % vec == 0
                if enough_work and enough_shmem and aligned:
                    blocks = math.prod(counts(vec))
                    break
                vec //= 2
        return LaunchDimensions(blocks, 128)

    # -- producer fused into consumer -----------------------------------------------------
    def preview(self, producer: Node, consumer: Node) -> FusionShape:
        """HloFusionAnalysis of `producer` fused into `consumer`, from a scratch copy of the
        two (the real graph is not touched); remembered until either changes."""
        key = (producer.uid, _body_version(producer), len(producer.operands), consumer.uid,
               _body_version(consumer), len(consumer.operands), consumer.operand_index(producer))
        found = self._previews.get(key)
        if found is None:
            if len(self._previews) > 4096:
                self._previews.clear()
            found = _merged_shape(producer, consumer, self.cfg, self.shape_of)
            if found is None:
                found = analyse(preview_fusion(producer, consumer, self.cfg), self.cfg)
            self._previews[key] = found
        return found


def _merged_shape(producer: Node, consumer: Node, cfg: GpuConfig, shape_of=None) -> FusionShape | None:
    """The fused pair's analysis without building it (heroes through XLA's producer-consumer
    adaptor, gpu.heroes.merged_heroes).  None when the pair must be built.  `shape_of`, when
    given, answers `analyse(consumer, cfg)` (a model's remembered analyses)."""
    from ..gpu.heroes import merged_heroes

    pairs = merged_heroes(producer, consumer, cfg)
    if pairs is None:
        return None
    inputs = [op for op in consumer.operands if op is not producer]
    consumer_inputs = {id(op) for op in inputs}  # the producer's operands the consumer lacks, in order
    inputs += [op for op in producer.operands if id(op) not in consumer_inputs]
    members = (tuple(consumer.fused.nodes()) if consumer.fused is not None else (consumer,)) + (
        tuple(producer.fused.nodes()) if producer.fused is not None else (producer,))
    kind = str((shape_of(consumer) if shape_of is not None else analyse(consumer, cfg)).backend_kind)
    return FusionShape(tuple(r for r, _ in pairs), tuple(h for _, h in pairs), tuple(inputs), kind, members)


def preview_fusion(producer: Node, consumer: Node, cfg: GpuConfig) -> Node:
    """A scratch fusion holding `consumer` with `producer` fused in, its other operands as
    parameters of a scratch computation."""
    scratch = Program("preview")
    graph = scratch.add_graph(Graph(scratch, "preview"))
    mapping: dict[int, Node] = {}

    def outside(node: Node) -> Node:
        if node.uid not in mapping:
            param = Node("p", "parameter", node.shape, literal=str(len(graph.parameters)))
            graph.add(param)
            mapping[node.uid] = param
        return mapping[node.uid]

    def copy(node: Node, operand_of) -> Node:
        clone = clone_node(node, graph)
        for op in node.operands:
            add_operand(clone, operand_of(op))
        return clone

    p = copy(producer, outside)
    mapping[producer.uid] = p
    c = copy(consumer, lambda op: p if op is producer else outside(op))
    graph.root = c
    fusion = c if c.opcode == "fusion" else create_fusion(c, choose_fusion_kind(producer, consumer, cfg))
    if any(op is p for op in fusion.operands):
        fuse_instruction(fusion, p)
    return fusion


def _body_version(node: Node) -> int | None:
    return node.fused.version if node.fused is not None else None


def shared_model(ctx, cfg: GpuConfig) -> "LegacyPerformanceModel":
    """One model (and cost analysis) for every pass of a replay: XLA builds a fresh analysis
    per pass run, with the same answers; sharing only saves recomputing them."""
    model = ctx.legacy_performance_model
    if model is None or model.cfg != cfg:
        model = ctx.legacy_performance_model = LegacyPerformanceModel(cfg)
    return model


def _bad_transpose(node: Node) -> bool:
    """A transpose of the minor dimension whose input is not a broadcast or iota."""
    nodes = node.fused.nodes() if node.opcode == "fusion" and node.fused is not None else [node]
    return any(transposes_minor_dimension(n) and n.operands and not _is_broadcast(n.operands[0]) for n in nodes)


def _is_broadcast(node: Node) -> bool:
    while True:
        if node.opcode in ("broadcast", "iota"):
            return True
        if len(node.operands) != 1 or (node.opcode != "bitcast" and not is_elementwise(node)):
            return False
        node = node.operands[0]


def _smallest_bits(nodes) -> int:
    bits = [8 if n.shape.element_type == "pred" else bit_width(n.shape.element_type)
            for n in nodes if n.shape.is_array]
    return min(bits) if bits else 1 << 30


def _element_shape(shape):
    while shape.is_tuple:
        shape = shape.tuple_shapes[0]
    return shape


def _may_prevent_vectorization(shape: FusionShape) -> bool:
    """MayPreventVectorization: ops the loop emitter does not vectorise well."""
    for n in shape.members or shape.roots:
        if n.opcode in ("reduce-window", "sort", "dot", "sine", "cosine", "tan", "power", "atan2"):
            return True
        if n.opcode == "concatenate" and len(n.operands) > 10:
            return True
        if n.opcode == "reduce" and n.shape.is_tuple and len(n.shape.tuple_shapes) > 1:
            return True
    return False


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def _llround(x: float) -> int:
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))

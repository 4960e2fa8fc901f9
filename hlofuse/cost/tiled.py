"""XLA's tile-level cost of a generic Triton fusion and its search for the best tiling
(GpuPerformanceModelWithIndexingAnalysis, xla/service/gpu/model/gpu_indexing_performance_model.cc,
at XLA 5a9e73cb; how a fusion is tiled is in tiling.py).

A generic Triton fusion (`"kind":"__triton"`, the normalisation fusions XLA:GPU forms on Ampere
and later) runs one block per tile of its output.  The run time of a tiling
(EstimateRunTimeForTiledHloComputation):
  * flops: every instruction inside, per element of its tile padded to powers of two, times the
    blocks computing it (FlopsPerElement: indexing ops cost nothing, a reduction
    `(reduced size - 1)` applications of its reducer, a concatenate 6 or 400);
  * reads: every tile of an operand of the fusion, the part inside the array (masked padding is
    not read), times the blocks; the first read of each operand comes from DRAM, re-reads from
    L2/L1 (ReadTimeWithDRAMHeuristic), at the bandwidth the tile's contiguous bytes use of
    64-byte DRAM transactions (BandwidthUtilizationRateHeuristicForTiledMemoryAccess);
  * writes: the output, at the bandwidth its tile uses;
  * compute on `blocks` blocks of `num_warps` warps (1, 2, 4 or 8 by the largest tile), combined
    with memory time as for every kernel; infinite when an output, operand or iota tile holds
    more than 40% of a block's registers (DoesComputationFitInRegisters: it would spill).

The search (TryFindBestTilingForFusion): every valid output tile, in order (first dimension
slowest); the fastest finite one, the first of equal ones.  None: "No valid tilings found."

Not modelled: XLA's FusionDeduplicationCache, which gives structurally identical pairs the
tiling found for the first of them (`x*x` and `x*y` of equal shapes share one, whichever
PriorityFusion asked first in its user order, which the dumps do not record).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING

from .. import attributes
from ..gpu.properties import is_elementwise
from ..gpu.shapes import byte_width
from . import durations as dur
from .tiling import Tiling, SymbolicTiling, candidate_tiles, padded_size, satisfies_constraints, tile_fusion, \
    untileable_reason

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Node
    from .model import GpuPerformanceModel, RunTime

#: DoesTileFitInRegisters: 40% of a block's registers hold tiles.
_REGISTER_FRACTION = 0.4
#: se::DeviceDescription::dram_to_l2_transaction_size_bytes() on CUDA devices.
_DRAM_TRANSACTION_BYTES = 64
#: GpuPerformanceModelWithIndexingAnalysis::FlopsPerElement: instructions that only index.
_INDEXING_ONLY = frozenset({"bitcast", "broadcast", "constant", "dynamic-slice", "dynamic-update-slice",
                            "gather", "iota", "pad", "parameter", "slice", "transpose", "tuple"})

#: XLA's reason when no tiling is valid (GetTiledRunTimeDataCached wraps it).
NO_VALID_TILINGS = "No valid tilings found."


# ------------------------------------------------------------------------------------------
# Cost
# ------------------------------------------------------------------------------------------


def flops_per_element(model: "GpuPerformanceModel", node: "Node", program=None) -> int:
    """GpuPerformanceModelWithIndexingAnalysis::FlopsPerElement; `program` holds the reducers
    (a pair's scratch fusion lives in a program of its own)."""
    op = node.opcode
    if op in _INDEXING_ONLY:
        return 0
    if op == "concatenate":
        dim = (attributes.dimensions(node) or (0,))[0]
        return 400 if dim > 0 and node.operands[0].shape.dims[dim] & 31 else 6
    if is_elementwise(node):
        return model.cost.profile.flops_per_element(op, node.shape.element_type)
    if op == "reduce":
        # (reduced elements - 1) applications of the reducer: at 5a9e73cb the reduced size is
        # not padded to a power of two (later XLA pads it)
        reduced = prod(node.operands[0].shape.dims[d] for d in attributes.dimensions(node))
        name = (node.attr("to_apply") or "").strip().lstrip("%")
        reducer = program.graphs.get(name) if program is not None else None
        per_step = sum(flops_per_element(model, inner, program) for inner in reducer.nodes()) if reducer else 0
        return int((reduced - 1) * per_step)
    return 0


def _program_of(fusion: "Node"):
    """The program a (real) fusion belongs to."""
    graph = fusion.graph
    return graph.program if graph is not None else None


def bandwidth_rate(node: "Node", sizes: tuple[int, ...]) -> float:
    """BandwidthUtilizationRateHeuristicForTiledMemoryAccess: the share of each 64-byte DRAM
    transaction the tile's contiguous run of bytes uses."""
    shape = node.shape
    if not shape.is_array or not sizes:
        contiguous = 1
    else:
        contiguous = 1
        for d in shape.minor_to_major:
            tile, size = sizes[d], shape.dims[d]
            contiguous *= min(tile, size)
            if tile < size:
                break
    nbytes = contiguous * byte_width(shape.element_type if shape.is_array else "f32")
    effective = _DRAM_TRANSACTION_BYTES * -(-nbytes // _DRAM_TRANSACTION_BYTES)
    return nbytes / effective if effective else 1.0


def num_warps(tiling: Tiling) -> int:
    """EstimateNumWarps: by the largest padded tile of the computation."""
    largest = max((padded_size(t.sizes) for t in tiling.instructions), default=1)
    return 1 if largest <= 256 else 2 if largest <= 1024 else 4 if largest <= 4096 else 8


def fits_in_registers(model: "GpuPerformanceModel", tiling: Tiling) -> bool:
    """DoesComputationFitInRegisters: the output tile and every operand and iota tile in 40% of
    a block's registers."""
    limit = _REGISTER_FRACTION * model.device.registers_per_block_limit
    if padded_size(tiling.root.sizes) > limit:
        return False
    return all(padded_size(t.sizes) <= limit for t in tiling.instructions
               if not t.inside or t.node.opcode == "iota")


def estimate_tiling(model: "GpuPerformanceModel", fusion: "Node", tiling: Tiling, warps: int,
                    program=None, memo: dict | None = None) -> "RunTime":
    """EstimateRunTimeForTiledHloComputation for a tiled fusion run with `warps` warps;
    `program` holds the reducers (default: the fusion's own); `memo` keeps per-instruction
    figures across the tilings of one search."""
    from .analysis import shape_size
    from .fusion_analysis import LaunchDimensions
    from .model import RunTime, combine, compute_time, read_time

    device = model.device
    if not fits_in_registers(model, tiling):
        return RunTime(0, 0, 0, 0, 0, 0, dur.INFINITE)
    if memo is None:
        memo = {}
    flops = 0
    reads: dict[int, list] = {}
    program = program or _program_of(fusion)
    for inst in tiling.instructions:
        node = inst.node
        if inst.inside:
            per_element = memo.get(node.uid)
            if per_element is None:
                per_element = memo[node.uid] = flops_per_element(model, node, program)
            if per_element:
                flops += per_element * inst.blocks * padded_size(inst.sizes)
            continue
        key = (node.uid, inst.sizes)
        found = memo.get(key)
        if found is None:
            elements = 1
            for tile, size in zip(inst.sizes, node.shape.dims):
                elements *= min(tile, size)
            found = memo[key] = (byte_width(node.shape.element_type) * elements, bandwidth_rate(node, inst.sizes))
        entry = reads.get(node.uid)
        if entry is None:
            entry = reads[node.uid] = [node, 0, 1.0]
        entry[1] += found[0] * inst.blocks
        entry[2] = min(entry[2], found[1])
    read = 0
    bytes_read = 0
    for node, total, rate in reads.values():
        bytes_read += total
        read += read_time(device, tiling.blocks, min(shape_size(node.shape), total), total, rate)
    root = tiling.root.node
    written = shape_size(root.shape)
    effective = int(bandwidth_rate(root, tiling.root.sizes) * device.memory_bandwidth)
    write = dur.from_seconds(written / effective) if effective else 0
    threads = warps * device.threads_per_warp
    compute = compute_time(device, flops, tiling.blocks, threads)
    launch = LaunchDimensions(tiling.blocks, threads, "triton")
    return RunTime(flops, bytes_read, written, read, write, compute, combine(compute, read + write), launch, True)


def estimate_tiled(model: "GpuPerformanceModel", fusion: "Node", sizes: tuple[int, ...],
                   warps: int | None) -> "RunTime":
    """The run time of `fusion` (a fusion node, real or scratch) with output tile `sizes`;
    `warps` None: XLA's choice from the largest tile."""
    from .model import RunTime

    if untileable_reason(fusion) is not None:
        return RunTime(0, 0, 0, 0, 0, 0, dur.INFINITE)
    tiling = tile_fusion(fusion, tuple(sizes))
    if not tiling.propagated:
        return RunTime(0, 0, 0, 0, 0, 0, dur.INFINITE)
    return estimate_tiling(model, fusion, tiling, warps or num_warps(tiling))


# ------------------------------------------------------------------------------------------
# The search
# ------------------------------------------------------------------------------------------


def triton_tiling(fusion: "Node") -> tuple[tuple[int, ...], int] | None:
    """The output tile and warps of a generic Triton fusion's `block_level_fusion_config`."""
    config = (attributes.backend_config(fusion).get("fusion_backend_config") or {}).get(
        "block_level_fusion_config") or {}
    tiles = config.get("output_tiles") or []
    if not tiles:
        return None
    sizes = tuple(int(s) for s in (tiles[0].get("sizes") or []))
    if len(sizes) != fusion.shape.rank:
        return None
    return sizes, int(config.get("num_warps") or 4)


@dataclass(frozen=True, slots=True)
class BestTiling:
    """TryFindBestTilingForFusion's answer: the fastest tiling, or why there is none."""

    runtime: "RunTime"
    tile: tuple[int, ...]
    warps: int
    reason: str | None = None

    @property
    def found(self) -> bool:
        return self.reason is None


def best_tiled(model: "GpuPerformanceModel", fusion: "Node", program=None) -> BestTiling:
    """TryFindBestTilingForFusion: the fastest valid tiling of `fusion` (a pair's scratch
    fusion: `program` is the replayed program, which holds the reducers).

    The answer is a function of the fused computation's structure, its operands' shapes and
    which parameters read the same operand, and the device: the program remembers it by that
    structure (`structure_key`), so the layers of a model, which repeat the same fusions,
    search once."""
    from .model import RunTime

    infinite = RunTime(0, 0, 0, 0, 0, 0, dur.INFINITE)
    reason = untileable_reason(fusion)  # (names the instruction: not remembered by structure)
    if reason is not None:
        return BestTiling(infinite, (), 1, reason)
    program = program or _program_of(fusion)
    memo = program.memo.tilings if program is not None else None
    key = None
    if memo is not None:
        key = (model.device, model.cost.profile.name, structure_key(fusion, program))
        found = memo.get(key)
        if found is not None:
            return found
    best = _search(model, fusion, program, infinite)
    if memo is not None:
        memo[key] = best
    return best


def _search(model: "GpuPerformanceModel", fusion: "Node", program, infinite: "RunTime") -> BestTiling:
    best: BestTiling | None = None
    limit = _REGISTER_FRACTION * model.device.registers_per_block_limit
    symbolic = SymbolicTiling(fusion)
    costs: dict = {}
    for sizes in candidate_tiles(fusion.fused.root.shape.dims):
        if padded_size(sizes) > limit:
            continue  # the output tile alone would spill: infinite (DoesComputationFitInRegisters)
        tiling = symbolic.tiling(sizes)
        if not satisfies_constraints(tiling):
            continue
        warps = num_warps(tiling)
        runtime = estimate_tiling(model, fusion, tiling, warps, program, costs)
        if runtime.is_infinite:
            continue
        if best is None or runtime.exec_time < best.runtime.exec_time:
            best = BestTiling(runtime, sizes, warps)
    if best is None:
        return BestTiling(infinite, (), 1, NO_VALID_TILINGS)
    return best


def structure_key(fusion: "Node", program=None) -> tuple:
    """What the tiling search of `fusion` depends on, without names: its instructions in post
    order (opcode, shape, attributes but metadata, literal, operands by position in that
    order), each parameter's number, the shape of the operand it binds and the first parameter
    bound to the same operand (reads of one operand are counted once), and the root.  Equal
    keys mean equal fusions up to names, so equal searches.  A reducer (`to_apply`, looked up
    in `program`) is named by what FlopsPerElement reads of it: its instructions' opcodes and
    shapes (XLA clones reducers, so equal ones have many names)."""
    body = fusion.fused
    operands = fusion.operands
    position: dict[int, int] = {}
    first_binding: dict[int, int] = {}
    parts = []
    for node in body.post_order():
        position[node.uid] = len(parts)
        if node.opcode == "parameter":
            n = node.parameter_number
            outside = operands[n]
            parts.append((n, node.shape, outside.shape, first_binding.setdefault(outside.uid, n)))
            continue
        attrs = node.attrs
        if attrs:
            attrs = tuple(a if a[0] != "to_apply" else ("to_apply", _reducer_key(program, a[1]))
                          for a in attrs if a[0] != "metadata")
        parts.append((node.opcode, node.shape, tuple(position[op.uid] for op in node.operands), attrs or (),
                      node.literal))
    return tuple(parts), position[body.root.uid]


def _reducer_key(program, name: str):
    """A reducer as flops_per_element sees it, or its name where that would not be all."""
    reducer = program.graphs.get(name.strip().lstrip("%")) if program is not None else None
    if reducer is None:
        return name
    key = []
    for inner in reducer.nodes():
        if inner.opcode not in _INDEXING_ONLY and not is_elementwise(inner):
            return name  # (a reduce or concatenate in a reducer: its own attributes count)
        key.append((inner.opcode, inner.shape.element_type))
    return tuple(key)

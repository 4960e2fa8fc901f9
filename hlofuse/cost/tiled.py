"""XLA's tile-level cost model for generic Triton fusions and its tiling search
(GpuPerformanceModelWithIndexingAnalysis, xla/service/gpu/model/gpu_indexing_performance_model.cc;
SymbolicTileAnalysis, xla/codegen/tiling/symbolic_tile_analysis.cc; TritonEmitterConstraints,
xla/service/gpu/model/triton_emitter_constraints.cc; all at XLA 5a9e73cb).

A generic Triton fusion (`"kind":"__triton"`, the normalisation fusions XLA:GPU forms on Ampere
and later) runs one block per tile of its output.  Every instruction is computed on a tile: the
output tile is propagated to the operands instruction by instruction, and an instruction that
two paths read differently (a row reduction reads whole rows of `x` while an elementwise
epilogue reads `x` tile by tile) is simply computed once per distinct tile (SymbolicTileAnalysis
deduplicates by instruction and indexing map, not by instruction).  A concatenate computes each
output tile from one of its operands: each operand is a region run by the share of the blocks
that falls on it.

The run time of a tiling (EstimateRunTimeForTiledHloComputation):
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

The tiling search (TryFindBestTilingForFusion with SymbolicTileAnalysis::GetValidTilings): every
output tile whose sizes are powers of two below the dimension or the dimension itself, in
order (first dimension slowest), that Triton accepts — no tile of more than 2^20 padded elements,
a concatenate's tile along its dimension dividing every operand but the last — the fastest
finite one, the first of equal ones.  None valid: "No valid tilings found."

Where hlofuse is simpler (expected effect): a tile crosses a reshape or bitcast only as one
contiguous run of elements per group of merged or split dimensions (what SymbolicTile's
reshape constraints allow for the tiles tried here); tile strides are taken as 1 (slices with
strides are rare in these fusions).  Not modelled: XLA's FusionDeduplicationCache, which gives
structurally identical pairs the tiling found for the first of them (`x*x` and `x*y` of equal
shapes share one, whichever PriorityFusion asked first in its user order, which the dumps do
not record).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import prod
from typing import TYPE_CHECKING, NamedTuple

from .. import attributes
from ..gpu.properties import is_elementwise
from ..gpu.shapes import byte_width
from . import durations as dur

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Node
    from .model import GpuPerformanceModel, RunTime

#: DoesTileFitInRegisters: 40% of a block's registers hold tiles.
_REGISTER_FRACTION = 0.4
#: kMaxTensorNumElements: Triton compiles no tensor of more elements (TRITON_MAX_TENSOR_NUMEL).
MAX_TENSOR_ELEMENTS = 1048576
#: se::DeviceDescription::dram_to_l2_transaction_size_bytes() on CUDA devices.
_DRAM_TRANSACTION_BYTES = 64
#: block_dim_limit().x of the launch grid (NumberOfBlocksFitsOnDeviceGrid).
_GRID_LIMIT = 2147483647
#: GpuPerformanceModelWithIndexingAnalysis::FlopsPerElement: instructions that only index.
_INDEXING_ONLY = frozenset({"bitcast", "broadcast", "constant", "dynamic-slice", "dynamic-update-slice",
                            "gather", "iota", "pad", "parameter", "slice", "transpose", "tuple"})
#: The opcodes a tile can be propagated through (others make the fusion untileable here).
_PROPAGATED = frozenset({"broadcast", "reduce", "transpose", "bitcast", "reshape", "slice", "concatenate",
                         "iota", "constant", "parameter"})

#: XLA's reason when no tiling is valid (GetTiledRunTimeDataCached wraps it).
NO_VALID_TILINGS = "No valid tilings found."


def _pow2(n: int) -> int:
    """llvm::PowerOf2Ceil for n >= 1."""
    return 1 << (n - 1).bit_length() if n > 1 else 1


@lru_cache(maxsize=65536)
def padded_size(sizes: tuple[int, ...]) -> int:
    """GetPaddedTileSize: elements of the tile with each size rounded up to a power of two."""
    return prod(_pow2(s) for s in sizes) if sizes else 1


class TiledInstruction(NamedTuple):
    """One TiledHloInstruction: `node` computed (or, for a fusion operand, read) on a tile of
    `sizes` by `blocks` blocks.  `offsets` is the tile's static offset from the output tile's
    origin: two reads of one operand with equal sizes and offsets are one read."""

    node: "Node"
    sizes: tuple[int, ...]
    offsets: tuple[int, ...]
    blocks: int
    inside: bool


class Tiling(NamedTuple):
    """A tiled fusion: every distinct tile instruction of the fusion for one output tile;
    `propagated` is False when some tile could not be carried to an operand (the tiling is
    then not valid)."""

    root: TiledInstruction
    instructions: tuple[TiledInstruction, ...]
    blocks: int
    propagated: bool = True


# ------------------------------------------------------------------------------------------
# Tile propagation (SymbolicTileAnalysis, concrete)
# ------------------------------------------------------------------------------------------


def _reshape_groups(out_dims, in_dims) -> list[tuple[list[int], list[int]]] | None:
    """The dimensions of a reshape's output and operand in groups of equal element counts
    (major to minor); unit dimensions join a neighbouring group."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(out_dims) and j < len(in_dims):
        gi, gj = [i], [j]
        pa, pb = out_dims[i], in_dims[j]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb and i < len(out_dims):
                pa *= out_dims[i]
                gi.append(i)
                i += 1
            elif pb < pa and j < len(in_dims):
                pb *= in_dims[j]
                gj.append(j)
                j += 1
            else:
                return None
        groups.append((gi, gj))
    if not groups:
        return [(list(range(len(out_dims))), list(range(len(in_dims))))]
    groups[-1][0].extend(range(i, len(out_dims)))
    groups[-1][1].extend(range(j, len(in_dims)))
    return groups


def _reshape_tile(out_dims, out_tile, in_dims) -> tuple[int, ...] | None:
    """The operand tile of a reshape (row-major, both sides): within each group of dimensions
    with equal element counts the output tile must be one contiguous run of elements (the
    dimensions minor to a partially tiled one whole, those major to it 1), and that run must
    fill the operand's dimensions the same way; None when it cannot (SymbolicTile's reshape
    constraints then rule the tiling out)."""
    if tuple(out_dims) == tuple(in_dims):
        return tuple(out_tile)
    groups = _reshape_groups(out_dims, in_dims)
    if groups is None:
        return None
    tile = [1] * len(in_dims)
    for gi, gj in groups:
        gi = [d for d in gi if out_dims[d] != 1]
        gj = [d for d in gj if in_dims[d] != 1]
        if len(gi) == 1 and len(gj) == 1:
            # one dimension on each side, unit dimensions aside: the tile carries over
            tile[gj[0]] = out_tile[gi[0]]
            continue
        run = 1
        whole = True
        for d in reversed(gi):
            if whole:
                run *= out_tile[d]
                whole = out_tile[d] == out_dims[d]
            elif out_tile[d] != 1:
                return None
        for d in reversed(gj):
            size = in_dims[d]
            if run >= size:
                if run % size:
                    return None
                tile[d] = size
                run //= size
            else:
                if size % run:
                    return None
                tile[d] = run
                run = 1
        if run != 1:
            return None
    return tuple(tile)


def _physical(shape, values) -> list[int]:
    """`values` (one per logical dimension) in the shape's major-to-minor physical order."""
    return [values[d] for d in reversed(shape.minor_to_major)]


def _bitcast_tile(node: "Node", sizes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The operand tile of a bitcast or reshape: a reshape of the physical (layout) order."""
    operand = node.operands[0].shape
    shape = node.shape
    if node.opcode == "reshape":
        return _reshape_tile(shape.dims, sizes, operand.dims)
    tile = _reshape_tile(_physical(shape, shape.dims), _physical(shape, sizes), _physical(operand, operand.dims))
    if tile is None:
        return None
    out = [1] * operand.rank
    for position, d in enumerate(reversed(operand.minor_to_major)):
        out[d] = tile[position]
    return tuple(out)


def _operand_tiles(node: "Node", sizes: tuple[int, ...], offsets: tuple[int, ...]):
    """(operand, sizes, offsets, share of the blocks) for each operand read to compute a tile
    of `node`; the share is a (numerator, denominator) pair.  None when the tile cannot be
    propagated (a reshape that would split it)."""
    op = node.opcode
    out = []
    if op == "broadcast":
        mapping = attributes.dimensions(node)
        operand = node.operands[0]
        out.append((operand, tuple(sizes[m] for m in mapping), tuple(offsets[m] for m in mapping), (1, 1)))
    elif op == "reduce":
        half = len(node.operands) // 2
        reduced = set(attributes.dimensions(node))
        for i, operand in enumerate(node.operands):
            if i >= half:
                out.append((operand, (), (), (1, 1)))
                continue
            dims = operand.shape.dims
            kept = iter(zip(sizes, offsets))
            s, o = [], []
            for d in range(len(dims)):
                if d in reduced:
                    s.append(dims[d])
                    o.append(0)
                else:
                    ks, ko = next(kept, (1, 0))
                    s.append(ks)
                    o.append(ko)
            out.append((operand, tuple(s), tuple(o), (1, 1)))
    elif op == "transpose":
        perm = attributes.dimensions(node)
        operand = node.operands[0]
        s = [1] * operand.shape.rank
        o = [0] * operand.shape.rank
        for j, p in enumerate(perm):
            s[p] = sizes[j]
            o[p] = offsets[j]
        out.append((operand, tuple(s), tuple(o), (1, 1)))
    elif op in ("bitcast", "reshape"):
        operand = node.operands[0]
        tile = _bitcast_tile(node, sizes)
        if tile is None:
            return None
        same = tuple(node.shape.dims) == tuple(operand.shape.dims)
        out.append((operand, tile, tuple(offsets) if same else (0,) * len(tile), (1, 1)))
    elif op == "slice":
        ranges = attributes.slice_dims(node)
        operand = node.operands[0]
        out.append((operand, tuple(sizes), tuple(o * r.stride + r.start for o, r in zip(offsets, ranges)), (1, 1)))
    elif op == "concatenate":
        dim = (attributes.dimensions(node) or (0,))[0]
        total = node.shape.dims[dim]
        for operand in node.operands:
            # each operand is a region of its own (tiles dedup within it): its tiles are
            # placed relative to the region's origin, as the output's are
            out.append((operand, tuple(sizes), tuple(offsets), (operand.shape.dims[dim], total)))
    else:  # elementwise
        for operand in node.operands:
            rank = operand.shape.rank
            if rank == len(sizes):
                out.append((operand, tuple(sizes), tuple(offsets), (1, 1)))
            else:
                out.append((operand, tuple(operand.shape.dims), (0,) * rank, (1, 1)))
    return out


def untileable_reason(fusion: "Node") -> str | None:
    """Why SymbolicTileAnalysis gives up on a fusion before any tiling is tried (an opcode the
    analysis bails out on, a tuple root), or None."""
    body = fusion.fused
    if body.root.opcode == "tuple" or not body.root.shape.is_array:
        return "multi-output fusions are not tiled here"
    for node in body.nodes():
        if node.opcode == "pad":
            return f"Bailing out on {node.name}"
        if node.opcode not in _PROPAGATED and not is_elementwise(node):
            return f"no symbolic tile for {node.name} ({node.opcode})"
    return None


def tile_fusion(fusion: "Node", sizes: tuple[int, ...]) -> Tiling:
    """ComputeTiledComputation: every tile instruction of `fusion` for output tile `sizes`."""
    body = fusion.fused
    root = body.root
    dims = root.shape.dims
    blocks = prod(-(-d // max(t, 1)) for d, t in zip(dims, sizes)) if dims else 1
    seen: dict[tuple, TiledInstruction] = {}
    order: list[TiledInstruction] = []
    stack = [(root, tuple(sizes), (0,) * len(sizes), blocks, ())]
    propagated = True
    while stack:
        node, s, o, b, region = stack.pop()
        if node.opcode == "parameter":
            outside = fusion.operands[node.parameter_number]
            key = (outside.uid, s, o, region)
            if key not in seen:
                seen[key] = TiledInstruction(outside, s, o, b, False)
                order.append(seen[key])
            continue
        key = (node.uid, s, o, region)
        if key in seen:
            continue
        seen[key] = TiledInstruction(node, s, o, b, True)
        order.append(seen[key])
        operand_tiles = _operand_tiles(node, s, o)
        if operand_tiles is None:
            propagated = False
            continue
        for i, (operand, os_, oo, share) in enumerate(operand_tiles):
            if node.opcode == "concatenate":
                stack.append((operand, os_, oo, b * share[0] // share[1], region + ((i, *share),)))
            else:
                stack.append((operand, os_, oo, b, region))
    return Tiling(order[0], tuple(order), blocks, propagated)


class _SymbolicFusion:
    """The tile propagation of a fusion done once for every output tile of a search: each tile
    size is an atom — a constant, `("r", k)` (the output tile's dimension k) or `("x", j, d)`
    (dimension d of what reshape site j makes of its input) — and a tiling is then evaluated
    by substituting the candidate's sizes, site by site.  It finds exactly the instructions
    `tile_fusion` finds (tiles equal by value are merged after substitution)."""

    def __init__(self, fusion: "Node"):
        self.fusion = fusion
        root = fusion.fused.root
        self.root = root
        rank = root.shape.rank
        # atoms become slots of one list per tiling: constants filled once, the output tile's
        # sizes and the reshape sites' results per tiling
        self._slots: dict = {}
        self._base: list[int] = []
        self._root_slots = [self._slot(("r", k)) for k in range(rank)]
        start = (root, tuple(("r", k) for k in range(rank)), (0,) * rank, ())
        sites: list[tuple["Node", tuple]] = []
        instances: list[tuple["Node", tuple, tuple, tuple, bool]] = []
        seen = set()
        stack = [start]
        while stack:
            node, expr, o, region = stack.pop()
            key = (node.uid, expr, o, region)
            if key in seen:
                continue
            seen.add(key)
            if node.opcode == "parameter":
                instances.append((fusion.operands[node.parameter_number], expr, o, region, False))
                continue
            instances.append((node, expr, o, region, True))
            if node.opcode in ("bitcast", "reshape") and not _same_layout(node):
                operand = node.operands[0]
                j = len(sites)
                sites.append((node, expr))
                stack.append((operand, tuple(("x", j, d) for d in range(operand.shape.rank)),
                              (0,) * operand.shape.rank, region))
                continue
            concat = node.opcode == "concatenate"
            for i, (operand, os_, oo, share) in enumerate(_operand_tiles(node, expr, o)):
                stack.append((operand, os_, oo, region + ((i, *share),) if concat else region))
        self._sites = [(node, tuple(self._slot(a) for a in expr),
                        [self._slot(("x", j, d)) for d in range(node.operands[0].shape.rank)])
                       for j, (node, expr) in enumerate(sites)]
        self._instances = [(node, tuple(self._slot(a) for a in expr), o, region, inside)
                           for node, expr, o, region, inside in instances]
        self._site_memo: dict = {}

    def _slot(self, atom) -> int:
        slot = self._slots.get(atom)
        if slot is None:
            slot = self._slots[atom] = len(self._base)
            self._base.append(atom if type(atom) is int else 0)
        return slot

    def tiling(self, sizes: tuple[int, ...]) -> Tiling:
        """The concrete tiling for output tile `sizes` (as `tile_fusion` gives it)."""
        root = self.root
        dims = root.shape.dims
        blocks = prod(-(-d // max(t, 1)) for d, t in zip(dims, sizes)) if dims else 1
        values = list(self._base)
        for slot, size in zip(self._root_slots, sizes):
            values[slot] = size
        top = TiledInstruction(root, tuple(sizes), (0,) * len(sizes), blocks, True)
        memo = self._site_memo
        for j, (node, in_slots, out_slots) in enumerate(self._sites):
            tile_in = tuple(map(values.__getitem__, in_slots))
            tile = memo.get((j, tile_in), memo)
            if tile is memo:
                tile = memo[(j, tile_in)] = _bitcast_tile(node, tile_in)
            if tile is None:
                return Tiling(top, (), blocks, False)
            for slot, size in zip(out_slots, tile):
                values[slot] = size
        get = values.__getitem__
        seen = {(root.uid, top.sizes, top.offsets, ())}
        order = [top]
        region_blocks: dict = {}
        for node, slots, o, region, inside in self._instances:
            tile = tuple(map(get, slots))
            key = (node.uid, tile, o, region)
            if key in seen:
                continue
            seen.add(key)
            if region:
                b = region_blocks.get(region)
                if b is None:
                    b = region_blocks[region] = _region_blocks(blocks, region)
            else:
                b = blocks
            order.append(TiledInstruction(node, tile, o, b, inside))
        return Tiling(top, tuple(order), blocks, True)


def _same_layout(node: "Node") -> bool:
    """A bitcast or reshape that leaves the tile as it is (same dimensions, same layout)."""
    operand = node.operands[0].shape
    shape = node.shape
    if tuple(operand.dims) != tuple(shape.dims):
        return False
    return node.opcode == "reshape" or operand.minor_to_major == shape.minor_to_major


def _region_blocks(blocks: int, region) -> int:
    """GetNumBlocksForRegion, region by region: the share of the blocks on each operand (a
    region is the path of concatenate operands taken: (operand index, its size, the total))."""
    for _, size, total in region:
        blocks = blocks * size // total
    return blocks


# ------------------------------------------------------------------------------------------
# Constraints and cost
# ------------------------------------------------------------------------------------------


def satisfies_constraints(tiling: Tiling) -> bool:
    """SymbolicTileAnalysis::ParametersSatisfyConstraints, for the constraints hlofuse derives:
    every reshape keeps each tile one contiguous run (the symbolic tiles' constraints), no
    padded tile above 2^20 elements, a grid within the device's limit, and a concatenate's
    padded tile along its dimension dividing every operand but the last (the emitter masks the
    last operand's tail; the others must end on tile boundaries)."""
    if not tiling.propagated or tiling.blocks >= _GRID_LIMIT:
        return False
    for inst in tiling.instructions:
        if padded_size(inst.sizes) > MAX_TENSOR_ELEMENTS:
            return False
        node = inst.node
        if inst.inside and node.opcode == "concatenate":
            dim = (attributes.dimensions(node) or (0,))[0]
            tile = _pow2(max(inst.sizes[dim], 1))
            if any(op.shape.dims[dim] % tile for op in node.operands[:-1]):
                return False
    return True


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


def candidate_tiles(dims: tuple[int, ...]) -> list[tuple[int, ...]]:
    """GetFlatTilingsForInputSpace: per dimension the powers of two below its size and the size
    itself, first dimension slowest."""
    per_dim = []
    for d in dims:
        sizes = []
        t = 1
        while t < d:
            sizes.append(t)
            t *= 2
        sizes.append(d)
        per_dim.append(sizes)
    out: list[tuple[int, ...]] = [()]
    for sizes in per_dim:
        out = [prefix + (s,) for prefix in out for s in sizes]
    return out


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
    fusion: `program` is the replayed program, which holds the reducers)."""
    from .model import RunTime

    infinite = RunTime(0, 0, 0, 0, 0, 0, dur.INFINITE)
    reason = untileable_reason(fusion)
    if reason is not None:
        return BestTiling(infinite, (), 1, reason)
    best: BestTiling | None = None
    limit = _REGISTER_FRACTION * model.device.registers_per_block_limit
    symbolic = _SymbolicFusion(fusion)
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

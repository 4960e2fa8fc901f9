"""How XLA tiles a generic Triton fusion: which tile every instruction is computed on for an
output tile, and which output tiles are valid (SymbolicTileAnalysis,
xla/codegen/tiling/symbolic_tile_analysis.cc, and TritonEmitterConstraints,
xla/service/gpu/model/triton_emitter_constraints.cc, at XLA 5a9e73cb; the cost of a tiling and
the search are in tiled.py).

The output tile is propagated to the operands instruction by instruction (elementwise: the same
tile; broadcast: the kept dimensions; reduce: the reduced dimensions whole; transpose: permuted;
slice: the same size, shifted; reshape and bitcast: one contiguous run per group of merged or
split dimensions, else the tiling is invalid).  An instruction read along two paths with
different tiles is computed once per distinct tile (SymbolicTileAnalysis deduplicates by
instruction and indexing map, not by instruction).  A concatenate computes each output tile
from one operand: each operand is a region run by its share of the blocks.

Valid output tiles (GetValidTilings): per dimension the powers of two below its size and the
size itself, for which every reshape passes, no padded tile exceeds 2^20 elements, the grid
fits, and a concatenate's padded tile along its dimension divides every operand but the last.

Where hlofuse is simpler (expected effect): reshape constraints as contiguity (what symbolic
tiles allow for the tiles tried here); tile strides taken as 1 (strided slices are rare in
these fusions).
"""

from __future__ import annotations

from functools import lru_cache
from math import prod
from typing import TYPE_CHECKING, NamedTuple

from .. import attributes
from ..gpu.properties import is_elementwise
from .symbolic_tile import first_failure

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Node

#: kMaxTensorNumElements: Triton compiles no tensor of more elements (TRITON_MAX_TENSOR_NUMEL).
MAX_TENSOR_ELEMENTS = 1048576
#: block_dim_limit().x of the launch grid (NumberOfBlocksFitsOnDeviceGrid).
_GRID_LIMIT = 2147483647
#: The opcodes a tile can be propagated through (others make the fusion untileable here).
_PROPAGATED = frozenset({"broadcast", "reduce", "transpose", "bitcast", "reshape", "slice", "concatenate",
                         "iota", "constant", "parameter"})


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


def reshape_tile(out_dims, out_tile, in_dims) -> tuple[int, ...] | None:
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
        return reshape_tile(shape.dims, sizes, operand.dims)
    tile = reshape_tile(_physical(shape, shape.dims), _physical(shape, sizes), _physical(operand, operand.dims))
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
    analysis bails out on, a tuple root, an instruction whose indexing map has no symbolic
    tile: symbolic_tile.py), or None.  The reason names an instruction, so it is derived here
    for each fusion and never memoized by structure."""
    body = fusion.fused
    if body.root.opcode == "tuple" or not body.root.shape.is_array:
        return "multi-output fusions are not tiled here"
    for node in body.nodes():
        if node.opcode == "pad":
            return f"Bailing out on {node.name}"
        if node.opcode not in _PROPAGATED and not is_elementwise(node):
            return f"no symbolic tile for {node.name} ({node.opcode})"
    failure = first_failure(fusion)
    return failure.reason if failure is not None else None


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


class SymbolicTiling:
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



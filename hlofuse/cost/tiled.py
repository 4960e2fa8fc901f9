"""A tile-level estimate for generic Triton fusions (approximating XLA's
GpuPerformanceModelWithIndexingAnalysis, xla/service/gpu/model/gpu_indexing_performance_model.cc).

XLA costs a generic Triton fusion (`"kind":"__triton"`, the softmax/normalisation fusions XLA:GPU
forms on Ampere and later) by tiles: one block per output tile; each block computes its tile of
every instruction (flops counted on tiles padded to powers of two) and reads its tile of every
operand (an operand read by every block, such as a broadcast scale vector, is read once per
block and the re-reads come from cache).  For a Triton fusion about to absorb a producer or
consumer, XLA searches all valid tilings (SymbolicTileAnalysis) for the fastest.

What hlofuse does instead (expected effect):
  * tiles are propagated from the output tile to operands with simple per-opcode rules
    (elementwise: same tile; broadcast: the kept dimensions; reduce: reduced dimensions whole;
    transpose: permuted; bitcast/reshape: the same number of elements, minor dimensions first)
    instead of symbolic tile analysis — exact for the softmax/normalisation shapes XLA makes;
  * a pair's tiling is searched among tiles that keep the minor dimension whole and take a
    power of two of the next one (what XLA picks for row-wise fusions), not all valid tilings;
  * all memory accesses count as coalesced.
The times are close to XLA's on the Triton pairs of the sample dumps (a few tens of
nanoseconds), which is enough: priorities of Triton pairs are dominated by launch overhead.
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

from .. import attributes
from ..gpu.properties import is_elementwise
from ..gpu.shapes import byte_width
from . import durations as dur
from .durations import f32

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Node
    from .model import GpuPerformanceModel, RunTime

#: DoesTileFitsInRegisters: 40% of a block's registers hold tiles.
_REGISTER_FRACTION = 0.4
_INDEXING_ONLY = frozenset({"bitcast", "broadcast", "constant", "dynamic-slice", "dynamic-update-slice",
                            "gather", "iota", "pad", "parameter", "slice", "transpose", "tuple", "reshape"})


def _pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _padded(tile) -> int:
    return prod(_pow2(max(t, 1)) for t in tile) if tile else 1


def _reshape_tile(out_dims, out_tile, in_dims) -> tuple[int, ...]:
    """The operand tile of a bitcast/reshape: as many elements, filling minor dimensions first."""
    if tuple(out_dims) == tuple(in_dims):
        return tuple(out_tile)
    remaining = max(prod(out_tile) if out_tile else 1, 1)
    tile = [1] * len(in_dims)
    for d in range(len(in_dims) - 1, -1, -1):
        size = in_dims[d]
        take = min(size, remaining)
        tile[d] = max(take, 1)
        remaining = max(remaining // max(size, 1), 1) if take == size else 1
    return tuple(tile)


def operand_tiles(node: "Node", tile: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The tile of each operand needed to compute `tile` of `node`."""
    op = node.opcode
    out = []
    for i, operand in enumerate(node.operands):
        dims = operand.shape.dims
        if op == "broadcast":
            mapping = attributes.dimensions(node)
            out.append(tuple(tile[m] for m in mapping))
        elif op == "reduce":
            if i >= len(node.operands) // 2:
                out.append(())
                continue
            reduced = set(attributes.dimensions(node))
            kept = iter(tile)
            out.append(tuple(dims[d] if d in reduced else next(kept, 1) for d in range(len(dims))))
        elif op == "transpose":
            perm = attributes.dimensions(node)
            t = [1] * len(dims)
            for j, p in enumerate(perm):
                t[p] = tile[j]
            out.append(tuple(t))
        elif op in ("bitcast", "reshape"):
            out.append(_reshape_tile(node.shape.dims, tile, dims))
        elif len(dims) == len(tile):
            out.append(tuple(min(t, d) for t, d in zip(tile, dims)))
        else:
            out.append(tuple(dims))
    return out


def propagate_tiles(root: "Node", tile: tuple[int, ...]) -> dict[tuple[int, tuple[int, ...]], "Node"] | None:
    """Every (instruction, tile) a block computes for output tile `tile`; None when an
    instruction inside the fusion would need two different tiles (symbolic tile analysis
    finds no tiling then: an instruction has one tiling)."""
    tiles: dict[tuple[int, tuple[int, ...]], "Node"] = {}
    tile_of: dict[int, tuple[int, ...]] = {}
    stack = [(root, tuple(tile))]
    while stack:
        node, t = stack.pop()
        key = (node.uid, t)
        if key in tiles:
            continue
        if node.opcode != "parameter":
            if node.uid in tile_of and tile_of[node.uid] != t:
                return None
            tile_of[node.uid] = t
        tiles[key] = node
        if node.opcode == "parameter":
            continue
        for operand, ot in zip(node.operands, operand_tiles(node, t)):
            stack.append((operand, ot))
    return tiles


def _flops_per_element(model: "GpuPerformanceModel", node: "Node") -> int:
    """GpuPerformanceModelWithIndexingAnalysis::FlopsPerElement."""
    if node.opcode in _INDEXING_ONLY:
        return 0
    if is_elementwise(node):
        return model.cost.profile.flops_per_element(node.opcode, node.shape.element_type)
    if node.opcode == "reduce":
        per_step = model.cost._computation_flops(node)
        out = node.shape if not node.shape.is_tuple else node.shape.tuple_shapes[0]
        from ..gpu.shapes import elements

        factor = elements(node.operands[0].shape) // max(elements(out), 1)
        return int((factor - 1) * per_step)
    return 0


def estimate_tiled(model: "GpuPerformanceModel", fusion: "Node", tile: tuple[int, ...], num_warps: int | None,
                   launch_emitter: str = "triton") -> "RunTime":
    """EstimateRunTimeForTiledHloComputation for `fusion` (a fusion node, real or scratch)
    with output tile `tile`; `num_warps` None: XLA's choice from the largest tile."""
    from .fusion_analysis import LaunchDimensions
    from .model import RunTime, combine, compute_time, read_time

    device = model.device
    body = fusion.fused
    root = body.root
    shape = root.shape
    blocks = prod(-(-d // max(t, 1)) for d, t in zip(shape.dims, tile)) if shape.dims else 1
    tiles = propagate_tiles(root, tuple(tile))
    if tiles is None:
        return RunTime(0, 0, 0, 0, 0, 0, dur.INFINITE)
    largest = max((_padded(t) for (_, t) in tiles), default=1)
    limit = _REGISTER_FRACTION * device.registers_per_block_limit
    if any(_padded(t) > limit for (uid, t), n in tiles.items() if n is root or n.opcode in ("parameter", "iota")):
        return RunTime(0, 0, 0, 0, 0, 0, dur.INFINITE)
    warps = num_warps or (1 if largest <= 256 else 2 if largest <= 1024 else 4 if largest <= 4096 else 8)
    threads = warps * device.threads_per_warp
    flops = 0
    reads: dict[int, int] = {}
    operand_of: dict[int, "Node"] = {}
    for (uid, t), node in tiles.items():
        if node.opcode == "parameter":
            outside = fusion.operands[node.parameter_number]
            reads[outside.uid] = reads.get(outside.uid, 0) + blocks * prod(t) * byte_width(node.shape.element_type)
            operand_of[outside.uid] = outside
            continue
        flops += _flops_per_element(model, node) * blocks * _padded(t)
    read = 0
    bytes_read = 0
    from .analysis import shape_size

    for uid, total in reads.items():
        operand = operand_of[uid]
        net = min(shape_size(operand.shape), total)
        bytes_read += total
        read += read_time(device, blocks, net, total, 1.0)
    written = shape_size(shape) if shape.is_array else sum(shape_size(s) for s in shape.tuple_shapes)
    write = dur.from_seconds(written / device.memory_bandwidth)
    compute = compute_time(device, flops, blocks, threads)
    launch = LaunchDimensions(blocks, threads, launch_emitter)
    return RunTime(flops, bytes_read, written, read, write, compute, combine(compute, read + write), launch, True)


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


def best_tiled(model: "GpuPerformanceModel", fusion: "Node") -> tuple["RunTime", tuple[int, ...], int]:
    """TryFindBestTilingForFusion, restricted (see the module doc): the fastest tile that keeps
    the minor dimension whole and takes a power of two of the next; (run time, tile, warps)."""
    from .model import RunTime

    shape = fusion.fused.root.shape
    if not shape.is_array or not shape.dims:
        rt = estimate_tiled(model, fusion, (), None)
        return rt, (), (rt.launch.threads_per_block // model.device.threads_per_warp if rt.launch else 1)
    dims = shape.dims
    best: RunTime | None = None
    candidates = []
    if len(dims) == 1:
        t = 1
        while t < dims[0]:
            candidates.append((t,))
            t *= 2
        candidates.append((dims[0],))
    else:
        t = 1
        while True:
            tile = tuple([1] * (len(dims) - 2) + [min(t, dims[-2]), dims[-1]])
            candidates.append(tile)
            if t >= dims[-2] or t >= 256:
                break
            t *= 2
    best_tile: tuple[int, ...] = candidates[0]
    for tile in candidates:
        rt = estimate_tiled(model, fusion, tile, None)
        if best is None or rt.exec_time < best.exec_time:
            best, best_tile = rt, tile
    warps = best.launch.threads_per_block // model.device.threads_per_warp if best.launch else 4
    return best, best_tile, warps

"""Transposes: which ones XLA:GPU emits with its shared-memory tiled transpose emitter
(GetDescriptionForTiledTransposeEmitter), and which instructions move data across the
physical layout (IsPhysicallyTransposing, TransposesMinorDimension, TransposesMostData)."""

from __future__ import annotations

from dataclasses import dataclass

from ..attributes import dimensions
from ..graph import Node, graph_cache
from ..ir import Shape
from .config import GpuConfig
from .shapes import bit_width, byte_width, elements_recursive, is_monotonic_dim0_major, transpose_is_bitcast

# ir_emission_utils.h (both eras)
MIN_DIMENSION_TO_TRANSPOSE_TILED = 16
MIN_DIMENSION_TO_TRANSPOSE_TILED2 = 8
MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED = 64 * 128
MAX_BYTES_IN_MOST_MINOR_DIMENSION = 8


@dataclass(frozen=True)
class TransposeDescription:
    """A transpose the tiled emitter handles: its (normalised) output dimensions, the
    permutation, and (2026) the element bit width and the shared memory it needs."""

    dimensions: tuple[int, ...]
    permutation: tuple[int, ...]
    bit_width: int = 0
    shmem_usage: int = 0

    def is_equivalent(self, other: "TransposeDescription", era_2026: bool = False) -> bool:
        """TransposeDescription::IsEquivalent (2026 also compares the bit width)."""
        same = self.dimensions == other.dimensions and self.permutation == other.permutation
        return same and (not era_2026 or self.bit_width == other.bit_width)


def tiled_transpose(node: Node, cfg: GpuConfig) -> TransposeDescription | None:
    """GetDescriptionForTiledTransposeEmitter: only `transpose` qualifies (never a copy, in
    either era), with a minor dimension large enough for a 32x32 shared-memory tile."""
    if node.opcode != "transpose" or not node.operands:
        return None
    shape, operand = node.shape, node.operands[0].shape
    key = (shape, operand, node.attr("dimensions"), cfg.token)
    found = _TILED.get(key, _UNASKED)
    if found is _UNASKED:
        if len(_TILED) >= _MAX_TILED:
            _TILED.clear()
        found = _TILED[key] = _tiled_transpose_2024(node, cfg) if cfg.legacy else _tiled_transpose_2026(node)
    return found


#: tiled_transpose's answers by what they depend on: the output and operand shapes (a Shape
#: keeps its hash once computed), the permutation's text and the config.  Every hero, budget
#: and kind question asks it again of the same transposes.
_TILED: dict[tuple, TransposeDescription | None] = {}
_UNASKED = object()
_MAX_TILED = 1 << 14


def _tiled_transpose_2024(node: Node, cfg: GpuConfig) -> TransposeDescription | None:
    permutation = list(dimensions(node))
    if len(permutation) < 2:
        return None
    dims = list(node.shape.dims)
    operand = node.operands[0].shape
    most_minor = operand.dims[-1]
    if cfg.mlir_emitter_level >= 3:
        if permutation[-1] == len(dims) - 1:
            second_minor = operand.dims[len(dims) - 2]
            width = byte_width(node.shape.element_type)
            if (width * dims[-1] <= MAX_BYTES_IN_MOST_MINOR_DIMENSION
                    and width * dims[-1] * min(second_minor, dims[-2]) >= MIN_DIMENSION_TO_TRANSPOSE_TILED):
                return TransposeDescription(tuple(dims), tuple(permutation))
        elif _large_enough(most_minor, dims[-1]):
            return TransposeDescription(tuple(dims), tuple(permutation))
        return None
    if permutation in ([1, 0], [0, 2, 1], [2, 1, 0]):
        if len(permutation) == 2:
            permutation = [0, 2, 1]
            dims = [1] + dims
        if _large_enough(most_minor, dims[-1]):
            return TransposeDescription(tuple(dims), tuple(permutation))
    return None


def _large_enough(operand_minor: int, output_minor: int) -> bool:
    return ((operand_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED and output_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED)
            or (operand_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED2 and output_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED2
                and operand_minor * output_minor >= MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED))


def normalize_transpose(operand: Shape, output: Shape, perm: list[int]) -> tuple[list[int], list[int]] | None:
    """The 2026 normalisation: drop size-1 dimensions, merge dimensions that stay adjacent
    and in order; returns (normalised output dims, permutation), or None when a layout is
    not the default one."""
    if not (is_monotonic_dim0_major(operand) and is_monotonic_dim0_major(output)):
        return None
    kept_in = [d for d in range(operand.rank) if operand.dims[d] != 1]
    renumber = {d: i for i, d in enumerate(kept_in)}
    out_perm = [renumber[p] for p in perm if operand.dims[p] != 1]
    groups: list[list[int]] = []
    for p in out_perm:
        if groups and groups[-1][-1] + 1 == p:
            groups[-1].append(p)
        else:
            groups.append([p])
    order = sorted(range(len(groups)), key=lambda i: groups[i][0])
    rank_of = {g: r for r, g in enumerate(order)}
    new_perm = [rank_of[i] for i in range(len(groups))]
    new_dims = []
    for g in groups:
        size = 1
        for d in g:
            size *= operand.dims[kept_in[d]]
        new_dims.append(size)
    return new_dims, new_perm


def _tiled_transpose_2026(node: Node) -> TransposeDescription | None:
    operand = node.operands[0].shape
    normalized = normalize_transpose(operand, node.shape, list(dimensions(node)))
    if normalized is None:
        return None
    dims, perm = normalized
    if len(perm) < 2 or 0 in dims:  # nothing to tile (zero-sized arrays: hand-written text only)
        return None
    bits = bit_width(node.shape.element_type)
    input_dims = [0] * len(perm)
    for out_dim, in_dim in enumerate(perm):
        input_dims[in_dim] = dims[out_dim]
    most_minor = input_dims[-1]
    if bits < 32 and bits > 0:
        packed = _packed_shmem(dims, perm, bits)
        if packed is not None:
            return TransposeDescription(tuple(dims), tuple(perm), bits, packed)
    if perm[-1] == len(perm) - 1:
        second = input_dims[-2]
        if bits * dims[-1] <= 64 and bits * dims[-1] * min(second, dims[-2]) >= 8 * 16:
            return TransposeDescription(tuple(dims), tuple(perm), bits, -(-32 * 33 * bits * dims[-1] // 8))
        return None
    if bits != 4 and _large_enough(most_minor, dims[-1]):
        return TransposeDescription(tuple(dims), tuple(perm), bits, -(-32 * 33 * bits // 8))
    return None


def _packed_shmem(dims: list[int], perm: list[int], bits: int) -> int | None:
    """The 2026 packed transpose for narrow types: canonical [T2, A, T1, B] with B == 1."""
    if len(perm) == 2 and perm == [1, 0]:
        t2, a, t1, b = dims[1], 1, dims[0], 1
    elif len(perm) == 3 and perm == [2, 1, 0]:
        t2, a, t1, b = dims[2], dims[1], dims[0], 1
    else:
        return None
    if b != 1:
        return None
    vector = 32 // bits
    shmem_dim = 32 * vector
    tile1 = min(t1, shmem_dim)
    tile_a = min(a, max(shmem_dim // tile1, 1))
    tile2 = min(t2, shmem_dim)
    if tile_a * tile1 < 10 * vector or tile2 < 10 * vector:
        return None
    if (tile_a * tile1) % vector or tile2 % vector or (t2 % tile2) % vector:
        return None
    return 32 * 4 * 32 * vector


def is_physically_transposing(node: Node) -> bool:
    """IsPhysicallyTransposing: a copy (any copy) or a transpose that is not a bitcast, or a
    fusion containing one; reading through it defeats coalescing."""
    if node.opcode == "fusion" and node.fused is not None:
        cache = graph_cache(node.fused)  # (per version of the body)
        found = cache.get("physically transposing")
        if found is None:
            found = cache["physically transposing"] = any(is_physically_transposing(n) for n in node.fused.nodes())
        if found:
            return True
    if node.opcode == "copy":
        return True
    return node.opcode == "transpose" and not transpose_is_bitcast(
        node.operands[0].shape, node.shape, dimensions(node))


def _most_minor_non_trivial(shape: Shape) -> tuple[int, int]:
    for position, dim in enumerate(shape.minor_to_major):
        if shape.dims[dim] > 1:
            return dim, position
    return -1, len(shape.minor_to_major)


def transposes_minor_dimension(node: Node) -> bool:
    """TransposesMinorDimension: a copy or transpose that changes which dimension is the most
    minor one of size > 1 (or a fusion containing one)."""
    if node.opcode == "fusion" and node.fused is not None:
        return any(transposes_minor_dimension(n) for n in node.fused.nodes())
    if node.opcode == "copy":
        return _most_minor_non_trivial(node.operands[0].shape)[0] != _most_minor_non_trivial(node.shape)[0]
    if node.opcode == "transpose":
        operand = node.operands[0].shape
        position = {d: i for i, d in enumerate(operand.minor_to_major)}
        first_non_trivial = _most_minor_non_trivial(operand)[1]
        dims = dimensions(node)
        for out_dim in node.shape.minor_to_major:
            if node.shape.dims[out_dim] == 1:
                continue
            return position[dims[out_dim]] > first_non_trivial
        return False
    return False


#: TransposesMostData: share of a fusion's output that physically transposing ops must reach.
TRANSPOSES_MOST_DATA = 0.5


def transposes_most_data(fusion: Node) -> tuple[bool, float]:
    """FusionMerger's TransposesMostData: summed over the fused instructions in list order,
    the elements of each physically transposing one relative to the fusion's output; true as
    soon as the share reaches one half.  Returns (answer, share so far)."""
    share = 0.0
    out = elements_recursive(fusion.shape) or 1
    for node in fusion.fused.nodes():
        if is_physically_transposing(node):
            share += elements_recursive(node.shape) / out
            if share >= TRANSPOSES_MOST_DATA:
                return True, share
    return False, share

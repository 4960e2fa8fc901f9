"""Reductions the GPU emits with its fast "unnested" reduction emitter (reduction_utils.cc):
which reduces qualify (contiguous in the physical layout and large enough), their normalised
row/column form, and whether they can be followed by an epilogue (race freedom).

Every other reduce is "elemental": the loop emitter computes it like an elementwise op.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from ..attributes import dimensions
from ..graph import Node
from ..ir import Shape
from .config import GpuConfig
from .shapes import elements

#: BatchedReductionRaceFreeBound(): at most 8 batched rows keep a row reduction race free.
BATCHED_RACE_FREE_BOUND = 8
#: Column reduction tile height (GetReductionTiling: {1, 128, 1}).
COLUMN_TILE = 128
#: Row reduction tile width (GetReductionTiling: {.., 1, 16}).
ROW_TILE = 16


@dataclass(frozen=True)
class ReductionDimensions:
    """GetReductionKindAndContiguousComponents: a row reduction [batch, kept, reduced] or a
    column reduction [kept major, reduced, kept minor]."""

    is_row: bool
    dims: tuple[int, int, int]

    def __str__(self) -> str:
        return f"{'row' if self.is_row else 'column'} reduction [{','.join(map(str, self.dims))}]"


def are_dimensions_consecutive(shape: Shape, dims: Sequence[int]) -> bool:
    """LayoutUtil::AreDimensionsConsecutive: the dimensions sit next to each other in the
    physical (minor-to-major) order."""
    m2m = list(shape.minor_to_major)
    positions = sorted(m2m.index(d) for d in dims)
    return all(b - a == 1 for a, b in zip(positions, positions[1:]))


def _partition(shape: Shape, middle: Sequence[int]) -> list[int]:
    """PartitionShapeByMiddleDimensions: [major, middle, minor] element products."""
    values = [1, 1, 1]
    segment = 2  # minor
    middle = set(middle)
    for dim in shape.minor_to_major:
        if segment != 0:
            if segment == 2 and dim in middle:
                segment = 1
            elif segment == 1 and dim not in middle:
                segment = 0
        values[segment] *= shape.dims[dim]
    return values


def _kept_and_reduced(reduce: Node) -> tuple[list[int], tuple[int, ...]]:
    reduced = dimensions(reduce)
    rank = reduce.operands[0].shape.rank
    return [d for d in range(rank) if d not in reduced], reduced


def reduction_dimensions(reduce: Node) -> ReductionDimensions:
    """GetReductionKindAndContiguousComponents (judged on operand 0's physical layout)."""
    return _reduction_dimensions(reduce.operands[0].shape, reduce.attr("dimensions"))


#: Both caches below are keyed by the shape itself: a Shape keeps its hash once computed.
@lru_cache(maxsize=1 << 14)
def _reduction_dimensions(shape: Shape, dims_text: str | None) -> ReductionDimensions:
    from ..attributes import int_list

    reduced = int_list(dims_text)
    kept = [d for d in range(shape.rank) if d not in reduced]
    found = _components(shape, kept, reduced)
    if 0 in found.dims:
        # A reduction of no elements: XLA's ZeroSizedHloElimination replaces it by a constant
        # before fusion, so only hand-written text has one; it is priced as one element.
        found = ReductionDimensions(found.is_row, tuple(max(d, 1) for d in found.dims))
    return found


def _components(shape: Shape, kept: list[int], reduced: Sequence[int]) -> ReductionDimensions:
    if not kept:
        return ReductionDimensions(True, (1, 1, elements(shape)))
    if are_dimensions_consecutive(shape, kept):
        major, middle, minor = _partition(shape, kept)
        if middle == 1:
            return ReductionDimensions(True, (1, 1, major * minor))
        if minor == 1:
            return ReductionDimensions(False, (1, major, middle))
        return ReductionDimensions(True, (major, middle, minor))
    major, middle, minor = _partition(shape, reduced)
    if minor == 1:
        return ReductionDimensions(True, (1, major, middle))
    return ReductionDimensions(False, (major, middle, minor))


def unnested_faster_than_elemental(dims: ReductionDimensions, warp: int = 32) -> bool:
    """IsUnnestedReductionFasterThanElemental: rows need a reduced size of at least a warp (or
    a divisor of it); columns follow XLA's swept thresholds."""
    if dims.is_row:
        d2 = dims.dims[2]
        return d2 >= warp or (d2 > 0 and warp % d2 == 0)
    major, minor = dims.dims[1], dims.dims[2]
    prefer_elemental = (major < warp or (major < 2 * warp and minor < warp)
                        or (major < 4 * warp and minor < 8) or (major < 8 * warp and minor < 3))
    return not prefer_elemental


def is_contiguous_reduction(node: Node, cfg: GpuConfig) -> bool:
    """IsReductionFromOrToContiguousDimensions: a reduce whose kept or reduced dimensions are
    consecutive in memory and that the unnested emitter handles faster than the loop emitter."""
    if node.opcode != "reduce" or not node.operands:
        return False
    return _is_contiguous(node.operands[0].shape, node.attr("dimensions"), cfg.warp_size)


@lru_cache(maxsize=1 << 14)
def _is_contiguous(shape: Shape, dims_text: str | None, warp: int) -> bool:
    from ..attributes import int_list

    reduced = int_list(dims_text)
    kept = [d for d in range(shape.rank) if d not in reduced]
    if not (are_dimensions_consecutive(shape, kept) or are_dimensions_consecutive(shape, reduced)):
        return False
    return unnested_faster_than_elemental(_components(shape, kept, reduced), warp)


def race_free_bound(dims: ReductionDimensions, cfg: GpuConfig) -> int:
    """ReductionDimensionRaceFreeBound: 16 x MinThreadsXRowReduction for rows, 32 x 128 for columns."""
    if dims.is_row:
        return cfg.row_reduction_min_threads * ROW_TILE
    return cfg.warp_size * COLUMN_TILE


def is_race_free(dims: ReductionDimensions, cfg: GpuConfig) -> bool:
    """ReductionIsRaceFree: one block computes each output, so an epilogue may follow."""
    if dims.is_row:
        return dims.dims[2] <= race_free_bound(dims, cfg) and dims.dims[0] <= BATCHED_RACE_FREE_BOUND
    return dims.dims[1] <= race_free_bound(dims, cfg)


def is_real_reduction_hero(root: Node, hero: Node, cfg: GpuConfig) -> bool:
    """IsRealReductionHero: a contiguous reduction that is the root itself, or race free."""
    if not is_contiguous_reduction(hero, cfg):
        return False
    return root is hero or is_race_free(reduction_dimensions(hero), cfg)


def reductions_mof_compatible(a: Node, b: Node) -> bool:
    """AreReductionsMultiOutputFusionCompatible: the same row/column form and sizes."""
    return reduction_dimensions(a) == reduction_dimensions(b)

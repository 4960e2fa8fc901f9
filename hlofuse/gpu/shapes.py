"""Layout facts XLA's GPU predicates ask about shapes (xla/shape_util.cc): whether a
transpose or reshape only reinterprets memory (a bitcast), how many buffers a shape has, and
how many bytes it occupies.  Shapes printed without a layout have XLA's default one
(`ir.Shape.minor_to_major`)."""

from __future__ import annotations

import re
from math import prod
from typing import Sequence

from ..ir import ELEMENT_BITS, Layout, Shape


def byte_width(element_type: str) -> int:
    """Bytes per element as XLA counts them (ByteSizeOfPrimitiveType): pred is 1 byte,
    sub-byte types round up to a byte."""
    return (ELEMENT_BITS.get(element_type, 0) + 7) // 8


def bit_width(element_type: str) -> int:
    """primitive_util::BitWidth (pred counts 8 bits)."""
    return ELEMENT_BITS.get(element_type, 0)


def elements(shape: Shape) -> int:
    """ShapeUtil::ElementsIn: elements of an array (a tuple is the empty product, 1)."""
    if shape.is_tuple:
        return 1
    return prod(max(d, 0) for d in shape.dims)


def elements_recursive(shape: Shape) -> int:
    """ShapeUtil::ElementsInRecursive: elements of every array leaf."""
    if shape.is_tuple:
        return sum(elements_recursive(s) for s in shape.tuple_shapes)
    if not shape.is_array:
        return 0
    return prod(max(d, 0) for d in shape.dims)


def byte_size(shape: Shape, pointer_size: int = 8) -> int:
    """ShapeUtil::ByteSizeOf: an array's element bytes; a tuple's index table only
    (`pointer_size` per element, not its leaves); a token 0."""
    if shape.is_tuple:
        return pointer_size * len(shape.tuple_shapes)
    if shape.element_type == "token":
        return 0
    if shape.element_type == "opaque":
        return pointer_size
    return elements(shape) * byte_width(shape.element_type)


def byte_size_of_elements(shape: Shape) -> int:
    """ShapeUtil::ByteSizeOfElements of an array (0 for tuples)."""
    if not shape.is_array:
        return 0
    return elements(shape) * byte_width(shape.element_type)


def subshape_count(shape: Shape) -> int:
    """ShapeUtil::SubshapeCount: every subshape, tuple nodes included (an array 1, `(a, b)` 3)."""
    if shape.is_tuple:
        return 1 + sum(subshape_count(s) for s in shape.tuple_shapes)
    return 1


def equal_ignoring_element_type(a: Shape, b: Shape) -> bool:
    """ShapeUtil::EqualIgnoringElementType: same dimensions and the same layout."""
    if a.is_tuple or b.is_tuple:
        return (a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes)
                and all(equal_ignoring_element_type(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes)))
    if a.is_array != b.is_array:
        return False
    return a.dims == b.dims and (a.rank == 0 or a.minor_to_major == b.minor_to_major)


def equal(a: Shape, b: Shape) -> bool:
    """Shape equality as XLA's `operator==` (element type, dimensions and layout)."""
    if a.is_tuple or b.is_tuple:
        return (a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes)
                and all(equal(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes)))
    return a.element_type == b.element_type and equal_ignoring_element_type(a, b)


def is_monotonic_dim0_major(shape: Shape) -> bool:
    """LayoutUtil::IsMonotonicWithDim0Major: the layout is {n-1, ..., 0}."""
    return tuple(shape.minor_to_major) == tuple(range(shape.rank - 1, -1, -1))


#: The memory-space field of a printed layout, `S(n)` (after ':' in `{0:S(5)}`).
_MEMORY_SPACE_RE = re.compile(r"(?<![A-Za-z])S\((\d+)\)")


def memory_space(shape: Shape) -> int:
    """LayoutUtil::MemorySpace: the `S(n)` of an array's layout; 0 (Layout::kDefaultMemorySpace)
    when the layout names none, and for tuples, which have no layout of their own."""
    if shape.is_tuple or shape.layout is None:
        return 0
    found = _MEMORY_SPACE_RE.search(shape.layout.extra)
    return int(found.group(1)) if found else 0


def all_in_default_memory_space(shape: Shape) -> bool:
    """Every subshape (the tuple itself and each leaf, recursively) lives in memory space 0."""
    if shape.is_tuple:
        return all(all_in_default_memory_space(s) for s in shape.tuple_shapes)
    return memory_space(shape) == 0


def descending_layout_same_physical(shape: Shape) -> Shape:
    """ShapeUtil::MakeShapeWithDescendingLayoutAndSamePhysicalLayout: the array with its
    dimensions listed major to minor and the default layout, so its bytes are unchanged (a
    bitcast of `shape`); tiles and other layout fields are kept."""
    order = tuple(reversed(shape.minor_to_major))
    extra = shape.layout.extra if shape.layout is not None else ""
    return Shape(shape.element_type, tuple(shape.dims[d] for d in order),
                 Layout(tuple(range(shape.rank - 1, -1, -1)), extra),
                 dynamic=tuple(shape.dynamic[d] for d in order) if shape.dynamic else ())


def _compose(p1: Sequence[int], p2: Sequence[int]) -> list[int]:
    """ComposePermutations(p1, p2)[i] = p1[p2[i]]."""
    return [p1[i] for i in p2]


def _inverse(p: Sequence[int]) -> list[int]:
    out = [0] * len(p)
    for i, v in enumerate(p):
        out[v] = i
    return out


def transpose_is_bitcast(input_shape: Shape, output_shape: Shape, dimensions: Sequence[int],
                         ignore_element_type: bool = False) -> bool:
    """ShapeUtil::TransposeIsBitcast: the transpose keeps every element where it is in memory."""
    if not ignore_element_type and input_shape.element_type != output_shape.element_type:
        return False
    if len(dimensions) != output_shape.rank or input_shape.rank != output_shape.rank:
        return False
    return _compose(list(dimensions), list(output_shape.minor_to_major)) == list(input_shape.minor_to_major)


def _linear_index(dims: Sequence[int], minor_to_major: Sequence[int], index: Sequence[int]) -> int:
    linear, scale = 0, 1
    for d in minor_to_major:
        linear += index[d] * scale
        scale *= dims[d]
    return linear


def _multi_index(dims: Sequence[int], linear: int) -> list[int]:
    """LinearIndexToMultidimensionalIndex under the dim-0-major layout."""
    out = [0] * len(dims)
    for d in range(len(dims) - 1, -1, -1):
        size = dims[d]
        if size:
            out[d] = linear % size
            linear //= size
    return out


def reshape_is_bitcast(input_shape: Shape, output_shape: Shape, ignore_element_type: bool = False) -> bool:
    """ShapeUtil::ReshapeIsBitcast: the reshape keeps the physical position of every unit index
    of the input and of the output (XLA's proof-by-unit-indices check)."""
    if not ignore_element_type and input_shape.element_type != output_shape.element_type:
        return False
    if elements(input_shape) != elements(output_shape):
        return False
    if elements(input_shape) == 0:
        return True

    def unit_indices_keep_position(a: Shape, b: Shape) -> bool:
        a_dims, b_dims = list(a.dims), list(b.dims)
        a_default = list(range(a.rank - 1, -1, -1))
        for dim in range(a.rank):
            if a_dims[dim] <= 1:
                continue
            unit = [0] * a.rank
            unit[dim] = 1
            logical = _linear_index(a_dims, a_default, unit)
            other = _multi_index(b_dims, logical)
            if _linear_index(a_dims, a.minor_to_major, unit) != _linear_index(b_dims, b.minor_to_major, other):
                return False
        return True

    return unit_indices_keep_position(input_shape, output_shape) and \
        unit_indices_keep_position(output_shape, input_shape)


def deduce_transpose_dimensions_for_bitcast(input_shape: Shape, output_shape: Shape) -> list[int] | None:
    """ShapeUtil::DeduceTransposeDimensionsForBitcast: the permutation under which a transpose
    from `input_shape` to `output_shape` is a bitcast, if one exists."""
    if input_shape.rank != output_shape.rank:
        return None
    perm = _compose(list(input_shape.minor_to_major), _inverse(list(output_shape.minor_to_major)))
    if [input_shape.dims[p] for p in perm] != list(output_shape.dims):
        return None
    return perm


def is_reshape_or_transpose_bitcast(a: Shape, b: Shape, ignore_element_type: bool = False) -> bool:
    """ShapeUtil::IsReshapeOrTransposeBitcast."""
    if a.is_tuple or b.is_tuple:
        return False
    if not ignore_element_type and a.element_type != b.element_type:
        return False
    if equal_ignoring_element_type(a, b):
        return True
    if reshape_is_bitcast(a, b, ignore_element_type=True):
        return True
    dims = deduce_transpose_dimensions_for_bitcast(a, b)
    if dims is not None:
        return transpose_is_bitcast(b, a, dims, ignore_element_type=True)
    return False

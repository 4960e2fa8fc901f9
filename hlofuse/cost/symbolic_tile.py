"""Which instruction of a generic Triton fusion SymbolicTileAnalysis cannot give a symbolic tile
(SymbolicTileAnalysis::AnalyzeFusionImpl and SymbolicTile::FromIndexingMap,
xla/codegen/tiling/symbolic_tile_analysis.cc and size_and_stride_expression.cc, at XLA
5a9e73cb).

XLA composes, from the fusion's root to every instruction (and every operand of the fusion),
the indexing map from the root's output index to the instruction's index: dimensions d_i of
the root, and a range variable s_j for each dimension a reduce collapses; the map is simplified
against the variables' bounds (a dimension of size 1 is replaced by 0).  For each result
expression, minus its value at the origin, FromIndexingMap must find a size and a stride
(ExtractSizeAndStride):
  * a dimension, a range variable starting at 0, a constant, a constant multiple of these;
  * `x mod c` where x is a dimension or `dimension / c'`; `x / c` (floordiv) where x is a
    dimension — never of a range variable (its size would not be one of the tile sizes);
  * a sum of these whose summands have constant or dimension sizes and whose strides grow
    exactly by the summands' sizes (CombineStrides; a dimension starting above 0 fails).
Otherwise the fusion is refused: "Failed to compute symbolic tile for <map> for HLO <instr>".

Where this bites: a bitcast or reshape that merges a reduced dimension out of several (a
LayerNorm's f32[4,32,64] read as f32[128,64] by a reduce over the 128) gives the producer's
instructions `(s0 / 32, s0 mod 32, d0)`; the same split on a kept dimension, `(d0 / 32, d0
mod 32, s0)`, and a reshape that splits the reduced dimension instead, `(s0 * 32 + s1, d0)`,
are tiled.

Instructions are checked in the order XLA creates them (from the root; each instruction taken
creates its operands in order, and the last created is taken next): the first that fails is
named.  Not modelled (expected effect: none on the dumps measured but the one noted): XLA's
simplifier beyond the floordiv/mod rules below (XLA leaves vit_patch_embed's class token at
(s0 / 64, s0 / 64, s0) where this reduces it to (0, 0, s0)), maps with constraints (a
concatenate along an index that is not one dimension is not followed), runtime variables.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import TYPE_CHECKING

from .. import attributes
from ..gpu.properties import is_elementwise

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Node


# ------------------------------------------------------------------------------------------
# Affine expressions: a constant plus constant multiples of atoms
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Var:
    """A dimension of the root (`kind` "d") or a range variable of a reduce (`kind` "s")."""

    kind: str
    index: int


@dataclass(frozen=True, slots=True)
class Div:
    """`expr floordiv divisor`."""

    expr: "Expr"
    divisor: int


@dataclass(frozen=True, slots=True)
class Mod:
    """`expr mod modulus`."""

    expr: "Expr"
    modulus: int


@dataclass(frozen=True, slots=True)
class Expr:
    """`constant + sum(coefficient * atom)`; terms sorted as XLA prints them."""

    constant: int = 0
    terms: tuple = ()

    @property
    def single(self):
        """The atom when the expression is exactly one atom, else None."""
        if self.constant == 0 and len(self.terms) == 1 and self.terms[0][1] == 1:
            return self.terms[0][0]
        return None


def _order(atom) -> tuple:
    if isinstance(atom, Var):
        return (0 if atom.kind == "d" else 1, atom.index, "")
    return (2, 0, repr(atom))


def _make(constant: int, terms: dict) -> Expr:
    kept = tuple(sorted(((a, c) for a, c in terms.items() if c), key=lambda t: _order(t[0])))
    return Expr(constant, kept)


def variable(kind: str, index: int) -> Expr:
    return Expr(0, ((Var(kind, index), 1),))


def constant(value: int) -> Expr:
    return Expr(value, ())


def add(a: Expr, b: Expr) -> Expr:
    terms = dict(a.terms)
    for atom, c in b.terms:
        terms[atom] = terms.get(atom, 0) + c
    return _make(a.constant + b.constant, terms)


def scale(a: Expr, factor: int) -> Expr:
    return _make(a.constant * factor, {atom: c * factor for atom, c in a.terms})


class Domain:
    """The bounds of the variables of a map: dimension i in `dims[i]` (an inclusive interval:
    [0, size - 1], or a concatenate operand's part of it), range variable j in
    [0, symbols[j] - 1].  A path through a concatenate or reduce gets a domain of its own."""

    def __init__(self, dims, symbols=()):
        self.dims = tuple((0, d - 1) if isinstance(d, int) else tuple(d) for d in dims)
        self.symbols: list[int] = list(symbols)

    def with_symbol(self, size: int) -> tuple["Domain", Expr]:
        """This domain and a new range variable of `size` values."""
        domain = Domain(self.dims, self.symbols + [size])
        return domain, variable("s", len(self.symbols))

    def restricted(self, dim: int, lo: int, hi: int) -> "Domain":
        dims = list(self.dims)
        dims[dim] = (max(lo, dims[dim][0]), min(hi, dims[dim][1]))
        return Domain(dims, self.symbols)

    def key(self) -> tuple:
        return self.dims, tuple(self.symbols)

    def bounds(self, var: Var) -> tuple[int, int]:
        if var.kind == "d":
            return self.dims[var.index]
        return 0, self.symbols[var.index] - 1

    def range_of(self, e: Expr) -> tuple[int, int]:
        lo = hi = e.constant
        for atom, c in e.terms:
            a_lo, a_hi = self._atom_range(atom)
            lo += min(c * a_lo, c * a_hi)
            hi += max(c * a_lo, c * a_hi)
        return lo, hi

    def _atom_range(self, atom) -> tuple[int, int]:
        if isinstance(atom, Var):
            return self.bounds(atom)
        lo, hi = self.range_of(atom.expr)
        if isinstance(atom, Div):
            return lo // atom.divisor, hi // atom.divisor
        if lo >= 0 and hi < atom.modulus:
            return lo, hi
        return 0, atom.modulus - 1

    # -- simplification (IndexingMap::Simplify's floordiv and mod rules) --------------------

    def floordiv(self, e: Expr, k: int) -> Expr:
        if k == 1:
            return e
        inner = e.single
        if isinstance(inner, Div):
            return self.floordiv(inner.expr, inner.divisor * k)
        whole = {a: c // k for a, c in e.terms if c % k == 0}
        rest = _make(e.constant, {a: c for a, c in e.terms if c % k})
        lo, hi = self.range_of(rest)
        if lo // k == hi // k:
            return add(_make(lo // k, whole), constant(0))
        split = self._split(rest, k)
        if split is not None:
            big, g = split
            return add(_make(0, whole), self.floordiv(scale_down(big, g), k // g))
        return add(_make(0, whole), _make(0, {Div(rest, k): 1}))

    def mod(self, e: Expr, k: int) -> Expr:
        if k == 1:
            return constant(0)
        terms = {a: c for a, c in e.terms if c % k}
        for shift in (e.constant, e.constant % k):
            rest = _make(shift, terms)
            lo, hi = self.range_of(rest)
            if lo >= 0 and hi < k:
                return rest
        inner = rest.single
        if isinstance(inner, Mod) and inner.modulus % k == 0:
            return self.mod(inner.expr, k)
        split = self._split(rest, k)
        if split is not None:
            big, g = split
            small = add(rest, scale(big, -1))
            return add(scale(self.mod(scale_down(big, g), k // g), g), small)
        return _make(0, {Mod(rest, k): 1})

    def _split(self, e: Expr, k: int):
        """`e` as big + small with every coefficient of big a multiple of some g > 1 dividing
        k and small within [0, g - 1]; (big, g), or None."""
        terms = sorted(e.terms, key=lambda t: -abs(t[1]))
        for n in range(1, len(terms) + 1):
            big = terms[:n]
            g = k
            for _, c in big:
                g = gcd(g, c)
            if g <= 1:
                continue
            small = _make(e.constant, dict(terms[n:]))
            lo, hi = self.range_of(small)
            if lo >= 0 and hi < g:
                return _make(0, dict(big)), g
        return None


def scale_down(e: Expr, g: int) -> Expr:
    return _make(e.constant // g, {a: c // g for a, c in e.terms})


# ------------------------------------------------------------------------------------------
# Printing, in XLA's notation (IndexingMap::ToString)
# ------------------------------------------------------------------------------------------


def _atom_text(atom, names) -> str:
    if isinstance(atom, Var):
        return names[atom]
    inner = expression_text(atom.expr, names)
    if atom.expr.terms and (atom.expr.single is None or not isinstance(atom.expr.single, Var)):
        inner = f"({inner})"
    return f"{inner} / {atom.divisor}" if isinstance(atom, Div) else f"{inner} mod {atom.modulus}"


def expression_text(e: Expr, names) -> str:
    parts: list[str] = []
    for atom, c in e.terms:
        text = _atom_text(atom, names)
        if not isinstance(atom, Var) and c != 1:
            text = f"({text})"
        body = text if abs(c) == 1 else f"{text} * {abs(c)}"
        parts.append(body if not parts and c > 0 else (f"-{body}" if not parts else
                                                        (f"+ {body}" if c > 0 else f"- {body}")))
    if e.constant or not parts:
        if not parts:
            parts.append(str(e.constant))
        else:
            parts.append(f"+ {e.constant}" if e.constant > 0 else f"- {-e.constant}")
    return " ".join(parts)


def _used_symbols(exprs) -> list[int]:
    found: set[int] = set()

    def walk(e: Expr):
        for atom, _ in e.terms:
            if isinstance(atom, Var):
                if atom.kind == "s":
                    found.add(atom.index)
            else:
                walk(atom.expr)

    for e in exprs:
        walk(e)
    return sorted(found)


def map_text(exprs: tuple[Expr, ...], domain: Domain) -> str:
    """The indexing map as XLA prints it, its unused range variables removed and the others
    renumbered (RemoveUnusedSymbols)."""
    symbols = _used_symbols(exprs)
    names = {Var("d", i): f"d{i}" for i in range(len(domain.dims))}
    names.update({Var("s", j): f"s{n}" for n, j in enumerate(symbols)})
    dims = ", ".join(f"d{i}" for i in range(len(domain.dims)))
    head = f"({dims})" + (f"[{', '.join(f's{n}' for n in range(len(symbols)))}]" if symbols else "")
    body = ", ".join(expression_text(e, names) for e in exprs)
    bounds = [f"d{i} in [{lo}, {hi}]" for i, (lo, hi) in enumerate(domain.dims)]
    bounds += [f"s{n} in [0, {domain.symbols[j] - 1}]" for n, j in enumerate(symbols)]
    return f"{head} -> ({body}), domain: {', '.join(bounds)}"


# ------------------------------------------------------------------------------------------
# SymbolicTile::FromIndexingMap: can a size and stride be extracted?
# ------------------------------------------------------------------------------------------


def _at_origin(e: Expr) -> int:
    """The expression with every variable 0 (its offset)."""
    total = e.constant
    for atom, c in e.terms:
        total += c * _atom_at_origin(atom)
    return total


def _atom_at_origin(atom) -> int:
    if isinstance(atom, Var):
        return 0
    inner = _at_origin(atom.expr)
    return inner // atom.divisor if isinstance(atom, Div) else inner % atom.modulus


def _is_dim(e: Expr) -> bool:
    atom = e.single
    return isinstance(atom, Var) and atom.kind == "d"


def _summand(atom, coefficient: int, domain: Domain):
    """ExtractSizeAndStride of `coefficient * atom`: (size, stride) where size is ("const", n),
    ("dim", i) or ("expr",); None when no size and stride can be extracted."""
    if isinstance(atom, Var):
        size = ("dim", atom.index) if atom.kind == "d" else ("const", domain.symbols[atom.index])
        return size, coefficient
    if isinstance(atom, Mod):
        inner = atom.expr.single
        if _is_dim(atom.expr) or (isinstance(inner, Div) and _is_dim(inner.expr)):
            return ("expr",), coefficient
        return None
    if _is_dim(atom.expr):  # floordiv
        return ("expr",), coefficient
    return None


def _range_size(size, domain: Domain) -> int | None:
    """TryGetSizeExpressionRangeSize: a dimension's number of values, None when its interval
    does not start at 0 (a concatenate's later operand)."""
    if size[0] == "const":
        return size[1]
    if size[0] == "dim":
        lo, hi = domain.dims[size[1]]
        return hi + 1 if lo == 0 else None
    return None


def size_and_stride(e: Expr, domain: Domain) -> bool:
    """Whether ExtractSizeAndStride succeeds on `e` minus its offset (CombineStrides for sums:
    sizes constant or a dimension, strides growing exactly by the sizes)."""
    strided = _make(e.constant - _at_origin(e), dict(e.terms))
    summands = [(atom, c) for atom, c in strided.terms]
    if strided.constant:
        summands.append((None, 0))
    if not summands:
        return True
    parts = []
    for atom, c in summands:
        if atom is None:
            parts.append((("const", 1), 0))
            continue
        part = _summand(atom, c, domain)
        if part is None:
            return False
        parts.append(part)
    if len(parts) == 1:
        return True
    if any(_range_size(size, domain) is None for size, _ in parts):
        return False
    parts.sort(key=lambda p: -abs(p[1]))
    for (size, stride), (_, previous) in zip(parts[1:], parts):
        n = _range_size(size, domain)
        if n is None or n * abs(stride) != abs(previous):
            return False
    return True


# ------------------------------------------------------------------------------------------
# Indexing maps from the root (ComputeOutputToInputIndexing, composed)
# ------------------------------------------------------------------------------------------


def _linear(shape, index: tuple[Expr, ...]) -> Expr:
    """The physical (layout order) linear index of a logical index."""
    total = constant(0)
    stride = 1
    for d in shape.minor_to_major:
        total = add(total, scale(index[d], stride))
        stride *= shape.dims[d]
    return total


def _delinear(shape, linear: Expr, domain: Domain) -> tuple[Expr, ...]:
    out: list[Expr] = [constant(0)] * shape.rank
    stride = 1
    order = list(shape.minor_to_major)
    for position, d in enumerate(order):
        value = domain.floordiv(linear, stride)
        if position < len(order) - 1:
            value = domain.mod(value, shape.dims[d])
        out[d] = value
        stride *= shape.dims[d]
    return tuple(out)


def _reshaped(node: "Node", index: tuple[Expr, ...], domain: Domain):
    operand = node.operands[0].shape
    if not operand.is_array or _elements(operand) != _elements(node.shape):
        return None
    if node.opcode == "reshape":
        return _delinear(_row_major(operand), _linear(_row_major(node.shape), index), domain)
    return _delinear(operand, _linear(node.shape, index), domain)


def _elements(shape) -> int:
    n = 1
    for d in shape.dims:
        n *= d
    return n


class _RowMajor:
    __slots__ = ("dims", "minor_to_major", "rank")

    def __init__(self, dims):
        self.dims = tuple(dims)
        self.rank = len(self.dims)
        self.minor_to_major = tuple(range(self.rank - 1, -1, -1))


def _row_major(shape):
    return _RowMajor(shape.dims)


def _operand_maps(node: "Node", index: tuple[Expr, ...], domain: Domain):
    """(operand, its index, the index's domain) for each operand XLA propagates the map to."""
    op = node.opcode
    if op == "broadcast":
        mapping = attributes.dimensions(node)
        return [(node.operands[0], tuple(index[m] for m in mapping), domain)]
    if op == "reduce":
        half = len(node.operands) // 2
        reduced = set(attributes.dimensions(node))
        symbols: dict[int, Expr] = {}
        exprs = []
        kept = iter(index)
        for d, size in enumerate(node.operands[0].shape.dims):
            if d in reduced:
                if size == 1:
                    symbols[d] = constant(0)
                else:
                    domain, symbols[d] = domain.with_symbol(size)
                exprs.append(symbols[d])
            else:
                exprs.append(next(kept, constant(0)))
        return [(operand, tuple(exprs) if i < half else (), domain) for i, operand in enumerate(node.operands)]
    if op == "transpose":
        perm = attributes.dimensions(node)
        exprs = [constant(0)] * len(perm)
        for j, p in enumerate(perm):
            exprs[p] = index[j]
        return [(node.operands[0], tuple(exprs), domain)]
    if op in ("bitcast", "reshape"):
        exprs = _reshaped(node, index, domain)
        return [] if exprs is None else [(node.operands[0], exprs, domain)]
    if op == "slice":
        ranges = attributes.slice_dims(node)
        return [(node.operands[0], tuple(add(scale(e, r.stride), constant(r.start))
                                         for e, r in zip(index, ranges)), domain)]
    if op == "concatenate":
        return _concatenate_maps(node, index, domain)
    if is_elementwise(node):
        return [(operand, index if operand.shape.rank == len(index) else
                 tuple(constant(0) for _ in operand.shape.dims), domain) for operand in node.operands]
    return []  # iota, constant, parameter


def _concatenate_maps(node: "Node", index: tuple[Expr, ...], domain: Domain):
    """Each operand of a concatenate is read on its part of the dimension: the dimension's
    interval is restricted to the part (a single point is replaced by its value) and shifted
    by the part's offset.  Where the concatenated index is not one dimension the maps would
    carry constraints; they are not followed here."""
    dim = (attributes.dimensions(node) or (0,))[0]
    along = index[dim]
    var = along.single
    out = []
    offset = 0
    for operand in node.operands:
        size = operand.shape.dims[dim]
        exprs = list(index)
        if isinstance(var, Var) and var.kind == "d":
            part = domain.restricted(var.index, offset, offset + size - 1)
            lo, hi = part.dims[var.index]
            if lo <= hi:
                exprs[dim] = constant(lo - offset) if lo == hi else add(along, constant(-offset))
                out.append((operand, tuple(exprs), part))
        elif not along.terms:
            if offset <= along.constant < offset + size:
                exprs[dim] = constant(along.constant - offset)
                out.append((operand, tuple(exprs), domain))
        offset += size
    return out


@dataclass(frozen=True, slots=True)
class TileFailure:
    """The first instruction whose indexing map has no symbolic tile."""

    node: "Node"
    map: str

    @property
    def reason(self) -> str:
        return f"Failed to compute symbolic tile for {self.map} for HLO %{self.node.name}"


def first_failure(fusion: "Node") -> TileFailure | None:
    """The instruction of `fusion` (or operand of it) SymbolicTileAnalysis cannot tile, in the
    order XLA derives them; None when every map has a symbolic tile."""
    root = fusion.fused.root
    if not root.shape.is_array:
        return None
    domain = Domain(root.shape.dims)
    # SimplifyPointDimensions::kReplace: a dimension of size 1 is the constant 0
    start = tuple(constant(0) if size == 1 else variable("d", i) for i, size in enumerate(root.shape.dims))
    failure = _failure(fusion, root, start, domain)
    if failure is not None:
        return failure
    # AnalyzeFusionImpl's worklist: each instruction popped creates (and derives the tiles of)
    # its operands in order, then the last one created is taken next
    seen = {(root.uid, start, domain.key())}
    stack = [(root, start, domain)]
    while stack:
        node, index, domain = stack.pop()
        if node.opcode == "parameter":
            continue
        for operand, operand_index, operand_domain in _operand_maps(node, index, domain):
            key = (operand.uid, operand_index, operand_domain.key())
            if key in seen:
                continue
            seen.add(key)
            failure = _failure(fusion, operand, operand_index, operand_domain)
            if failure is not None:
                return failure
            stack.append((operand, operand_index, operand_domain))
    return None


def _failure(fusion: "Node", node: "Node", index: tuple[Expr, ...], domain: Domain) -> TileFailure | None:
    if all(size_and_stride(e, domain) for e in index):
        return None
    target = fusion.operands[node.parameter_number] if node.opcode == "parameter" else node
    return TileFailure(target, map_text(index, domain))

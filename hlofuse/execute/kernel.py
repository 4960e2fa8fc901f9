"""Whole kernels from a computation: which outputs share a loop nest, and the kernel
shapes XLA's emitters have — a loop over the output elements, XLA's concatenate emitter
(threads over the operands), its reduction emitter with side outputs, an in-place
dynamic-update-slice (only the window is written) and scatter (a copy, then the updates).
The per-element code inside comes from execute/emit.py; execute/cpu.py and execute/cuda.py
wrap the loop nests for their target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import attributes as attrs
from .. import ir
from .arrays import reducer_kind
from .emit import (_BITS, LANES, Arg, EmitError, Emitter, Frame, Idx, _clamped, _start_indices, ctype,
                   linear)
from .library_nests import (blocked_dot_on_cpu, blocked_dot_supported, conv_on_cpu, conv_supported, topk_comparator,
                            topk_on_cpu, topk_supported)
from .nests import (COLUMN_SLICES, COLUMN_TILE, column_reduction, columns_on_cpu, columns_on_cuda, dot_on_cpu,
                    start_group)

# ------------------------------------------------------------------------------------------
# Whole kernels: output groups, in-place updates, scatter
# ------------------------------------------------------------------------------------------


@dataclass
class Group:
    """One loop nest of a kernel: every element of `dims` computed by `body`, which reads
    the index variables `vars` (one per logical dimension).  `order` lists the dimensions
    major to minor (the order the CPU loops nest in and CUDA threads are numbered by).
    Groups of one phase may run concurrently; a later phase waits for the earlier ones."""

    dims: tuple[int, ...]
    order: tuple[int, ...]
    vars: list[str]
    body: list[str]
    phase: int = 0
    #: threads per element: 32 when a reduction loop is split across a warp's lanes (CUDA;
    #: the CPU runs the same code as one lane)
    lanes: int = 1
    #: code that depends only on the first `hoist_depth` dimensions of `order` (a row's
    #: reduction): the CPU runs it between those loops and the inner ones, once per row; a
    #: CUDA thread runs it before `body`
    hoisted: list[str] = field(default_factory=list)
    hoist_depth: int = 0
    #: the whole loop nest as the CPU runs it instead (a column reduction), or None
    cpu_body: list[str] | None = None
    #: whether iterations are independent even where an output shares its buffer with an
    #: input: the lowering lets them share only when the input is read at the output's own
    #: index, and each element's values are all computed before its stores (an element
    #: loop, a reduction's row with its side outputs)
    independent: bool = False
    #: a CUDA block's code instead of a thread per element (a column reduction's tile:
    #: COLUMN_TILE outputs by COLUMN_SLICES slices of the reduced rows), or None
    cuda_body: list[str] | None = None
    #: a loop nest only the CPU has (execute/library_nests.py: CUDA keeps those ops library
    #: calls); CUDA refuses to render it
    cpu_only: bool = False

    @property
    def elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def rows(self) -> int:
        """Iterations of the loops outside the hoisted code (a CUDA warp each)."""
        n = 1
        for d in self.order[: self.hoist_depth]:
            n *= self.dims[d]
        return n

    @property
    def threads(self) -> int:
        """CUDA threads the group takes: a tile of COLUMN_TILE x COLUMN_SLICES per
        COLUMN_TILE outputs (a column reduction), a warp per row when it has hoisted code,
        else `lanes` per element."""
        if self.cuda_body is not None:
            return -(-self.elements // COLUMN_TILE) * COLUMN_TILE * COLUMN_SLICES
        return self.rows * self.lanes if self.hoisted else self.elements * self.lanes


@dataclass
class KernelBody:
    """A generated kernel, target-independent: arguments, loop nests, helper functions.
    `in_place` maps an output to the parameter whose buffer it must share."""

    name: str
    args: list[Arg]
    groups: list[Group]
    functions: list[str] = field(default_factory=list)
    in_place: dict[int, int] = field(default_factory=dict)
    label: str = ""
    #: Set by the caller once buffers are bound: no two arguments share memory.
    distinct_args: bool = False

    @property
    def phases(self) -> int:
        return 1 + max((g.phase for g in self.groups), default=0)


def output_leaves(comp: ir.Computation) -> list[tuple[str, int, ir.Shape]]:
    """The kernel's outputs: (instruction, leaf of its value, shape) for each, in order."""
    root = comp.root
    if root.opcode == "tuple":
        out = []
        for operand in root.operands:
            shape = comp[operand].shape
            out += [(operand, k, leaf) for k, leaf in enumerate(shape.leaves())]
        return out
    return [(root.name, k, leaf) for k, leaf in enumerate(root.shape.leaves())]


def _param_frame(em: Emitter, comp: ir.Computation) -> Frame:
    shapes = {p.parameter_number: p.shape for p in comp.parameters}

    def bind(number: int, index: list[Idx]) -> list[str]:
        shape = shapes[number]
        if shape.is_tuple:
            raise EmitError(f"kernel {em.kernel}: tuple-shaped parameter {number} is not supported")
        buffer = em.input_arg(("param", number), shape.element_type)
        return [em.let(shape.element_type, em.load(buffer, shape, index if shape.dims else []), "p")]

    return Frame(comp, bind)


def _index_vars(em: Emitter, group_id: int, dims: tuple[int, ...], prefix: str = "i") -> list[str]:
    names = []
    for d, size in enumerate(dims):
        name = f"{prefix}{group_id}_{d}"
        em.ranges[name] = (0, max(size - 1, 0))
        names.append(name)
    return names


def _start_group(em: Emitter, lanes_ok: bool = False) -> None:
    start_group(em)
    em.lanes_ok = lanes_ok


def _lanes(em: Emitter) -> int:
    return LANES if em.lanes_used else 1


def generate(module: ir.Module, comp: ir.Computation, name: str, *, in_place: bool = False,
             label: str = "") -> KernelBody:
    """The kernel computing `comp` (a fused computation, or one instruction wrapped as one).
    With `in_place`, a root dynamic-update-slice or scatter whose operand is a parameter
    writes into that parameter's buffer (the caller must make the buffers the same)."""
    em = Emitter(module, label or name)
    leaves = output_leaves(comp)
    out_args = [em.output_arg(("out", k), shape.element_type) for k, (_, _, shape) in enumerate(leaves)]
    root = comp.root
    groups: list[Group] = []
    body = KernelBody(name, em.args, groups, label=label or name)
    frame = _param_frame(em, comp)
    operand0 = comp[root.operands[0]] if root.operands else None
    can_alias = in_place and operand0 is not None and operand0.opcode == "parameter" and len(leaves) == 1
    if root.opcode == "dynamic-update-slice" and can_alias:
        body.in_place[0] = operand0.parameter_number
        groups.append(_dus_in_place(em, frame, root, out_args[0]))
        return body
    if root.opcode == "scatter":
        if len(leaves) != 1:
            raise EmitError(f"kernel {em.kernel}: variadic scatter ({root.name}) is not supported")
        if can_alias:
            body.in_place[0] = operand0.parameter_number
        else:
            groups.append(_elements(em, frame, [(root.operands[0], 0, leaves[0][2])], out_args, 0))
        groups.append(_scatter(em, frame, root, out_args[0], len(groups), body))
        return body
    if conv_supported(root, comp):
        groups.append(Group(leaves[0][2].dims, (), [], [], cpu_only=True,
                             cpu_body=conv_on_cpu(em, frame, root, leaves[0][2], out_args[0])))
        return body
    if topk_supported(root, comp):
        fn = f"{name}_before"
        body.functions.append(topk_comparator(em, root, fn, leaves[0][2].element_type))
        groups.append(Group(leaves[0][2].dims, (), [], [], cpu_only=True,
                            cpu_body=topk_on_cpu(em, frame, root, out_args, fn)))
        return body
    hero = concatenate_hero(comp)
    if hero is not None and len(leaves) == 1:
        groups.append(_by_concatenate_operand(em, frame, hero, leaves[0][2], out_args[0]))
        return body
    hero = reduction_hero(comp, leaves)
    if hero is not None:
        groups.append(_reduction_with_side_outputs(em, frame, hero, leaves, out_args))
        return body
    if comp.root.opcode == "dot" and len(leaves) == 1:
        group = _elements(em, frame, leaves, out_args, 0)  # a thread per output (CUDA keeps cuBLAS)
        if blocked_dot_supported(root, comp):
            group.cpu_body = blocked_dot_on_cpu(em, frame, root, leaves[0][2], out_args[0], name, body.functions)
        else:
            group.cpu_body = dot_on_cpu(em, frame, comp.root, leaves[0][2], out_args[0])
        groups.append(group)
        return body
    hero = column_reduction(comp, leaves)
    if hero is not None:
        group = _elements(em, frame, leaves, out_args, 0)
        group.cpu_body = columns_on_cpu(em, frame, hero, leaves[0][2], out_args[0])
        group.cuda_body = columns_on_cuda(em, frame, hero, leaves[0][2], out_args[0])
        groups.append(group)
        return body
    by_dims: dict[tuple[int, ...], list[int]] = {}
    for k, (_, _, shape) in enumerate(leaves):
        by_dims.setdefault(shape.dims, []).append(k)
    for gid, ks in enumerate(by_dims.values()):
        groups.append(_elements(em, frame, [leaves[k] for k in ks], [out_args[k] for k in ks], gid))
    return body


#: Minor dimensions unrolled inside the element loop: sizes whose rows GCC vectorizes as
#: groups of accesses (it gives up on a group of 5, 6, 7).
UNROLL_MINOR = frozenset({2, 3, 4, 8})


def _elements(em: Emitter, frame: Frame, outputs, out_args: list[str], gid: int) -> Group:
    """A loop over the elements of outputs that share their dimensions.  A short minor
    dimension (the cart-pole's 4 state values) is unrolled: one iteration computes the whole
    row, with that index a constant, so what the row's elements share is computed once and
    a concatenate or pad along it picks its operand at generation time, no branch per element
    (which would keep the loop over the other dimensions from being vectorized).  Only where
    the unrolled row has no branch left: GCC 12.2 vectorizes a group of six like guarded
    loads (a dynamic-update-slice's window, row by row) into wrong code, so a row that still
    branches keeps one element per iteration."""
    shape = outputs[0][2]
    order = tuple(reversed(shape.minor_to_major))
    if flat_elementwise(frame.comp, outputs):
        return _flat_element_loop(em, frame, outputs, out_args, gid)
    if len(shape.dims) > 1 and shape.dims[order[-1]] in UNROLL_MINOR:
        group = _element_loop(em, frame, outputs, out_args, gid, order[-1])
        if not any(line.lstrip().startswith(("if (", "} else")) for line in group.body):
            return group
    return _element_loop(em, frame, outputs, out_args, gid, None)


def flat_elementwise(comp: ir.Computation, outputs) -> bool:
    """Whether the outputs (of two or more dimensions) are computed element by element from
    arrays of their own dimensions and layout: every array the output index reaches is an
    elementwise op, a parameter or a constant of the outputs' shape, or a broadcast of a
    scalar (below which the index is not used).  Then one loop over the elements in memory
    order computes them (threefry's rounds on u32[2048,5] rows: a loop of 5 per row is one
    GCC does not vectorize; a flat loop of 10240 it does)."""
    from ..opcodes import ELEMENTWISE

    first = outputs[0][2]
    if first.rank < 2 or any(s.dims != first.dims or s.minor_to_major != first.minor_to_major
                             for _, _, s in outputs):
        return False
    seen: set[str] = set()
    todo = [name for name, _, _ in outputs]
    while todo:
        instr = comp[todo.pop()]
        if instr.name in seen:
            continue
        seen.add(instr.name)
        shape = instr.shape
        if not shape.is_array or shape.dims != first.dims or shape.minor_to_major != first.minor_to_major:
            return False
        if instr.opcode == "broadcast":
            if comp[instr.operands[0]].shape.rank != 0:
                return False
            continue
        if instr.opcode in ("parameter", "constant"):
            continue
        if instr.opcode not in ELEMENTWISE or instr.opcode == "map":
            return False
        todo += list(instr.operands)
    return True


def _flat_element_loop(em: Emitter, frame: Frame, outputs, out_args: list[str], gid: int) -> Group:
    """The outputs computed over one index running through memory order: it stands at the
    layout's most minor dimension longer than 1, the others at 0, so each array's offset is the index itself
    (flat_elementwise: every array indexed shares that layout)."""
    _start_group(em, lanes_ok=False)
    shape = outputs[0][2]
    (name,) = _index_vars(em, gid, (shape.elements,))
    index = [Idx()] * shape.rank
    minor = next((d for d in shape.minor_to_major if shape.dims[d] > 1), shape.minor_to_major[0])
    index[minor] = Idx.of(name)  # dimensions of size 1 more minor than it add nothing
    values = [em.value(frame, out, index)[leaf] for out, leaf, _ in outputs]
    for arg, value in zip(out_args, values):
        em.line(f"{arg}[{name}] = {value};")
    return Group((shape.elements,), (0,), [name], em.lines, independent=True)


def _element_loop(em: Emitter, frame: Frame, outputs, out_args: list[str], gid: int, minor: int | None) -> Group:
    _start_group(em, lanes_ok=True)
    shape = outputs[0][2]
    dims = shape.dims
    names = _index_vars(em, gid, dims)
    order = tuple(reversed(shape.minor_to_major))
    indices = []
    for c in range(dims[minor]) if minor is not None else [None]:
        index = [Idx.of(v) for v in names]
        if c is not None:
            index[minor] = Idx.of(c)
        indices.append(index)
    loop_dims = tuple(1 if d == minor else n for d, n in enumerate(dims))
    looped = [d for d in order if loop_dims[d] > 1]
    hoisted, depth = [], 0
    if len(looped) > 1:
        # a reduction whose value does not depend on the innermost loop's index (softmax's row
        # maximum broadcast along the row) is computed once per row, before that loop
        depth = order.index(looped[-1])
        outer = {names[d] for d in order[:depth]}
        requests = _reduce_requests(em, frame, outputs, indices)
        _start_group(em, lanes_ok=True)
        for rframe, name, index in requests:
            if all(v in outer for ix in index for v, _ in ix.terms):
                em.value(rframe, name, index)
        if em.lines:
            # on CUDA a warp takes a row: its lanes share the hoisted reductions (shuffles
            # leave every lane the whole), then take the row's elements in turn; the per-
            # element code below splits nothing across lanes
            em.line("HF_SYNC_LANES();")
            em.lanes_ok = em.lanes_used = False
        hoisted, em.lines = em.lines, []
    # every value first, then the stores: an output may share its buffer with an input that
    # another output (or another lane) still reads at this element
    values = [[em.value(frame, name, index)[leaf] for name, leaf, _ in outputs] for index in indices]
    if em.lanes_used:
        em.line("HF_SYNC_LANES();")
    for index, row in zip(indices, values):
        for (_, _, out_shape), arg, value in zip(outputs, out_args, row):
            em.line(f"{arg}[{linear(index, out_shape.dims, out_shape.minor_to_major).c()}] = {value};")
    return Group(loop_dims, order, names, em.lines, lanes=LANES if hoisted else _lanes(em), hoisted=hoisted,
                 hoist_depth=depth if hoisted else 0, independent=True)


def _reduce_requests(em: Emitter, frame: Frame, outputs, indices) -> list[tuple[Frame, str, list[Idx]]]:
    """The reductions (outside any other reduction's loop) the outputs' code computes, with
    the index each is read at: found by writing that code once and throwing it away."""
    requests = []
    em.reduce_requests = requests
    try:
        for index in indices:
            for name, _, _ in outputs:
                em.value(frame, name, index)
    finally:
        em.reduce_requests = None
    return requests


def reduction_hero(comp: ir.Computation, leaves) -> ir.Instruction | None:
    """A multi-output reduction fusion (XLA's reduction emitter with extra outputs): one
    output is a reduce, every other output has the shape of the reduce's input."""
    if comp.root.opcode != "tuple" or len(leaves) < 2:
        return None
    reduces = [comp[name] for name, _, _ in leaves if comp[name].opcode == "reduce"]
    names = {r.name for r in reduces}
    if len(names) != 1:
        return None
    hero = reduces[0]
    dims = comp[hero.operands[0]].shape.dims
    if all(name == hero.name or shape.dims == dims for name, _, shape in leaves):
        return hero
    return None


def _reduction_with_side_outputs(em: Emitter, frame: Frame, hero: ir.Instruction, leaves, out_args) -> Group:
    """One loop nest over the reduce's output; inside the reduction loop each input element
    is computed once and the other outputs are stored at its index (each by the lane that
    read it, when the reduction is split across lanes)."""
    _start_group(em, lanes_ok=True)
    dims = hero.shape.leaves().__next__().dims
    names = _index_vars(em, 0, dims)
    index = [Idx.of(v) for v in names]
    side = [(leaf, arg) for leaf, arg in zip(leaves, out_args) if leaf[0] != hero.name]
    mine = [(leaf, arg) for leaf, arg in zip(leaves, out_args) if leaf[0] == hero.name]

    def store(full_index: list[Idx]) -> None:
        for (name, k, shape), arg in side:
            value = em.value(frame, name, full_index)[k]
            em.line(f"{arg}[{linear(full_index, shape.dims, shape.minor_to_major).c()}] = {value};")

    em.side_outputs[(frame.uid, hero.name)] = store
    values = em.value(frame, hero.name, index)
    del em.side_outputs[(frame.uid, hero.name)]
    if em.lanes_used:
        em.line("HF_SYNC_LANES();")
    for (name, k, shape), arg in mine:
        em.line(f"{arg}[{linear(index, shape.dims, shape.minor_to_major).c()}] = {values[k]};")
    order = tuple(reversed(next(iter(hero.shape.leaves())).minor_to_major))
    return Group(dims, order, names, em.lines, lanes=_lanes(em), independent=True)


def concatenate_hero(comp: ir.Computation) -> ir.Instruction | None:
    """The concatenate a kernel's root computes elementwise from, if there is exactly one
    (XLA's concatenate fusions: the concatenate as hero, elementwise ops after it)."""
    from ..opcodes import ELEMENTWISE

    root = comp.root
    if root.shape.is_tuple:
        return None
    found: dict[str, ir.Instruction] = {}
    seen: set[str] = set()
    stack = [root]
    while stack:
        instr = stack.pop()
        if instr.name in seen:
            continue
        seen.add(instr.name)
        if instr.shape.dims != root.shape.dims:
            continue
        if instr.opcode == "concatenate":
            found[instr.name] = instr
        elif instr.opcode in ELEMENTWISE:
            stack.extend(comp[o] for o in instr.operands)
    return next(iter(found.values())) if len(found) == 1 else None


def _by_concatenate_operand(em: Emitter, frame: Frame, hero: ir.Instruction, out_shape: ir.Shape, out: str) -> Group:
    """XLA's concatenate emitter: threads run over the operands' index space and each writes
    every operand's element to its place in the output, so values the operands share at an
    index (the cart-pole's sine and cosine) are computed once, with no branch per element."""
    _start_group(em)
    comp = frame.comp
    axis = attrs.dimensions(hero)[0]
    shapes = [comp[o].shape for o in hero.operands]
    dims = tuple(max(s.dims[d] for s in shapes) for d in range(out_shape.rank))
    names = _index_vars(em, 0, dims)
    index = [Idx.of(v) for v in names]
    offset = 0
    for operand, shape in zip(hero.operands, shapes):
        size = shape.dims[axis]
        if size == 0 or any(d == 0 for d in shape.dims):
            continue
        out_index = list(index)
        out_index[axis] = index[axis] + offset
        guard = [f"{names[d]} < {shape.dims[d]}" for d in range(len(dims)) if shape.dims[d] < dims[d]]

        def piece(operand=operand, out_index=out_index):
            value = em.value(frame, operand, index)
            em.scopes[-1][(frame.uid, hero.name, tuple(i.key() for i in out_index))] = value
            result = em.value(frame, comp.root_name, out_index)[0]
            em.line(f"{out}[{linear(out_index, out_shape.dims, out_shape.minor_to_major).c()}] = {result};")

        if guard:
            with em.block(f"if ({' && '.join(guard)})"):
                piece()
        else:
            piece()
        offset += size
    return Group(dims, tuple(reversed(out_shape.minor_to_major)), names, em.lines)


def _dus_in_place(em: Emitter, frame: Frame, root: ir.Instruction, out: str) -> Group:
    """Only the updated window is written; the rest of the buffer keeps the operand."""
    _start_group(em)
    operand_shape = frame.comp[root.operands[0]].shape
    update_shape = frame.comp[root.operands[1]].shape
    names = _index_vars(em, 0, update_shape.dims, "u")
    index = [Idx.of(v) for v in names]
    starts = _start_indices(em, frame, root.operands[2:], operand_shape.rank)
    offsets = [_clamped(em, frame, s, d - u) for s, d, u in zip(starts, operand_shape.dims, update_shape.dims)]
    value = em.one(frame, root.operands[1], index)
    target = [ix + off for ix, off in zip(index, offsets)]
    em.line(f"{out}[{linear(target, operand_shape.dims, operand_shape.minor_to_major).c()}] = {value};")
    return Group(update_shape.dims, tuple(reversed(update_shape.minor_to_major)), names, em.lines)


#: scatter combiners the GPU performs as one atomic instruction (as XLA's scatter emitter does,
#: gpu/fusions/scatter_mlir.cc: an atomic read-modify-write where the hardware has one, a
#: compare-and-swap loop otherwise); under contention (many updates to one element, as in a
#: segment sum) a CAS loop retries once per competing update
_NATIVE_ATOMICS = {"add": ("f32", "f64", "s32", "u32", "s64", "u64"),
                   "maximum": ("s32", "u32", "s64", "u64"), "minimum": ("s32", "u32", "s64", "u64")}


def _scatter(em: Emitter, frame: Frame, root: ir.Instruction, out: str, phase: int, body: KernelBody) -> Group:
    """Every update element combined into its target; windows starting out of bounds are
    skipped whole (XLA's scatter).  The combine runs through HF_COMBINE_<bytes>: in order
    on the CPU, as a compare-and-swap loop on the GPU; an add (or an integer max or min)
    through HF_ATOMIC_<op>, one atomic instruction on the GPU (_NATIVE_ATOMICS)."""
    _start_group(em)
    comp = frame.comp
    operand, indices, updates = root.operands
    op_shape, idx_shape, upd_shape = comp[operand].shape, comp[indices].shape, comp[updates].shape
    uwd = attrs.ints(root, "update_window_dims")
    inserted = attrs.ints(root, "inserted_window_dims")
    to_operand = attrs.ints(root, "scatter_dims_to_operand_dims")
    ivd = attrs.integer(root, "index_vector_dim", idx_shape.rank)
    input_batching = attrs.ints(root, "input_batching_dims")
    indices_batching = attrs.ints(root, "scatter_indices_batching_dims")
    names = _index_vars(em, phase, upd_shape.dims, "s")
    index = [Idx.of(v) for v in names]
    scatter_dims = [d for d in range(upd_shape.rank) if d not in uwd]
    batch = [index[d] for d in scatter_dims]
    window_dims = [d for d in range(op_shape.rank) if d not in inserted and d not in input_batching]
    idx_batch_axes = [d for d in range(idx_shape.rank) if d != ivd]
    conditions, target = [], []
    for d in range(op_shape.rank):
        size = upd_shape.dims[uwd[window_dims.index(d)]] if d in window_dims else 1
        if d in to_operand:
            pos, it = [], iter(batch)
            for a in range(idx_shape.rank):
                pos.append(Idx.of(to_operand.index(d)) if a == ivd else next(it))
            start = em.var(f"(i64){em.one(frame, indices, pos)}", -(1 << 62), 1 << 62)
            conditions.append(f"{start} >= 0 && {start} <= {op_shape.dims[d] - size}")
            ix = Idx.of(start)
        elif d in input_batching:
            ix = batch[idx_batch_axes.index(indices_batching[input_batching.index(d)])]
        else:
            ix = Idx()
        if d in window_dims:
            ix = ix + index[uwd[window_dims.index(d)]]
        target.append(ix)
    et = root.shape.element_type
    fn = f"{body.name}_combine"
    body.functions.append(_scalar_function(em.module, root.called[0], fn, et, em.kernel))
    value = em.one(frame, updates, index)
    offset = linear(target, op_shape.dims, op_shape.minor_to_major).c()
    if et in _NATIVE_ATOMICS.get(reducer_kind(em.module[root.called[0]]), ()):
        kind = reducer_kind(em.module[root.called[0]])
        statement = f"HF_ATOMIC_{kind.upper()}({ctype(et)}, &{out}[{offset}], {value}, {fn});"
    else:
        statement = f"HF_COMBINE_{_BITS[et] // 8}({ctype(et)}, &{out}[{offset}], {value}, {fn});"
    if conditions:
        with em.block(f"if ({' && '.join(conditions)})"):
            em.line(statement)
    else:
        em.line(statement)
    return Group(upd_shape.dims, tuple(reversed(upd_shape.minor_to_major)), names, em.lines, phase)


def _scalar_function(module: ir.Module, comp_name: str, fn: str, et: str, kernel: str) -> str:
    """A reducer as a C function of two scalars."""
    em = Emitter(module, kernel)
    em.depth = 1
    frame = em.call_frame(comp_name, [["a"], ["b"]])
    result = em.value(frame, frame.comp.root_name, [])[0]
    t = ctype(et)
    return "\n".join([f"HF_FN {t} {fn}({t} a, {t} b) {{"] + em.lines + [f"  return {result};", "}"])

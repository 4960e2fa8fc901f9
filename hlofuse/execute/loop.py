"""The `loop` plan: a while loop whose body is elementwise per batch element becomes one
kernel with the loop inside — what the paper's hand-written CUDA cart-pole did, and what
XLA cannot do (it launches the body's kernels, and more, every iteration).

Each thread owns one batch element: it loads that element's state into locals, runs the
condition and the body (emitted by execute/emit.py) until the condition fails, and stores
the state back.  Loop state elements are classified:
  batched    leading dimension B (shared by all of them), a row of ≤ MAX_ROW elements per
             thread, read by the body only at the thread's own batch element;
  scalar     rank 0 (the loop counter), kept by every thread;
  invariant  handed back unchanged by the body (the random pool), read from memory.
The emitter proves the "own batch element" condition while it writes the body: every read
of batched state must have the thread's variable as its first index.  Anything else —
reading a neighbour, reducing over the batch, state of another shape — leaves the loop on
the host, with the reason in the plan's notes.
"""

from __future__ import annotations

from contextlib import contextmanager
from math import prod

from .. import ir
from .emit import EmitError, Emitter, Frame, Idx, ctype, linear
from .kernel import Group, KernelBody

#: The largest per-element row of state kept in locals (registers on a GPU).
MAX_ROW = 64
#: Batch elements per CPU call of the loop kernel (a GPU thread takes one).
CPU_TILE = 64


class NotApplicable(Exception):
    """This while loop cannot run as one kernel; the message says why."""


def _row_index(r: int, dims: tuple[int, ...]) -> list[Idx]:
    out = []
    for size in reversed(dims):
        out.append(Idx.of(r % size))
        r //= size
    return list(reversed(out))


def loop_kernel(lowerer, scope, instr: ir.Instruction, init) -> tuple[int, object]:
    """Build the loop kernel for while `instr` (state `init`, a tree of buffers); returns the
    kernel's index in `lowerer.kernels` and the tree of buffers holding the final state."""
    module = lowerer.module
    body = module[instr.attr("body").lstrip("%")]
    cond = module[instr.attr("condition").lstrip("%")]
    shape = instr.shape
    if not shape.is_tuple or any(s.is_tuple for s in shape.tuple_shapes):
        raise NotApplicable("the loop state is not a flat tuple of arrays")
    slots = list(shape.tuple_shapes)
    if not isinstance(init, tuple) or any(not isinstance(b, int) for b in init):
        raise NotApplicable("the loop state is not a tuple of buffers")
    root = body.root
    if root.opcode != "tuple":
        raise NotApplicable("the loop body does not end in a tuple")
    param = body.parameters[0].name
    kinds = []
    for i, (s, operand) in enumerate(zip(slots, root.operands)):
        source = body[operand]
        if source.opcode == "get-tuple-element" and source.operands[0] == param and source.attr("index") == str(i):
            kinds.append("invariant")
        elif not s.dims:
            kinds.append("scalar")
        else:
            kinds.append("batched")
    batched = [i for i, k in enumerate(kinds) if k == "batched"]
    if not batched:
        raise NotApplicable("no loop state is carried per batch element")
    leading = {slots[i].dims[0] for i in batched}
    if len(leading) != 1:
        raise NotApplicable(f"the loop state has no common batch dimension (leading sizes {sorted(leading)})")
    batch = leading.pop()
    for i in batched:
        row = prod(slots[i].dims[1:])
        if row > MAX_ROW:
            raise NotApplicable(f"state element {i} ({slots[i].to_text(False)}) has {row} values per batch "
                                f"element; at most {MAX_ROW} fit in a thread's registers")
    label = f"{scope.comp.name}/{instr.name} (loop kernel)"
    name = lowerer.symbol(instr.name + "_loop")
    em = Emitter(module, label)
    try:
        kernel_body = _emit(em, name, label, body, cond, slots, kinds, batch, lowerer.loop_tile)
    except EmitError as err:
        raise NotApplicable(str(err)) from None
    outputs = []
    for i, buf in enumerate(init):
        outputs.append(buf if kinds[i] == "invariant" else lowerer.new_buffer(slots[i]))
    args = []
    for arg in kernel_body.args:
        what, slot = arg.key[0], arg.key[1]
        if what == "out":
            args.append(outputs[slot])
        elif what == "slot":
            args.append(init[slot])
        else:  # constants of the body or condition
            args.append(lowerer.constant_buffer(arg.key[1], module[arg.key[1]][arg.key[2]]))
    kernel_body.distinct_args = len(set(args)) == len(args)
    nbytes = sum(lowerer.buffers[b].nbytes for b in set(args))
    from .lower import Kernel

    lowerer.kernels.append(Kernel(name, label, "loop", scope.comp.name, args, nbytes, body=kernel_body))
    return len(lowerer.kernels) - 1, tuple(outputs)


def _emit(em: Emitter, name: str, label: str, body: ir.Computation, cond: ir.Computation,
          slots: list[ir.Shape], kinds: list[str], batch: int, tile: int) -> KernelBody:
    """Thread `i0_0` runs the loop for `tile` batch elements at once (step by step, element by
    element, their state in local arrays): one element per GPU thread, a block of them per CPU
    call so that each step reads the invariant arrays' rows of the block together."""
    out_args = {i: em.output_arg(("out", i), s.element_type) for i, s in enumerate(slots) if kinds[i] != "invariant"}
    em.depth = 0
    em.scopes = [{}]
    tile = max(1, min(tile, batch))
    blocks = (batch + tile - 1) // tile
    thread, lane, b = "i0_0", "lane", "bv"
    em.ranges[thread] = (0, blocks - 1)
    em.ranges[lane] = (0, tile - 1)
    em.ranges[b] = (0, batch - 1)
    rows = {i: tuple(slots[i].dims[1:]) for i, k in enumerate(kinds) if k == "batched"}
    width = {i: prod(r) for i, r in rows.items()}

    def state(i: int) -> str:
        return f"s{i}"

    def local(i: int, offset: str) -> str:
        # element-major (each row position's tile of lanes contiguous): the lane loop then
        # reads and writes its state with unit stride, which the compiler vectorizes
        return f"{state(i)}[({offset})*{tile} + {lane}]" if tile > 1 else f"{state(i)}[{offset}]"

    def bind_element(number: int, k: int, index: list[Idx]) -> list[str]:
        s = slots[k]
        if kinds[k] == "scalar":
            return [state(k)]
        if kinds[k] == "invariant":
            buffer = em.input_arg(("slot", k), s.element_type)
            return [em.let(s.element_type, em.load(buffer, s, index), "p")]
        if not index[0].is_var(b):
            raise NotApplicable(f"the loop reads state element {k} ({s.to_text(False)}) at batch index "
                                f"{index[0].c()}, not only at the thread's own element")
        offset = linear(index[1:], rows[k], tuple(range(len(rows[k]) - 1, -1, -1)))
        return [local(k, offset.c())]

    def bind(number: int, index: list[Idx]) -> list[str]:
        raise NotApplicable("the loop body uses its state tuple other than through get-tuple-element")

    @contextmanager
    def lanes():
        with em.block(f"for (i64 {lane} = 0; {lane} < {tile}; ++{lane})"):
            em.line(f"const i64 {b} = {thread} * {tile} + {lane};")
            if batch % tile == 0:  # every block is full: no guard (a branch the vectorizer would mask)
                yield
                return
            with em.block(f"if ({b} < {batch})"):
                yield

    # load the state of this thread's elements
    for i, kind in enumerate(kinds):
        t = ctype(slots[i].element_type)
        if kind == "scalar":
            em.line(f"{t} {state(i)} = {em.input_arg(('slot', i), slots[i].element_type)}[0];")
        elif kind == "batched":
            em.line(f"{t} {state(i)}[{max(width[i], 1) * tile}];")
    with lanes():
        for i in rows:
            source = em.input_arg(("slot", i), slots[i].element_type)
            for r in range(width[i]):
                index = [Idx.of(b)] + _row_index(r, rows[i])
                em.line(f"{local(i, str(r))} = {em.load(source, slots[i], index)};")
    with em.block("for (;;)"):
        cond_frame = Frame(cond, bind, bind_element=bind_element)
        with em.block(""):
            go = em.value(cond_frame, cond.root_name, [])[0]
            em.line(f"if (!{go}) break;")
        body_frame = Frame(body, bind, bind_element=bind_element)
        with em.block(""):
            # scalars (the same for every element) first, from the old state...
            scalars = {i: em.let(slots[i].element_type, em.one(body_frame, body.root.operands[i], []))
                       for i, kind in enumerate(kinds) if kind == "scalar"}
            # ...then each element's new row, computed whole before it is stored
            with lanes():
                new = {i: [em.let(slots[i].element_type,
                                  em.one(body_frame, body.root.operands[i], [Idx.of(b)] + _row_index(r, rows[i])))
                           for r in range(width[i])] for i in rows}
                for i, values in new.items():
                    for r, v in enumerate(values):
                        em.line(f"{local(i, str(r))} = {v};")
            for i, v in scalars.items():
                em.line(f"{state(i)} = {v};")
    # store it back
    for i, kind in enumerate(kinds):
        if kind == "scalar":
            with em.block(f"if ({thread} == 0)"):
                em.line(f"{out_args[i]}[0] = {state(i)};")
    with lanes():
        for i in rows:
            s = slots[i]
            for r in range(width[i]):
                index = [Idx.of(b)] + _row_index(r, rows[i])
                em.line(f"{out_args[i]}[{linear(index, s.dims, s.minor_to_major).c()}] = {local(i, str(r))};")
    group = Group((blocks,), (0,), [thread], em.lines)
    return KernelBody(name, em.args, [group], label=label)

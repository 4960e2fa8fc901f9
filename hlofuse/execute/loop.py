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

from math import prod

from .. import ir
from . import emit
from .emit import EmitError, Emitter, Frame, Group, Idx, KernelBody, ctype, linear
from .index import delinear

#: The largest per-thread row of state kept in locals (registers on a GPU).
MAX_ROW = 64


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
        kernel_body = _emit(em, name, label, body, cond, slots, kinds, batch)
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
          slots: list[ir.Shape], kinds: list[str], batch: int) -> KernelBody:
    out_args = {i: em.output_arg(("out", i), s.element_type) for i, s in enumerate(slots) if kinds[i] != "invariant"}
    em.depth = 0
    em.scopes = [{}]
    b = "i0_0"
    em.ranges[b] = (0, batch - 1)
    rows = {i: tuple(slots[i].dims[1:]) for i, k in enumerate(kinds) if k == "batched"}

    def state(i: int) -> str:
        return f"s{i}"

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
        return [f"{state(k)}[{offset.c()}]"]

    def bind(number: int, index: list[Idx]) -> list[str]:
        raise NotApplicable("the loop body uses its state tuple other than through get-tuple-element")

    # load this thread's state
    for i, kind in enumerate(kinds):
        s = slots[i]
        t = ctype(s.element_type)
        if kind == "scalar":
            em.line(f"{t} {state(i)} = {em.input_arg(('slot', i), s.element_type)}[0];")
        elif kind == "batched":
            source = em.input_arg(("slot", i), s.element_type)
            n = prod(rows[i])
            em.line(f"{t} {state(i)}[{max(n, 1)}];")
            for r in range(n):
                index = [Idx.of(b)] + _row_index(r, rows[i])
                em.line(f"{state(i)}[{r}] = {em.load(source, s, index)};")
    with em.block("for (;;)"):
        cond_frame = Frame(cond, bind, bind_element=bind_element)
        with em.block(""):
            go = em.value(cond_frame, cond.root_name, [])[0]
            em.line(f"if (!{go}) break;")
        body_frame = Frame(body, bind, bind_element=bind_element)
        with em.block(""):
            new = {}
            for i, kind in enumerate(kinds):
                operand = body.root.operands[i]
                if kind == "scalar":
                    new[i] = [em.let(slots[i].element_type, em.one(body_frame, operand, []))]
                elif kind == "batched":
                    new[i] = [em.let(slots[i].element_type,
                                     em.one(body_frame, operand, [Idx.of(b)] + _row_index(r, rows[i])))
                              for r in range(prod(rows[i]))]
            for i, values in new.items():
                if kinds[i] == "scalar":
                    em.line(f"{state(i)} = {values[0]};")
                else:
                    for r, v in enumerate(values):
                        em.line(f"{state(i)}[{r}] = {v};")
    # store it back
    for i, kind in enumerate(kinds):
        s = slots[i]
        if kind == "scalar":
            with em.block(f"if ({b} == 0)"):
                em.line(f"{out_args[i]}[0] = {state(i)};")
        elif kind == "batched":
            for r in range(prod(rows[i])):
                index = [Idx.of(b)] + _row_index(r, rows[i])
                em.line(f"{out_args[i]}[{linear(index, s.dims, s.minor_to_major).c()}] = {state(i)}[{r}];")
    group = Group((batch,), (0,), [b], em.lines)
    return KernelBody(name, em.args, [group], label=label)

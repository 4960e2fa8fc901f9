"""The `loop` plan: a while loop whose body is elementwise per batch element becomes one
kernel with the loop inside — what the paper's hand-written CUDA cart-pole did, and what
XLA cannot do (it launches the body's kernels, and more, every iteration).

Each thread owns one batch element (a CPU call a tile of them): it loads that element's
state into locals, runs the condition and the body (emitted by execute/emit.py) until the
condition fails, and stores the state back.  Loop state elements are classified:
  batched    leading dimension B (the leading dimension of the largest state element), a
             row of ≤ MAX_ROW elements per batch element, read by the body only at the
             thread's own batch element;
  shared     any other small array (≤ MAX_ROW elements: the loop counter, an RNG key, a
             key schedule), the same for every batch element, so every thread keeps all of
             it and computes it once per iteration (per tile on the CPU), before the
             batched rows;
  invariant  handed back unchanged by the outer loop's body (the random pool), read from
             memory.
While loops inside the body (JAX's threefry rounds inside a scan step) run inside the
kernel the same way, each iteration's shared part once, then its batched rows lane by lane:
they are emitted where the body's shared values are, before the body's own batched rows,
and their final state stays in locals for the code after them.
The emitter proves exactness while it writes the body: batched state is read only inside
a loop over the tile's lanes and only at the lane's own batch element, so shared state is
never computed from per-element state.  Anything else — reading a neighbour, reducing over
the batch, a key derived from the states, large state of another shape — leaves the loop on
the host, with the reason in the plan's notes.
"""

from __future__ import annotations

from contextlib import contextmanager
from math import prod
from typing import Callable

from .. import ir
from .emit import EmitError, Emitter, Frame, Idx, ctype, inner_frame, linear, tuple_element
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


def _row_major(dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(range(len(dims) - 1, -1, -1))


def _flat_slots(instr: ir.Instruction) -> list[ir.Shape]:
    shape = instr.shape
    if not shape.is_tuple or any(s.is_tuple for s in shape.tuple_shapes):
        raise NotApplicable(f"the state of loop {instr.name} is not a flat tuple of arrays")
    return list(shape.tuple_shapes)


def _classify(slots: list[ir.Shape], batch: int, invariant: list[bool], loop: str) -> list[str]:
    kinds = []
    for i, s in enumerate(slots):
        if invariant[i]:
            kinds.append("invariant")
        elif s.dims and s.dims[0] == batch:
            row = prod(s.dims[1:])
            if row > MAX_ROW:
                raise NotApplicable(f"state element {i} of {loop} ({s.to_text(False)}) has {row} values per "
                                    f"batch element; at most {MAX_ROW} fit in a thread's registers")
            kinds.append("batched")
        elif prod(s.dims) <= MAX_ROW:
            kinds.append("shared")
        else:
            raise NotApplicable(f"state element {i} of {loop} ({s.to_text(False)}) has neither the batch "
                                f"dimension {batch} nor at most {MAX_ROW} values to share between elements")
    return kinds


def loop_kernel(lowerer, scope, instr: ir.Instruction, init) -> tuple[int, object]:
    """Build the loop kernel for while `instr` (state `init`, a tree of buffers); returns the
    kernel's index in `lowerer.kernels` and the tree of buffers holding the final state."""
    module = lowerer.module
    body = module[instr.attr("body").lstrip("%")]
    cond = module[instr.attr("condition").lstrip("%")]
    slots = _flat_slots(instr)
    if not isinstance(init, tuple) or any(not isinstance(b, int) for b in init):
        raise NotApplicable("the loop state is not a tuple of buffers")
    root = body.root
    if root.opcode != "tuple":
        raise NotApplicable("the loop body does not end in a tuple")
    param = body.parameters[0].name
    invariant = []
    for i, operand in enumerate(root.operands):
        source = body[operand]
        invariant.append(source.opcode == "get-tuple-element" and source.operands[0] == param
                         and source.attr("index") == str(i))
    carried = [s for i, s in enumerate(slots) if not invariant[i] and s.dims]
    if not carried:
        raise NotApplicable("no loop state is carried per batch element")
    batch = max(carried, key=lambda s: prod(s.dims)).dims[0]
    kinds = _classify(slots, batch, invariant, "the loop")
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


class _LoopWriter:
    """Writes loops into one kernel body: thread `i0_0` runs `tile` batch elements at once
    (step by step, element by element, their state in local arrays): one element per GPU
    thread, a block of them per CPU call so that each step reads the invariant arrays' rows
    of the block together and computes the shared state once for the block."""

    def __init__(self, em: Emitter, batch: int, tile: int):
        self.em = em
        self.batch = batch
        self.tile = tile
        self.thread, self.lane, self.b = "i0_0", "lane", "bv"
        self.in_lanes = False
        #: (frame uid, while name) → (slots, kinds, arrays) of a nested loop's final state
        self.loops: dict[tuple, tuple] = {}
        self.count = 0
        em.nested_loops = self.nested_element
        # shift amounts here are often shared state (threefry's rotations): see prelude.py
        em.masked_shifts = True

    def local(self, array: str, offset: str) -> str:
        # element-major (each row position's tile of lanes contiguous): the lane loop then
        # reads and writes its state with unit stride, which the compiler vectorizes
        return f"{array}[({offset})*{self.tile} + {self.lane}]" if self.tile > 1 else f"{array}[{offset}]"

    @contextmanager
    def lanes(self):
        em = self.em
        with em.block(f"for (i64 {self.lane} = 0; {self.lane} < {self.tile}; ++{self.lane})"):
            em.line(f"const i64 {self.b} = {self.thread} * {self.tile} + {self.lane};")
            self.in_lanes = True
            try:
                if self.batch % self.tile == 0:  # every block is full: no guard (a branch the vectorizer would mask)
                    yield
                else:
                    with em.block(f"if ({self.b} < {self.batch})"):
                        yield
            finally:
                self.in_lanes = False

    def read(self, slots, kinds, arrays, k: int, index: list[Idx], loop: str) -> str:
        s = slots[k]
        if kinds[k] == "shared":
            offset = linear(index, s.dims, _row_major(s.dims)).c() if s.dims else "0"
            return f"{arrays[k]}[{offset}]"
        if not self.in_lanes:
            raise NotApplicable(f"{loop}'s shared state or condition is computed from state element {k} "
                                f"({s.to_text(False)}), which differs per batch element")
        if not index[0].is_var(self.b):
            raise NotApplicable(f"{loop} reads state element {k} ({s.to_text(False)}) at batch index "
                                f"{index[0].c()}, not only at the thread's own element")
        rows = tuple(s.dims[1:])
        return self.local(arrays[k], linear(index[1:], rows, _row_major(rows)).c())

    def nested_element(self, frame: Frame, instr: ir.Instruction, k: int, index: list[Idx]) -> list[str]:
        entry = self.loops.get((frame.uid, instr.name))
        if entry is None:
            raise NotApplicable(f"while loop {instr.name} is not at the top of a loop body, where the "
                                f"kernel runs nested loops")
        return [self.read(*entry, k, index, f"loop {instr.name}")]

    def run(self, tag: str, loop: str, body: ir.Computation, cond: ir.Computation, slots: list[ir.Shape],
            kinds: list[str], init: Callable[[int, list[Idx]], str],
            invariant: Callable[[int, list[Idx]], str] | None = None) -> dict[int, str]:
        """Emit one while loop: its state arrays declared and set from `init(slot, index)`,
        then the loop.  Returns the arrays holding the final state."""
        em = self.em
        arrays = {i: f"{tag}s{i}" for i, k in enumerate(kinds) if k != "invariant"}
        width = {i: prod(slots[i].dims[1:]) for i, k in enumerate(kinds) if k == "batched"}
        size = {i: prod(slots[i].dims) for i, k in enumerate(kinds) if k == "shared"}
        for i, array in arrays.items():
            t = ctype(slots[i].element_type)
            n = max(width[i], 1) * self.tile if i in width else max(size[i], 1)
            em.line(f"{t} {array}[{n}];")
        for i, n in size.items():
            for r in range(n):
                em.line(f"{arrays[i]}[{r}] = {init(i, _row_index(r, slots[i].dims))};")
        if width:
            with self.lanes():
                for i, w in width.items():
                    for r in range(w):
                        em.line(f"{self.local(arrays[i], str(r))} = "
                                f"{init(i, [Idx.of(self.b)] + _row_index(r, slots[i].dims[1:]))};")

        def bind_element(number: int, k: int, index: list[Idx]) -> list[str]:
            if kinds[k] == "invariant":
                return [invariant(k, index)]
            return [self.read(slots, kinds, arrays, k, index, loop)]

        def bind(number: int, index: list[Idx]) -> list[str]:
            raise NotApplicable(f"{loop}'s body uses its state tuple other than through get-tuple-element")

        root = body.root
        if root.opcode != "tuple":
            raise NotApplicable(f"the body of {loop} does not end in a tuple")
        with em.block("for (;;)"):
            cond_frame = Frame(cond, bind, bind_element=bind_element)
            with em.block(""):
                go = em.value(cond_frame, cond.root_name, [])[0]
                em.line(f"if (!{go}) break;")
            body_frame = Frame(body, bind, bind_element=bind_element)
            with em.block(""):
                # nested loops first, once per iteration: what follows reads their state
                self.hoist(body_frame)
                # the shared state (the same for every element) from the old state...
                shared = {i: [em.let(slots[i].element_type,
                                     em.one(body_frame, root.operands[i], _row_index(r, slots[i].dims)))
                              for r in range(n)] for i, n in size.items()}
                # ...then each element's new row, computed whole before it is stored
                if width:
                    with self.lanes():
                        new = {i: [em.let(slots[i].element_type,
                                          em.one(body_frame, root.operands[i],
                                                 [Idx.of(self.b)] + _row_index(r, slots[i].dims[1:])))
                                   for r in range(w)] for i, w in width.items()}
                        for i, values in new.items():
                            for r, v in enumerate(values):
                                em.line(f"{self.local(arrays[i], str(r))} = {v};")
                for i, values in shared.items():
                    for r, v in enumerate(values):
                        em.line(f"{arrays[i]}[{r}] = {v};")
        return arrays

    def hoist(self, frame: Frame) -> None:
        """Emit the while loops of `frame`'s computation (and of the calls in it), operands
        before users, where the frame's shared values are computed."""
        comp = frame.comp
        done: set[str] = set()

        def visit(name: str) -> None:
            if name in done:
                return
            done.add(name)
            instr = comp[name]
            for operand in instr.operands:
                visit(operand)
            if instr.opcode == "while":
                self.nested(frame, instr)
            elif instr.opcode == "call":
                self.hoist(inner_frame(self.em, frame, instr))

        visit(comp.root_name)

    def nested(self, frame: Frame, instr: ir.Instruction) -> None:
        module = self.em.module
        body = module[instr.attr("body").lstrip("%")]
        cond = module[instr.attr("condition").lstrip("%")]
        loop = f"loop {instr.name}"
        slots = _flat_slots(instr)
        kinds = _classify(slots, self.batch, [False] * len(slots), loop)
        self.count += 1
        source = instr.operands[0]

        def init(i: int, index: list[Idx]) -> str:
            return tuple_element(self.em, frame, source, i, index)[0]

        arrays = self.run(f"w{self.count}", loop, body, cond, slots, kinds, init)
        self.loops[(frame.uid, instr.name)] = (slots, kinds, arrays)


def _emit(em: Emitter, name: str, label: str, body: ir.Computation, cond: ir.Computation,
          slots: list[ir.Shape], kinds: list[str], batch: int, tile: int) -> KernelBody:
    out_args = {i: em.output_arg(("out", i), s.element_type) for i, s in enumerate(slots) if kinds[i] != "invariant"}
    em.depth = 0
    em.scopes = [{}]
    tile = max(1, min(tile, batch))
    blocks = (batch + tile - 1) // tile
    writer = _LoopWriter(em, batch, tile)
    em.ranges[writer.thread] = (0, blocks - 1)
    em.ranges[writer.lane] = (0, tile - 1)
    em.ranges[writer.b] = (0, batch - 1)

    def init(i: int, index: list[Idx]) -> str:
        return em.load(em.input_arg(("slot", i), slots[i].element_type), slots[i], index)

    def invariant(i: int, index: list[Idx]) -> str:
        return em.let(slots[i].element_type, init(i, index), "p")

    arrays = writer.run("", "the loop", body, cond, slots, kinds, init, invariant)
    # store the final state: the shared part by the first thread, each row by its own
    for i, kind in enumerate(kinds):
        if kind == "shared":
            s = slots[i]
            with em.block(f"if ({writer.thread} == 0)"):
                for r in range(prod(s.dims)):
                    index = _row_index(r, s.dims)
                    em.line(f"{out_args[i]}[{linear(index, s.dims, s.minor_to_major).c() if s.dims else 0}] = "
                            f"{arrays[i]}[{r}];")
    if any(k == "batched" for k in kinds):
        with writer.lanes():
            for i, kind in enumerate(kinds):
                if kind != "batched":
                    continue
                s = slots[i]
                for r in range(prod(s.dims[1:])):
                    index = [Idx.of(writer.b)] + _row_index(r, s.dims[1:])
                    em.line(f"{out_args[i]}[{linear(index, s.dims, s.minor_to_major).c()}] = "
                            f"{writer.local(arrays[i], str(r))};")
    group = Group((blocks,), (0,), [writer.thread], em.lines)
    return KernelBody(name, em.args, [group], label=label)

"""Lowering: an `ir.Module` (fused or not) → the kernels it launches and the host steps that
launch them, with buffers assigned — the part of XLA's thunk emitter and buffer assignment
that decides what runs where.

Every kernel instruction of an executed computation becomes one kernel: a fusion or an
unfused instruction a generated kernel (execute/kernel.py, execute/emit.py), a dot, convolution, sort or
library custom call a library call (NumPy on the CPU, CuPy on the GPU), as XLA hands those
to cuBLAS/cuDNN/its own emitters.  Parameters, constants, tuples, get-tuple-element and
bitcasts are buffers, not kernels.  While loops run on the host as XLA runs them: with a
known trip count the body's kernels that many times, otherwise the condition's kernels, a
read of the predicate, then the body's.  Calls are inlined.

Buffers are reused where XLA would reuse them: a loop body's result that no later kernel of
the iteration reads is written straight into the loop state (otherwise it is copied at the
end of the iteration), and a dynamic-update-slice or scatter whose operand dies there updates
that buffer in place.  Entry parameters and constants are never written.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Union

import numpy as np

from .. import attributes as attrs
from .. import ir
from ..errors import ExecutionError
from ..opcodes import NON_KERNEL
from . import emit, numeric
from .kernel import KernelBody, generate
from .library_nests import blocked_dot_supported, conv_supported, topk_supported
from .interp import THREEFRY_TARGETS, literal_value

Tree = Union[int, tuple, None]  # a buffer id, a tuple of trees, or a token

LIBRARY_OPCODES = frozenset({"dot", "convolution", "sort", "topk", "rng-bit-generator", "fft", "cholesky",
                             "triangular-solve", "custom-call", "ragged-dot", "scaled-dot"})


# ------------------------------------------------------------------------------------------
# What a lowered module is
# ------------------------------------------------------------------------------------------


@dataclass
class Buffer:
    id: int
    shape: ir.Shape
    kind: str  # input | constant | temp
    data: np.ndarray | None = None  # constants: their elements in physical order

    @property
    def nbytes(self) -> int:
        return self.shape.byte_size


@dataclass
class Kernel:
    """One kernel: `body` for a generated one, `instr` (evaluated by the library) otherwise.
    `args` are the buffers bound to the body's arguments in order (library: inputs then
    outputs)."""

    name: str
    label: str  # computation/instruction
    kind: str  # what XLA would call it: kLoop, kInput, library, copy, <opcode>
    computation: str
    args: list[int]
    bytes: int
    body: KernelBody | None = None
    instr: ir.Instruction | None = None
    n_inputs: int = 0
    #: library calls: the shape of each argument as the instruction sees it
    shapes: list = field(default_factory=list)

    @property
    def generated(self) -> bool:
        return self.body is not None


@dataclass
class Launch:
    kernel: int


@dataclass
class Copy:
    dst: int
    src: int


@dataclass
class While:
    name: str
    entry: list[Copy]
    cond: list
    pred: int
    body: list
    end: list[Copy]
    trip_count: int | None


@dataclass
class Conditional:
    name: str
    selector: int
    branches: list[list]  # steps of each branch, ending with copies into the result buffers


@dataclass
class Lowered:
    module: ir.Module
    buffers: list[Buffer]
    kernels: list[Kernel]
    steps: list
    inputs: list[Tree]
    output: Tree
    notes: list[str] = field(default_factory=list)

    def buffer(self, i: int) -> Buffer:
        return self.buffers[i]

    def leaves(self, tree: Tree) -> list[int]:
        if tree is None:
            return []
        if isinstance(tree, tuple):
            out = []
            for t in tree:
                out += self.leaves(t)
            return out
        return [tree]

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.buffers)


# ------------------------------------------------------------------------------------------
# Which buffer each instruction's value lives in (symbolically, before lowering)
# ------------------------------------------------------------------------------------------


def _shape_tree(shape: ir.Shape, make) -> Tree:
    if shape.is_tuple:
        return tuple(_shape_tree(s, lambda p, k=k: make((k,) + p)) for k, s in enumerate(shape.tuple_shapes))
    return make(())


def _keys(comp: ir.Computation) -> dict[str, Tree]:
    """For every instruction, the tree of buffer keys its value occupies: views share their
    operand's keys, everything else owns new ones."""
    keys: dict[str, Tree] = {}
    for instr in comp.post_order:
        op = instr.opcode
        if op == "parameter":
            n = instr.parameter_number
            keys[instr.name] = _shape_tree(instr.shape, lambda p, n=n: ("p", n) + p)
        elif op == "bitcast":
            keys[instr.name] = keys[instr.operands[0]]
        elif op == "get-tuple-element":
            source = keys[instr.operands[0]]
            k = attrs.integer(instr, "index", 0)
            keys[instr.name] = source[k] if isinstance(source, tuple) else ("i", instr.name)
        elif op == "tuple":
            keys[instr.name] = tuple(keys[o] for o in instr.operands)
        elif op in ("opt-barrier", "add-dependency", "domain", "copy-done"):
            keys[instr.name] = keys[instr.operands[0]] if op != "copy-done" else ("i", instr.name)
        else:
            keys[instr.name] = _shape_tree(instr.shape, lambda p, n=instr.name: ("i", n) + p)
    return keys


def _flat(tree) -> list:
    """The keys of a key tree, in leaf order (a key is a tuple starting with "p" or "i")."""
    if tree is None:
        return []
    if isinstance(tree, tuple) and tree and isinstance(tree[0], str):
        return [tree]
    out = []
    for t in tree:
        out += _flat(t)
    return out


VIEWS = frozenset({"parameter", "bitcast", "get-tuple-element", "tuple", "opt-barrier", "add-dependency", "domain",
                   "after-all", "constant"})


@dataclass
class _Liveness:
    keys: dict[str, Tree]
    position: dict[str, int]
    readers: dict[tuple, list[int]]
    live_out: list[tuple]  # root leaves, in order


def _liveness(comp: ir.Computation) -> _Liveness:
    keys = _keys(comp)
    position = {instr.name: i for i, instr in enumerate(comp.post_order)}
    readers: dict[tuple, list[int]] = {}
    for instr in comp.post_order:
        if instr.opcode in VIEWS:
            continue
        for operand in instr.operands:
            for key in _flat(keys[operand]):
                readers.setdefault(key, []).append(position[instr.name])
    return _Liveness(keys, position, readers, _flat(keys[comp.root_name]))


# ------------------------------------------------------------------------------------------
# The lowering
# ------------------------------------------------------------------------------------------


@dataclass
class _Scope:
    """Lowering state of one computation: its liveness facts, which parameter leaves may be
    written (a loop body's state), and which kernel outputs go straight into the state."""

    comp: ir.Computation
    live: _Liveness
    writable_params: dict[tuple, int]  # ("p", 0, k) → state buffer id
    direct: dict[tuple, int]  # kernel output key → state buffer it is written into


class Lowerer:
    """Turns a module into a Lowered program.  `loop_kernels` makes the `loop` plan: while
    loops whose body is elementwise per batch element become one kernel (execute/loop.py)."""

    def __init__(self, module: ir.Module, *, loop_kernels: bool = False, loop_tile: int = 1,
                 generated_dots: bool = False, split_gemm_fusions: bool = False):
        self.module = with_adders(module) if split_gemm_fusions else module
        self.loop_kernels = loop_kernels
        self.loop_tile = loop_tile
        self.generated_dots = generated_dots
        self.split_gemm_fusions = split_gemm_fusions
        self.buffers: list[Buffer] = []
        self.kernels: list[Kernel] = []
        self.notes: list[str] = []
        self._constants: dict[tuple, int] = {}
        self._names: set[str] = set()

    # -- buffers --------------------------------------------------------------------------
    def new_buffer(self, shape: ir.Shape, kind: str = "temp", data: np.ndarray | None = None) -> int:
        if shape.is_tuple or not shape.is_array:
            raise ExecutionError(f"internal: buffer of non-array shape {shape}")
        self.buffers.append(Buffer(len(self.buffers), shape, kind, data))
        return len(self.buffers) - 1

    def new_tree(self, shape: ir.Shape, kind: str = "temp") -> Tree:
        if shape.is_tuple:
            return tuple(self.new_tree(s, kind) for s in shape.tuple_shapes)
        if not shape.is_array:
            return None
        return self.new_buffer(shape, kind)

    def constant_buffer(self, comp: str, instr: ir.Instruction) -> int:
        key = (comp, instr.name)
        if key not in self._constants:
            data = numeric.to_physical(literal_value(instr), instr.shape)
            self._constants[key] = self.new_buffer(instr.shape, "constant", data)
        return self._constants[key]

    def symbol(self, name: str) -> str:
        base = "k_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
        candidate, n = base, 1
        while candidate in self._names:
            n += 1
            candidate = f"{base}_{n}"
        self._names.add(candidate)
        return candidate

    # -- entry ----------------------------------------------------------------------------
    def lower(self) -> Lowered:
        entry = self.module.entry
        inputs = [self.new_tree(p.shape, "input") for p in entry.parameters]
        steps: list = []
        scope = _Scope(entry, _liveness(entry), {}, {})
        output = self.lower_computation(scope, inputs, steps)
        return Lowered(self.module, self.buffers, self.kernels, steps, inputs, output, self.notes)

    def lower_computation(self, scope: _Scope, params: list[Tree], steps: list) -> Tree:
        values: dict[str, Tree] = {}
        comp = scope.comp
        for instr in comp.post_order:
            values[instr.name] = self.lower_instruction(scope, instr, values, params, steps)
        return values[comp.root_name]

    def lower_instruction(self, scope: _Scope, instr: ir.Instruction, values, params, steps) -> Tree:
        op = instr.opcode
        operands = [values[o] for o in instr.operands]
        if op == "parameter":
            return params[instr.parameter_number]
        if op == "constant":
            return self.constant_buffer(scope.comp.name, instr) if instr.shape.is_array else None
        if op in ("bitcast", "opt-barrier", "add-dependency", "domain"):
            return operands[0]
        if op == "get-tuple-element":
            return operands[0][attrs.integer(instr, "index", 0)]
        if op == "tuple":
            return tuple(operands)
        if op == "after-all":
            return None
        if op == "while":
            return self.lower_while(scope, instr, operands[0], steps)
        if op == "conditional":
            return self.lower_conditional(scope, instr, operands, steps)
        if op in ("call", "async-start"):
            callee = self.module[(instr.attr("calls") or instr.called[0]).lstrip("%")]
            inner = _Scope(callee, _liveness(callee), {}, {})
            result = self.lower_computation(inner, operands, steps)
            return (tuple(operands), result, None) if op == "async-start" else result
        if op == "async-done":
            return operands[0][1]
        if op == "async-update":
            return operands[0]
        if op == "copy-start":
            out = self.new_tree(instr.shape.tuple_shapes[0])
            steps.append(Copy(out, operands[0]))
            return (out, operands[0], None)
        if op == "copy-done":
            return operands[0][0]
        if op in NON_KERNEL:
            return operands[0] if operands else None
        return self.lower_kernel(scope, instr, operands, steps)

    # -- kernels --------------------------------------------------------------------------
    def _output_tree(self, scope: _Scope, instr: ir.Instruction) -> Tree:
        """Fresh buffers for a kernel's result, or the loop state where it goes straight there."""
        keys = scope.live.keys[instr.name]

        def make(shape, key):
            if isinstance(key, tuple) and key and key[0] in ("p", "i"):
                if key in scope.direct:
                    return scope.direct[key]
                return self.new_buffer(shape) if shape.is_array else None
            return tuple(make(s, k) for s, k in zip(shape.tuple_shapes, key))

        return make(instr.shape, keys)

    def _in_place_ok(self, scope: _Scope, instr: ir.Instruction) -> bool:
        """May this kernel overwrite its first operand's buffer?  Only when nothing reads that
        buffer later and it is a temporary (or loop state handed back in the same slot)."""
        if not instr.operands:
            return False
        keys = _flat(scope.live.keys[instr.operands[0]])
        if len(keys) != 1:
            return False
        key = keys[0]
        here = scope.live.position[instr.name]
        if any(p > here for p in scope.live.readers.get(key, [])):
            return False
        if key[0] == "p":
            # loop state: only when this result is what goes back into the same slot
            mine = _flat(scope.live.keys[instr.name])
            slot = key[2] if len(key) == 3 else None
            return (key in scope.writable_params and slot is not None and len(mine) == 1
                    and slot < len(scope.live.live_out) and scope.live.live_out[slot] == mine[0]
                    and key not in scope.live.live_out)
        if key[0] == "i" and scope.comp[key[1]].opcode == "constant":
            return False
        return key not in scope.live.live_out

    def lower_kernel(self, scope: _Scope, instr: ir.Instruction, operands: list[Tree], steps: list) -> Tree:
        label = f"{scope.comp.name}/{instr.name}"
        library = _is_library(instr, self.module, self.generated_dots, scope.comp)
        kind = _kernel_kind(instr) if library or instr.opcode == "fusion" else instr.opcode
        split = outlined_dot(self.module, instr) if library and self.generated_dots else None
        if split is not None:
            # a library fusion holding a dot and per-element code after it (XLA:CPU's YNNPACK
            # fusion of attention's scores, max and exp): the dot's kernel into a temporary,
            # then the rest's kernel reading it, both generated
            dot_comp, rest_comp, dot_operands = split
            temp = self.new_buffer(dot_comp.root.shape)
            self._generated(scope, instr, dot_comp, self.symbol(instr.name + ".dot"), label + " (dot)", "dot",
                            [operands[k] for k in dot_operands], steps, outputs=temp)
            return self._generated(scope, instr, rest_comp, self.symbol(instr.name), label, kind,
                                   list(operands) + [temp], steps)
        if library and self.split_gemm_fusions:
            # a small dot (or GEMM fusion) as one generated kernel: its dot a row reduction
            small = small_dot_computation(self.module, scope.comp, instr)
            if small is not None:
                return self._generated(scope, instr, small, self.symbol(instr.name), label, kind, operands, steps)
        gemm = split_gemm_fusion(self.module, instr) if library and self.split_gemm_fusions else None
        if gemm is not None:
            return self._split_gemm(scope, instr, gemm, label, kind, operands, steps)
        if library:
            outputs = self._output_tree(scope, instr)
            flat_in = []
            for t in operands:
                flat_in += self._leaves(t)
            flat_out = self._leaves(outputs)
            nbytes = sum(self.buffers[b].nbytes for b in set(flat_in) | set(flat_out))
            # the shapes the instruction sees (a bitcast's view, not its buffer's first shape)
            shapes = [leaf for o in instr.operands for leaf in scope.comp[o].shape.leaves() if leaf.is_array]
            shapes += [leaf for leaf in instr.shape.leaves() if leaf.is_array]
            self.kernels.append(Kernel(self.symbol(instr.name), label, kind, scope.comp.name, flat_in + flat_out,
                                       nbytes, instr=instr, n_inputs=len(flat_in), shapes=shapes))
            steps.append(Launch(len(self.kernels) - 1))
            return outputs
        comp = _kernel_computation(self.module, scope.comp, instr)
        in_place = self._in_place_ok(scope, instr) and _sole_user_is_root(comp)
        return self._generated(scope, instr, comp, self.symbol(instr.name), label, kind, operands, steps, in_place)

    def _split_gemm(self, scope: _Scope, instr: ir.Instruction, gemm: "GemmSplit", label: str, kind: str,
                    operands: list[Tree], steps: list) -> Tree:
        """A GEMM fusion as the GPU runs it here: a generated kernel per dot operand computed
        in the fusion (its prologue) into a temporary, the dot as one library call (cuBLAS),
        then a generated kernel for the code after the dot (its epilogue) reading the dot's
        result.  Operands that are fusion parameters (through bitcasts) are read in place, and
        a dot whose result is the fusion's (through bitcasts) writes the fusion's buffer."""
        dot_in = []
        for k, source in enumerate(gemm.sources):
            if isinstance(source, int):
                tree = operands[source]
                if not isinstance(tree, int):
                    raise emit.EmitError(f"kernel {label}: operand {source} is a tuple, not a buffer")
                dot_in.append(tree)
            else:
                temp = self.new_buffer(source.root.shape)
                self._generated(scope, instr, source, self.symbol(f"{instr.name}.prologue{k}"),
                                f"{label} (prologue {k})", kind, operands, steps, outputs=temp)
                dot_in.append(temp)
        if gemm.epilogue is None:
            outputs = self._output_tree(scope, instr)
            dot_out = outputs
        else:
            outputs = None
            dot_out = self.new_buffer(gemm.dot.shape)
        shapes = [gemm.operand_shapes[0], gemm.operand_shapes[1], gemm.dot.shape]
        nbytes = sum(self.buffers[b].nbytes for b in set(dot_in) | {dot_out})
        self.kernels.append(Kernel(self.symbol(instr.name + ".dot"), label + " (dot)", "library", scope.comp.name,
                                   dot_in + [dot_out], nbytes, instr=gemm.dot, n_inputs=2, shapes=shapes))
        steps.append(Launch(len(self.kernels) - 1))
        if gemm.epilogue is None:
            return outputs
        return self._generated(scope, instr, gemm.epilogue, self.symbol(instr.name), label, kind,
                               list(operands) + [dot_out], steps)

    def _generated(self, scope: _Scope, instr: ir.Instruction, comp: ir.Computation, name: str, label: str,
                   kind: str, operands: list[Tree], steps: list, in_place: bool = False,
                   outputs: Tree | None = None) -> Tree:
        """One generated kernel computing `comp` from `operands` (its parameters in order)
        into `outputs` (by default new buffers for `instr`'s result)."""
        body = generate(self.module, comp, name, in_place=in_place, label=label)
        if body.in_place:  # the result lives in the operand's buffer
            outputs = self._leaves(operands[body.in_place[0]])[0]
        elif outputs is None:
            outputs = self._output_tree(scope, instr)
        out_leaves = self._leaves(outputs)
        args = []
        for arg in body.args:
            kind_, *rest = arg.key
            if kind_ == "out":
                args.append(out_leaves[rest[0]])
            elif kind_ == "param":
                tree = operands[rest[0]]
                if not isinstance(tree, int):
                    raise emit.EmitError(f"kernel {label}: operand {rest[0]} is a tuple, not a buffer")
                args.append(tree)
            else:
                args.append(self.constant_buffer(rest[0], self.module[rest[0]][rest[1]]
                                                 if rest[0] in self.module else comp[rest[1]]))
        body.distinct_args = len(set(args)) == len(args)
        nbytes = _generated_bytes(comp, body, [self.buffers[a] for a in args], self.buffers)
        self.kernels.append(Kernel(body.name, label, kind, scope.comp.name, args, nbytes, body=body))
        steps.append(Launch(len(self.kernels) - 1))
        return outputs

    def _leaves(self, tree: Tree) -> list[int]:
        if tree is None:
            return []
        if isinstance(tree, tuple):
            out = []
            for t in tree:
                out += self._leaves(t)
            return out
        return [tree]

    # -- control flow ---------------------------------------------------------------------
    def lower_while(self, scope: _Scope, instr: ir.Instruction, init: Tree, steps: list) -> Tree:
        body = self.module[instr.attr("body").lstrip("%")]
        cond = self.module[instr.attr("condition").lstrip("%")]
        if self.loop_kernels:
            from .loop import loop_kernel, NotApplicable

            try:
                kernel, state = loop_kernel(self, scope, instr, init)
                steps.append(Launch(kernel))
                return state
            except NotApplicable as why:
                self.notes.append(f"{instr.name}: stays a host loop: {why}")
        body_live = _liveness(body)
        init_leaves = self._leaves(init)
        n = len(init_leaves)
        root_keys = body_live.live_out
        passthrough = [i < len(root_keys) and root_keys[i] == ("p", 0, i) for i in range(n)]
        here = scope.live.position[instr.name]
        init_keys = _flat(scope.live.keys[instr.operands[0]])
        state, entry = [], []
        for i, b in enumerate(init_leaves):
            key = init_keys[i] if i < len(init_keys) else None
            dead_after = key is not None and key[0] == "i" and self.buffers[b].kind == "temp" and \
                all(p <= here for p in scope.live.readers.get(key, [])) and key not in scope.live.live_out
            if passthrough[i] or dead_after:
                state.append(b)
            else:
                s = self.new_buffer(self.buffers[b].shape)
                entry.append(Copy(s, b))
                state.append(s)
        state_tree = _rebuild(init, iter(state))
        # kernel results that may be written straight into their state slot
        direct = {}
        for i, key in enumerate(root_keys):
            if passthrough[i] or key[0] != "i" or root_keys.count(key) > 1:
                continue
            producer = body_live.position.get(key[1])
            old_readers = body_live.readers.get(("p", 0, i), [])
            if producer is None or any(p > producer for p in old_readers):
                continue
            if producer in old_readers and not _reads_at_same_index(self.module, body, body_live,
                                                                    body[key[1]], ("p", 0, i)):
                continue
            direct[key] = state[i]
        writable = {("p", 0, i): state[i] for i in range(n) if not passthrough[i]}
        body_steps: list = []
        body_scope = _Scope(body, body_live, writable, direct)
        root = self.lower_computation(body_scope, [state_tree], body_steps)
        end = [Copy(s, r) for s, r in zip(state, self._leaves(root)) if s != r]
        end = _staged(self, end, set(state))
        cond_steps: list = []
        cond_scope = _Scope(cond, _liveness(cond), {}, {})
        pred = self.lower_computation(cond_scope, [state_tree], cond_steps)
        trip = attrs.known_trip_count(instr)
        steps.append(While(instr.name, entry, cond_steps, pred, body_steps, end, trip))
        return state_tree

    def lower_conditional(self, scope: _Scope, instr: ir.Instruction, operands: list[Tree], steps: list) -> Tree:
        names = [n.lstrip("%") for n in instr.called]
        result = self.new_tree(instr.shape)
        branches = []
        for k, name in enumerate(names):
            comp = self.module[name]
            branch_steps: list = []
            root = self.lower_computation(_Scope(comp, _liveness(comp), {}, {}), [operands[1 + k]], branch_steps)
            branch_steps += [Copy(d, s) for d, s in zip(self._leaves(result), self._leaves(root))]
            branches.append(branch_steps)
        steps.append(Conditional(instr.name, operands[0], branches))
        return result


def _rebuild(tree: Tree, leaves) -> Tree:
    if tree is None:
        return None
    if isinstance(tree, tuple):
        return tuple(_rebuild(t, leaves) for t in tree)
    return next(leaves)


def _staged(lowerer: Lowerer, copies: list[Copy], state: set[int]) -> list[Copy]:
    """End-of-iteration copies whose source is itself a state slot being overwritten (a swap)
    go through a temporary first."""
    dests = {c.dst for c in copies}
    first, then = [], []
    for c in copies:
        if c.src in dests:
            tmp = lowerer.new_buffer(lowerer.buffers[c.src].shape)
            first.append(Copy(tmp, c.src))
            then.append(Copy(c.dst, tmp))
        else:
            then.append(c)
    return first + then


# ------------------------------------------------------------------------------------------
# Kernel helpers
# ------------------------------------------------------------------------------------------


def _is_library(instr: ir.Instruction, module: ir.Module | None = None, dots: bool = False,
                comp: ir.Computation | None = None) -> bool:
    """A library call (NumPy or CuPy runs it), or a kernel hlofuse generates.  A kCustom
    fusion (XLA:CPU's YNNPACK fusions, XLA:GPU's Triton fusions) is one kernel in XLA's plan:
    hlofuse generates that one kernel when everything in it is per-element code (reductions,
    elementwise ops, broadcasts...), and calls the library only for the fusions that hold a
    library op (a dot, a convolution...).  With `dots` (the CPU's choice: its library is
    NumPy, called back from C), a dot or a convolution is generated too, when it is the
    kernel's root (its own loop nest, execute/kernel.py), and so is XLA's TopK custom call
    (execute/library_nests.py)."""
    if instr.opcode == "fusion":
        if instr.fusion_kind != "kCustom":
            return False
        return module is None or not _generatable(module, module[instr.fused_computation.lstrip("%")], dots)
    if dots and comp is not None and (conv_supported(instr, comp) or topk_supported(instr, comp)):
        return False
    if instr.opcode == "custom-call":
        return (instr.custom_call_target or "") not in THREEFRY_TARGETS
    if instr.opcode == "dot" and dots and comp is not None:
        return not _generated_dot(instr, comp)
    return instr.opcode in LIBRARY_OPCODES


#: Dots of at most this many multiply-adds are generated on the CPU; larger ones go to NumPy's
#: BLAS, whose blocking beats a plain loop nest once its call costs little beside the work.
GENERATED_DOT_MACS = 1 << 20
#: Dots blocked for registers (library_nests.blocked_dot_on_cpu) are generated up to this many
#: multiply-adds: the mlp's 8.4M run faster than NumPy's BLAS called back from C; beyond, a
#: dot's operands outgrow the caches, which the register tiles do not block for.
BLOCKED_DOT_MACS = 1 << 24


def _generated_dot(dot: ir.Instruction, comp: ir.Computation) -> bool:
    """Dots the CPU generates: floating point, one array out, small (GENERATED_DOT_MACS) or
    of a form it blocks for registers as a library would (library_nests.blocked_dot_on_cpu)
    up to BLOCKED_DOT_MACS."""
    from .interp import dot_dims

    if dot.shape.element_type not in ("f32", "f64") or dot.shape.is_tuple:
        return False
    lhs = comp[dot.operands[0]].shape
    contracted = 1
    for d in dot_dims(dot)[0]:
        contracted *= lhs.dims[d]
    macs = dot.shape.elements * contracted
    return macs <= GENERATED_DOT_MACS or (macs <= BLOCKED_DOT_MACS and blocked_dot_supported(dot, comp))


def _generatable(module: ir.Module, comp: ir.Computation, dots: bool = False) -> bool:
    """Whether every instruction of a fused computation (and of the fusions it nests) is
    per-element code the generator writes (with `dots`: or a dot at its root)."""
    for instr in comp.instructions:
        if instr.opcode == "fusion":
            if not _generatable(module, module[instr.fused_computation.lstrip("%")], dots):
                return False
        elif instr.opcode == "dot" and dots and instr.name == comp.root_name and _generated_dot(instr, comp):
            continue
        elif dots and instr.name == comp.root_name and conv_supported(instr, comp):
            continue
        elif instr.opcode not in emit.EMITTERS or _is_library(instr):
            return False
    return True


def outlined_dot(module: ir.Module, instr: ir.Instruction) -> tuple[ir.Computation, ir.Computation, list[int]] | None:
    """A kCustom fusion whose only library op is one dot of two of its parameters, with
    per-element code after it, split in two computations the CPU generates: (the dot alone,
    with parameters 0 and 1; the fusion with the dot's result as a new last parameter; the
    fusion's parameter numbers the dot reads).  None when the fusion is not of that form."""
    if instr.opcode != "fusion" or instr.fusion_kind != "kCustom":
        return None
    comp = module[instr.fused_computation.lstrip("%")]
    dots = [i for i in comp.instructions if i.opcode == "dot"]
    if len(dots) != 1 or dots[0].name == comp.root_name:
        return None
    dot = dots[0]
    sources = [comp[o] for o in dot.operands]
    if any(s.opcode != "parameter" for s in sources):
        return None
    params = tuple(ir.Instruction(f"{s.name}.dot", "parameter", s.shape, literal=str(k)) for k, s in enumerate(sources))
    alone = dot.replace(operands=tuple(p.name for p in params))
    dot_comp = ir.Computation(f"{comp.name}.dot", params + (alone,), alone.name)
    if not _generated_dot(alone, dot_comp):
        return None
    result = ir.Instruction(dot.name, "parameter", dot.shape, literal=str(len(comp.parameters)))
    rest = ir.Computation(f"{comp.name}.rest", tuple(result if i.name == dot.name else i for i in comp.instructions),
                          comp.root_name)
    if not _generatable(module, rest, True):
        return None
    return dot_comp, rest, [s.parameter_number for s in sources]


#: dots of at most this many multiply-adds run on the GPU as generated kernels (a warp per
#: output element summing its products, the dot written as a reduction) rather than cuBLAS:
#: that keeps a program's steps one CUDA graph (CuPy refuses to capture cuBLAS calls), and
#: on an H100 one graph of such kernels beat cuBLAS calls launched from Python up to the
#: mlp sample's 64x64·64x512 batches of 4 (8.4M: attention 0.082 -> 0.036 ms, mlp 0.109 ->
#: 0.094); larger dots, where cuBLAS's tiling pays, stay library calls
SMALL_DOT_MACS = 1 << 23


def _adder_name(element_type: str) -> str:
    return f"hlofuse.add.{element_type}"


def with_adders(module: ir.Module) -> ir.Module:
    """The module with a scalar add computation per element type dots may produce (the
    reductions small dots become call them)."""
    extra = []
    for et in ("f16", "bf16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"):
        if _adder_name(et) in module:
            continue
        scalar = ir.Shape(et)
        a = ir.Instruction("a", "parameter", scalar, literal="0")
        b = ir.Instruction("b", "parameter", scalar, literal="1")
        total = ir.Instruction("sum", "add", scalar, operands=("a", "b"))
        extra.append(ir.Computation(_adder_name(et), (a, b, total), "sum"))
    return dataclasses.replace(module, computations=module.computations + tuple(extra))


def dot_as_reduction(comp: ir.Computation, dot: ir.Instruction) -> tuple[ir.Instruction, ...] | None:
    """A dot as XLA defines it, written as the sum over its contracting dimensions of the
    products of its broadcast operands (dims: batch, lhs free, rhs free, then contracting,
    those most minor so the sum is a row reduction), the reduce keeping the dot's name and
    shape.  None for dots with other than one array result or an unsupported type."""
    from .interp import dot_dims

    out = dot.shape
    if out.is_tuple or out.element_type not in ("f16", "bf16", "f32", "f64", "s8", "s16", "s32", "s64", "u8",
                                                "u16", "u32", "u64"):
        return None
    lc, rc, lb, rb = dot_dims(dot)
    lhs, rhs = comp[dot.operands[0]], comp[dot.operands[1]]
    lfree = [d for d in range(lhs.shape.rank) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.shape.rank) if d not in rc and d not in rb]
    rank = out.rank
    wide_dims = out.dims + tuple(lhs.shape.dims[d] for d in lc)
    k = len(lc)
    wide = ir.array_shape(out.element_type, wide_dims,
                          tuple(range(rank + k - 1, rank - 1, -1)) + tuple(out.minor_to_major))

    def position(d, batch, free, contracting, free_base):
        if d in batch:
            return batch.index(d)
        if d in free:
            return free_base + free.index(d)
        return rank + contracting.index(d)

    made = []
    sides = []
    for side, operand, batch, free, contracting, base in (("l", lhs, lb, lfree, lc, len(lb)),
                                                          ("r", rhs, rb, rfree, rc, len(lb) + len(lfree))):
        name = operand.name
        if operand.shape.element_type != out.element_type:
            converted = ir.Instruction(f"{dot.name}.{side}.convert", "convert",
                                       operand.shape.with_element_type(out.element_type), operands=(name,))
            made.append(converted)
            name = converted.name
        dims = ",".join(str(position(d, batch, free, contracting, base)) for d in range(operand.shape.rank))
        spread = ir.Instruction(f"{dot.name}.{side}", "broadcast", wide, operands=(name,),
                                attrs=(("dimensions", "{" + dims + "}"),))
        made.append(spread)
        sides.append(spread.name)
    product = ir.Instruction(f"{dot.name}.products", "multiply", wide, operands=tuple(sides))
    zero = ir.Instruction(f"{dot.name}.zero", "constant", ir.Shape(out.element_type), literal="0")
    summed = ",".join(str(rank + i) for i in range(k))
    total = ir.Instruction(dot.name, "reduce", out, operands=(product.name, zero.name),
                           attrs=(("dimensions", "{" + summed + "}"), ("to_apply", _adder_name(out.element_type))),
                           called=(_adder_name(out.element_type),))
    return tuple(made) + (product, zero, total)


def small_dot_computation(module: ir.Module, comp: ir.Computation, instr: ir.Instruction) -> ir.Computation | None:
    """A dot, or a kCustom fusion holding one dot with per-element code around it (XLA:GPU's
    Triton GEMM fusions), of at most SMALL_DOT_MACS multiply-adds, as one computation the
    generator writes (the dot as a reduction: dot_as_reduction); None otherwise."""
    from .interp import dot_dims

    if instr.opcode == "fusion" and instr.fusion_kind == "kCustom":
        body = module[instr.fused_computation.lstrip("%")]
    elif instr.opcode == "dot":
        body = _kernel_computation(module, comp, instr)
    else:
        return None
    dots = [i for i in body.instructions if i.opcode == "dot"]
    if len(dots) != 1 or instr.shape.is_tuple:
        return None
    dot = dots[0]
    contracted = 1
    for d in dot_dims(dot)[0]:
        contracted *= body[dot.operands[0]].shape.dims[d]
    if dot.shape.elements * contracted > SMALL_DOT_MACS:
        return None
    replaced = dot_as_reduction(body, dot)
    if replaced is None:
        return None
    instructions = []
    for i in body.instructions:
        instructions += replaced if i.name == dot.name else (i,)
    rewritten = ir.Computation(f"{body.name}.as_reduction", tuple(instructions), body.root_name)
    return rewritten if _generatable(module, rewritten) else None


@dataclass(frozen=True)
class GemmSplit:
    """A GEMM fusion cut around its dot: for each dot operand the fusion parameter it reads
    (through bitcasts) or the computation of it (a prologue over the fusion's parameters);
    the dot alone; the code after it (over the fusion's parameters and the dot's result as a
    last parameter), None when the fusion's result is the dot's (through bitcasts)."""

    sources: tuple  # int (a fusion parameter number) or ir.Computation, per dot operand
    operand_shapes: tuple  # the shapes the dot sees its operands in
    dot: ir.Instruction
    epilogue: ir.Computation | None


def split_gemm_fusion(module: ir.Module, instr: ir.Instruction) -> GemmSplit | None:
    """XLA:GPU's Triton GEMM fusions (`__triton_gemm`, `__triton_nested_gemm_fusion`: one
    kernel holding a dot with the per-element code that feeds it and follows it, gpu/
    transforms/gemm_fusion.cc) cut into what runs here on a GPU: cuBLAS for the dot and
    generated kernels for the rest.  None when the fusion holds other than one dot and
    per-element code the generator writes."""
    if instr.opcode != "fusion" or instr.fusion_kind != "kCustom" or instr.shape.is_tuple:
        return None
    comp = module[instr.fused_computation.lstrip("%")]
    dots = [i for i in comp.instructions if i.opcode == "dot"]
    if len(dots) != 1 or dots[0].shape.is_tuple or len(dots[0].operands) != 2:
        return None
    dot = dots[0]
    params = tuple(i for i in comp.instructions if i.opcode == "parameter")
    sources = []
    for k, name in enumerate(dot.operands):
        start = _through_bitcasts(comp, name)
        if start.opcode == "parameter":
            sources.append(start.parameter_number)
            continue
        needed = _ancestors(comp, name)
        if dot.name in needed:
            return None
        body = tuple(i for i in comp.instructions if i.name in needed and i.opcode != "parameter")
        prologue = ir.Computation(f"{comp.name}.prologue{k}", params + body, name)
        if not _generatable(module, prologue):
            return None
        sources.append(prologue)
    epilogue = None
    if _through_bitcasts(comp, comp.root_name).name != dot.name:
        result = ir.Instruction(dot.name, "parameter", dot.shape, literal=str(len(params)))
        needed = _ancestors(comp, comp.root_name, stop=dot.name)
        body = tuple(i for i in comp.instructions if i.name in needed and i.opcode != "parameter"
                     and i.name != dot.name)
        epilogue = ir.Computation(f"{comp.name}.epilogue", params + (result,) + body, comp.root_name)
        if not _generatable(module, epilogue):
            return None
    return GemmSplit(tuple(sources), tuple(comp[o].shape for o in dot.operands), dot, epilogue)


def _through_bitcasts(comp: ir.Computation, name: str) -> ir.Instruction:
    """The instruction `name` reinterprets, past any bitcasts (which move no bytes)."""
    instr = comp[name]
    while instr.opcode == "bitcast":
        instr = comp[instr.operands[0]]
    return instr


def _ancestors(comp: ir.Computation, name: str, stop: str | None = None) -> set[str]:
    """`name` and every instruction it reads, transitively (not past `stop`)."""
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if current != stop:
            todo.extend(comp[current].operands)
    return seen


def _kernel_kind(instr: ir.Instruction) -> str:
    if instr.opcode == "fusion":  # a generated kCustom fusion keeps its kind
        return instr.fusion_kind or "kLoop"
    if _is_library(instr):
        return "library"
    return instr.opcode


def _kernel_computation(module: ir.Module, comp: ir.Computation, instr: ir.Instruction) -> ir.Computation:
    """The computation a generated kernel computes: a fusion's body, or the instruction
    alone with one parameter per operand."""
    if instr.opcode == "fusion":
        return module[instr.fused_computation.lstrip("%")]
    params = []
    for k, operand in enumerate(instr.operands):
        params.append(ir.Instruction(f"param_{k}", "parameter", comp[operand].shape, literal=str(k)))
    names = tuple(p.name for p in params)
    kept = tuple((key, value) for key, value in instr.attrs if key not in ("control-predecessors", "metadata"))
    root = instr.replace(operands=names, attrs=kept)
    return ir.Computation(f"{comp.name}.{instr.name}", tuple(params) + (root,), root.name)


def _reads_at_same_index(module: ir.Module, comp: ir.Computation, live: _Liveness, instr: ir.Instruction,
                         key: tuple) -> bool:
    """Does this kernel read the buffer `key` only at the index it writes (elementwise, one
    output of the same shape)?  Then it may write over that buffer (XLA's buffer sharing of
    elementwise users)."""
    from ..opcodes import ELEMENTWISE

    if _is_library(instr):
        return False
    out_dims = {leaf.dims for leaf in instr.shape.leaves()}
    if len(out_dims) != 1:  # a multi-output loop fusion: all outputs of one shape
        return False
    dims = out_dims.pop()
    numbers = [k for k, o in enumerate(instr.operands) if key in _flat(live.keys[o])]
    if instr.opcode != "fusion":
        return instr.opcode in ELEMENTWISE and all(comp[instr.operands[k]].shape.dims == dims
                                                   for k in numbers)
    body = module[instr.fused_computation.lstrip("%")]
    params = {p.parameter_number: p for p in body.parameters}
    for k in numbers:
        param = params.get(k)
        if param is None or param.shape.dims != dims:
            return False
        for user in body.users[param.name]:
            u = body[user]
            if u.opcode not in ELEMENTWISE or u.shape.dims != param.shape.dims:
                return False
    return True


def _sole_user_is_root(comp: ir.Computation) -> bool:
    """XLA updates in place only when the root's operand parameter has no other user."""
    root = comp.root
    if root.opcode not in ("dynamic-update-slice", "scatter") or not root.operands:
        return False
    operand = comp[root.operands[0]]
    return operand.opcode == "parameter" and comp.users[operand.name] == (root.name,)


def _generated_bytes(comp: ir.Computation, body: KernelBody, args: list[Buffer], buffers) -> int:
    """Bytes a generated kernel moves: each input once (only the slices it reads when it
    reads it through slices), each output once (an in-place update: the update only)."""
    total = 0
    seen = set()
    for arg, buf in zip(body.args, args):
        if arg.output:
            if body.in_place:
                root = comp.root
                total += comp[root.operands[1]].shape.byte_size if root.opcode == "dynamic-update-slice" \
                    else comp[root.operands[2]].shape.byte_size
            else:
                total += buf.nbytes
            continue
        if buf.id in seen:
            continue
        seen.add(buf.id)
        if arg.key[0] == "param":
            total += _bytes_read(comp, arg.key[1], buf.nbytes)
        else:
            total += buf.nbytes
    return total


def _bytes_read(comp: ir.Computation, number: int, full: int) -> int:
    param = next((p for p in comp.parameters if p.parameter_number == number), None)
    if param is None:
        return full
    users = [comp[u] for u in comp.users[param.name]]
    sliced = [u for u in users if u.opcode in ("slice", "dynamic-slice", "gather") and u.operands[0] == param.name]
    if users and len(sliced) == len(users):
        return min(full, sum(u.shape.byte_size for u in sliced))
    return full


def lower(module: ir.Module, *, loop_kernels: bool = False, loop_tile: int = 1, generated_dots: bool = False,
          split_gemm_fusions: bool = False) -> Lowered:
    """`loop_tile`: batch elements one thread of a loop kernel takes; `generated_dots`: dots
    as generated kernels rather than library calls; `split_gemm_fusions`: a GEMM fusion as
    generated prologues and epilogue around a library dot (the device says all three)."""
    from ..cycles import require_acyclic

    require_acyclic(module)  # a module built in memory has not met the parser's check
    return Lowerer(module, loop_kernels=loop_kernels, loop_tile=loop_tile, generated_dots=generated_dots,
                   split_gemm_fusions=split_gemm_fusions).lower()

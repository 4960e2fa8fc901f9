"""The reference evaluator: runs an `ir.Module` on NumPy, one instruction at a time.

This is the correctness oracle of `hlofuse bench`: every plan's kernels are checked
against it.  It follows XLA's semantics (execute/numeric.py for the arithmetic), evaluates
fusions, calls and while loops by running their computations, and raises ExecutionError
naming the instruction for anything it cannot run (an elided constant, an unknown custom
call, an opcode it does not know).

    from hlofuse.execute.interp import evaluate
    outputs = evaluate(module, [np.ones((2048, 4), np.float32), ...])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .. import attributes as attrs
from .. import ir
from ..errors import ExecutionError
from ..literals import LiteralError, parse_literal
from . import arrays, numeric
from .threefry import threefry2x32

Value = Any  # np.ndarray, a tuple of Values, or None (token)
Handler = Callable[["Evaluator", ir.Instruction, list], Value]

HANDLERS: dict[str, Handler] = {}


def handles(*opcodes: str):
    def register(fn: Handler) -> Handler:
        for op in opcodes:
            HANDLERS[op] = fn
        return fn
    return register


@dataclass(frozen=True)
class _Step:
    instr: ir.Instruction
    handler: Handler
    operands: tuple[int, ...]


class Evaluator:
    """Evaluates the computations of one module.  `max_iterations` bounds every while loop
    (a guard against loops that never end on random inputs)."""

    def __init__(self, module: ir.Module, *, max_iterations: int = 10_000_000, max_bytes: int | None = None):
        from ..cycles import require_acyclic

        require_acyclic(module)  # a module built in memory has not met the parser's check
        self.module = module
        self.max_iterations = max_iterations
        #: the memory a run may take (None: HLOFUSE_MEMORY_LIMIT, else half the physical memory)
        self.max_bytes = max_bytes
        self._compiled: dict[str, tuple[list[_Step], dict[int, int], int]] = {}
        self._constants: dict[int, np.ndarray] = {}
        #: id(instruction) → its operands' shapes (a bitcast needs its operand's layout)
        self.operand_shapes: dict[int, tuple[ir.Shape, ...]] = {}

    # -- entry points ---------------------------------------------------------------------
    def run(self, args: Sequence[Value]) -> Value:
        """Evaluate the entry computation on `args` (logical-shape arrays, one per parameter).
        Refused before it starts when the values the module declares need more than
        `max_bytes` (execute/budget.py) or a loop runs more than `max_iterations` times."""
        from .budget import Limits, check

        limits = Limits.from_environment(iterations=self.max_iterations)
        if self.max_bytes is not None:
            limits = Limits(self.max_bytes, self.max_iterations)
        check(self.module, limits)
        entry = self.module.entry
        params = entry.parameters
        if len(args) != len(params):
            raise ExecutionError(f"{self.module.name}: the entry takes {len(params)} arguments, got {len(args)}")
        checked = [_check_arg(p, a) for p, a in zip(params, args)]
        return self.call(entry, checked)

    def call(self, comp: ir.Computation | str, args: Sequence[Value]) -> Value:
        if isinstance(comp, str):
            comp = self.module[comp]
        steps, param_slots, root = self._compile(comp)
        env: list[Value] = [None] * len(steps)
        for number, slot in param_slots.items():
            if number >= len(args):
                raise ExecutionError(f"computation {comp.name} takes parameter {number}, got {len(args)} arguments")
            env[slot] = args[number]
        with np.errstate(all="ignore"):
            for i, step in enumerate(steps):
                if step.instr.opcode == "parameter":
                    continue
                ops = [env[j] for j in step.operands]
                try:
                    env[i] = step.handler(self, step.instr, ops)
                except ExecutionError:
                    raise
                except Exception as err:  # a NumPy error: say where it happened
                    raise ExecutionError(f"{comp.name}/{step.instr.name} ({step.instr.opcode}): "
                                         f"{type(err).__name__}: {err}") from err
        return env[root]

    def _compile(self, comp: ir.Computation):
        cached = self._compiled.get(comp.name)
        if cached is not None:
            return cached
        order = comp.post_order
        slot = {instr.name: i for i, instr in enumerate(order)}
        steps = []
        params = {}
        for instr in order:
            handler = HANDLERS.get(instr.opcode)
            if handler is None:
                raise ExecutionError(f"the evaluator cannot run opcode {instr.opcode!r} "
                                     f"({comp.name}/{instr.name})")
            if instr.opcode == "parameter":
                params[instr.parameter_number] = slot[instr.name]
            steps.append(_Step(instr, handler, tuple(slot[o] for o in instr.operands)))
            self.operand_shapes[id(instr)] = tuple(comp[o].shape for o in instr.operands)
        compiled = (steps, params, slot[comp.root_name])
        self._compiled[comp.name] = compiled
        return compiled

    def apply(self, comp_name: str) -> Callable[[Sequence[np.ndarray]], list[np.ndarray]]:
        """A reducer/comparator as a function of arrays returning a list of arrays."""
        comp = self.module[comp_name]

        def fn(args):
            out = self.call(comp, list(args))
            return list(out) if isinstance(out, tuple) else [out]

        fn.arity = len(comp.parameters)
        return fn

    def constant(self, instr: ir.Instruction) -> np.ndarray:
        key = id(instr)
        if key not in self._constants:
            self._constants[key] = literal_value(instr)
        return self._constants[key]


def evaluate(module: ir.Module, args: Sequence[Value]) -> Value:
    """Run the module's entry computation on `args`; the result as arrays (tuples for tuples)."""
    return Evaluator(module).run(args)


def literal_value(instr: ir.Instruction) -> np.ndarray:
    """The array of a constant instruction (ExecutionError when the dump elided it)."""
    shape = instr.shape
    if shape.is_tuple:
        raise ExecutionError(f"tuple constants are not supported ({instr.name})")
    try:
        value = parse_literal(instr.literal or "", shape)
    except LiteralError as err:
        raise ExecutionError(f"constant {instr.name}: {err}") from None
    if _has_ellipsis(value):
        raise ExecutionError(f"constant {instr.name} is elided in the dump ({{...}}); dump with "
                             f"--xla_dump_large_constants to run it")
    dtype = numeric.np_dtype(shape.element_type)
    array = np.array(value, dtype=object if dtype.kind in "iu" else None)
    if array.ndim == 0 and shape.dims:
        return np.full(shape.dims, value, dtype)
    return np.asarray(array.astype(dtype) if array.dtype == object else array, dtype).reshape(shape.dims)


def _has_ellipsis(value) -> bool:
    if value is ...:
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_ellipsis(v) for v in value)
    return False


def _check_arg(param: ir.Instruction, arg: Value) -> Value:
    shape = param.shape
    if shape.is_tuple:
        return tuple(_check_arg(ir.Instruction(param.name, "parameter", s), a)
                     for s, a in zip(shape.tuple_shapes, arg))
    arr = np.asarray(arg)
    if tuple(arr.shape) != shape.dims:
        raise ExecutionError(f"parameter {param.name} is {shape.to_text(False)}, got an array of shape {arr.shape}")
    return arr.astype(numeric.np_dtype(shape.element_type), copy=False)


def _dtype(instr: ir.Instruction) -> np.dtype:
    return numeric.np_dtype(instr.shape.element_type)


# ------------------------------------------------------------------------------------------
# Elementwise
# ------------------------------------------------------------------------------------------


@handles(*numeric.FLOAT_FUNCTIONS)
def _float_fn(ev, instr, ops):
    return numeric.float_function(instr.opcode, ops[0])


@handles("abs", "negate", "sign", "floor", "ceil", "round-nearest-even", "round-nearest-afz", "not",
         "is-finite", "popcnt", "count-leading-zeros", "real", "imag", "copy")
def _unary(ev, instr, ops):
    x, op = ops[0], instr.opcode
    if op == "abs":
        out = np.abs(x)
    elif op == "negate":
        out = np.negative(x)
    elif op == "sign":
        out = np.sign(x)
    elif op == "floor":
        out = np.floor(x)
    elif op == "ceil":
        out = np.ceil(x)
    elif op == "round-nearest-even":
        out = np.rint(x)
    elif op == "round-nearest-afz":
        out = numeric.round_half_away(x)
    elif op == "not":
        out = np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)
    elif op == "is-finite":
        out = np.isfinite(x)
    elif op == "popcnt":
        out = numeric.popcnt(x)
    elif op == "count-leading-zeros":
        out = numeric.clz(x)
    elif op == "real":
        out = np.real(x)
    elif op == "imag":
        out = np.imag(x)
    else:  # copy
        out = np.array(x, copy=True)
    return np.asarray(out).astype(_dtype(instr), copy=False)


@handles("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2",
         "and", "or", "xor", "shift-left", "shift-right-logical", "shift-right-arithmetic", "complex")
def _binary(ev, instr, ops):
    a, b = np.asarray(ops[0]), np.asarray(ops[1])
    op = instr.opcode
    kind = a.dtype.kind
    if op in ("add", "subtract", "multiply") and kind == "b":
        out = (a | b) if op == "add" else (a & b) if op == "multiply" else (a ^ b)
    elif op == "add":
        out = a + b
    elif op == "subtract":
        out = a - b
    elif op == "multiply":
        out = a * b
    elif op == "divide":
        out = a / b if kind in "fc" else numeric.int_divide(a, b)
    elif op == "remainder":
        out = numeric.float_remainder(a, b) if kind == "f" else numeric.int_remainder(a, b)
    elif op == "maximum":
        out = np.maximum(a, b)
    elif op == "minimum":
        out = np.minimum(a, b)
    elif op == "power":
        if kind == "f":
            out = np.power(a.astype(np.float64), b.astype(np.float64))
        elif kind == "c":
            out = np.power(a, b)
        else:
            out = numeric.int_power(a, b)
    elif op == "atan2":
        out = np.arctan2(a.astype(np.float64), b.astype(np.float64))
    elif op in ("and", "or", "xor"):
        fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
        out = fn(a, b)
    elif op == "complex":
        out = a + 1j * b
    else:
        out = numeric.shift(op, a, b)
    return np.asarray(out).astype(_dtype(instr), copy=False)


@handles("compare")
def _compare(ev, instr, ops):
    direction = instr.attr("direction") or "EQ"
    total = (instr.attr("type") or "").upper() == "TOTALORDER"
    return np.asarray(numeric.compare(direction, np.asarray(ops[0]), np.asarray(ops[1]), total))


@handles("select")
def _select(ev, instr, ops):
    return np.asarray(np.where(ops[0], ops[1], ops[2])).astype(_dtype(instr), copy=False)


@handles("clamp")
def _clamp(ev, instr, ops):
    lo, x, hi = ops
    return np.asarray(np.minimum(np.maximum(x, lo), hi)).astype(_dtype(instr), copy=False)


@handles("convert")
def _convert(ev, instr, ops):
    return np.asarray(numeric.convert(np.asarray(ops[0]), instr.shape.element_type))


@handles("bitcast-convert")
def _bitcast_convert(ev, instr, ops):
    return numeric.bitcast_convert(np.asarray(ops[0]), instr.shape.element_type, instr.shape.dims)


@handles("reduce-precision")
def _reduce_precision(ev, instr, ops):
    return numeric.reduce_precision(ops[0], attrs.integer(instr, "exponent_bits"), attrs.integer(instr, "mantissa_bits"))


@handles("map")
def _map(ev, instr, ops):
    return np.asarray(ev.apply(instr.called[0])(ops)[0]).astype(_dtype(instr), copy=False)


# ------------------------------------------------------------------------------------------
# Values that need no computation
# ------------------------------------------------------------------------------------------


@handles("parameter")
def _parameter(ev, instr, ops):  # bound by Evaluator.call
    return None


@handles("constant")
def _constant(ev, instr, ops):
    return ev.constant(instr)


@handles("iota")
def _iota(ev, instr, ops):
    dims = instr.shape.dims
    axis = attrs.integer(instr, "iota_dimension", 0)
    shape = [1] * len(dims)
    shape[axis] = dims[axis]
    values = np.arange(dims[axis]).reshape(shape)
    return np.broadcast_to(values, dims).astype(_dtype(instr))


@handles("tuple")
def _tuple(ev, instr, ops):
    return tuple(ops)


@handles("get-tuple-element")
def _gte(ev, instr, ops):
    return ops[0][attrs.integer(instr, "index", 0)]


@handles("after-all", "partition-id", "replica-id")
def _token(ev, instr, ops):
    if instr.opcode == "after-all":
        return None
    return np.zeros((), np.uint32)


@handles("opt-barrier", "domain", "add-dependency")
def _identity(ev, instr, ops):
    return ops[0]


@handles("get-dimension-size")
def _dim_size(ev, instr, ops):
    return np.asarray(ops[0].shape[attrs.dimensions(instr)[0]], np.int32)


# ------------------------------------------------------------------------------------------
# Shapes and data movement
# ------------------------------------------------------------------------------------------


@handles("broadcast")
def _broadcast(ev, instr, ops):
    x = np.asarray(ops[0])
    dims = attrs.dimensions(instr)
    out = instr.shape.dims
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    x = np.transpose(x, order) if x.ndim > 1 else x
    shape = [1] * len(out)
    for i in order:
        shape[dims[i]] = out[dims[i]]
    return np.broadcast_to(x.reshape(shape), out)


@handles("reshape")
def _reshape(ev, instr, ops):
    return np.reshape(ops[0], instr.shape.dims)


@handles("bitcast")
def _bitcast(ev, instr, ops):
    return bitcast(np.asarray(ops[0]), ev.operand_shapes[id(instr)][0], instr.shape)


def bitcast(x: np.ndarray, in_shape: ir.Shape | None, out_shape: ir.Shape) -> np.ndarray:
    """A bitcast reinterprets the buffer: logical → physical order of the operand's layout →
    logical order of the result's layout.  Without the operand's layout, its default."""
    target = numeric.np_dtype(out_shape.element_type)
    if not out_shape.dims and (in_shape is None or not in_shape.dims):
        # scalar to scalar; also reached with arrays of scalars when a comparator or reducer
        # is evaluated on many pairs at once
        return x.view(target) if x.dtype != target else x
    if in_shape is None:
        in_shape = ir.array_shape(out_shape.element_type, tuple(x.shape))
    flat = numeric.to_physical(x, in_shape)
    if flat.dtype != target:
        flat = flat.view(target)
    return numeric.from_physical(flat, out_shape)


@handles("transpose")
def _transpose(ev, instr, ops):
    return np.transpose(ops[0], attrs.dimensions(instr))


@handles("slice")
def _slice(ev, instr, ops):
    return ops[0][tuple(slice(s.start, s.limit, s.stride) for s in attrs.slice_dims(instr))]


def _clamped_starts(starts, operand_dims, sizes) -> list[int]:
    return [int(min(max(int(np.asarray(s).reshape(())), 0), d - z)) for s, d, z in zip(starts, operand_dims, sizes)]


@handles("dynamic-slice")
def _dynamic_slice(ev, instr, ops):
    x = ops[0]
    sizes = attrs.ints(instr, "dynamic_slice_sizes")
    starts = _index_operands(ops[1:], x.ndim)
    begin = _clamped_starts(starts, x.shape, sizes)
    return x[tuple(slice(b, b + z) for b, z in zip(begin, sizes))]


@handles("dynamic-update-slice")
def _dus(ev, instr, ops):
    x, update = ops[0], ops[1]
    starts = _index_operands(ops[2:], x.ndim)
    begin = _clamped_starts(starts, x.shape, update.shape)
    out = np.array(x, copy=True)
    out[tuple(slice(b, b + z) for b, z in zip(begin, update.shape))] = update
    return out


def _index_operands(ops, rank: int) -> list:
    """Start indices: one scalar per dimension (or, in old HLO, one rank-1 array)."""
    if len(ops) == 1 and np.asarray(ops[0]).ndim == 1 and rank != 1:
        return list(np.asarray(ops[0]))
    return list(ops)


@handles("concatenate")
def _concatenate(ev, instr, ops):
    return np.concatenate([np.asarray(o) for o in ops], axis=attrs.dimensions(instr)[0])


@handles("pad")
def _pad(ev, instr, ops):
    x, value = np.asarray(ops[0]), np.asarray(ops[1])
    config = attrs.padding(instr)
    shape = tuple((d - 1) * (interior + 1) + 1 if d else 0 for d, (_, _, interior) in zip(x.shape, config))
    base = np.full(shape, value, x.dtype)
    base[tuple(slice(None, None, interior + 1) for _, _, interior in config)] = x
    padded = np.pad(base, [(max(lo, 0), max(hi, 0)) for lo, hi, _ in config], constant_values=value)
    crop = tuple(slice(-min(lo, 0), padded.shape[i] + min(hi, 0)) for i, (lo, hi, _) in enumerate(config))
    return padded[crop]


@handles("reverse")
def _reverse(ev, instr, ops):
    return np.flip(ops[0], axis=attrs.dimensions(instr))


# ------------------------------------------------------------------------------------------
# Reductions, contractions, indexing
# ------------------------------------------------------------------------------------------


def _split_variadic(ops):
    n = len(ops) // 2
    return [np.asarray(o) for o in ops[:n]], [np.asarray(o) for o in ops[n:]]


@handles("reduce")
def _reduce(ev, instr, ops):
    values, inits = _split_variadic(ops)
    comp = instr.called[0]
    kind = arrays.reducer_kind(ev.module[comp])
    out = arrays.reduce(values, inits, attrs.dimensions(instr), ev.apply(comp), kind)
    return tuple(out) if instr.shape.is_tuple else out[0]


@handles("reduce-window")
def _reduce_window(ev, instr, ops):
    values, inits = _split_variadic(ops)
    comp = instr.called[0]
    kind = arrays.reducer_kind(ev.module[comp])
    out = arrays.reduce_window(values, inits, attrs.window(instr), ev.apply(comp), kind)
    return tuple(out) if instr.shape.is_tuple else out[0]


def dot_dims(instr: ir.Instruction) -> tuple[tuple[int, ...], ...]:
    return (attrs.ints(instr, "lhs_contracting_dims"), attrs.ints(instr, "rhs_contracting_dims"),
            attrs.ints(instr, "lhs_batch_dims"), attrs.ints(instr, "rhs_batch_dims"))


@handles("dot")
def _dot(ev, instr, ops):
    return arrays.dot_general(np.asarray(ops[0]), np.asarray(ops[1]), *dot_dims(instr), _dtype(instr))


@handles("convolution")
def _convolution(ev, instr, ops):
    return arrays.convolution(np.asarray(ops[0]), np.asarray(ops[1]), attrs.window(instr),
                              instr.attr("dim_labels") or "", attrs.integer(instr, "feature_group_count", 1),
                              attrs.integer(instr, "batch_group_count", 1), _dtype(instr))


@handles("gather")
def _gather(ev, instr, ops):
    return arrays.gather(
        np.asarray(ops[0]), np.asarray(ops[1]), instr.shape.dims, attrs.ints(instr, "offset_dims"),
        attrs.ints(instr, "collapsed_slice_dims"), attrs.ints(instr, "start_index_map"),
        attrs.integer(instr, "index_vector_dim", np.asarray(ops[1]).ndim), attrs.ints(instr, "slice_sizes"),
        attrs.ints(instr, "operand_batching_dims"), attrs.ints(instr, "start_indices_batching_dims"))


@handles("scatter")
def _scatter(ev, instr, ops):
    n = (len(ops) - 1) // 2
    operands, indices, updates = list(ops[:n]), np.asarray(ops[n]), list(ops[n + 1:])
    comp = instr.called[0]
    out = arrays.scatter(
        [np.asarray(o) for o in operands], indices, [np.asarray(u) for u in updates],
        attrs.ints(instr, "update_window_dims"), attrs.ints(instr, "inserted_window_dims"),
        attrs.ints(instr, "scatter_dims_to_operand_dims"),
        attrs.integer(instr, "index_vector_dim", indices.ndim), ev.apply(comp),
        arrays.reducer_kind(ev.module[comp]), attrs.ints(instr, "input_batching_dims"),
        attrs.ints(instr, "scatter_indices_batching_dims"))
    return tuple(out) if instr.shape.is_tuple else out[0]


@handles("sort")
def _sort(ev, instr, ops):
    axis = attrs.dimensions(instr)[0]
    out = arrays.sort([np.asarray(o) for o in ops], axis, ev.apply(instr.called[0]), True)
    return tuple(out) if instr.shape.is_tuple else out[0]


@handles("topk")
def _topk(ev, instr, ops):
    k = attrs.integer(instr, "k")
    largest = (instr.attr("largest") or "true") == "true"
    return top_k(np.asarray(ops[0]), k, largest)


def top_k(x: np.ndarray, k: int, largest: bool = True, less=None) -> tuple[np.ndarray, np.ndarray]:
    """The k first elements of each row of the last dimension and their s32 indices; ties
    keep the lower index first."""
    if less is None:
        keys = numeric.total_order_key(x) if x.dtype.kind == "f" else x
        order = np.argsort(-keys.astype(np.int64) if largest else keys, axis=-1, kind="stable")
    else:
        index = np.broadcast_to(np.arange(x.shape[-1], dtype=np.int32), x.shape).copy()
        # the comparator sees values, and indices too when it takes four parameters
        arity = less.arity
        _, sorted_index = arrays.sort([x, index], x.ndim - 1, lambda a: less(a[:arity]), True)
        order = sorted_index
    idx = order[..., :k].astype(np.int32)
    return np.take_along_axis(x, idx, axis=-1), idx


# ------------------------------------------------------------------------------------------
# Control flow and calls
# ------------------------------------------------------------------------------------------


@handles("fusion", "call", "async-start")
def _call(ev, instr, ops):
    target = instr.attr("calls") or (instr.called[0] if instr.called else None)
    if instr.opcode == "async-start":
        target = instr.attr("calls") or instr.attr("async_wrapped_computation") or target
        result = ev.call(target.lstrip("%"), ops)
        return (tuple(ops), result, None)
    return ev.call(target.lstrip("%"), ops)


@handles("async-update")
def _async_update(ev, instr, ops):
    return ops[0]


@handles("async-done")
def _async_done(ev, instr, ops):
    return ops[0][1]


@handles("copy-start")
def _copy_start(ev, instr, ops):
    return (np.array(ops[0], copy=True), ops[0], np.zeros((), np.uint32))


@handles("copy-done")
def _copy_done(ev, instr, ops):
    return ops[0][0]


@handles("while")
def _while(ev, instr, ops):
    cond, body = instr.attr("condition").lstrip("%"), instr.attr("body").lstrip("%")
    state = ops[0]
    for _ in range(ev.max_iterations + 1):  # the last test ends a loop of exactly max_iterations
        if not bool(np.asarray(ev.call(cond, [state]))):
            return state
        state = ev.call(body, [state])
    raise ExecutionError(f"while loop {instr.name} ran more than {ev.max_iterations} iterations")


@handles("conditional")
def _conditional(ev, instr, ops):
    selector = np.asarray(ops[0])
    if selector.dtype == np.bool_:
        names = [instr.attr("true_computation"), instr.attr("false_computation")]
        index = 0 if bool(selector) else 1
        if names[0] is None:  # branch_computations={true, false} is not how pred conditionals print
            names = list(instr.called)
    else:
        names = list(instr.called)
        index = int(selector)
        if not 0 <= index < len(names):
            index = len(names) - 1  # XLA runs the last branch for out-of-range indices
    return ev.call(names[index].lstrip("%"), [ops[1 + index]])


@handles("all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter",
         "collective-broadcast")
def _single_device_collective(ev, instr, ops):
    # One participant: every collective leaves its operand as it is.
    return ops[0] if len(ops) == 1 else tuple(ops)


@handles("rng-bit-generator")
def _rng_bit_generator(ev, instr, ops):
    from .rng import rng_bit_generator

    state_shape, out_shape = instr.shape.tuple_shapes
    bits = numeric.np_dtype(out_shape.element_type).itemsize * 8
    new_state, values = rng_bit_generator(instr.attr("algorithm"), np.asarray(ops[0]), out_shape.dims, bits)
    target = numeric.np_dtype(out_shape.element_type)
    return (new_state.astype(numeric.np_dtype(state_shape.element_type)),
            values.view(target) if values.dtype.itemsize == target.itemsize else values.astype(target))


@handles("rng", "infeed", "outfeed", "send", "recv", "send-done", "recv-done", "rng-get-and-update-state")
def _unsupported(ev, instr, ops):
    raise ExecutionError(f"{instr.name}: {instr.opcode} cannot be evaluated (its result depends on "
                         f"state outside the module)")


# ------------------------------------------------------------------------------------------
# Custom calls
# ------------------------------------------------------------------------------------------

THREEFRY_TARGETS = frozenset({"cu_threefry2x32", "cu_threefry2x32_ffi", "cpu_threefry2x32"})
GEMM_TARGETS = frozenset({"__cublas$gemm", "__cublas$lt$matmul"})
CONV_TARGETS = frozenset({"__cudnn$convForward", "__cudnn$convBiasActivationForward"})
TOPK_TARGETS = frozenset({"TopK", "__gpu$TopK"})
IDENTITY_TARGETS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                              "MoveToHost", "MoveToDevice", "annotate_device_placement"})


@handles("custom-call")
def _custom_call(ev, instr, ops):
    target = instr.custom_call_target or ""
    if target in THREEFRY_TARGETS:
        return threefry2x32(*ops[:4])
    if target in GEMM_TARGETS:
        return gemm(instr, ops)
    if target in CONV_TARGETS:
        return cudnn_convolution(instr, ops)
    if target in TOPK_TARGETS:
        k = instr.shape.tuple_shapes[0].dims[-1]
        less = ev.apply(instr.called[0]) if instr.called else None
        return top_k(np.asarray(ops[0]), k, True, less)
    if target in IDENTITY_TARGETS:
        return ops[0]
    raise ExecutionError(f"{instr.name}: custom call {target!r} is not supported by the evaluator")


def _result_shape(instr: ir.Instruction) -> ir.Shape:
    return instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape


def _pack_result(instr: ir.Instruction, result: np.ndarray) -> Value:
    """cuBLAS/cuDNN custom calls return (result, scratch); the scratch is left zero."""
    if not instr.shape.is_tuple:
        return result
    rest = tuple(numeric.zeros(s) for s in instr.shape.tuple_shapes[1:])
    return (result,) + rest


def gemm(instr: ir.Instruction, ops) -> Value:
    """`__cublas$gemm` / `__cublas$lt$matmul`: alpha·dot(lhs, rhs) (+ beta·C) then the epilogue."""
    config = attrs.backend_config(instr).get("gemm_backend_config", {})
    dims = config.get("dot_dimension_numbers", {})

    def ints(key):
        return tuple(int(v) for v in dims.get(key, []))

    shape = _result_shape(instr)
    dtype = numeric.np_dtype(shape.element_type)
    lhs, rhs = np.asarray(ops[0]), np.asarray(ops[1])
    out = arrays.dot_general(lhs, rhs, ints("lhs_contracting_dimensions"), ints("rhs_contracting_dimensions"),
                             ints("lhs_batch_dimensions"), ints("rhs_batch_dimensions"), np.dtype(np.float32)
                             if dtype.kind == "f" and dtype.itemsize < 8 else dtype)
    out = out.reshape(shape.dims)
    alpha = float(config.get("alpha_real", 1.0))
    if alpha != 1.0:
        out = out * np.float32(alpha) if out.dtype == np.float32 else out * alpha
    epilogue = config.get("epilogue", "DEFAULT")
    beta = float(config.get("beta", 0.0))
    extra = list(ops[2:])
    if "BIAS" in epilogue and extra:
        bias = np.asarray(extra.pop(0))
        out = out + _broadcast_bias(bias, out.shape)
    if beta != 0.0 and extra:
        out = out + beta * np.asarray(extra.pop(0)).astype(out.dtype)
    if "RELU" in epilogue:
        out = np.maximum(out, 0)
    elif "GELU" in epilogue:
        wide = out.astype(np.float64)
        out = 0.5 * wide * (1 + np.tanh(np.sqrt(2 / np.pi) * (wide + 0.044715 * wide ** 3)))
    return _pack_result(instr, np.asarray(out).astype(dtype))


def _broadcast_bias(bias: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """cuBLAS bias epilogues add a vector along the last (column) dimension."""
    if bias.shape == shape:
        return bias
    return bias.reshape((1,) * (len(shape) - bias.ndim) + bias.shape)


def cudnn_convolution(instr: ir.Instruction, ops) -> Value:
    """`__cudnn$convForward` / `convBiasActivationForward`: scale·conv (+ bias + side input)
    then the activation."""
    config = attrs.backend_config(instr).get("cudnn_conv_backend_config", {})
    shape = _result_shape(instr)
    dtype = numeric.np_dtype(shape.element_type)
    out = arrays.convolution(np.asarray(ops[0]), np.asarray(ops[1]), attrs.window(instr),
                             instr.attr("dim_labels") or "", attrs.integer(instr, "feature_group_count", 1),
                             attrs.integer(instr, "batch_group_count", 1), np.dtype(np.float32))
    out = out * np.float32(config.get("conv_result_scale", 1))
    labels = arrays.parse_dim_labels(instr.attr("dim_labels") or "")
    feature_dim = labels[2][1]
    if len(ops) > 2:
        bias = np.asarray(ops[2])
        shape_b = [1] * out.ndim
        shape_b[feature_dim] = bias.size
        out = out + bias.reshape(shape_b)
    side_scale = float(config.get("side_input_scale", 0))
    if len(ops) > 3 and side_scale != 0:
        out = out + np.float32(side_scale) * np.asarray(ops[3])
    mode = config.get("activation_mode", "kNone")
    if mode == "kRelu":
        out = np.maximum(out, 0)
    elif mode == "kRelu6":
        out = np.clip(out, 0, 6)
    elif mode == "kElu":
        out = np.where(out > 0, out, np.expm1(out))
    elif mode == "kLeakyRelu":
        out = np.where(out > 0, out, out * np.float32(config.get("leakyrelu_alpha", 0)))
    elif mode not in ("kNone", None):
        raise ExecutionError(f"{instr.name}: cuDNN activation {mode} is not supported")
    return _pack_result(instr, np.asarray(out).astype(dtype))

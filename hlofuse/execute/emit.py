"""Per-element code for generated kernels, written once and compiled for two targets.

`Emitter.value(frame, instruction, index)` returns C expressions for one element of an
instruction at a multi-dimensional index, emitting the statements that compute it — the
way XLA's elemental IR emitter builds a fused kernel: operands are computed at the index
their user needs (through broadcasts, slices, reshapes, concatenates...), each (instruction,
index) once per scope, reductions and windows as loops inside the element's code.

The text uses only the prelude's names (types f32/i32/pred..., helpers hf_*), so the same
body is wrapped in CPU loops (execute/cpu.py) or a CUDA thread grid (execute/cuda.py);
execute/kernel.py assembles whole kernels from it.
An op that cannot be written per element raises EmitError naming the op and the kernel.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .. import attributes as attrs
from .. import ir
from ..errors import ExecutionError
from .index import Idx, delinear, linear
from .interp import THREEFRY_TARGETS, literal_value, dot_dims

CTYPE = {
    "pred": "pred", "s8": "i8", "s16": "i16", "s32": "i32", "s64": "i64",
    "u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64", "f32": "f32", "f64": "f64",
}
_UNSIGNED = {"s8": "u8", "s16": "u16", "s32": "u32", "s64": "u64", "u8": "u8", "u16": "u16", "u32": "u32",
             "u64": "u64"}
_SIGNED = {"u8": "i8", "u16": "i16", "u32": "i32", "u64": "i64", "s8": "i8", "s16": "i16", "s32": "i32",
           "s64": "i64"}
_BITS = {"s8": 8, "s16": 16, "s32": 32, "s64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64, "pred": 8,
         "f32": 32, "f64": 64}

#: Float functions the prelude defines as hf_<name>_<type>.
FLOAT_FUNCTIONS = {
    "exponential": "exp", "exponential-minus-one": "expm1", "log": "log", "log-plus-one": "log1p",
    "sine": "sin", "cosine": "cos", "tan": "tan", "tanh": "tanh", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "cbrt": "cbrt", "logistic": "logistic", "atan": "atan", "acos": "acos", "asin": "asin",
    "sinh": "sinh", "cosh": "cosh", "acosh": "acosh", "asinh": "asinh", "atanh": "atanh", "erf": "erf",
}


#: Reductions over at most this many elements are unrolled.
UNROLL_REDUCTIONS = 8
#: A reduction loop of at least this many iterations is split across the lanes of a warp on
#: CUDA (one lane on the CPU); element types the warp shuffle can exchange.
LANES = 32
LANE_TYPES = frozenset({"pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f32", "f64"})


class EmitError(ExecutionError):
    """An instruction the kernel generator cannot write as per-element code."""


def ctype(element_type: str) -> str:
    try:
        return CTYPE[element_type]
    except KeyError:
        raise EmitError(f"element type {element_type} is not supported by the kernel generator") from None


def literal(value, element_type: str) -> str:
    """A C literal of the element type (finite values exact, inf/nan through the prelude)."""
    t = element_type
    if t == "pred":
        return "1" if bool(value) else "0"
    if t in ("f32", "f64"):
        v = float(np.float32(value)) if t == "f32" else float(value)
        if np.isnan(v):
            return f"((f{_BITS[t]})HF_NAN)"
        if np.isinf(v):
            return f"((f{_BITS[t]})HF_INF)" if v > 0 else f"(-(f{_BITS[t]})HF_INF)"
        text = f"{v:.9g}" if t == "f32" else f"{v:.17g}"
        if "e" not in text and "." not in text and "n" not in text:
            text += ".0"
        return f"{text}f" if t == "f32" else text
    v = int(value)
    if t == "s64":
        return "(-9223372036854775807LL-1)" if v == -(1 << 63) else f"{v}LL"
    if t == "u64":
        return f"{v}ULL"
    if t == "s32":
        return "(-2147483647-1)" if v == -(1 << 31) else str(v)
    if t == "u32":
        return f"{v}u"
    return f"(({CTYPE[t]}){v})"


@dataclass
class Arg:
    """One buffer argument of a kernel: `key` is what the caller binds to it (a parameter
    number, or ("const", instruction name))."""

    name: str
    element_type: str
    output: bool
    key: object


@dataclass(eq=False)
class Frame:
    """A computation being emitted and how its parameters get their values: `bind(number,
    index)` returns the parameter's element(s) at the index."""

    comp: ir.Computation
    bind: Callable[[int, list[Idx]], list[str]]
    uid: int = field(default_factory=lambda: next(_FRAME_IDS))
    #: Tuple-shaped parameters: element k of parameter 0 at an index (the loop plan's state)
    bind_element: Callable[[int, int, list[Idx]], list[str]] | None = None


_FRAME_IDS = itertools.count(1)


class Emitter:
    """Writes the statements of one kernel body.  `kernel` names the kernel in errors."""

    def __init__(self, module: ir.Module, kernel: str):
        self.module = module
        self.kernel = kernel
        self.lines: list[str] = []
        self.depth = 1
        self.ranges: dict[str, tuple[int, int]] = {}
        self.scopes: list[dict] = [{}]
        self.counter = itertools.count()
        self.args: list[Arg] = []
        self.functions: dict[str, str] = {}  # standalone helper functions (reducers)
        self.frames: dict[tuple, Frame] = {}  # nested fusions' frames
        #: (frame, reduce) → called with each input index inside that reduce's loop
        self.side_outputs: dict[tuple, Callable[[list[Idx]], None]] = {}
        #: whether the group being written may split a reduction across lanes (its stores
        #: then wait for every lane), whether it did, and how deep in reduce loops we are
        self.lanes_ok = False
        self.lanes_used = False
        self.reduce_depth = 0
        #: when a list: every reduction emitted outside another's loop is noted there as
        #: (frame, instruction, index), for kernel.py to hoist out of inner loops
        self.reduce_requests: list | None = None
        #: (frame, while, k, index) → element k of that loop's final state, where a loop
        #: kernel runs nested loops (execute/loop.py)
        self.nested_loops: Callable | None = None
        #: unsigned shifts written without a branch (prelude.py: hf_shlm, hf_shrlm)
        self.masked_shifts = False

    # -- text -----------------------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def fresh(self, prefix: str = "v") -> str:
        return f"{prefix}{next(self.counter)}"

    def let(self, element_type: str, expr: str, prefix: str = "v") -> str:
        name = self.fresh(prefix)
        self.line(f"const {ctype(element_type)} {name} = {expr};")
        return name

    def var(self, expr: str, lo: int, hi: int) -> str:
        """An i64 index variable with a known inclusive range."""
        name = self.fresh("x")
        self.line(f"const i64 {name} = {expr};")
        self.ranges[name] = (lo, hi)
        return name

    def loop_var(self, size: int, prefix: str = "r") -> str:
        name = self.fresh(prefix)
        self.ranges[name] = (0, max(size - 1, 0))
        return name

    @contextmanager
    def block(self, header: str):
        """`header {` ... `}` with its own scope of computed values."""
        self.line(header + " {")
        self.depth += 1
        self.scopes.append({})
        try:
            yield
        finally:
            self.scopes.pop()
            self.depth -= 1
            self.line("}")

    def bounds(self, ix: Idx) -> tuple[int, int]:
        return ix.bounds(self.ranges)

    # -- arguments ------------------------------------------------------------------------
    def input_arg(self, key, element_type: str) -> str:
        for arg in self.args:
            if arg.key == key and not arg.output:
                return arg.name
        arg = Arg(f"a{len(self.args)}", element_type, False, key)
        self.args.append(arg)
        return arg.name

    def output_arg(self, key, element_type: str) -> str:
        arg = Arg(f"o{len(self.args)}", element_type, True, key)
        self.args.append(arg)
        return arg.name

    def load(self, buffer: str, shape: ir.Shape, index: list[Idx]) -> str:
        return f"{buffer}[{linear(index, shape.dims, shape.minor_to_major).c()}]"

    # -- values ---------------------------------------------------------------------------
    def value(self, frame: Frame, name: str, index: list[Idx]) -> list[str]:
        """C expressions (one per tuple leaf) for instruction `name` of `frame` at `index`."""
        key = (frame.uid, name, tuple(i.key() for i in index))
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        instr = frame.comp[name]
        rule = EMITTERS.get(instr.opcode)
        if rule is None:
            raise EmitError(f"kernel {self.kernel}: the generator cannot emit {instr.opcode} "
                            f"({instr.name}) as per-element code")
        result = rule(self, frame, instr, index)
        self.scopes[-1][key] = result
        return result

    def one(self, frame: Frame, name: str, index: list[Idx]) -> str:
        return self.value(frame, name, index)[0]

    def scalar_index(self, frame: Frame, name: str) -> str:
        """An index operand (dynamic-slice start, gather index...) as an i64 expression."""
        return f"(i64){self.one(frame, name, [])}"

    def shape_of(self, frame: Frame, name: str) -> ir.Shape:
        return frame.comp[name].shape

    def call_frame(self, comp_name: str, values: list[list[str]]) -> Frame:
        """A frame for a scalar computation (reducer, comparator, map) whose parameters are
        the given values."""
        comp = self.module[comp_name.lstrip("%")]
        return Frame(comp, lambda number, index: values[number])

    def while_element(self, frame: Frame, instr: ir.Instruction, k: int, index: list[Idx]) -> list[str]:
        """Element k of a while loop's final state; only a loop kernel (execute/loop.py)
        runs loops inside a kernel."""
        if self.nested_loops is not None:
            return self.nested_loops(frame, instr, k, index)
        raise EmitError(f"kernel {self.kernel}: the generator cannot emit while ({instr.name}) as per-element code")

    def apply(self, comp_name: str, values: list[list[str]]) -> list[str]:
        frame = self.call_frame(comp_name, values)
        return self.value(frame, frame.comp.root_name, [])


EMITTERS: dict[str, Callable[[Emitter, Frame, ir.Instruction, list[Idx]], list[str]]] = {}


def emits(*opcodes: str):
    def register(fn):
        for op in opcodes:
            EMITTERS[op] = fn
        return fn
    return register


def _et(instr: ir.Instruction) -> str:
    return instr.shape.element_type


def _operand_index(em: Emitter, frame: Frame, operand: str, index: list[Idx]) -> list[Idx]:
    """Elementwise operands share the index; a scalar operand (select's predicate, clamp's
    bounds in old HLO) is read at ()."""
    return [] if not em.shape_of(frame, operand).dims else index


# ------------------------------------------------------------------------------------------
# Parameters, constants, iota
# ------------------------------------------------------------------------------------------


@emits("parameter")
def _parameter(em, frame, instr, index):
    return frame.bind(instr.parameter_number, index)


@emits("constant")
def _constant(em, frame, instr, index):
    et = _et(instr)
    if not instr.shape.dims:
        return [literal(literal_value(instr).reshape(()).item(), et)]
    buffer = em.input_arg(("const", frame.comp.name, instr.name), et)
    return [em.let(et, em.load(buffer, instr.shape, index))]


@emits("iota")
def _iota(em, frame, instr, index):
    axis = attrs.integer(instr, "iota_dimension", 0)
    return [em.let(_et(instr), f"({ctype(_et(instr))})({index[axis].c()})")]


# ------------------------------------------------------------------------------------------
# Elementwise
# ------------------------------------------------------------------------------------------


def _wide_unsigned(et: str) -> str:
    return "u64" if _BITS.get(et, 32) == 64 else "u32"


@emits("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2",
       "and", "or", "xor", "shift-left", "shift-right-logical", "shift-right-arithmetic")
def _binary(em, frame, instr, index):
    a = em.one(frame, instr.operands[0], _operand_index(em, frame, instr.operands[0], index))
    b = em.one(frame, instr.operands[1], _operand_index(em, frame, instr.operands[1], index))
    et = _et(instr)
    t = ctype(et)
    op = instr.opcode
    symbol = {"add": "+", "subtract": "-", "multiply": "*"}.get(op)
    if et == "pred":
        expr = {"add": f"({a} | {b})", "multiply": f"({a} & {b})", "and": f"({a} & {b})", "or": f"({a} | {b})",
                "xor": f"({a} ^ {b})", "maximum": f"({a} | {b})", "minimum": f"({a} & {b})"}.get(op)
        if expr is None:
            raise EmitError(f"kernel {em.kernel}: {op} of pred values ({instr.name}) is not supported")
    elif et in ("f32", "f64"):
        if symbol:
            expr = f"{a} {symbol} {b}"
        elif op == "divide":
            expr = f"{a} / {b}"
        elif op in ("maximum", "minimum"):
            expr = f"hf_{'max' if op == 'maximum' else 'min'}_{t}({a}, {b})"
        elif op in ("remainder", "power", "atan2"):
            expr = f"hf_{ {'remainder': 'fmod', 'power': 'pow', 'atan2': 'atan2'}[op]}_{t}({a}, {b})"
        else:
            raise EmitError(f"kernel {em.kernel}: {op} of {et} ({instr.name}) is not supported")
    else:  # integers: wrap in the unsigned type, XLA's helpers for the rest
        wide = _wide_unsigned(et)
        if symbol:
            expr = f"({t})(({wide}){a} {symbol} ({wide}){b})"
        elif op in ("and", "or", "xor"):
            expr = f"({t})({a} {'&' if op == 'and' else '|' if op == 'or' else '^'} {b})"
        elif op in ("maximum", "minimum"):
            expr = f"({a} {'>' if op == 'maximum' else '<'} {b} ? {a} : {b})"
        else:
            helper = {"divide": "div", "remainder": "rem", "power": "pow", "shift-left": "shl",
                      "shift-right-logical": "shrl", "shift-right-arithmetic": "shra"}.get(op)
            if helper is None:
                raise EmitError(f"kernel {em.kernel}: {op} of {et} ({instr.name}) is not supported")
            if em.masked_shifts and helper in ("shl", "shrl") and et.startswith("u"):
                helper += "m"
            expr = f"hf_{helper}_{t}({a}, {b})"
    return [em.let(et, expr)]


@emits(*FLOAT_FUNCTIONS)
def _float_function(em, frame, instr, index):
    et = _et(instr)
    if et not in ("f32", "f64"):
        raise EmitError(f"kernel {em.kernel}: {instr.opcode} of {et} ({instr.name}) is not supported")
    x = em.one(frame, instr.operands[0], index)
    return [em.let(et, f"hf_{FLOAT_FUNCTIONS[instr.opcode]}_{ctype(et)}({x})")]


@emits("abs", "negate", "sign", "floor", "ceil", "round-nearest-even", "round-nearest-afz", "not",
       "is-finite", "popcnt", "count-leading-zeros", "copy")
def _unary(em, frame, instr, index):
    x = em.one(frame, instr.operands[0], index)
    op = instr.opcode
    src = em.shape_of(frame, instr.operands[0]).element_type
    et = _et(instr)
    t = ctype(et)
    if op == "copy":
        return [x]
    if op == "is-finite":
        return [em.let("pred", f"hf_isfinite_{ctype(src)}({x})")]
    if et in ("f32", "f64"):
        expr = {"abs": f"hf_abs_{t}({x})", "negate": f"-{x}", "floor": f"hf_floor_{t}({x})",
                "ceil": f"hf_ceil_{t}({x})", "round-nearest-even": f"hf_rint_{t}({x})",
                "round-nearest-afz": f"hf_round_{t}({x})",
                "sign": f"({x} > 0 ? ({t})1 : {x} < 0 ? ({t})-1 : {x})"}.get(op)
    elif et == "pred":
        expr = {"not": f"!{x}", "abs": x}.get(op)
    else:
        wide = _wide_unsigned(et)
        expr = {"abs": f"({t})({x} < 0 ? ({wide})0 - ({wide}){x} : ({wide}){x})",
                "negate": f"({t})(({wide})0 - ({wide}){x})", "not": f"({t})~{x}",
                "sign": f"({t})(({x} > 0) - ({x} < 0))", "popcnt": f"hf_popcnt_{t}({x})",
                "count-leading-zeros": f"hf_clz_{t}({x})"}.get(op)
        if op in ("floor", "ceil", "round-nearest-even", "round-nearest-afz"):
            expr = x
    if expr is None:
        raise EmitError(f"kernel {em.kernel}: {op} of {et} ({instr.name}) is not supported")
    return [em.let(et, expr)]


@emits("compare")
def _compare(em, frame, instr, index):
    a_name, b_name = instr.operands
    a = em.one(frame, a_name, _operand_index(em, frame, a_name, index))
    b = em.one(frame, b_name, _operand_index(em, frame, b_name, index))
    src = em.shape_of(frame, a_name).element_type
    symbol = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}[instr.attr("direction") or "EQ"]
    if (instr.attr("type") or "").upper() == "TOTALORDER" and src in ("f32", "f64"):
        a, b = f"hf_total_{ctype(src)}({a})", f"hf_total_{ctype(src)}({b})"
    return [em.let("pred", f"({a} {symbol} {b})")]


@emits("select")
def _select(em, frame, instr, index):
    p, a, b = (em.one(frame, o, _operand_index(em, frame, o, index)) for o in instr.operands)
    # HF_SELECT: a branch-free blend on the CPU (a ?: there lets the compiler thread jumps
    # through it and leave the operands' loads conditional, which keeps loops scalar)
    return [em.let(_et(instr), f"HF_SELECT({ctype(_et(instr))}, {p}, {a}, {b})")]


@emits("clamp")
def _clamp(em, frame, instr, index):
    lo, x, hi = (em.one(frame, o, _operand_index(em, frame, o, index)) for o in instr.operands)
    et = _et(instr)
    t = ctype(et)
    if et in ("f32", "f64"):
        return [em.let(et, f"hf_min_{t}(hf_max_{t}({x}, {lo}), {hi})")]
    return [em.let(et, f"({x} < {lo} ? {lo} : {x} > {hi} ? {hi} : {x})")]


@emits("convert")
def _convert(em, frame, instr, index):
    x = em.one(frame, instr.operands[0], index)
    src = em.shape_of(frame, instr.operands[0]).element_type
    dst = _et(instr)
    if dst == "pred":
        return [em.let(dst, f"({x} != 0)")]
    if src in ("f32", "f64") and dst not in ("f32", "f64"):
        return [em.let(dst, f"hf_cvt_{ctype(src)}_{ctype(dst)}({x})")]
    return [em.let(dst, f"({ctype(dst)}){x}")]


@emits("bitcast-convert")
def _bitcast_convert(em, frame, instr, index):
    src = em.shape_of(frame, instr.operands[0]).element_type
    dst = _et(instr)
    if _BITS.get(src) != _BITS.get(dst):
        raise EmitError(f"kernel {em.kernel}: bitcast-convert {src}→{dst} changes the width ({instr.name})")
    x = em.one(frame, instr.operands[0], index)
    if src == dst:
        return [x]
    u = em.fresh("bits")  # not "u": u8, u16, u32 and u64 are type names
    em.line(f"union {{ {ctype(src)} from; {ctype(dst)} to; }} {u}; {u}.from = {x};")
    return [em.let(dst, f"{u}.to")]


@emits("map")
def _map(em, frame, instr, index):
    values = [em.value(frame, o, index) for o in instr.operands]
    return em.apply(instr.called[0], values)


# ------------------------------------------------------------------------------------------
# Data movement: index arithmetic
# ------------------------------------------------------------------------------------------


@emits("broadcast")
def _broadcast(em, frame, instr, index):
    dims = attrs.dimensions(instr)
    return em.value(frame, instr.operands[0], [index[d] for d in dims])


@emits("transpose")
def _transpose(em, frame, instr, index):
    dims = attrs.dimensions(instr)
    operand_index: list[Idx] = [Idx()] * len(dims)
    for i, d in enumerate(dims):
        operand_index[d] = index[i]
    return em.value(frame, instr.operands[0], operand_index)


def _row_major(shape: ir.Shape) -> tuple[int, ...]:
    return tuple(range(shape.rank - 1, -1, -1))


@emits("reshape")
def _reshape(em, frame, instr, index):
    src = em.shape_of(frame, instr.operands[0])
    offset = linear(index, instr.shape.dims, _row_major(instr.shape))
    return em.value(frame, instr.operands[0], delinear(offset, src.dims, _row_major(src), em.ranges, em.var))


@emits("bitcast")
def _bitcast(em, frame, instr, index):
    src = em.shape_of(frame, instr.operands[0])
    if _BITS.get(src.element_type) != _BITS.get(instr.shape.element_type):
        raise EmitError(f"kernel {em.kernel}: bitcast changing the element width ({instr.name})")
    offset = linear(index, instr.shape.dims, instr.shape.minor_to_major)
    value = em.one(frame, instr.operands[0], delinear(offset, src.dims, src.minor_to_major, em.ranges, em.var))
    if src.element_type == instr.shape.element_type:
        return [value]
    u = em.fresh("bits")  # same width, other type: reinterpret the bits
    em.line(f"union {{ {ctype(src.element_type)} from; {ctype(instr.shape.element_type)} to; }} {u}; "
            f"{u}.from = {value};")
    return [em.let(instr.shape.element_type, f"{u}.to")]


@emits("slice")
def _slice(em, frame, instr, index):
    dims = attrs.slice_dims(instr)
    return em.value(frame, instr.operands[0], [ix * s.stride + s.start for ix, s in zip(index, dims)])


@emits("reverse")
def _reverse(em, frame, instr, index):
    rev = set(attrs.dimensions(instr))
    dims = instr.shape.dims
    return em.value(frame, instr.operands[0],
                    [Idx.of(dims[d] - 1) - ix if d in rev else ix for d, ix in enumerate(index)])


def _start_indices(em: Emitter, frame: Frame, operands: tuple[str, ...], rank: int) -> list[str]:
    if len(operands) == 1 and rank != 1 and em.shape_of(frame, operands[0]).rank == 1:
        raise EmitError(f"kernel {em.kernel}: dynamic index vectors of old HLO are not supported")
    return list(operands)


def _clamped(em: Emitter, frame: Frame, start: str, limit: int) -> Idx:
    """A start index clamped to [0, limit], as XLA clamps dynamic-slice starts."""
    if limit <= 0:
        return Idx()
    raw = em.scalar_index(frame, start)
    return Idx.of(em.var(f"hf_clamp_i64({raw}, 0, {limit})", 0, limit))


@emits("dynamic-slice")
def _dynamic_slice(em, frame, instr, index):
    src = em.shape_of(frame, instr.operands[0])
    starts = _start_indices(em, frame, instr.operands[1:], src.rank)
    sizes = instr.shape.dims
    offsets = [_clamped(em, frame, s, d - z) for s, d, z in zip(starts, src.dims, sizes)]
    return em.value(frame, instr.operands[0], [ix + o for ix, o in zip(index, offsets)])


@emits("dynamic-update-slice")
def _dynamic_update_slice(em, frame, instr, index):
    src = em.shape_of(frame, instr.operands[0])
    upd = em.shape_of(frame, instr.operands[1])
    starts = _start_indices(em, frame, instr.operands[2:], src.rank)
    offsets = [_clamped(em, frame, s, d - u) for s, d, u in zip(starts, src.dims, upd.dims)]
    conditions = []
    for ix, off, size in zip(index, offsets, upd.dims):
        rel = ix - off
        lo, hi = em.bounds(rel)
        if lo >= size or hi < 0:
            return em.value(frame, instr.operands[0], index)
        if lo < 0:
            conditions.append(f"{rel.c()} >= 0")
        if hi >= size:
            conditions.append(f"{rel.c()} < {size}")
    if not conditions:
        return em.value(frame, instr.operands[1], [ix - o for ix, o in zip(index, offsets)])
    return _choose(em, instr, [(" && ".join(conditions), lambda: em.value(
        frame, instr.operands[1], [ix - o for ix, o in zip(index, offsets)]))],
        lambda: em.value(frame, instr.operands[0], index))


def _choose(em: Emitter, instr: ir.Instruction, cases: list[tuple[str, Callable[[], list[str]]]],
            otherwise: Callable[[], list[str]]) -> list[str]:
    """if (c1) v = a; else if (c2) v = b; ... else v = z — each case's operand computed in
    its own scope, so out-of-range indices are never read."""
    leaves = list(instr.shape.leaves())
    names = [em.fresh("c") for _ in leaves]
    for name, leaf in zip(names, leaves):
        em.line(f"{ctype(leaf.element_type)} {name};")
    keyword = "if"
    for condition, compute in cases:
        with em.block(f"{keyword} ({condition})"):
            for name, v in zip(names, compute()):
                em.line(f"{name} = {v};")
        keyword = "else if"
    with em.block("else"):
        for name, v in zip(names, otherwise()):
            em.line(f"{name} = {v};")
    return names


@emits("concatenate")
def _concatenate(em, frame, instr, index):
    axis = attrs.dimensions(instr)[0]
    ix = index[axis]
    lo, hi = em.bounds(ix)
    pieces = []
    start = 0
    for operand in instr.operands:
        size = em.shape_of(frame, operand).dims[axis]
        if size and start <= hi and start + size - 1 >= lo:
            pieces.append((operand, start, size))
        start += size

    def at(operand, offset):
        sub = list(index)
        sub[axis] = ix - offset
        return lambda: em.value(frame, operand, sub)

    if len(pieces) == 1:
        operand, offset, _ = pieces[0]
        return at(operand, offset)()
    cases = [(f"{ix.c()} < {offset + size}", at(operand, offset)) for operand, offset, size in pieces[:-1]]
    operand, offset, _ = pieces[-1]
    return _choose(em, instr, cases, at(operand, offset))


@emits("pad")
def _pad(em, frame, instr, index):
    src = em.shape_of(frame, instr.operands[0])
    config = attrs.padding(instr)
    operand_index, conditions = [], []
    for ix, size, (low, _, interior) in zip(index, src.dims, config):
        rel = ix - low
        step = interior + 1
        lo, hi = em.bounds(rel)
        if size == 0 or lo > (size - 1) * step or hi < 0:
            return em.value(frame, instr.operands[1], [])
        if step == 1:
            if lo < 0:
                conditions.append(f"{rel.c()} >= 0")
            if hi > size - 1:
                conditions.append(f"{rel.c()} < {size}")
            operand_index.append(rel)
        else:
            conditions.append(f"{rel.c()} >= 0 && ({rel.c()}) % {step} == 0 && {rel.c()} <= {(size - 1) * step}")
            # the quotient's range holds where the condition does, the only place it is read
            operand_index.append(Idx.of(em.var(f"({rel.c()}) / {step}", 0, size - 1)))
    if not conditions:
        return em.value(frame, instr.operands[0], operand_index)
    return _choose(em, instr, [(" && ".join(conditions),
                                lambda: em.value(frame, instr.operands[0], operand_index))],
                   lambda: em.value(frame, instr.operands[1], []))


@emits("gather")
def _gather(em, frame, instr, index):
    operand, indices = instr.operands
    op_shape = em.shape_of(frame, operand)
    idx_shape = em.shape_of(frame, indices)
    offset_dims = attrs.ints(instr, "offset_dims")
    collapsed = attrs.ints(instr, "collapsed_slice_dims")
    start_map = attrs.ints(instr, "start_index_map")
    ivd = attrs.integer(instr, "index_vector_dim", idx_shape.rank)
    sizes = attrs.ints(instr, "slice_sizes")
    operand_batching = attrs.ints(instr, "operand_batching_dims")
    indices_batching = attrs.ints(instr, "start_indices_batching_dims")
    batch = [index[d] for d in range(instr.shape.rank) if d not in offset_dims]
    idx_batch_axes = [d for d in range(idx_shape.rank) if d != ivd]
    window_dims = [d for d in range(op_shape.rank) if d not in collapsed and d not in operand_batching]

    def index_value(k: int) -> str:
        pos: list[Idx] = []
        it = iter(batch)
        for d in range(idx_shape.rank):
            pos.append(Idx.of(k) if d == ivd else next(it))
        return f"(i64){em.one(frame, indices, pos)}"

    result: list[Idx] = []
    for d in range(op_shape.rank):
        limit = op_shape.dims[d] - sizes[d]
        if d in start_map:
            raw = index_value(start_map.index(d))
            start = Idx.of(em.var(f"hf_clamp_i64({raw}, 0, {max(limit, 0)})", 0, max(limit, 0)))
        elif d in operand_batching:
            start = batch[idx_batch_axes.index(indices_batching[operand_batching.index(d)])]
        else:
            start = Idx()
        if d in window_dims:
            start = start + index[offset_dims[window_dims.index(d)]]
        result.append(start)
    return em.value(frame, operand, result)


# ------------------------------------------------------------------------------------------
# Reductions and contractions: loops inside the element
# ------------------------------------------------------------------------------------------


def _accumulators(em: Emitter, shapes: list[ir.Shape], inits: list[str]) -> list[str]:
    names = []
    for shape, init in zip(shapes, inits):
        name = em.fresh("acc")
        em.line(f"{ctype(shape.element_type)} {name} = {init};")
        names.append(name)
    return names


@emits("reduce")
def _reduce(em, frame, instr, index):
    if em.reduce_requests is not None and em.reduce_depth == 0:
        em.reduce_requests.append((frame, instr.name, list(index)))
    n = len(instr.operands) // 2
    values, inits = instr.operands[:n], instr.operands[n:]
    src = em.shape_of(frame, values[0])
    dims = attrs.dimensions(instr)
    kept = [d for d in range(src.rank) if d not in dims]
    init_values = [em.one(frame, i, []) for i in inits]
    accs = _accumulators(em, list(instr.shape.leaves()), init_values)
    order = [d for d in reversed(src.minor_to_major) if d in dims]  # major → minor for locality
    operand_index = [Idx()] * src.rank
    for position, d in enumerate(kept):
        operand_index[d] = index[position]


    reduced = 1
    for d in order:
        reduced *= src.dims[d]
    if reduced <= UNROLL_REDUCTIONS:
        # a few elements: unrolled, with constant indices, so values the rest of the kernel
        # computes at those indices are shared and concatenates pick their operand now
        for position in itertools.product(*(range(src.dims[d]) for d in order)):
            at = list(operand_index)
            for d, p in zip(order, position):
                at[d] = Idx.of(p)
            _reduction_step(em, frame, instr, accs, values, at)
        return accs
    if len(order) == 1 and n == 1 and src.dims[order[0]] >= 2 * VECTOR_PARTIALS and em.reduce_depth == 0:
        # the CPU's variant vectorized (partial results reassociated); CUDA's as below
        em.line("#if HF_CPU")
        with em.block(""):
            _vector_reduce(em, frame, instr, accs[0], values[0], operand_index, order[0], src.dims[order[0]])
        em.line("#else")
        with em.block(""):
            _serial_reduce(em, frame, instr, accs, values, src, order, operand_index)
        em.line("#endif")
        return accs
    _serial_reduce(em, frame, instr, accs, values, src, order, operand_index)
    return accs


#: Partial results of a vectorized reduction on the CPU (one vector register of f32 on AVX-512).
VECTOR_PARTIALS = 16


def _vector_reduce(em: Emitter, frame: Frame, instr: ir.Instruction, acc: str, value: str, operand_index: list[Idx],
                   dim: int, size: int) -> None:
    """A reduction over one dimension as XLA:CPU vectorizes it: VECTOR_PARTIALS partial
    results, each over every VECTOR_PARTIALS-th element (the first chunk starts them, so the
    init value enters once), combined into the accumulator at the end, then the tail.  The
    reducer is applied in another order than one after another: a sum differs from the
    reference's by rounding (XLA's reducers are associative and commutative by contract)."""
    k = VECTOR_PARTIALS
    et = next(iter(instr.shape.leaves())).element_type
    t = ctype(et)
    part = em.fresh("part")
    hook = em.side_outputs.get((frame.uid, instr.name))

    def element(ix: Idx) -> str:
        at = list(operand_index)
        at[dim] = ix
        if hook is not None:
            hook(at)
        return em.one(frame, value, at)

    def combine(a: str, b: str) -> str:
        return em.let(et, em.apply(instr.called[0], [[a], [b]])[0])

    em.line(f"{t} {part}[{k}];")
    lane = em.loop_var(k, "l")
    with _loops(em, [(lane, k)]):
        em.line(f"{part}[{lane}] = {element(Idx.of(lane))};")
    chunks = size // k
    chunk = em.loop_var(chunks, "q")
    em.reduce_depth += 1
    try:
        em.line(f"for (i64 {chunk} = 1; {chunk} < {chunks}; ++{chunk}) {{")
        em.depth += 1
        em.scopes.append({})
        lane2 = em.loop_var(k, "l")
        # kept a loop over the partials in memory: unrolled, they would be k scalar reductions
        # of a reducer GCC does not recognize (maximum's NaN test), and stay scalar
        em.line("#pragma GCC unroll 1")
        with _loops(em, [(lane2, k)]):
            em.line(f"{part}[{lane2}] = {combine(f'{part}[{lane2}]', element(Idx.of(chunk) * k + Idx.of(lane2)))};")
        em.scopes.pop()
        em.depth -= 1
        em.line("}")
        lane3 = em.loop_var(k, "l")
        with _loops(em, [(lane3, k)]):
            em.line(f"{acc} = {combine(acc, f'{part}[{lane3}]')};")
        if size % k:
            rest = em.fresh("r")
            em.ranges[rest] = (chunks * k, size - 1)
            with em.block(f"for (i64 {rest} = {chunks * k}; {rest} < {size}; ++{rest})"):
                em.line(f"{acc} = {combine(acc, element(Idx.of(rest)))};")
    finally:
        em.reduce_depth -= 1


def _serial_reduce(em: Emitter, frame: Frame, instr: ir.Instruction, accs: list[str], values, src: ir.Shape,
                   order: list[int], operand_index: list[Idx]) -> None:
    """The reduction loop element after element (split across a warp's lanes on CUDA)."""
    started = None  # split across lanes: whether this lane's accumulators hold a value yet

    operand_index = list(operand_index)
    loop_vars = {d: em.loop_var(src.dims[d]) for d in order}
    for d, v in loop_vars.items():
        operand_index[d] = Idx.of(v)
    strided = _lane_split_dim(em, src, order, instr)
    if strided is not None:
        started = em.fresh("started")
        em.line(f"pred {started} = hf_lane == 0;")
    em.reduce_depth += 1
    try:
        with _loops(em, [(loop_vars[d], src.dims[d]) for d in order], strided=loop_vars.get(strided)):
            _reduction_step(em, frame, instr, accs, values, operand_index, started)
    finally:
        em.reduce_depth -= 1
    if strided is not None:
        _combine_lanes(em, instr, accs)


def _reduction_step(em: Emitter, frame: Frame, instr: ir.Instruction, accs: list[str], values, at: list[Idx],
                    started: str | None = None) -> None:
    """One element of a reduction folded into its accumulators; `started` names the flag of a
    loop split across lanes (whether this lane's accumulators hold a value yet)."""
    elems = [em.one(frame, v, at) for v in values]
    hook = em.side_outputs.get((frame.uid, instr.name))
    if hook is not None:  # a reduction kernel's other outputs, written as the input is read
        hook(at)
    new = em.apply(instr.called[0], [[a] for a in accs] + [[e] for e in elems])
    tmp = [em.let(s.element_type, v) for s, v in zip(instr.shape.leaves(), new)]
    for a, t, e in zip(accs, tmp, elems):
        # the init value enters once, in lane 0: another lane starts from its first element
        em.line(f"{a} = {t};" if started is None else f"{a} = {started} ? {t} : {e};")
    if started is not None:
        em.line(f"{started} = 1;")


def _lane_split_dim(em: Emitter, src: ir.Shape, order: list[int], instr: ir.Instruction) -> int | None:
    """The reduced dimension whose loop the lanes of a warp share (XLA's reduction emitters
    also give one output many threads): the longest, the minor one among equals (adjacent
    lanes read adjacent elements), at least one element per lane. Only for a reduction not
    inside another one's loop, of types a shuffle exchanges, in a group whose stores can
    wait for all lanes."""
    if not em.lanes_ok or em.reduce_depth:
        return None
    if any(leaf.element_type not in LANE_TYPES for leaf in instr.shape.leaves()):
        return None
    longest = max(order, key=lambda d: (src.dims[d], order.index(d)))
    if src.dims[longest] < LANES:
        return None
    em.lanes_used = True
    return longest


def _combine_lanes(em: Emitter, instr: ir.Instruction, accs: list[str]) -> None:
    """Each lane holds the reduction of its share; a butterfly of shuffles leaves every lane
    with the whole (the reducer applied as XLA's emitters do: associative and commutative).
    On the CPU hf_lanes is 1 and the loop does not run."""
    leaves = list(instr.shape.leaves())
    with em.block("for (int hf_o = hf_lanes >> 1; hf_o > 0; hf_o >>= 1)"):
        others = [em.let(s.element_type, f"HF_SHFL_XOR({ctype(s.element_type)}, {a}, hf_o)")
                  for s, a in zip(leaves, accs)]
        new = em.apply(instr.called[0], [[a] for a in accs] + [[o] for o in others])
        tmp = [em.let(s.element_type, v) for s, v in zip(leaves, new)]
        for a, t in zip(accs, tmp):
            em.line(f"{a} = {t};")


@contextmanager
def _loops(em: Emitter, loops: list[tuple[str, int]], strided: str | None = None):
    """Nested for loops; the body is emitted inside the innermost one. The loop of `strided`
    starts at this lane and steps by the lane count (all of it on the CPU: one lane)."""
    depth = 0
    try:
        for var, size in loops:
            if var == strided:
                em.line(f"for (i64 {var} = hf_lane; {var} < {size}; {var} += hf_lanes) {{")
            else:
                em.line(f"for (i64 {var} = 0; {var} < {size}; ++{var}) {{")
            em.depth += 1
            em.scopes.append({})
            depth += 1
        if not loops:
            em.line("{")
            em.depth += 1
            em.scopes.append({})
            depth = -1
        yield
    finally:
        for _ in range(abs(depth)):
            em.scopes.pop()
            em.depth -= 1
            em.line("}")


@emits("reduce-window")
def _reduce_window(em, frame, instr, index):
    n = len(instr.operands) // 2
    values, inits = instr.operands[:n], instr.operands[n:]
    src = em.shape_of(frame, values[0])
    window = attrs.window(instr)
    init_values = [em.one(frame, i, []) for i in inits]
    accs = _accumulators(em, list(instr.shape.leaves()), init_values)
    loop_vars = [em.loop_var(w.size, "w") for w in window]
    with _loops(em, list(zip(loop_vars, [w.size for w in window]))):
        positions, conditions = [], []
        for d, (w, v) in enumerate(zip(window, loop_vars)):
            pos = index[d] * w.stride + Idx.of(v) * w.rhs_dilation - w.pad_low
            lo, hi = em.bounds(pos)
            top = (src.dims[d] - 1) * w.lhs_dilation
            if w.lhs_dilation > 1:
                conditions.append(f"{pos.c()} >= 0 && ({pos.c()}) % {w.lhs_dilation} == 0 && {pos.c()} <= {top}")
                positions.append(None)
            else:
                if lo < 0:
                    conditions.append(f"{pos.c()} >= 0")
                if hi > top:
                    conditions.append(f"{pos.c()} <= {top}")
                positions.append(pos)

        def element():
            idx = []
            for d, (w, pos) in enumerate(zip(window, positions)):
                if pos is None:
                    raw = index[d] * w.stride + Idx.of(loop_vars[d]) * w.rhs_dilation - w.pad_low
                    pos = Idx.of(em.var(f"({raw.c()}) / {w.lhs_dilation}", 0, src.dims[d] - 1))
                idx.append(pos)
            return [em.one(frame, v, idx) for v in values]

        if conditions:
            elems = _choose(em, instr, [(" && ".join(conditions), element)], lambda: list(init_values))
        else:
            elems = element()
        new = em.apply(instr.called[0], [[a] for a in accs] + [[e] for e in elems])
        tmp = [em.let(s.element_type, v) for s, v in zip(instr.shape.leaves(), new)]
        for a, t in zip(accs, tmp):
            em.line(f"{a} = {t};")
    return accs


@emits("dot")
def _dot(em, frame, instr, index):
    lhs, rhs = instr.operands
    ls, rs = em.shape_of(frame, lhs), em.shape_of(frame, rhs)
    lc, rc, lb, rb = dot_dims(instr)
    lfree = [d for d in range(ls.rank) if d not in lc and d not in lb]
    rfree = [d for d in range(rs.rank) if d not in rc and d not in rb]
    et = _et(instr)
    acc_type = "f32" if et == "f32" else et
    acc = em.fresh("acc")
    em.line(f"{ctype(acc_type)} {acc} = 0;")
    loop_vars = [em.loop_var(ls.dims[d], "k") for d in lc]
    li, ri = [Idx()] * ls.rank, [Idx()] * rs.rank
    pos = 0
    for a, b in zip(lb, rb):
        li[a] = ri[b] = index[pos]
        pos += 1
    for d in lfree:
        li[d] = index[pos]
        pos += 1
    for d in rfree:
        ri[d] = index[pos]
        pos += 1
    for a, b, v in zip(lc, rc, loop_vars):
        li[a] = ri[b] = Idx.of(v)
    with _loops(em, [(v, ls.dims[d]) for v, d in zip(loop_vars, lc)]):
        x = em.one(frame, lhs, li)
        y = em.one(frame, rhs, ri)
        em.line(f"{acc} += ({ctype(acc_type)}){x} * ({ctype(acc_type)}){y};")
    return [em.let(et, f"({ctype(et)}){acc}")]


# ------------------------------------------------------------------------------------------
# Tuples, calls, custom calls
# ------------------------------------------------------------------------------------------


def leaf_offset(shape: ir.Shape, k: int) -> tuple[int, int]:
    """Where tuple element k's leaves start among the flattened leaves, and how many."""
    start = sum(len(list(s.leaves())) for s in shape.tuple_shapes[:k])
    return start, len(list(shape.tuple_shapes[k].leaves()))


@emits("get-tuple-element")
def _gte(em, frame, instr, index):
    return tuple_element(em, frame, instr.operands[0], attrs.integer(instr, "index", 0), index)


def tuple_element(em: Emitter, frame: Frame, name: str, k: int, index: list[Idx]) -> list[str]:
    """Element k of tuple-shaped instruction `name` at `index`, followed to where it is made
    (a tuple's operand, a bound state element, a multi-output fusion's output, a nested while
    loop's state), so that elements of different shapes are each read at their own index."""
    source = frame.comp[name]
    if source.opcode == "tuple":
        return em.value(frame, source.operands[k], index)
    if source.opcode == "parameter" and frame.bind_element is not None:
        return frame.bind_element(source.parameter_number, k, index)
    if source.opcode == "while":
        return em.while_element(frame, source, k, index)
    if source.opcode in ("fusion", "call"):
        inner = inner_frame(em, frame, source)
        root = inner.comp.root
        if root.opcode == "tuple":  # a multi-output fusion: outputs differ in shape
            return em.value(inner, root.operands[k], index)
        if root.opcode == "while":  # a call wrapping a loop (XLA:CPU's small calls)
            return em.while_element(inner, root, k, index)
    start, count = leaf_offset(source.shape, k)
    return em.value(frame, source.name, index)[start:start + count]


@emits("tuple")
def _tuple(em, frame, instr, index):
    out = []
    for o in instr.operands:
        out += em.value(frame, o, index)
    return out


@emits("fusion", "call")
def _fusion(em, frame, instr, index):
    """A nested fusion (or call) inlined: its parameters are this frame's operands."""
    inner = inner_frame(em, frame, instr)
    return em.value(inner, inner.comp.root_name, index)


def inner_frame(em: Emitter, frame: Frame, instr: ir.Instruction) -> Frame:
    """The frame of a nested fusion's computation (one per fusion, so its outputs share values)."""
    key = (frame.uid, instr.name)
    if key in em.frames:
        return em.frames[key]
    comp = em.module[(instr.attr("calls") or instr.called[0]).lstrip("%")]
    operands = instr.operands
    shapes = {p.parameter_number: p.shape for p in comp.parameters}

    def bind(number: int, idx: list[Idx]) -> list[str]:
        return em.value(frame, operands[number], idx if shapes[number].dims else [])

    def bind_element(number: int, k: int, idx: list[Idx]) -> list[str]:
        return tuple_element(em, frame, operands[number], k, idx)

    em.frames[key] = Frame(comp, bind, bind_element=bind_element)
    return em.frames[key]


@emits("custom-call")
def _custom_call(em, frame, instr, index):
    target = instr.custom_call_target or ""
    if target not in THREEFRY_TARGETS:
        raise EmitError(f"kernel {em.kernel}: custom call {target!r} ({instr.name}) is a library call, "
                        f"not per-element code")
    args = [em.one(frame, o, _operand_index(em, frame, o, index)) for o in instr.operands[:4]]
    y0, y1 = em.fresh("y"), em.fresh("y")
    em.line(f"u32 {y0}, {y1}; hf_threefry2x32({', '.join(args)}, &{y0}, &{y1});")
    return [y0, y1]

"""XLA's element types and arithmetic on NumPy arrays: the semantics both the reference
evaluator and the generated kernels must agree on.

Where C and NumPy differ from XLA, XLA wins: integer division truncates and x/0 gives -1
(all bits set), shifts by the bit width or more give 0 (or the sign), float→int conversion
saturates and maps NaN to 0, integer overflow wraps.  Transcendental functions of narrow
floats are computed in float64 and rounded once, the same recipe the CPU kernels use
(execute/emit.py), so the reference and the kernels agree to the last bit on the CPU.
"""

from __future__ import annotations

import math

import numpy as np

from .. import ir
from ..errors import ExecutionError

# ------------------------------------------------------------------------------------------
# Element types
# ------------------------------------------------------------------------------------------

_NP_TYPES: dict[str, type] = {
    "pred": np.bool_,
    "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64,
    "c64": np.complex64, "c128": np.complex128,
}
try:  # bf16 and the f8 types come with ml_dtypes (installed alongside jax); optional here
    import ml_dtypes as _ml

    _NP_TYPES.update({"bf16": _ml.bfloat16, "f8e4m3fn": _ml.float8_e4m3fn, "f8e5m2": _ml.float8_e5m2})
except ImportError:  # pragma: no cover - depends on the environment
    pass


def np_dtype(element_type: str) -> np.dtype:
    """The NumPy dtype of an XLA element type; ExecutionError for types NumPy cannot hold."""
    try:
        return np.dtype(_NP_TYPES[element_type])
    except KeyError:
        hint = " (install ml_dtypes for bf16/f8)" if element_type.startswith(("bf", "f8")) else ""
        raise ExecutionError(f"element type {element_type} is not supported by the evaluator{hint}") from None


def is_float(element_type: str) -> bool:
    return element_type in ir.FLOAT_TYPES


def is_int(element_type: str) -> bool:
    return element_type in ir.INTEGRAL_TYPES


def zeros(shape: ir.Shape) -> np.ndarray:
    return np.zeros(shape.dims, np_dtype(shape.element_type))


# ------------------------------------------------------------------------------------------
# Layouts: buffers hold elements in physical (minor-to-major) order
# ------------------------------------------------------------------------------------------


def major_to_minor(shape: ir.Shape) -> tuple[int, ...]:
    return tuple(reversed(shape.minor_to_major))


def to_physical(value: np.ndarray, shape: ir.Shape) -> np.ndarray:
    """The elements of a logical array in the order its layout stores them (1-D)."""
    return np.ascontiguousarray(np.transpose(value, major_to_minor(shape))).reshape(-1)


def from_physical(flat: np.ndarray, shape: ir.Shape) -> np.ndarray:
    """A logical array from its elements in physical order."""
    order = major_to_minor(shape)
    physical_dims = tuple(shape.dims[d] for d in order)
    physical = flat.reshape(physical_dims)
    return np.transpose(physical, np.argsort(order))


# ------------------------------------------------------------------------------------------
# Arithmetic with XLA's semantics
# ------------------------------------------------------------------------------------------


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.int64) if x.dtype != np.uint64 else x


def int_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Truncating division; x/0 = -1 (all ones), INT_MIN/-1 = INT_MIN (XLA's HLO evaluator)."""
    dtype = np.result_type(a, b)
    if dtype == np.uint64 or np.issubdtype(dtype, np.unsignedinteger):
        safe = np.where(b == 0, 1, b)
        return np.where(b == 0, np.array(-1).astype(dtype), a // safe).astype(dtype)
    wa, wb = _wide(a), _wide(b)
    safe = np.where(wb == 0, 1, wb)
    q = np.abs(wa) // np.abs(safe) * np.sign(wa) * np.sign(safe)
    q = np.where(wb == 0, -1, q)
    return q.astype(dtype)  # INT_MIN / -1 wraps back to INT_MIN


def int_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Remainder with the sign of the dividend; x%0 = x."""
    dtype = np.result_type(a, b)
    if np.issubdtype(dtype, np.unsignedinteger):
        safe = np.where(b == 0, 1, b)
        return np.where(b == 0, a, a % safe).astype(dtype)
    wa, wb = _wide(a), _wide(b)
    safe = np.where(wb == 0, 1, wb)
    r = np.abs(wa) % np.abs(safe) * np.sign(wa)
    return np.where(wb == 0, wa, r).astype(dtype)


def float_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.fmod(a, b)


def shift(kind: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """shift-left / shift-right-logical / shift-right-arithmetic; amounts ≥ the bit width
    (as unsigned) give 0, or the sign for arithmetic right shifts."""
    dtype = a.dtype
    bits = dtype.itemsize * 8
    unsigned = np.dtype(f"u{dtype.itemsize}")
    amount = b.astype(unsigned)
    too_far = amount >= bits
    safe = np.where(too_far, 0, amount).astype(unsigned)
    if kind == "shift-left":
        out = (a.astype(unsigned) << safe).astype(dtype)
        return np.where(too_far, np.zeros((), dtype), out)
    if kind == "shift-right-logical":
        out = (a.astype(unsigned) >> safe).astype(dtype)
        return np.where(too_far, np.zeros((), dtype), out)
    signed = np.dtype(f"i{dtype.itemsize}")
    sa = a.astype(signed)
    out = (sa >> safe.astype(signed)).astype(dtype)
    fill = np.where(sa < 0, np.array(-1, signed), np.array(0, signed)).astype(dtype)
    return np.where(too_far, fill, out)


def int_power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer power with wrapping; negative exponents give 0 except for bases 1 and -1."""
    dtype = np.result_type(a, b)
    wa, wb = _wide(a), _wide(b)
    result = np.ones(np.broadcast(wa, wb).shape, wa.dtype)
    base = np.broadcast_to(wa, result.shape).copy()
    exp = np.broadcast_to(np.maximum(wb, 0), result.shape).copy()
    while np.any(exp > 0):
        odd = (exp & 1) == 1
        result = np.where(odd, result * base, result)
        base = base * base
        exp = exp >> 1
    if np.issubdtype(dtype, np.signedinteger):
        neg = np.where(wa == 1, 1, np.where(wa == -1, np.where(wb % 2 == 0, 1, -1), 0))
        result = np.where(wb < 0, neg, result)
    return result.astype(dtype)


def total_order_key(x: np.ndarray) -> np.ndarray:
    """Integers that sort floats in IEEE total order (-NaN < -inf < -0 < +0 < inf < NaN)."""
    width = x.dtype.itemsize
    signed = np.dtype(f"i{width}")
    bits = x.view(signed) if x.dtype.kind == "f" else x.astype(np.float32).view(np.int32)
    mask = np.array(np.iinfo(bits.dtype).max, bits.dtype)
    return np.where(bits < 0, bits ^ mask, bits)


def compare(direction: str, a: np.ndarray, b: np.ndarray, total_order: bool = False) -> np.ndarray:
    if total_order and a.dtype.kind == "f":
        a, b = total_order_key(a), total_order_key(b)
    if direction == "EQ":
        return a == b
    if direction == "NE":
        return a != b
    if direction == "LT":
        return a < b
    if direction == "LE":
        return a <= b
    if direction == "GT":
        return a > b
    if direction == "GE":
        return a >= b
    raise ExecutionError(f"unknown comparison direction {direction}")


def convert(x: np.ndarray, element_type: str) -> np.ndarray:
    """XLA's convert: float→int truncates toward zero, saturates and maps NaN to 0;
    anything→pred is `!= 0`; integer narrowing wraps."""
    target = np_dtype(element_type)
    if target == np.bool_:
        return x != 0
    if x.dtype.kind == "f" and target.kind in "iu":
        info = np.iinfo(target)
        wide = np.nan_to_num(x.astype(np.float64), nan=0.0)
        wide = np.trunc(wide)
        # The largest integers are not representable in float64 exactly: compare there, then set.
        out = np.clip(wide, float(info.min), float(info.max))
        result = out.astype(target)
        result = np.where(wide >= float(info.max), np.array(info.max, target), result)
        return np.where(wide <= float(info.min), np.array(info.min, target), result)
    if x.dtype.kind == "c" and target.kind != "c":
        x = x.real
    return x.astype(target)


def bitcast_convert(x: np.ndarray, element_type: str, out_dims: tuple[int, ...]) -> np.ndarray:
    """Reinterpret the bits; a width change adds or removes a minor dimension (XLA's rule)."""
    target = np_dtype(element_type)
    if target.itemsize == x.dtype.itemsize:
        return np.ascontiguousarray(x).view(target)  # keeps the shape (also for arrays of scalars)
    flat = np.ascontiguousarray(x).view(target)
    return flat.reshape(out_dims)


# ------------------------------------------------------------------------------------------
# Floating-point functions: computed in float64, rounded once
# ------------------------------------------------------------------------------------------


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


FLOAT_FUNCTIONS = {
    "exponential": np.exp, "exponential-minus-one": np.expm1, "log": np.log,
    "log-plus-one": np.log1p, "sine": np.sin, "cosine": np.cos, "tan": np.tan, "tanh": np.tanh,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "cbrt": np.cbrt,
    "logistic": lambda x: 1.0 / (1.0 + np.exp(-x)), "atan": np.arctan, "acos": np.arccos,
    "asin": np.arcsin, "sinh": np.sinh, "cosh": np.cosh, "acosh": np.arccosh,
    "asinh": np.arcsinh, "atanh": np.arctanh, "erf": _erf,
}


def float_function(opcode: str, x: np.ndarray) -> np.ndarray:
    fn = FLOAT_FUNCTIONS[opcode]
    if x.dtype.kind == "c":
        return fn(x)
    return fn(x.astype(np.float64)).astype(x.dtype)


def round_half_away(x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64)
    return (np.sign(wide) * np.floor(np.abs(wide) + 0.5)).astype(x.dtype)


def clz(x: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    unsigned = x.astype(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    out = np.full(x.shape, bits, np.int64)
    for b in range(bits):
        has = (unsigned >> np.uint64(b)) & np.uint64(1)
        out = np.where(has == 1, bits - 1 - b, out)
    return out.astype(x.dtype)


def popcnt(x: np.ndarray) -> np.ndarray:
    unsigned = x.astype(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    out = np.zeros(x.shape, np.int64)
    for b in range(x.dtype.itemsize * 8):
        out += ((unsigned >> np.uint64(b)) & np.uint64(1)).astype(np.int64)
    return out.astype(x.dtype)


def reduce_precision(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """XLA's reduce-precision for f32/f64: round the mantissa to nearest even, then flush
    values outside the smaller exponent range to 0 or infinity (NaN stays NaN)."""
    if x.dtype == np.float32:
        utype, src_mant, src_exp = np.uint32, 23, 8
    elif x.dtype == np.float64:
        utype, src_mant, src_exp = np.uint64, 52, 11
    else:
        return reduce_precision(x.astype(np.float32), exponent_bits, mantissa_bits).astype(x.dtype)
    bits = x.view(utype).copy()
    one = utype(1)
    if mantissa_bits < src_mant:
        drop = utype(src_mant - mantissa_bits)
        last = (bits >> drop) & one
        bias = (one << (drop - one)) - one + last
        bits = (bits + bias) & ~((one << drop) - one)
    if exponent_bits < src_exp:
        sign = bits & (one << utype(src_mant + src_exp))
        exp_bias = (1 << (src_exp - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        max_exp = exp_bias + reduced_bias
        min_exp = exp_bias - reduced_bias
        exponent = (bits >> utype(src_mant)) & utype((1 << src_exp) - 1)
        overflow = exponent > utype(max_exp)
        underflow = exponent <= utype(min_exp)
        inf_bits = utype(((1 << src_exp) - 1) << src_mant) | sign
        bits = np.where(overflow, inf_bits, np.where(underflow, sign, bits))
    out = bits.view(x.dtype)
    return np.where(np.isnan(x), x, out)

"""The C/CUDA text every generated kernel file starts with: type names, XLA's arithmetic
where C differs (execute/numeric.py is the NumPy side of the same rules), and the math
functions.

On the CPU, float32 functions are evaluated in double precision and rounded once, as the
reference evaluator does: exp, expm1, log, log1p, logistic, tanh, sin and cos by the
vectorizable code of execute/vecmath.py (a result may differ from the reference's by 1 ulp
where the exact value lies next to a rounding boundary), the others by the C library's
double-precision functions (not vectorized); on the GPU the single-precision CUDA functions
are used, as XLA does.
"""

from __future__ import annotations

from . import vecmath
from .threefry import C_SOURCE as THREEFRY

TYPES = r"""
typedef float f32; typedef double f64;
typedef signed char i8; typedef short i16; typedef int i32; typedef long long i64;
typedef unsigned char u8; typedef unsigned short u16; typedef unsigned int u32; typedef unsigned long long u64;
typedef unsigned char pred;
"""

COMMON = r"""
HF_FN i64 hf_clamp_i64(i64 x, i64 lo, i64 hi) { return x < lo ? lo : (x > hi ? hi : x); }
/* NaN-propagating max/min, with NumPy's choice between equal values (-0 vs +0) */
HF_FN f32 hf_max_f32(f32 a, f32 b) { return (a >= b || a != a) ? a : b; }
HF_FN f32 hf_min_f32(f32 a, f32 b) { return (a <= b || a != a) ? a : b; }
HF_FN f64 hf_max_f64(f64 a, f64 b) { return (a >= b || a != a) ? a : b; }
HF_FN f64 hf_min_f64(f64 a, f64 b) { return (a <= b || a != a) ? a : b; }
/* IEEE total order as integers (compare type=TOTALORDER) */
HF_FN i32 hf_total_f32(f32 x) { union { f32 f; i32 i; } u; u.f = x; return u.i < 0 ? (u.i ^ 0x7fffffff) : u.i; }
HF_FN i64 hf_total_f64(f64 x) { union { f64 f; i64 i; } u; u.f = x; return u.i < 0 ? (u.i ^ 0x7fffffffffffffffLL) : u.i; }
HF_FN pred hf_isfinite_f32(f32 x) { return isfinite(x) ? 1 : 0; }
HF_FN pred hf_isfinite_f64(f64 x) { return isfinite(x) ? 1 : 0; }

/* Integer division and remainder as XLA defines them: x/0 = -1, x%0 = x, MIN/-1 = MIN;
   shifts by the bit width or more give 0 (or the sign); overflow wraps.  hf_shlm/hf_shrlm are
   the unsigned shifts without a branch, for loop kernels: there the amount comes from shared
   loop state (threefry's rotations), and GCC, unswitching the lane loop on the ternary's
   condition, leaves it scalar; in flat element loops the ternary vectorizes best. */
#define HF_SIGNED_OPS(T, U, W, BITS) \
HF_FN T hf_div_##T(T a, T b) { if (b == 0) return (T)-1; if (b == (T)-1) return (T)((W)0 - (W)a); return (T)(a / b); } \
HF_FN T hf_rem_##T(T a, T b) { if (b == 0) return a; if (b == (T)-1) return 0; return (T)(a % b); } \
HF_FN T hf_shl_##T(T a, T b) { return ((U)b >= BITS) ? (T)0 : (T)((W)(U)a << (U)b); } \
HF_FN T hf_shrl_##T(T a, T b) { return ((U)b >= BITS) ? (T)0 : (T)((U)a >> (U)b); } \
HF_FN T hf_shra_##T(T a, T b) { return ((U)b >= BITS) ? (T)(a < 0 ? -1 : 0) : (T)(a >> b); } \
HF_FN T hf_pow_##T(T a, T b) { \
  if (b < 0) return (T)(a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0)); \
  W r = 1, x = (W)a; while (b) { if (b & 1) r = r * x; x = x * x; b >>= 1; } return (T)r; } \
HF_FN T hf_popcnt_##T(T a) { return (T)HF_POPCOUNT64((u64)(U)a); } \
HF_FN T hf_clz_##T(T a) { return (U)a == 0 ? (T)BITS : (T)(HF_CLZ64((u64)(U)a) - (64 - BITS)); }
#define HF_UNSIGNED_OPS(T, S, W, BITS) \
HF_FN T hf_div_##T(T a, T b) { return b == 0 ? (T)-1 : (T)(a / b); } \
HF_FN T hf_rem_##T(T a, T b) { return b == 0 ? a : (T)(a % b); } \
HF_FN T hf_shl_##T(T a, T b) { return (b >= BITS) ? (T)0 : (T)((W)a << b); } \
HF_FN T hf_shrl_##T(T a, T b) { return (b >= BITS) ? (T)0 : (T)(a >> b); } \
HF_FN T hf_shlm_##T(T a, T b) { return (T)((T)((W)a << (b & (BITS - 1))) & (T)((T)0 - (T)(b < BITS))); } \
HF_FN T hf_shrlm_##T(T a, T b) { return (T)((T)(a >> (b & (BITS - 1))) & (T)((T)0 - (T)(b < BITS))); } \
HF_FN T hf_shra_##T(T a, T b) { return (b >= BITS) ? (T)(((S)a < 0) ? -1 : 0) : (T)((S)a >> b); } \
HF_FN T hf_pow_##T(T a, T b) { W r = 1, x = a; while (b) { if (b & 1) r = r * x; x = x * x; b >>= 1; } return (T)r; } \
HF_FN T hf_popcnt_##T(T a) { return (T)HF_POPCOUNT64((u64)a); } \
HF_FN T hf_clz_##T(T a) { return a == 0 ? (T)BITS : (T)(HF_CLZ64((u64)a) - (64 - BITS)); }
HF_SIGNED_OPS(i8, u8, u32, 8)
HF_SIGNED_OPS(i16, u16, u32, 16)
HF_SIGNED_OPS(i32, u32, u32, 32)
HF_SIGNED_OPS(i64, u64, u64, 64)
HF_UNSIGNED_OPS(u8, i8, u32, 8)
HF_UNSIGNED_OPS(u16, i16, u32, 16)
HF_UNSIGNED_OPS(u32, i32, u32, 32)
HF_UNSIGNED_OPS(u64, i64, u64, 64)

/* float -> integer: truncate, saturate, NaN -> 0 (XLA's convert) */
#define HF_CVT(F, T, LO, HI) \
HF_FN T hf_cvt_##F##_##T(F x) { if (x != x) return 0; if (x <= (F)(LO)) return (T)(LO); if (x >= (F)(HI)) return (T)(HI); return (T)x; }
HF_CVT(f32, i8, -128, 127) HF_CVT(f32, i16, -32768, 32767) HF_CVT(f32, i32, (-2147483647-1), 2147483647)
HF_CVT(f32, i64, (-9223372036854775807LL-1), 9223372036854775807LL)
HF_CVT(f32, u8, 0, 255) HF_CVT(f32, u16, 0, 65535) HF_CVT(f32, u32, 0, 4294967295u) HF_CVT(f32, u64, 0, 18446744073709551615ULL)
HF_CVT(f64, i8, -128, 127) HF_CVT(f64, i16, -32768, 32767) HF_CVT(f64, i32, (-2147483647-1), 2147483647)
HF_CVT(f64, i64, (-9223372036854775807LL-1), 9223372036854775807LL)
HF_CVT(f64, u8, 0, 255) HF_CVT(f64, u16, 0, 65535) HF_CVT(f64, u32, 0, 4294967295u) HF_CVT(f64, u64, 0, 18446744073709551615ULL)
"""

_UNARY = ("exp", "expm1", "log", "log1p", "sin", "cos", "tan", "tanh", "sqrt", "cbrt", "atan", "acos", "asin",
          "sinh", "cosh", "acosh", "asinh", "atanh", "erf")
_EXACT = ("fabs", "floor", "ceil", "rint", "round")


def _math(target: str) -> str:
    out = []
    for fn in _UNARY:
        if target != "cuda" and fn == "sqrt":  # correctly rounded either way; sqrtf has a vector form
            out.append("HF_FN f32 hf_sqrt_f32(f32 x) { return sqrtf(x); }")
            out.append("HF_FN f64 hf_sqrt_f64(f64 x) { return sqrt(x); }")
            continue
        if target != "cuda" and fn in vecmath.FUNCTIONS:
            out.append(f"HF_FN f64 hf_{fn}_f64(f64 x) {{ return {fn}(x); }}")
            continue
        if target == "cuda":
            out.append(f"HF_FN f32 hf_{fn}_f32(f32 x) {{ return {fn}f(x); }}")
        else:  # double precision, rounded once: the reference evaluator's recipe
            out.append(f"HF_FN f32 hf_{fn}_f32(f32 x) {{ return (f32){fn}((f64)x); }}")
        out.append(f"HF_FN f64 hf_{fn}_f64(f64 x) {{ return {fn}(x); }}")
    for fn in _EXACT:
        name = "abs" if fn == "fabs" else fn
        out.append(f"HF_FN f32 hf_{name}_f32(f32 x) {{ return {fn}f(x); }}")
        out.append(f"HF_FN f64 hf_{name}_f64(f64 x) {{ return {fn}(x); }}")
    for fn in ("fmod", "pow", "atan2"):
        if target == "cuda":
            out.append(f"HF_FN f32 hf_{fn}_f32(f32 a, f32 b) {{ return {fn}f(a, b); }}")
        else:
            out.append(f"HF_FN f32 hf_{fn}_f32(f32 a, f32 b) {{ return (f32){fn}((f64)a, (f64)b); }}")
        out.append(f"HF_FN f64 hf_{fn}_f64(f64 a, f64 b) {{ return {fn}(a, b); }}")
    if target == "cuda":
        out.append("HF_FN f32 hf_rsqrt_f32(f32 x) { return rsqrtf(x); }")
        out.append("HF_FN f32 hf_logistic_f32(f32 x) { return 1.0f / (1.0f + expf(-x)); }")
    else:  # logistic is vecmath's
        out.append("HF_FN f32 hf_rsqrt_f32(f32 x) { return (f32)(1.0 / sqrt((f64)x)); }")
    out.append("HF_FN f64 hf_rsqrt_f64(f64 x) { return 1.0 / sqrt(x); }")
    out.append("HF_FN f64 hf_logistic_f64(f64 x) { return 1.0 / (1.0 + exp(-x)); }")
    return "\n".join(out) + "\n"


CPU_HEAD = r"""
#include <math.h>
#define HF_CPU 1
/* inlined, so that a loop calling helpers is one straight body the compiler vectorizes */
#define HF_FN static inline __attribute__((always_inline))
#define HF_INF __builtin_inf()
#define HF_NAN __builtin_nan("")
#define HF_POPCOUNT64(x) __builtin_popcountll(x)
#define HF_CLZ64(x) __builtin_clzll(x)
/* scatter's combine: the CPU kernels run one update after another */
#define HF_COMBINE_1(T, ptr, val, fn) (*(ptr) = fn(*(ptr), (val)))
#define HF_COMBINE_2 HF_COMBINE_1
#define HF_COMBINE_4 HF_COMBINE_1
#define HF_COMBINE_8 HF_COMBINE_1
#define HF_ATOMIC_ADD(T, ptr, val, fn) HF_COMBINE_1(T, ptr, val, fn)
#define HF_ATOMIC_MAXIMUM(T, ptr, val, fn) HF_COMBINE_1(T, ptr, val, fn)
#define HF_ATOMIC_MINIMUM(T, ptr, val, fn) HF_COMBINE_1(T, ptr, val, fn)
/* select as a blend of bits: the compiler sees data flow, no branch it could thread */
#define HF_SELECT(T, c, a, b) hf_select_##T((c), (a), (b))
#define HF_SELECT_BITS(T, U) HF_FN T hf_select_##T(pred c, T a, T b) { \
  U ua, ub, r; T t; __builtin_memcpy(&ua, &a, sizeof(T)); __builtin_memcpy(&ub, &b, sizeof(T)); \
  const U m = (U)0 - (U)(c != 0); r = (ua & m) | (ub & ~m); __builtin_memcpy(&t, &r, sizeof(T)); return t; }
/* a reduction split across the lanes of a warp (CUDA) is one lane here: no exchange, no barrier */
#define HF_SHFL_XOR(T, x, o) (x)
#define HF_SYNC_LANES()
"""

CPU_SELECTS = """
HF_SELECT_BITS(f32, u32) HF_SELECT_BITS(f64, u64) HF_SELECT_BITS(pred, u8)
HF_SELECT_BITS(i8, u8) HF_SELECT_BITS(i16, u16) HF_SELECT_BITS(i32, u32) HF_SELECT_BITS(i64, u64)
HF_SELECT_BITS(u8, u8) HF_SELECT_BITS(u16, u16) HF_SELECT_BITS(u32, u32) HF_SELECT_BITS(u64, u64)
"""

CUDA_HEAD = r"""
#define HF_CPU 0
#define HF_FN static __device__ __forceinline__
#define HF_INF __int_as_float(0x7f800000)
#define HF_NAN __int_as_float(0x7fc00000)
#define HF_POPCOUNT64(x) __popcll(x)
#define HF_CLZ64(x) __clzll(x)
/* scatter's combine on the GPU: a compare-and-swap loop, for any reducer of 4- or 8-byte values */
#define HF_COMBINE_4(T, ptr, val, fn) do { unsigned int* a_ = (unsigned int*)(ptr); \
  unsigned int old_ = *a_, assumed_; union { unsigned int u; T t; } c_, n_; \
  do { assumed_ = old_; c_.u = assumed_; n_.t = fn(c_.t, (val)); old_ = atomicCAS(a_, assumed_, n_.u); } \
  while (assumed_ != old_); } while (0)
#define HF_COMBINE_8(T, ptr, val, fn) do { unsigned long long* a_ = (unsigned long long*)(ptr); \
  unsigned long long old_ = *a_, assumed_; union { unsigned long long u; T t; } c_, n_; \
  do { assumed_ = old_; c_.u = assumed_; n_.t = fn(c_.t, (val)); old_ = atomicCAS(a_, assumed_, n_.u); } \
  while (assumed_ != old_); } while (0)
/* adds (and integer max/min) as one atomic instruction; 64-bit integers as their unsigned bits */
#define HF_ATOMIC_ADD(T, ptr, val, fn) hf_atomic_add((ptr), (T)(val))
#define HF_ATOMIC_MAXIMUM(T, ptr, val, fn) hf_atomic_max((ptr), (T)(val))
#define HF_ATOMIC_MINIMUM(T, ptr, val, fn) hf_atomic_min((ptr), (T)(val))
/* reductions split across the 32 lanes of a warp: partial results exchanged by shuffles,
   and a barrier before stores (an output may share its buffer with an input the other
   lanes still read) */
#define HF_SHFL_XOR(T, x, o) ((T)__shfl_xor_sync(0xffffffffu, (x), (o)))
#define HF_SELECT(T, c, a, b) ((c) ? (a) : (b))
#define HF_SYNC_LANES() __syncwarp()
"""


#: the atomic instructions behind HF_ATOMIC_<op> on the GPU (after the types)
CUDA_ATOMICS = """
HF_FN void hf_atomic_add(f32* p, f32 v) { atomicAdd(p, v); }
HF_FN void hf_atomic_add(f64* p, f64 v) { atomicAdd(p, v); }
HF_FN void hf_atomic_add(i32* p, i32 v) { atomicAdd(p, v); }
HF_FN void hf_atomic_add(u32* p, u32 v) { atomicAdd(p, v); }
HF_FN void hf_atomic_add(i64* p, i64 v) { atomicAdd((u64*)p, (u64)v); }
HF_FN void hf_atomic_add(u64* p, u64 v) { atomicAdd(p, v); }
HF_FN void hf_atomic_max(i32* p, i32 v) { atomicMax(p, v); }
HF_FN void hf_atomic_max(u32* p, u32 v) { atomicMax(p, v); }
HF_FN void hf_atomic_max(i64* p, i64 v) { atomicMax(p, v); }
HF_FN void hf_atomic_max(u64* p, u64 v) { atomicMax(p, v); }
HF_FN void hf_atomic_min(i32* p, i32 v) { atomicMin(p, v); }
HF_FN void hf_atomic_min(u32* p, u32 v) { atomicMin(p, v); }
HF_FN void hf_atomic_min(i64* p, i64 v) { atomicMin(p, v); }
HF_FN void hf_atomic_min(u64* p, u64 v) { atomicMin(p, v); }
"""


def prelude(target: str) -> str:
    """Everything a kernel file needs before its kernels; `target` is "cpu" or "cuda"."""
    if target == "cuda":
        return CUDA_HEAD + TYPES + CUDA_ATOMICS + COMMON + _math(target) + THREEFRY
    return CPU_HEAD + TYPES + CPU_SELECTS + COMMON + vecmath.c_source() + _math(target) + THREEFRY

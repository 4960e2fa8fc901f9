"""Single-precision math for the CPU kernels, written so that the C compiler vectorizes the
element loops that call it: straight-line code, no library calls, selects instead of
branches, integer tricks instead of conversions the vector units lack.

exp, log, log1p, logistic, tanh, sine and cosine are computed in single precision, as
XLA:CPU computes them: within 1, 2, 3, 2, 2, 1 and 1 ulp of the correctly rounded result
(SINGLE_PRECISION, measured by the tests; XLA's own budgets are 6 ulp for exp and 3 for tanh,
and it is within 2 for log1p, 1 for sine and cosine); sine and cosine reduce their argument
in double precision (below).  The others (expm1) are
evaluated in double precision and rounded once, keeping the accuracy of the reference
evaluator's recipe (double-precision libm, rounded): their polynomials and reductions have
relative errors of about 1e-13 or less before the rounding, so a result is the correctly
rounded one except where the exact value lies within that distance of a rounding boundary
(then it is 1 ulp off).  XLA:CPU (jax 0.10.2, measured
by tests against double precision) is within 1 ulp for sin, cos, log, sqrt, atan, cbrt and
tan, 2 for log1p, logistic, rsqrt and atan2, 4 for pow, 5 for tanh and expm1, 6 for erf; it
also flushes subnormal results of exp and subnormal arguments of log to zero, which these
functions do not (the reference keeps subnormals).

Sine and cosine reduce the argument modulo pi/2 in two ways, both computed and one
selected per element: below 2^20 by subtracting j*pi/2 with pi/2 split in three parts (each
product exact); at and above 2^20 from the float's integer mantissa times 2^e*(2/pi) mod 4,
a table of 2/pi's bits by exponent (built here from pi computed with integers) split in
four 24-bit doubles so that every product is exact.  Both keep the reduced argument to
about 2^-60 absolute, over the whole f32 range.

Functions not here (erf, pow, atan2, the inverse and hyperbolic ones but tanh) stay scalar
double-precision libm calls (execute/prelude.py): a loop that calls one is not vectorized.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

#: Arguments of sine and cosine at or above this go through the table (2^20).
LARGE_TRIG = 1 << 20
#: f32 biased exponents with a table row: 2^20 (147) up to the largest finite (254).
_FIRST_EXPONENT = 147
_ROWS = 254 - _FIRST_EXPONENT + 1


def _pi_fixed(bits: int) -> int:
    """floor(pi * 2^bits), by Machin's formula in integers (with guard bits)."""
    guard = bits + 32
    one = 1 << guard

    def arctan_inv(n: int) -> int:
        total, term, k, sign = 0, one // n, 1, 1
        n2 = n * n
        while term:
            total += sign * (term // k)
            term //= n2
            k += 2
            sign = -sign
        return total

    return (16 * arctan_inv(5) - 4 * arctan_inv(239)) >> 32


@lru_cache(maxsize=1)
def two_over_pi_table() -> list[tuple[float, float, float, float]]:
    """For each f32 exponent from 2^20 up: 2^E * (2/pi) mod 4, E the exponent of the float's
    integer mantissa, as four doubles of 24 bits each (bits 2^1 .. 2^-94)."""
    precision = 400
    pi = _pi_fixed(precision)
    two_over_pi = Fraction(2 << precision, 1) / pi  # 2/pi to ~400 bits
    rows = []
    for biased in range(_FIRST_EXPONENT, 255):
        e = biased - 127 - 23
        value = (two_over_pi * Fraction(2) ** e) % 4
        fixed = int(value * (1 << 94))  # bits 2^1 .. 2^-94
        # chunk k: bits 2^(1-24k) .. 2^(-22-24k), 24 of them, so that m * chunk is exact
        parts = [((fixed >> (72 - 24 * k)) & 0xFFFFFF) * 2.0 ** (-22 - 24 * k) for k in range(4)]
        rows.append(tuple(parts))
    return rows


def _split_pio2() -> tuple[float, float, float]:
    """pi/2 as P1 + P2 + P3, P1 and P2 with 32 significant bits (j * P exact for j < 2^21)."""
    pi = Fraction(_pi_fixed(300), 1 << 300)
    half = pi / 2
    p1 = Fraction(round(half * (1 << 31)), 1 << 31)
    p2 = Fraction(round((half - p1) * (1 << 63)), 1 << 63)
    p3 = float(half - p1 - p2)
    return float(p1), float(p2), p3


#: Below this |x|, tanh is the fitted polynomial (no cancellation in 1 - 2/(e+1)).
TANH_SMALL = 0.625


@lru_cache(maxsize=1)
def tanh_coefficients(degree: int = 6) -> list[float]:
    """c0..c(degree-1) of tanh(x) = x + x^3 (c0 + c1 x^2 + ...) on [0, TANH_SMALL]: a least-
    squares fit at Chebyshev points in double precision (within 1e-9 of tanh), rounded to
    float."""
    import numpy as np

    k = np.arange(400)
    x = TANH_SMALL * (1 + np.cos(np.pi * (k + 0.5) / 400)) / 2
    x = x[x > 1e-3]
    target = (np.tanh(x) - x) / x ** 3
    z = x * x
    matrix = np.stack([z ** j for j in range(degree)], axis=1)
    coefficients, *_ = np.linalg.lstsq(matrix, target, rcond=None)
    return [float(np.float32(c)) for c in coefficients]


def _table_text() -> str:
    """One array per part: a gather takes an index scaled by the element size alone."""
    out = []
    for k in range(4):
        values = ", ".join(f"{row[k]!r}" for row in two_over_pi_table())
        out.append(f"static const f64 hf_2opi_{k}[{_ROWS}] = {{{values}}};")
    return "\n".join(out) + "\n"


def _c(value: float) -> str:
    return repr(float(value))


def c_source() -> str:
    """The C text (after the prelude's types): hf_<fn>_f32 for exp, expm1, log, log1p, sin,
    cos, tanh, logistic."""
    p1, p2, p3 = _split_pio2()
    inv = [1.0]
    for n in range(1, 18):
        inv.append(inv[-1] / n)
    exp_poly = " + r * (".join(_c(inv[n]) for n in range(0, 12)) + ")" * 11
    expm1_series = " + d * (".join(_c(inv[n]) for n in range(1, 7)) + ")" * 5
    sin_poly_f32 = " + z * (".join(f"{(-1) ** k * inv[2 * k + 1]!r}f" for k in range(1, 6)) + ")" * 4
    cos_poly_f32 = " + z * (".join(f"{(-1) ** k * inv[2 * k]!r}f" for k in range(1, 7)) + ")" * 5
    exp_poly_f32 = " + r * (".join(f"{inv[n]!r}f" for n in range(0, 8)) + ")" * 7
    coefficients = tanh_coefficients()
    tanh_poly = " + z * (".join(f"{c!r}f" for c in coefficients) + ")" * (len(coefficients) - 1)
    log_poly_f32 = " + z * (".join(f"{1.0 / (2 * k + 1)!r}f" for k in range(1, 6)) + ")" * 4
    return _table_text() + f"""
#define HF_VM static inline __attribute__((always_inline))
HF_VM f64 hf_d_from_bits(u64 u) {{ f64 d; __builtin_memcpy(&d, &u, 8); return d; }}
HF_VM u64 hf_d_bits(f64 d) {{ u64 u; __builtin_memcpy(&u, &d, 8); return u; }}
HF_VM u32 hf_f_bits(f32 f) {{ u32 u; __builtin_memcpy(&u, &f, 4); return u; }}
/* an integer-valued double |k| < 2^51 as the low bits of a u64 (no conversion instruction) */
HF_VM u64 hf_d_int_bits(f64 k) {{ return hf_d_bits(k + 6755399441055744.0) - hf_d_bits(6755399441055744.0); }}

/* e^x for |x| <= 200: x = k ln2 + r, |r| <= ln2/2, e^r by its Taylor polynomial (degree 11) */
HF_VM f64 hf_exp_d(f64 x) {{
  const f64 k = __builtin_rint(x * 1.4426950408889634);
  const f64 r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  const f64 p = {exp_poly};
  return p * hf_d_from_bits((hf_d_int_bits(k) + 1023) << 52);
}}
/* e^x in single precision, as XLA:CPU computes it: x = k ln2 + r (ln2 in two parts, k ln2hi
   exact), e^r by a degree-7 polynomial, 2^k applied in two steps so that a subnormal result
   is rounded once */
HF_FN f32 hf_exp_f32(f32 x) {{
  const f32 xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  const f32 k = __builtin_rintf(xc * 1.44269504f);
  const f32 r = (xc - k * 0.693145751953125f) - k * 1.42860677e-06f;
  const f32 p = {exp_poly_f32};
  const i32 ki = (i32)k, k1 = ki >> 1, k2 = ki - k1;
  f32 s1, s2;
  const u32 b1 = (u32)(k1 + 127) << 23, b2 = (u32)(k2 + 127) << 23;
  __builtin_memcpy(&s1, &b1, 4);
  __builtin_memcpy(&s2, &b2, 4);
  return x != x ? x : (p * s1) * s2;
}}
HF_FN f32 hf_expm1_f32(f32 x) {{
  const f64 d = x < -200.0f ? -200.0 : (x > 200.0f ? 200.0 : (f64)x);
  const f64 small = d * ({expm1_series});
  const f64 r = (d > -1e-2 && d < 1e-2) ? small : hf_exp_d(d) - 1.0;
  return x != x ? x : (f32)r;
}}
/* 1/(1+e^-x) with e^-|x| (never overflows): t/(1+t) below 0 keeps the subnormal results */
HF_FN f32 hf_logistic_f32(f32 x) {{
  const f32 t = hf_exp_f32(x < 0.0f ? x : -x);
  const f32 d = 1.0f + t;
  return x != x ? x : (x < 0.0f ? t / d : 1.0f / d);
}}
/* log x in single precision: x = 2^e m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with
   s = (m-1)/(m+1), e ln2 in two parts; subnormal x scaled by 2^23 first */
/* log u for a positive normal finite u: no special cases (log1p's 1 + x is one) */
HF_VM f32 hf_log_normal_f32(f32 u) {{
  const u32 bits = hf_f_bits(u);
  const i32 e = (i32)(bits - 0x3f3504f3u) >> 23;
  const u32 mb = bits - ((u32)e << 23);
  f32 m;
  __builtin_memcpy(&m, &mb, 4);
  const f32 ef = (f32)e;
  const f32 sv = (m - 1.0f) / (m + 1.0f);
  const f32 z = sv * sv;
  const f32 s2 = 2.0f * sv;
  const f32 lm = s2 + s2 * z * ({log_poly_f32});
  return ef * 0.693145751953125f + (ef * 1.42860677e-06f + lm);
}}
HF_FN f32 hf_log_f32(f32 x) {{
  /* one comparison per select: a flag combined with && keeps the loop scalar (GCC 12) */
  const f32 xs = x > 0.0f ? (x <= 3.4028234663852886e38f ? x : 1.0f) : 1.0f;
  const f32 xn = xs < 1.17549435e-38f ? xs * 8388608.0f : xs;
  const u32 bits = hf_f_bits(xn);
  const i32 e = (i32)(bits - 0x3f3504f3u) >> 23;
  const u32 mb = bits - ((u32)e << 23);
  f32 m;
  __builtin_memcpy(&m, &mb, 4);
  const f32 ef = (f32)e - (xs < 1.17549435e-38f ? 23.0f : 0.0f);
  const f32 sv = (m - 1.0f) / (m + 1.0f);
  const f32 z = sv * sv;
  const f32 s2 = 2.0f * sv;
  const f32 lm = s2 + s2 * z * ({log_poly_f32});
  const f32 r = ef * 0.693145751953125f + (ef * 1.42860677e-06f + lm);
  return x > 0.0f ? (x <= 3.4028234663852886e38f ? r : x) : (x == 0.0f ? -HF_INF : (x != x ? x : HF_NAN));
}}
/* log(1+x) in single precision (Goldberg's: u = 1+x rounded, log(u) * x/(u-1) corrects
   u's rounding; u = 1 means log1p(x) = x to single precision) */
HF_FN f32 hf_log1p_f32(f32 x) {{
  const int regular = x > -1.0f && x <= 3.4028234663852886e38f;
  const f32 xr = regular ? x : 0.0f;
  const f32 u = 1.0f + xr;
  const f32 um = u - 1.0f;
  /* u >= 2^-24 (x > -1) and finite: a normal number */
  const f32 r = um == 0.0f ? xr : hf_log_normal_f32(u) * (xr / (um == 0.0f ? 1.0f : um));
  return regular ? r : (x == -1.0f ? -HF_INF : (x > 0.0f ? x : (x != x ? x : HF_NAN)));
}}
/* tanh in single precision: below TANH_SMALL an odd polynomial fitted here, above it
   1 - 2/(e^2|x| + 1) with the single-precision exp */
HF_FN f32 hf_tanh_f32(f32 x) {{
  const f32 ax = x < 0.0f ? -x : x;
  const f32 z = ax * ax;
  const f32 small = ax + ax * z * ({tanh_poly});
  const f32 e = hf_exp_f32(2.0f * (ax > 20.0f ? 20.0f : ax));
  const f32 t = ax < {TANH_SMALL!r}f ? small : 1.0f - 2.0f / (e + 1.0f);
  return x != x ? x : (x < 0.0f ? -t : t);
}}

/* sin and cos of |x| (float): r in [-pi/4, pi/4] and the quadrant j mod 4, as a macro
   declaring r and q (an out-pointer would keep the loop from being vectorized) */
#define HF_REDUCE_PIO2(ax, r, q) \\
  /* below 2^20: Cody and Waite, pi/2 = P1 + P2 + P3 */ \\
  const f64 d_ = (f64)(ax); \\
  const f64 js_ = __builtin_rint(d_ * 0.6366197723675814); \\
  const f64 rs_ = ((d_ - js_ * {_c(p1)}) - js_ * {_c(p2)}) - js_ * {_c(p3)}; \\
  /* from 2^20: mantissa m (an integer) times 2^E (2/pi) mod 4, four exact partial products */ \\
  const u32 bits_ = hf_f_bits(ax); \\
  const u32 biased_ = (bits_ >> 23) & 0xffu; \\
  /* the row is biased - {_FIRST_EXPONENT}, clamped to the table by integer arithmetic: a branch would \\
     let the compiler fold row 0's loads and leave conditional loads it cannot vectorize */ \\
  const i32 t_ = (i32)biased_ - {_FIRST_EXPONENT}; \\
  const i32 low_ = t_ & ~(t_ >> 31); \\
  const i32 over_ = low_ - {_ROWS - 1}; \\
  const i32 row_ = low_ - (over_ & ~(over_ >> 31)); \\
  const f64 m_ = (f64)(i32)((bits_ & 0x7fffffu) | 0x800000u); \\
  const f64 a1_ = m_ * hf_2opi_0[row_]; \\
  const f64 a2_ = a1_ - 4.0 * __builtin_floor(a1_ * 0.25) + m_ * hf_2opi_1[row_]; \\
  const f64 a_ = a2_ - 4.0 * __builtin_floor(a2_ * 0.25); \\
  const f64 b_ = m_ * hf_2opi_2[row_]; \\
  const f64 c_ = m_ * hf_2opi_3[row_]; \\
  const f64 jl_ = __builtin_rint(a_ + b_); \\
  const f64 rl_ = (((a_ - jl_) + b_) + c_) * 1.5707963267948966; \\
  const int large_ = (ax) >= {float(LARGE_TRIG)!r}f; \\
  const u64 q = hf_d_int_bits(large_ ? jl_ : js_) & 3u; \\
  const f64 r = large_ ? rl_ : rs_;
/* the reduced argument (|r| <= pi/4, to about 2^-60) rounded to float, then sine and cosine
   by their Taylor polynomials in single precision (XLA:CPU's precision, twice the lanes) */
HF_VM f32 hf_sin_poly(f32 r) {{ const f32 z = r * r; return r + r * z * ({sin_poly_f32}); }}
HF_VM f32 hf_cos_poly(f32 r) {{ const f32 z = r * r; return 1.0f + z * ({cos_poly_f32}); }}
HF_FN f32 hf_sin_f32(f32 x) {{
  const f32 ax = x < 0.0f ? -x : x;
  HF_REDUCE_PIO2(ax, r, q)
  const f32 rf = (f32)r;
  const f32 s = hf_sin_poly(rf), c = hf_cos_poly(rf);
  const f32 v = (q & 1u) ? c : s;
  const f32 y = (q & 2u) ? -v : v;
  return ax <= 3.4028234663852886e38f ? (x < 0.0f ? -y : y) : (x != x ? x : HF_NAN);
}}
HF_FN f32 hf_cos_f32(f32 x) {{
  const f32 ax = x < 0.0f ? -x : x;
  HF_REDUCE_PIO2(ax, r, q)
  const f32 rf = (f32)r;
  const f32 s = hf_sin_poly(rf), c = hf_cos_poly(rf);
  const f32 v = (q & 1u) ? s : c;
  const f32 y = ((q + 1u) & 2u) ? -v : v;
  return ax <= 3.4028234663852886e38f ? y : (x != x ? x : HF_NAN);
}}
"""


#: The f32 functions c_source defines (the prelude defines the others).
FUNCTIONS = ("exp", "expm1", "logistic", "log", "log1p", "tanh", "sin", "cos")
#: Those computed in single precision, and the largest error of each in ulps against the
#: correctly rounded result (tests/test_cpu_vector_kernels.py measures it); the others are
#: within 1 ulp and almost always correctly rounded.
SINGLE_PRECISION = {"exp": 1, "log": 2, "log1p": 3, "logistic": 2, "tanh": 2, "sin": 1, "cos": 1}

"""Random inputs for running a module, and how far one set of outputs is from another.

Every plan of a benchmark runs on the same inputs, drawn once from a seed:
  floats      uniform in [0.02, 0.2): never zero, never negative (log, sqrt and rsqrt stay
              finite), small enough that thresholds such as the cart-pole's 12 degrees are
              crossed by some elements and not others;
  signed ints uniform in [0, 4): valid indices for gathers and dynamic slices, and a mix of
              the values comparisons such as `action == 1` test;
  unsigned    uniform over all bit patterns (PRNG keys and counters);
  pred        fair coin flips.
This module imports only NumPy (the reference-generation script runs it beside JAX).
"""

from __future__ import annotations

import numpy as np

FLOAT_RANGE = (0.02, 0.2)
SIGNED_RANGE = (0, 4)

_FLOAT = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
_SIGNED = {"s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64}
_UNSIGNED = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}


def random_array(rng: np.random.Generator, dims: tuple[int, ...], element_type: str) -> np.ndarray:
    """One input array of the given XLA element type, by the recipe above."""
    dims = tuple(dims)
    if element_type in _FLOAT:
        return rng.uniform(*FLOAT_RANGE, size=dims).astype(_FLOAT[element_type])
    if element_type == "bf16":
        from .numeric import np_dtype

        return rng.uniform(*FLOAT_RANGE, size=dims).astype(np.float32).astype(np_dtype("bf16"))
    if element_type in _SIGNED:
        return rng.integers(*SIGNED_RANGE, size=dims).astype(_SIGNED[element_type])
    if element_type in _UNSIGNED:
        dtype = _UNSIGNED[element_type]
        return rng.integers(0, np.iinfo(dtype).max, size=dims, dtype=dtype, endpoint=True)
    if element_type == "pred":
        return rng.integers(0, 2, size=dims).astype(np.bool_)
    if element_type in ("c64", "c128"):
        real = rng.uniform(*FLOAT_RANGE, size=dims)
        imag = rng.uniform(*FLOAT_RANGE, size=dims)
        return (real + 1j * imag).astype(np.complex64 if element_type == "c64" else np.complex128)
    raise ValueError(f"no random inputs for element type {element_type}")


def random_inputs(signature: list[tuple[tuple[int, ...], str]], seed: int) -> list[np.ndarray]:
    """One array per (dims, element type) of `signature`, all drawn from one seeded generator."""
    rng = np.random.default_rng(seed)
    return [random_array(rng, dims, etype) for dims, etype in signature]


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """The largest elementwise |got - want| / (|want| + floor), floor = a tenth of the output's
    largest magnitude: relative for the large elements, absolute (against that scale) for
    elements much smaller than it. Elements that come out of a cancellation (layer norm's
    gamma·x̂ + beta near zero) carry rounding errors of their operands' size, not their own:
    summed in another order, as every device does, they differ by a few ulps of the output's
    scale, and an error relative to the element alone would call a correct plan wrong (legacy
    layer_norm: 10 ulps at 0.5 on an element of 3e-7). A wrong index or formula still shows
    an error of the output's own scale.
    Matching NaNs and infinities count as equal; a NaN or infinity on one side only is an
    infinite error. Integers and predicates compare exactly (0 or the largest relative
    difference)."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return float("inf")
    if got.size == 0:
        return 0.0
    if want.dtype.kind in "biu" and got.dtype.kind in "biu":
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        return float(np.max(diff / np.maximum(np.abs(want.astype(np.float64)), 1.0)))
    g = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
    w = want.astype(np.complex128 if want.dtype.kind == "c" else np.float64)
    same_special = (np.isnan(g) & np.isnan(w)) | (np.isinf(g) & np.isinf(w) & (g == w))
    one_special = (~np.isfinite(g) | ~np.isfinite(w)) & ~same_special
    if np.any(one_special):
        return float("inf")
    finite = np.isfinite(w)
    if not np.any(finite):
        return 0.0
    floor = 0.1 * max(1e-30, float(np.max(np.abs(w[finite]))))
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where both match
        err = np.abs(g - w) / (np.abs(w) + floor)
    return float(np.max(np.where(same_special, 0.0, err)))


def tolerance(element_type: str) -> float:
    """The largest relative error a plan may show and still count as matching the reference."""
    return {"f16": 1e-2, "bf16": 5e-2, "f64": 1e-9, "c128": 1e-9}.get(element_type, 1e-4) \
        if element_type[0] in "fbc" else 0.0

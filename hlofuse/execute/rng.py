"""XLA's `rng-bit-generator`, as its RngBitGeneratorExpander writes it in HLO
(xla/hlo/transforms/expanders/rng_bit_generator_expander.cc with xla/hlo/builder/lib/prng.cc):
ThreeFry-2x32 or Philox-4x32 (the default on CPU and GPU) over a u64 state whose first word
is the key.  Pure NumPy; returns the new state and the bits.
"""

from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from .threefry import threefry2x32

_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
U32 = np.uint32
U64 = np.uint64


def _split64(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype(U64)
    return (x & U64(0xFFFFFFFF)).astype(U32), (x >> U64(32)).astype(U32)


def _join64(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.astype(U64) | (hi.astype(U64) << U64(32))


def rng_bit_generator(algorithm: str, state: np.ndarray, dims: tuple[int, ...], bits: int):
    """(new state, unsigned random bits of `bits` width and shape `dims`)."""
    state = np.asarray(state).astype(U64).reshape(-1)
    algorithm = (algorithm or "rng_default").lower()
    if algorithm in ("rng_default", "rng_philox"):
        new_state, values = _philox(state, dims, bits)
    elif algorithm == "rng_three_fry":
        new_state, values = _three_fry(state, dims, bits)
    else:
        raise ExecutionError(f"rng-bit-generator: unknown algorithm {algorithm}")
    return new_state, values


# ------------------------------------------------------------------------------------------
# ThreeFry (ThreeFryBitGenerator)
# ------------------------------------------------------------------------------------------


def _threefry_inputs(start: np.uint64, dims: tuple[int, ...]) -> np.ndarray:
    """GetThreeFryInputsAndUpdatedState: the counter plus each element's row-major number,
    skipping dimensions of size < 2."""
    counter = np.full(dims, start, U64)
    product = 1
    for i in range(len(dims) - 1, -1, -1):
        if dims[i] < 2:
            continue
        shape = [1] * len(dims)
        shape[i] = dims[i]
        counter = counter + np.arange(dims[i], dtype=U64).reshape(shape) * U64(product)
        product *= dims[i]
    return counter


def _three_fry(state: np.ndarray, dims: tuple[int, ...], bits: int):
    key_lo, key_hi = _split64(state[:1])
    start = state[1]
    with np.errstate(over="ignore"):
        if bits == 64:
            inputs = _threefry_inputs(start, dims)
            lo, hi = threefry2x32(key_lo[0], key_hi[0], *_split64(inputs))
            return np.array([state[0], start + U64(int(np.prod(dims, dtype=np.int64)))], U64), _join64(lo, hi)
        # 32 bits (narrower types keep the low bits): split a dimension into halves
        if not dims:
            half, split = (1,), None
        else:
            split = next((i for i, d in enumerate(dims) if d % 2 == 0), None)
            if split is None:
                split = max(range(len(dims)), key=lambda i: dims[i])
            half = tuple(list(dims[:split]) + [-(-dims[split] // 2), 1] + list(dims[split + 1:]))
        inputs = _threefry_inputs(start, half)
        out0, out1 = threefry2x32(key_lo[0], key_hi[0], *_split64(inputs))
        new_state = np.array([state[0], start + U64(int(np.prod(half, dtype=np.int64)))], U64)
        if split is None:
            values = out0.reshape(())
        else:
            both = np.concatenate([out0, out1], axis=split + 1)
            rounded = list(dims)
            rounded[split] = half[split] * 2
            values = both.reshape(rounded)[tuple(slice(0, d) for d in dims)]
    return new_state, _narrow(values, bits)


# ------------------------------------------------------------------------------------------
# Philox (PhiloxBitGenerator)
# ------------------------------------------------------------------------------------------


def _philox4x32(x: list[np.ndarray], key: list[np.ndarray]) -> list[np.ndarray]:
    x = [v.astype(U32) for v in x]
    k0, k1 = (np.asarray(k, U32) for k in key)
    with np.errstate(over="ignore"):
        for _ in range(10):
            p0 = x[0].astype(U64) * U64(_PHILOX_M[0])
            p1 = x[2].astype(U64) * U64(_PHILOX_M[1])
            hi0, lo0 = (p0 >> U64(32)).astype(U32), p0.astype(U32)
            hi1, lo1 = (p1 >> U64(32)).astype(U32), p1.astype(U32)
            x = [hi1 ^ x[1] ^ k0, lo1, hi0 ^ x[3] ^ k1, lo0]
            k0 = (k0 + U32(_PHILOX_W[0])).astype(U32)
            k1 = (k1 + U32(_PHILOX_W[1])).astype(U32)
    return x


def _philox_bits(count: int, low: np.uint64, high: np.uint64, key: list) -> tuple[list[np.ndarray], tuple]:
    """GeneratePhiloxBits: 4 words for each of ceil(count/4) counters state + i (a u128)."""
    n = -(-count // 4)
    with np.errstate(over="ignore"):
        iota = np.arange(n, dtype=U64)
        new_low = low + iota
        new_high = np.where(new_low < low, high + U64(1), high).astype(U64)
        inputs = [*_split64(new_low), *_split64(new_high)]
        after_low = U64(low + U64(n))
        after_high = U64(high + U64(1)) if after_low < low else U64(high)
    return _philox4x32(inputs, key), (after_low, after_high)


def _philox(state: np.ndarray, dims: tuple[int, ...], bits: int):
    key = list(_split64(state[:1]))
    key = [key[0][0], key[1][0]]
    if state.size >= 3:
        low, high = state[1], state[2]
    else:  # GetPhiloxStateOp: the whole state reversed, (state[1], state[0]) as low, high
        low, high = state[1], state[0]
    count = int(np.prod(dims, dtype=np.int64))
    if bits == 64:
        words, (new_low, new_high) = _philox_bits(count * 2, low, high, key)
        pairs = np.stack([_join64(words[0], words[1]), _join64(words[2], words[3])], axis=1).reshape(-1)
        values = pairs[:count].reshape(dims)
    else:
        words, (new_low, new_high) = _philox_bits(count, low, high, key)
        values = _narrow(np.stack(words, axis=1).reshape(-1)[:count].reshape(dims), bits)
    tail = [new_low, new_high] if state.size >= 3 else [new_low]
    return np.array([state[0], *tail], U64), values


def _narrow(values: np.ndarray, bits: int) -> np.ndarray:
    return values.astype({8: np.uint8, 16: np.uint16, 32: U32}[bits]) if bits < 32 else values.astype(U32)

"""Threefry-2x32 (20 rounds), the counter-based generator JAX's `jax.random` uses.

XLA:GPU runs it as the custom call `cu_threefry2x32` (`cu_threefry2x32_ffi` in current
jaxlib): operands key0, key1, count0, count1 (u32 arrays of one shape), result the tuple
of the two output words.  On the CPU JAX expands the same rounds into HLO shifts, adds and
xors, which the evaluator runs op by op; both must give the same bits.
"""

from __future__ import annotations

import numpy as np

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
#: The key-schedule parity constant of Threefry (Salmon et al., 2011).
KS_PARITY = 0x1BD11BDA


def _rotl(v: np.ndarray, r: int) -> np.ndarray:
    return (v << np.uint32(r)) | (v >> np.uint32(32 - r))


def threefry2x32(k0, k1, x0, x1) -> tuple[np.ndarray, np.ndarray]:
    """The two output words for keys (k0, k1) and counters (x0, x1), broadcast together."""
    k0, k1, x0, x1 = (np.asarray(a, dtype=np.uint32) for a in (k0, k1, x0, x1))
    k0, k1, x0, x1 = np.broadcast_arrays(k0, k1, x0, x1)
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(KS_PARITY))
    with np.errstate(over="ignore"):
        a = x0 + ks[0]
        b = x1 + ks[1]
        for block in range(5):
            for r in ROTATIONS[block % 2]:
                a = a + b
                b = _rotl(b, r) ^ a
            a = a + ks[(block + 1) % 3]
            b = b + ks[(block + 2) % 3] + np.uint32(block + 1)
    return a.astype(np.uint32), b.astype(np.uint32)


#: C source of the same function, shared by the CPU and CUDA kernels (HF_FN is the
#: target's qualifier for inline helpers, u32 the prelude's unsigned 32-bit type).
C_SOURCE = r"""
HF_FN u32 hf_rotl32(u32 v, int r) { return (v << r) | (v >> (32 - r)); }
HF_FN void hf_threefry2x32(u32 k0, u32 k1, u32 x0, u32 x1, u32* y0, u32* y1) {
  const u32 ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  u32 a = x0 + ks[0], b = x1 + ks[1];
  for (int block = 0; block < 5; ++block) {
    for (int i = 0; i < 4; ++i) { a += b; b = hf_rotl32(b, rot[block % 2][i]) ^ a; }
    a += ks[(block + 1) % 3];
    b += ks[(block + 2) % 3] + (u32)(block + 1);
  }
  *y0 = a; *y1 = b;
}
"""

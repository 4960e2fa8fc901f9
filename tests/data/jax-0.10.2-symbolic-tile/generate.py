"""Regenerate this folder: small LayerNorm programs whose normalisation (a generic Triton
fusion) is read by a reduce through a bitcast or reshape, compiled deviceless for the H100 by
jax 0.10.2's XLA:GPU (XLA 5a9e73cb), one folder per program.

    .venv-samples-current/bin/python tests/data/jax-0.10.2-symbolic-tile/generate.py

Each folder keeps the module right before the fusion passes, the last snapshot of the fusion
pipeline and PriorityFusion's log (`priority_fusion_dump.txt`), under XLA's names.

What each shows (XLA's result):
  ln_sum_merged        LayerNorm of f32[4,32,64] summed over its first two dimensions: XLA
                       reduces f32[128,64] over the 128, the LayerNorm's index is then
                       (s0 / 32, s0 mod 32, d0) and SymbolicTileAnalysis refuses the pair
                       ("Failed to compute symbolic tile for ...")
  ln_sum_kept          the LayerNorm of f32[4,32,64] summed over its first dimension only: no
                       bitcast merges the reduced dimension, XLA fuses it all into one
                       Triton fusion
  ln_split_sum         a LayerNorm of f32[128,64] reshaped to f32[4,32,64] and summed over the
                       4: the reduced dimension is split, its index s0 * 32 + d0 is tiled
"""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import deviceless  # noqa: E402 (tests/data/deviceless.py)

F32 = jnp.float32


def layer_norm(x, g, b):
    m = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean((x - m) ** 2, -1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b


def ln_sum_merged(x, g, b):
    return layer_norm(x, g, b).sum((0, 1))


def ln_sum_kept(x, g, b):
    return layer_norm(x, g, b).sum(0)


def ln_split_sum(x, g, b):
    return layer_norm(x, g, b).reshape(4, 32, 64).sum(0)


def cls_token_norm(x, w, cls, pos, g, b):
    tokens = (x @ w).reshape(4, 64, 64)
    tokens = jnp.concatenate([jnp.broadcast_to(cls, (4, 1, 64)), tokens], axis=1)
    return layer_norm(tokens + pos, g, b)


PROGRAMS = {
    "ln_sum_merged": ("h100_sxm", ln_sum_merged, [(4, 32, 64), (64,), (64,)]),
    "ln_sum_kept": ("h100_sxm", ln_sum_kept, [(4, 32, 64), (64,), (64,)]),
    "ln_split_sum": ("h100_sxm", ln_split_sum, [(128, 64), (64,), (64,)]),
    "cls_token_norm": ("h100_sxm", cls_token_norm, [(256, 48), (48, 64), (1, 1, 64), (65, 64), (64,), (64,)]),
}


if __name__ == "__main__":
    sys.exit(deviceless.main(__file__, PROGRAMS, sys.argv[1:]))

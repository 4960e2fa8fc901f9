"""Regenerate this folder: small normalisation programs compiled deviceless by jax 0.10.2's
XLA:GPU (XLA 5a9e73cb), one folder per program and GPU.

    .venv-samples-current/bin/python tests/data/jax-0.10.2-triton/generate.py

Each folder keeps three files under the names XLA gave them: the module right before the
fusion passes (`fusion.after_pipeline-start.before_variadic-op-splitter`, which already holds
the generic Triton fusions SoftmaxRewriterTriton made from each row reduction), the last
snapshot of the fusion pipeline, and PriorityFusion's own log (`priority_fusion_dump.txt`).

What each shows (XLA's result):
  layer_norm_concat_h100       LayerNorm grows into one Triton fusion that takes in the
                               concatenate reading it (along rows: output tile 2x768)
  softmax_concat_h100          softmax fuses into a concatenate along its rows' dimension;
                               the tile along it (256) must divide the first operand (768)
  softmax_concat_narrow_h100   the same with 1000 columns: only tiles up to 8 divide 1000,
                               so fusing is slower and XLA keeps the concatenate apart
  layer_norm_grad_h100         LayerNorm forward and backward (jax.grad) with 37 rows: the
                               Triton fusions grow through the whole chain
  softmax_concat_a100          as softmax_concat, 2048x1024, on the A100
  layer_norm_matmul_h100       a LayerNorm read by a matmul (through a bitcast) and by a
                               multiply: XLA prices the bitcast pair with its analytical model
                               (no CanFuse, so no tiling), finds the fusion unprofitable and
                               keeps the LayerNorm a kernel of its own
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


def layer_norm_concat(x, g, b, y):
    return jnp.concatenate([layer_norm(x, g, b), y], axis=0)


def softmax_concat(x, y):
    return jnp.concatenate([jax.nn.softmax(x, -1), y], axis=-1)


def layer_norm_matmul(x, g, b, w, d):
    y = layer_norm(x, g, b)
    return y.reshape(-1, y.shape[-1]) @ w, y * d


def layer_norm_grad(x, g, b):
    return jax.grad(lambda x, g, b: jnp.sum(layer_norm(x, g, b) ** 2), argnums=(0, 1, 2))(x, g, b)


PROGRAMS = {
    "layer_norm_concat_h100": ("h100_sxm", layer_norm_concat, [(256, 768), (768,), (768,), (16, 768)]),
    "softmax_concat_h100": ("h100_sxm", softmax_concat, [(256, 768), (256, 64)]),
    "softmax_concat_narrow_h100": ("h100_sxm", softmax_concat, [(37, 1000), (37, 64)]),
    "layer_norm_grad_h100": ("h100_sxm", layer_norm_grad, [(37, 1000), (1000,), (1000,)]),
    "softmax_concat_a100": ("a100_sxm_80", softmax_concat, [(2048, 1024), (2048, 64)]),
    "layer_norm_matmul_h100": ("h100_sxm", layer_norm_matmul,
                               [(2, 64, 256), (256,), (256,), (256, 256), (2, 64, 256)]),
}


if __name__ == "__main__":
    sys.exit(deviceless.main(__file__, PROGRAMS, sys.argv[1:]))

"""JAX programs for `hlofuse explain`'s triage: a small transformer trained one Adam step (the
size a new user tries first), a deeper one (thousands of kernel boundaries), and small
programs for bench/triage_accuracy.py whose XLA:CPU kernels leave relaxable boundaries.

None of them was written or tuned against hlofuse's predictions: they are the patterns people
write (norms, gated activations, losses with several reductions, optimizer steps, physics
loops with trigonometry, features packed with concatenate), sized so that one run of every
plan takes milliseconds on a CPU.

bench/explain_compile.py compiles them (`--programs triage_programs`) into
bench/out/triage/<target>/<program>/.  This module imports JAX; only compiling needs it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from explain_programs import F32, I32, Arg, Program, a, adam, cross_entropy, decoder_block, layer_norm  # noqa: F401 (Arg: the compile script reads it here)

# ---------------------------------------------------------------------------------------------
# A transformer trained one Adam step
# ---------------------------------------------------------------------------------------------

D, FF, V, S, B = 64, 256, 512, 32, 4


def _block_shapes(d=D, ff=FF):
    return {"ln1_g": a(d), "ln1_b": a(d), "wq": a(d, d), "wk": a(d, d), "wv": a(d, d), "wo": a(d, d),
            "ln2_g": a(d), "ln2_b": a(d), "w1": a(d, ff), "b1": a(ff), "w2": a(ff, d), "b2": a(d)}


def _lm_params(layers: int):
    return {"emb": a(V, D), "blocks": [_block_shapes() for _ in range(layers)], "lnf_g": a(D), "lnf_b": a(D)}


def _lm_loss(params, tokens, labels):
    x = params["emb"][tokens]
    for p in params["blocks"]:
        x = decoder_block(p, x)
    logits = layer_norm(x, params["lnf_g"], params["lnf_b"]) @ params["emb"].T
    return cross_entropy(logits, labels)


def transformer_train_adam(params, m, v, step, tokens, labels):
    """A two-layer decoder-only LM (tied embedding) trained one Adam step with weight decay."""
    loss, grads = jax.value_and_grad(_lm_loss)(params, tokens, labels)
    params, m, v = adam(params, grads, m, v, step, wd=0.01)
    return loss, params, m, v, step + 1


def transformer_train_adam_deep(params, m, v, step, tokens, labels):
    """The same step on a 12-layer model: thousands of kernel boundaries."""
    return transformer_train_adam(params, m, v, step, tokens, labels)


def _train_args(layers: int):
    p = _lm_params(layers)
    return (p, p, p, a(dtype=I32), a(B, S, dtype=I32), a(B, S, dtype=I32))


# ---------------------------------------------------------------------------------------------
# Small programs with relaxable XLA:CPU boundaries (bench/triage_accuracy.py)
# ---------------------------------------------------------------------------------------------

N = 1 << 16  # elements of the 1-D programs: 256 KiB of f32


def gelu_residual(x, w, b):
    """A tanh-GELU whose result is read by a residual add and by a mean (two users)."""
    h = jax.nn.gelu(x @ w + b, approximate=True)
    return x + h, h.mean(axis=-1)


def layer_norm_grad(x, g, b, dy):
    """Gradients of a layer norm with respect to its input and both parameters."""
    _, vjp = jax.vjp(lambda x, g, b: layer_norm(x, g, b), x, g, b)
    return vjp(dy)


def rms_norm_rope(x, g, cos, sin):
    """RMSNorm then rotary position embedding: halves swapped with a concatenate."""
    x = x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    rotated = jnp.concatenate([-x2, x1], axis=-1)
    return x * cos + rotated * sin


def row_statistics(x):
    """Seven statistics of every row (more reductions than one CPU fusion takes)."""
    mean = x.mean(-1)
    centred = x - mean[:, None]
    return (mean, (centred ** 2).mean(-1), x.max(-1), x.min(-1), jnp.abs(x).sum(-1),
            (centred ** 3).mean(-1), jnp.exp(centred).sum(-1))


def packed_features(a_, b_, c_, d_):
    """Per-element features packed along the minor dimension, then normalised."""
    feats = jnp.concatenate([jnp.sin(a_), jnp.cos(b_), a_ * b_, jnp.exp(-c_ * c_), d_, a_ + d_], axis=-1)
    return feats / (jnp.linalg.norm(feats, axis=-1, keepdims=True) + 1e-6)


def softmax_ce_grad(logits, labels):
    """Cross entropy of a softmax and its gradient with respect to the logits."""
    return jax.value_and_grad(lambda z: cross_entropy(z, labels))(logits)


def pendulum_scan(theta, omega, torque):
    """Damped pendulums stepped 50 times by scan: sin, cos, and the energy of every step."""

    def step(carry, u):
        th, om = carry
        acc = -9.8 * jnp.sin(th) - 0.1 * om + u
        om = om + 0.01 * acc
        th = th + 0.01 * om
        energy = 0.5 * om * om + 9.8 * (1 - jnp.cos(th))
        return (th, om), energy.mean()

    (theta, omega), energies = jax.lax.scan(step, (theta, omega), torque)
    return theta, omega, energies


def pairwise_rbf(x, y):
    """An RBF kernel matrix: pairwise distances, exp, row sums."""
    d2 = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    k = jnp.exp(-d2 / 2.0)
    return k, k.sum(-1)


def swish_glu(x, w_gate, w_up):
    """A SwiGLU unit: SiLU of one projection times another."""
    return jax.nn.silu(x @ w_gate) * (x @ w_up)


def polynomial_users(x):
    """An expensive elementwise value (exp and log) read by four different expressions."""
    e = jnp.exp(x) * jnp.log1p(x * x)
    return e + 1.0, e * x, jnp.sqrt(jnp.abs(e)), e.sum()


def adamw_scalars(p, g, m, v):
    """One AdamW update of a single large tensor with bias corrections."""
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    update = (m / 0.1) / (jnp.sqrt(v / 0.001) + 1e-8) + 0.01 * p
    return p - 1e-3 * update, m, v


def batch_norm_relu_pool(x, g, b):
    """Training-mode batch norm, ReLU and a 2x2 average pool over NHWC activations."""
    mean = x.mean((0, 1, 2))
    var = ((x - mean) ** 2).mean((0, 1, 2))
    y = jax.nn.relu((x - mean) * jax.lax.rsqrt(var + 1e-5) * g + b)
    n, h, w, c = y.shape
    return y.reshape(n, h // 2, 2, w // 2, 2, c).mean((2, 4))


def logsumexp_attention(q, k):
    """Attention scores with a numerically stable log-sum-exp per row."""
    s = q @ k.T / 8.0
    m = s.max(-1, keepdims=True)
    lse = m + jnp.log(jnp.exp(s - m).sum(-1, keepdims=True))
    return jnp.exp(s - lse), lse


PROGRAMS: list[Program] = [
    Program("transformer_train_adam", transformer_train_adam, _train_args(2), "transformer",
            "2-layer decoder LM, one Adam step"),
    Program("transformer_train_adam_deep", transformer_train_adam_deep, _train_args(12), "transformer",
            "12-layer decoder LM, one Adam step"),
    Program("gelu_residual", gelu_residual, (a(256, 256), a(256, 256), a(256)), "accuracy", "GELU, two users"),
    Program("layer_norm_grad", layer_norm_grad, (a(512, 256), a(256), a(256), a(512, 256)), "accuracy",
            "layer norm backward"),
    Program("rms_norm_rope", rms_norm_rope, (a(512, 128), a(128), a(512, 128), a(512, 128)), "accuracy",
            "RMSNorm and rotary embedding"),
    Program("row_statistics", row_statistics, (a(1024, 256),), "accuracy", "seven row reductions"),
    Program("packed_features", packed_features, (a(N // 4, 1), a(N // 4, 1), a(N // 4, 1), a(N // 4, 1)),
            "accuracy", "features packed by concatenate"),
    Program("softmax_ce_grad", softmax_ce_grad, (a(256, 1024), a(256, dtype=I32)), "accuracy",
            "softmax cross entropy gradient"),
    Program("pendulum_scan", pendulum_scan, (a(4096), a(4096), a(50, 4096)), "accuracy", "physics scan"),
    Program("pairwise_rbf", pairwise_rbf, (a(256, 16), a(256, 16)), "accuracy", "RBF kernel matrix"),
    Program("swish_glu", swish_glu, (a(256, 128), a(128, 256), a(128, 256)), "accuracy", "SwiGLU"),
    Program("polynomial_users", polynomial_users, (a(N),), "accuracy", "expensive value, four users"),
    Program("adamw_scalars", adamw_scalars, (a(N), a(N), a(N), a(N)), "accuracy", "AdamW on one tensor"),
    Program("batch_norm_relu_pool", batch_norm_relu_pool, (a(8, 32, 32, 16), a(16), a(16)), "accuracy",
            "batch norm, ReLU, pool"),
    Program("logsumexp_attention", logsumexp_attention, (a(256, 64), a(256, 64)), "accuracy",
            "attention with log-sum-exp"),
]

BY_NAME = {p.name: p for p in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "program names must be unique"

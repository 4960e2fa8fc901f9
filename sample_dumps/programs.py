"""The JAX programs whose XLA dumps live in sample_dumps/.

Each program is a plain function plus the abstract shapes of its arguments. generate.py
jit-compiles every one of them for each build (XLA:GPU of two eras, XLA:CPU) and keeps the
HLO snapshots around the fusion passes.

The cart-pole programs follow the case study of "Operator Fusion in XLA" (Snider & Liang,
2023): Fig. 2's environment step, run for 2048 environments inside `jax.lax.scan`, in the
variants the paper measures. The physics lives in `cartpole_dynamics` alone, one formula a
line, so that the source lines carried in the dumps' metadata point at readable code.

The other programs are common blocks (MLP, softmax, layer norm, attention, Adam, ...), chosen
for the variety of fusion situations they give XLA: reductions, dots and convolutions (library
calls), gathers and scatters, sorts, loops, many small independent kernels.

This module imports JAX; only regeneration needs it (see README.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

F32 = jnp.float32
I32 = jnp.int32
U32 = jnp.uint32

# ---------------------------------------------------------------------------------------------
# Cart-pole (the paper's Fig. 2), constants of the classic control environment
# ---------------------------------------------------------------------------------------------

N_ENVS = 2048
N_STEPS = 100  # scan length: the while loop's trip count in the dumps
UNROLL = 10

GRAVITY = 9.8
MASSCART = 1.0
MASSPOLE = 0.1
TOTAL_MASS = MASSPOLE + MASSCART  # 1.1
LENGTH = 0.5  # half the pole's length
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02  # seconds between state updates
X_THRESHOLD = 2.4
THETA_THRESHOLD_RADIANS = 12 * 2 * math.pi / 360
RESET_LOW, RESET_HIGH = -0.05, 0.05


def cartpole_dynamics(x, x_dot, theta, theta_dot, action):
    """One Euler step of the cart-pole physics (Fig. 2's `dynamics`), elementwise over envs."""
    force = jnp.where(action == 1, FORCE_MAG, -FORCE_MAG)
    costheta = jnp.cos(theta)
    sintheta = jnp.sin(theta)
    temp = (force + POLEMASS_LENGTH * theta_dot**2 * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        (4.0 / 3.0 - MASSPOLE * costheta**2 / TOTAL_MASS) * LENGTH
    )
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    x = x + TAU * x_dot
    x_dot = x_dot + TAU * xacc
    theta = theta + TAU * theta_dot
    theta_dot = theta_dot + TAU * thetaacc
    return x, x_dot, theta, theta_dot


def cartpole_done(x, theta):
    """Fig. 2's termination test: the cart left the track or the pole fell past 12 degrees."""
    return (jnp.abs(x) > X_THRESHOLD) | (jnp.abs(theta) > THETA_THRESHOLD_RADIANS)


# The done test of the packed-state variant with the vectorised done test: one limit per
# state column (x and theta are bounded, the velocities are not).
STATE_LIMITS = np.array([X_THRESHOLD, np.inf, THETA_THRESHOLD_RADIANS, np.inf], np.float32)


def _pack(x, x_dot, theta, theta_dot):
    """Fig. 2's convenience: the new state as one array, np.array([...]) then transposed."""
    return jnp.array([x, x_dot, theta, theta_dot]).T  # (envs, 4), a concatenate in HLO


def _step_packed(state, action, reset_state):
    """Fig. 2's `step` on the packed (envs, 4) state: unpack, dynamics, repack, unpack again
    for the done test, reset the finished environments."""
    x, x_dot, theta, theta_dot = state.T
    state = _pack(*cartpole_dynamics(x, x_dot, theta, theta_dot, action))
    x, x_dot, theta, theta_dot = state.T
    done = cartpole_done(x, theta)
    return jnp.where(done[:, None], reset_state, state)


def _step_packed_vector_done(state, action, reset_state):
    """As `_step_packed`, but the done test reads the packed array itself (one comparison per
    column, then any): the concatenate then has two users, the test and the reset."""
    x, x_dot, theta, theta_dot = state.T
    state = _pack(*cartpole_dynamics(x, x_dot, theta, theta_dot, action))
    done = jnp.any(jnp.abs(state) > STATE_LIMITS, axis=1)
    return jnp.where(done[:, None], reset_state, state)


def _random_actions(key, shape):
    return jax.random.bernoulli(key, 0.5, shape).astype(I32)


def _random_states(key, shape):
    return jax.random.uniform(key, shape, F32, RESET_LOW, RESET_HIGH)


def cartpole_a_rng(state, key):
    """(a) Random numbers drawn inside the loop body, the key split every step: one block of
    uniforms per step gives the actions (column 0) and the reset states (columns 1-4)."""

    def body(carry, _):
        state, key = carry
        key, k_step = jax.random.split(key)
        u = jax.random.uniform(k_step, (N_ENVS, 5), F32)
        action = (u[:, 0] < 0.5).astype(I32)
        reset_state = RESET_LOW + (RESET_HIGH - RESET_LOW) * u[:, 1:]
        return (_step_packed(state, action, reset_state), key), None

    (state, key), _ = jax.lax.scan(body, (state, key), None, length=N_STEPS)
    return state


def random_pool(key):
    """The random pool of (b), (c) and (d): actions (steps, envs) and reset states
    (steps, envs, 4), drawn once before the simulation. Those programs take the pool as
    arguments, so their modules hold the loop and not thousands of threefry instructions."""
    k_action, k_reset = jax.random.split(key)
    return (_random_actions(k_action, (N_STEPS, N_ENVS)),
            _random_states(k_reset, (N_STEPS, N_ENVS, 4)))


def cartpole_b_concat(state, actions, reset_states):
    """(b) The paper's baseline: the precomputed pool indexed per step by the scan; the state
    is still packed into one (envs, 4) array every step."""

    def body(state, pool):
        action, reset_state = pool
        return _step_packed(state, action, reset_state), None

    state, _ = jax.lax.scan(body, state, (actions, reset_states))
    return state


def cartpole_b_concat_vecdone(state, actions, reset_states):
    """(b) with the done test vectorised over the packed state (see `_step_packed_vector_done`)."""

    def body(state, pool):
        action, reset_state = pool
        return _step_packed_vector_done(state, action, reset_state), None

    state, _ = jax.lax.scan(body, state, (actions, reset_states))
    return state


def _separate_scan(state, actions, resets, unroll):
    def body(carry, pool):
        x, x_dot, theta, theta_dot = carry
        action, r_x, r_x_dot, r_theta, r_theta_dot = pool
        x, x_dot, theta, theta_dot = cartpole_dynamics(x, x_dot, theta, theta_dot, action)
        done = cartpole_done(x, theta)
        x = jnp.where(done, r_x, x)
        x_dot = jnp.where(done, r_x_dot, x_dot)
        theta = jnp.where(done, r_theta, theta)
        theta_dot = jnp.where(done, r_theta_dot, theta_dot)
        return (x, x_dot, theta, theta_dot), None

    carry, _ = jax.lax.scan(body, state, (actions, *resets), unroll=unroll)
    return carry


def cartpole_c_separate(x, x_dot, theta, theta_dot, actions, r_x, r_x_dot, r_theta, r_theta_dot):
    """(c) No concatenate: the state (and the reset pool) travel as separate (envs,) arrays."""
    return _separate_scan((x, x_dot, theta, theta_dot), actions,
                          (r_x, r_x_dot, r_theta, r_theta_dot), unroll=1)


def cartpole_d_unroll10(x, x_dot, theta, theta_dot, actions, r_x, r_x_dot, r_theta, r_theta_dot):
    """(d) Variant (c) with the scan unrolled ten times."""
    return _separate_scan((x, x_dot, theta, theta_dot), actions,
                          (r_x, r_x_dot, r_theta, r_theta_dot), unroll=UNROLL)


# ---------------------------------------------------------------------------------------------
# Common blocks
# ---------------------------------------------------------------------------------------------


def mlp(x, w1, b1, w2, b2, w3, b3):
    """Three dense layers with ReLU between them, batch 64."""
    h = jax.nn.relu(x @ w1 + b1)
    h = jax.nn.relu(h @ w2 + b2)
    return h @ w3 + b3


def softmax(logits):
    """Row softmax written out: max, subtract, exp, sum, divide."""
    m = jnp.max(logits, axis=-1, keepdims=True)
    e = jnp.exp(logits - m)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def layer_norm(x, gamma, beta):
    """Layer normalisation over the last axis (two reductions feeding an elementwise tail)."""
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * gamma + beta


def attention(q, k, v):
    """Single-head scaled dot-product attention: QK^T, softmax, times V (batched)."""
    scores = jnp.einsum("bqd,bkd->bqk", q, k) / math.sqrt(q.shape[-1])
    weights = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("bqk,bkd->bqd", weights, v)


ADAM_SHAPES = [(256, 128), (128,), (128, 64), (64,), (64, 10), (10,), (3, 3, 16, 32)]


def adam_update(step, *arrays):
    """One Adam step over parameters of different shapes (the case horizontal fusion targets)."""
    n = len(ADAM_SHAPES)
    params, grads, ms, vs = (arrays[i * n:(i + 1) * n] for i in range(4))
    b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-8
    t = step.astype(F32) + 1.0
    new_p, new_m, new_v = [], [], []
    for p, g, m, v in zip(params, grads, ms, vs):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        v_hat = v / (1 - b2**t)
        new_p.append(p - lr * m_hat / (jnp.sqrt(v_hat) + eps))
        new_m.append(m)
        new_v.append(v)
    return new_p, new_m, new_v


def sgd_update(*arrays):
    """Plain SGD with weight decay over the Adam shapes: one output per parameter, so each
    update is a single-output loop fusion (the shape of horizontal loop fusion's candidates)."""
    n = len(ADAM_SHAPES)
    params, grads = arrays[:n], arrays[n:]
    return [p - 0.01 * (g + 1e-4 * p) for p, g in zip(params, grads)]


def conv2d_bias_relu(x, w, b):
    """NHWC convolution, bias, ReLU (a library call on GPU followed by elementwise work)."""
    y = jax.lax.conv_general_dilated(
        x, w, window_strides=(1, 1), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    return jax.nn.relu(y + b)


def rnn_scan(xs, h0, w_xh, w_hh, b):
    """An Elman RNN over 32 time steps via scan: a dot and a tanh in the loop body."""

    def cell(h, x):
        h = jnp.tanh(x @ w_xh + h @ w_hh + b)
        return h, h

    h, hs = jax.lax.scan(cell, h0, xs)
    return h, hs


def embedding_gather(table, ids):
    """Embedding lookup (gather) followed by a scale and a mean over the sequence."""
    emb = jnp.take(table, ids, axis=0) * math.sqrt(table.shape[1])
    return emb.mean(axis=1)


def argsort_rows(x):
    """Argsort along rows and the sorted values (a variadic sort)."""
    idx = jnp.argsort(x, axis=-1)
    return idx, jnp.take_along_axis(x, idx, axis=-1)


def top_k(x):
    """Top 8 of every row."""
    return jax.lax.top_k(x, 8)


def segment_sum(data, segment_ids):
    """Scatter-add of rows into 64 segments, then a normalisation."""
    sums = jax.ops.segment_sum(data, segment_ids, num_segments=64)
    return sums / (jnp.abs(sums).max() + 1.0)


def cumsum(x):
    """Cumulative sum along a long axis (a reduce-window or associative scan)."""
    return jnp.cumsum(x * 2.0, axis=1)


def transpose_reduce(x):
    """A transpose followed by a reduction over the old leading axis."""
    return jnp.sum(jnp.transpose(x, (0, 2, 1)) ** 2, axis=1)


def batch_norm(x, gamma, beta):
    """Training-mode batch norm over N, H, W of an NHWC tensor."""
    mean = jnp.mean(x, axis=(0, 1, 2))
    var = jnp.var(x, axis=(0, 1, 2))
    return (x - mean) / jnp.sqrt(var + 1e-5) * gamma + beta


def logsumexp(x):
    """Numerically stable log-sum-exp along rows."""
    return jax.nn.logsumexp(x, axis=-1)


def dus_fori_loop(buf, rows):
    """fori_loop writing one row per iteration with dynamic_update_slice (in-place updates)."""

    def body(i, buf):
        row = jnp.tanh(rows[i] * (i + 1).astype(F32))
        return jax.lax.dynamic_update_slice(buf, row[None, :], (i, 0))

    return jax.lax.fori_loop(0, buf.shape[0], body, buf)


def cross_entropy(logits, labels):
    """Mean softmax cross entropy with integer labels: several reductions in a row."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(logp, labels[:, None], axis=-1)[:, 0]
    return -jnp.mean(picked)


def elementwise_chain(x, row, col, scale):
    """A long elementwise chain with broadcasts of a row, a column and a scalar."""
    y = x * row[None, :] + col[:, None]
    y = jnp.tanh(y) * scale + jnp.exp(-y * y)
    y = jnp.where(y > 0.5, y, 0.5 * y) - jnp.log1p(jnp.abs(x))
    return y * row[None, :] / (1.0 + col[:, None] ** 2)


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Program:
    name: str
    fn: Callable
    # argument shapes and dtypes, in order
    args: tuple[tuple[tuple[int, ...], Any], ...]
    variant: str = ""
    description: str = ""
    # jax.config values set while this program is traced and compiled
    jax_config: dict = field(default_factory=dict)
    gpu_only: bool = False
    group: str = "common"  # "cartpole", "common" (both GPUs) or "extra" (one GPU per era)


def _a(*shape, dtype=F32):
    return (tuple(shape), dtype)


KEY = _a(2, dtype=U32)  # a raw threefry key, jax.random.PRNGKey's layout
ENV = _a(N_ENVS)
POOL_ACTIONS = _a(N_STEPS, N_ENVS, dtype=I32)
POOL = _a(N_STEPS, N_ENVS)

PROGRAMS: list[Program] = [
    Program("cartpole_a_rng", cartpole_a_rng, (_a(N_ENVS, 4), KEY), "a: RNG in loop, packed state",
            "cart-pole, random actions and resets drawn per step with jax.random", group="cartpole"),
    Program("cartpole_a_rng_customcall", cartpole_a_rng, (_a(N_ENVS, 4), KEY),
            "a: RNG in loop via cu_threefry2x32, packed state",
            "as cartpole_a_rng, with threefry lowered to XLA:GPU's custom call",
            jax_config={"jax_threefry_gpu_kernel_lowering": True}, gpu_only=True, group="cartpole"),
    Program("cartpole_b_concat", cartpole_b_concat,
            (_a(N_ENVS, 4), POOL_ACTIONS, _a(N_STEPS, N_ENVS, 4)),
            "b: precomputed random pool, packed state (concat baseline)",
            "cart-pole, random pool (arguments) indexed per step, state packed with stack", group="cartpole"),
    Program("cartpole_b_concat_vecdone", cartpole_b_concat_vecdone,
            (_a(N_ENVS, 4), POOL_ACTIONS, _a(N_STEPS, N_ENVS, 4)),
            "b': as b, done test vectorised over the packed state (concat keeps two users)",
            "cart-pole, packed state read whole by the done test", group="cartpole"),
    Program("cartpole_c_separate", cartpole_c_separate, (ENV,) * 4 + (POOL_ACTIONS,) + (POOL,) * 4,
            "c: precomputed pool, four separate state arrays (no concat)",
            "cart-pole, state passed as four arrays", group="cartpole"),
    Program("cartpole_d_unroll10", cartpole_d_unroll10, (ENV,) * 4 + (POOL_ACTIONS,) + (POOL,) * 4,
            "d: as c, scan unroll=10", "cart-pole, no concat, loop unrolled 10 times",
            group="cartpole"),
    Program("mlp", mlp, (_a(64, 256), _a(256, 512), _a(512), _a(512, 256), _a(256), _a(256, 10),
                         _a(10)), description="3 dense layers + relu, batch 64"),
    Program("softmax", softmax, (_a(128, 1000),), description="row softmax"),
    Program("layer_norm", layer_norm, (_a(256, 768), _a(768), _a(768)), description="layer norm"),
    Program("attention", attention, (_a(4, 128, 64), _a(4, 128, 64), _a(4, 128, 64)),
            description="QK^T, softmax, V"),
    Program("adam_update", adam_update,
            (_a(dtype=I32),) + tuple(_a(*s) for _ in range(4) for s in ADAM_SHAPES),
            description="Adam over 7 parameter arrays of different shapes"),
    Program("sgd_update", sgd_update, tuple(_a(*s) for _ in range(2) for s in ADAM_SHAPES),
            description="SGD over 7 parameter arrays of different shapes"),
    Program("conv2d_bias_relu", conv2d_bias_relu, (_a(8, 32, 32, 16), _a(3, 3, 16, 32), _a(32)),
            description="conv 3x3 + bias + relu", group="extra"),
    Program("rnn_scan", rnn_scan, (_a(32, 16, 64), _a(16, 128), _a(64, 128), _a(128, 128),
                                   _a(128)), description="Elman RNN, scan of 32 steps",
            group="extra"),
    Program("embedding_gather", embedding_gather, (_a(10000, 128), _a(32, 20, dtype=I32)),
            description="embedding lookup + mean", group="extra"),
    Program("argsort_rows", argsort_rows, (_a(64, 512),), description="argsort + sorted values",
            group="extra"),
    Program("top_k", top_k, (_a(64, 4096),), description="top 8 per row", group="extra"),
    Program("segment_sum", segment_sum, (_a(4096, 32), _a(4096, dtype=I32)),
            description="scatter-add into 64 segments", group="extra"),
    Program("cumsum", cumsum, (_a(16, 4096),), description="cumulative sum", group="extra"),
    Program("transpose_reduce", transpose_reduce, (_a(32, 256, 128),),
            description="transpose then reduce", group="extra"),
    Program("batch_norm", batch_norm, (_a(16, 16, 16, 64), _a(64), _a(64)),
            description="batch norm, NHWC", group="extra"),
    Program("logsumexp", logsumexp, (_a(256, 1000),), description="log-sum-exp", group="extra"),
    Program("dus_fori_loop", dus_fori_loop, (_a(64, 256), _a(64, 256)),
            description="fori_loop + dynamic_update_slice", group="extra"),
    Program("cross_entropy", cross_entropy, (_a(128, 1000), _a(128, dtype=I32)),
            description="softmax cross entropy loss", group="extra"),
    Program("elementwise_chain", elementwise_chain, (_a(512, 512), _a(512), _a(512), _a()),
            description="elementwise chain with broadcasts", group="extra"),
]

BY_NAME = {p.name: p for p in PROGRAMS}

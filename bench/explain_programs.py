"""JAX programs for measuring `hlofuse explain` against XLA's own fusion log.

None of them is a sample program (sample_dumps/programs.py): they are small versions of what
people train — decoder blocks with their backward pass and optimizer, conv nets with batch
norm, mixture-of-experts routing, recurrent scans, physics loops, RL losses, graph networks,
FFT filters, mixed precision, segment sums.  Shapes are small: what matters for fusion is the
structure of the program, and 2 shared cores compile them all in minutes.

bench/explain_compile.py compiles each one in its own process for a described GPU (deviceless,
as sample_dumps/generate.py does); bench/explain_agreement.py explains the dumps.  This module
imports JAX; only compiling needs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import jax.numpy as jnp

F32, BF16, F16, I32, U32 = jnp.float32, jnp.bfloat16, jnp.float16, jnp.int32, jnp.uint32


@dataclass(frozen=True)
class Arg:
    """An abstract argument: shape and dtype (a leaf of a program's argument tree)."""

    shape: tuple[int, ...]
    dtype: Any = F32


def a(*shape, dtype=F32) -> Arg:
    return Arg(tuple(shape), dtype)


@dataclass(frozen=True)
class Program:
    name: str
    fn: Callable
    args: tuple  # a tree of Arg (dicts and tuples allowed)
    kind: str  # what people would call it: transformer, convnet, moe, rnn, physics, rl, gnn, fft, ...
    description: str = ""
    jax_config: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Shared building blocks
# ---------------------------------------------------------------------------------------------

D, H, S, B, FF, V = 64, 4, 32, 4, 256, 512  # model width, heads, sequence, batch, MLP width, vocab


def layer_norm(x, g, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * g + b


def rms_norm(x, g, eps=1e-6):
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + eps) * g


def causal_attention(x, wq, wk, wv, wo, heads=H):
    b, s, d = x.shape
    hd = d // heads
    q = (x @ wq).reshape(b, s, heads, hd)
    k = (x @ wk).reshape(b, s, heads, hd)
    v = (x @ wv).reshape(b, s, heads, hd)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hd)
    mask = jnp.tril(jnp.ones((s, s), bool))
    scores = jnp.where(mask, scores, -1e9)
    w = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", w, v).reshape(b, s, d)
    return out @ wo


def block_params(d=D, ff=FF):
    return {"ln1_g": a(d), "ln1_b": a(d), "wq": a(d, d), "wk": a(d, d), "wv": a(d, d), "wo": a(d, d),
            "ln2_g": a(d), "ln2_b": a(d), "w1": a(d, ff), "b1": a(ff), "w2": a(ff, d), "b2": a(d)}


def decoder_block(p, x):
    h = x + causal_attention(layer_norm(x, p["ln1_g"], p["ln1_b"]), p["wq"], p["wk"], p["wv"], p["wo"])
    m = jax.nn.gelu(layer_norm(h, p["ln2_g"], p["ln2_b"]) @ p["w1"] + p["b1"])
    return h + m @ p["w2"] + p["b2"]


def adam(params, grads, m, v, step, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
    t = step.astype(F32) + 1.0
    tm = jax.tree_util.tree_map
    m = tm(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
    v = tm(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
    params = tm(lambda p, m, v: p - lr * ((m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps) + wd * p),
                params, m, v)
    return params, m, v


def cross_entropy(logits, labels):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, labels[..., None], axis=-1).mean()


# ---------------------------------------------------------------------------------------------
# Transformers
# ---------------------------------------------------------------------------------------------


def decoder_block_fwd(p, x):
    """One pre-norm decoder block: causal attention, GELU MLP, residuals."""
    return decoder_block(p, x)


def decoder_block_train(p, m, v, step, x, y):
    """A decoder block trained one Adam step on a regression loss (forward, backward, update)."""

    def loss(p):
        return ((decoder_block(p, x) - y) ** 2).mean()

    value, grads = jax.value_and_grad(loss)(p)
    new_p, new_m, new_v = adam(p, grads, m, v, step, wd=0.01)
    return value, new_p, new_m, new_v


def tiny_lm_train(emb, blocks, lnf_g, lnf_b, tokens, labels):
    """Two-layer language model: embedding, blocks, tied output, cross entropy, SGD step."""

    def loss(params):
        emb, blocks, g, b = params
        x = emb[tokens]
        for p in blocks:
            x = decoder_block(p, x)
        logits = layer_norm(x, g, b) @ emb.T
        return cross_entropy(logits, labels)

    params = (emb, blocks, lnf_g, lnf_b)
    value, grads = jax.value_and_grad(loss)(params)
    return value, jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


def llama_block_train(wq, wk, wv, wo, w_gate, w_up, w_down, g1, g2, x):
    """RMSNorm, rotary attention and a SwiGLU MLP, with gradients of every weight."""

    def rope(t):
        b, s, h, d = t.shape
        freqs = 1.0 / (10000 ** (jnp.arange(0, d, 2, dtype=F32) / d))
        ang = jnp.arange(s, dtype=F32)[:, None] * freqs[None, :]
        cos, sin = jnp.cos(ang)[None, :, None, :], jnp.sin(ang)[None, :, None, :]
        t1, t2 = t[..., ::2], t[..., 1::2]
        return jnp.stack([t1 * cos - t2 * sin, t1 * sin + t2 * cos], axis=-1).reshape(t.shape)

    def loss(ws):
        wq, wk, wv, wo, w_gate, w_up, w_down = ws
        b, s, d = x.shape
        h = rms_norm(x, g1)
        q = rope((h @ wq).reshape(b, s, H, d // H))
        k = rope((h @ wk).reshape(b, s, H, d // H))
        v = (h @ wv).reshape(b, s, H, d // H)
        att = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // H)
                             + jnp.triu(jnp.full((s, s), -1e9), 1), axis=-1)
        x2 = x + jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d) @ wo
        h2 = rms_norm(x2, g2)
        out = x2 + (jax.nn.silu(h2 @ w_gate) * (h2 @ w_up)) @ w_down
        return (out ** 2).mean()

    return jax.grad(loss)((wq, wk, wv, wo, w_gate, w_up, w_down))


def kv_cache_decode(cache_k, cache_v, pos, x, wq, wk, wv, wo):
    """One decoding step: project, write K/V into the cache at `pos`, attend over the cache."""
    q, k, v = x @ wq, x @ wk, x @ wv
    cache_k = jax.lax.dynamic_update_slice(cache_k, k[:, None, :], (0, pos, 0))
    cache_v = jax.lax.dynamic_update_slice(cache_v, v[:, None, :], (0, pos, 0))
    scores = jnp.einsum("bd,bsd->bs", q, cache_k) / math.sqrt(q.shape[-1])
    scores = jnp.where(jnp.arange(cache_k.shape[1])[None, :] <= pos, scores, -jnp.inf)
    out = jnp.einsum("bs,bsd->bd", jax.nn.softmax(scores, -1), cache_v) @ wo
    return out, cache_k, cache_v


def vit_patch_embed(images, w, pos, cls):
    """Vision transformer input: cut 4x4 patches, project, add a class token and positions."""
    b, hh, ww, c = images.shape
    p = 4
    patches = images.reshape(b, hh // p, p, ww // p, p, c).transpose(0, 1, 3, 2, 4, 5)
    patches = patches.reshape(b, (hh // p) * (ww // p), p * p * c)
    tokens = patches @ w
    tokens = jnp.concatenate([jnp.broadcast_to(cls, (b, 1, w.shape[1])), tokens], axis=1)
    return layer_norm(tokens + pos, 1.0, 0.0)


def attention_backward(q, k, v, do):
    """Gradients of softmax attention (what a flash-attention backward computes)."""

    def f(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)

    _, vjp = jax.vjp(f, q, k, v)
    return vjp(do)


def bf16_decoder_train(p, x, y, scale):
    """Mixed precision: bf16 compute from f32 master weights, loss scaling, unscaled gradients
    checked for overflow, SGD step applied only when finite."""

    def loss(p):
        pb = jax.tree_util.tree_map(lambda t: t.astype(BF16), p)
        out = decoder_block(pb, x.astype(BF16)).astype(F32)
        return ((out - y) ** 2).mean() * scale

    grads = jax.grad(loss)(p)
    grads = jax.tree_util.tree_map(lambda g: g / scale, grads)
    finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(g)) for g in jax.tree_util.tree_leaves(grads)]))
    new_p = jax.tree_util.tree_map(lambda q, g: jnp.where(finite, q - 1e-3 * g, q), p, grads)
    return new_p, jnp.where(finite, scale * 2.0, scale * 0.5)


def f16_mlp_train(w1, w2, w3, x, labels):
    """An MLP in float16 with a float32 loss; gradients cast back to float32."""

    def loss(ws):
        h = x.astype(F16)
        for w in ws[:-1]:
            h = jax.nn.relu(h @ w.astype(F16))
        logits = (h @ ws[-1].astype(F16)).astype(F32)
        return cross_entropy(logits, labels)

    return jax.grad(loss)((w1, w2, w3))


def label_smoothing_ce(logits, labels):
    """Cross entropy with label smoothing and a z-loss term, mean over tokens."""
    n = logits.shape[-1]
    logz = jax.nn.logsumexp(logits, -1)
    logp = logits - logz[..., None]
    onehot = jax.nn.one_hot(labels, n) * 0.9 + 0.1 / n
    return -(onehot * logp).sum(-1).mean() + 1e-4 * (logz ** 2).mean()


def beam_search_step(logp, beams_logp, tokens):
    """One beam-search step: add log probabilities, top-k over beams x vocab, gather."""
    b, k, v = logp.shape
    total = (beams_logp[..., None] + logp).reshape(b, k * v)
    best, idx = jax.lax.top_k(total, k)
    beam, tok = idx // v, idx % v
    prev = jnp.take_along_axis(tokens, beam[..., None], axis=1)
    return best, jnp.concatenate([prev, tok[..., None]], axis=-1)


# ---------------------------------------------------------------------------------------------
# Convolutional networks
# ---------------------------------------------------------------------------------------------


def conv(x, w, stride=1, groups=1):
    return jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        feature_group_count=groups)


def batch_norm_train(x, g, b):
    mean = x.mean((0, 1, 2))
    var = ((x - mean) ** 2).mean((0, 1, 2))
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g + b, mean, var


def conv_bn_relu_train(w, g, b, mom, run_mean, run_var, x, y):
    """Conv, training-mode batch norm, ReLU, pooled regression loss; SGD with momentum and
    the running statistics updated."""

    def loss(params):
        w, g, b = params
        h, mean, var = batch_norm_train(conv(x, w), g, b)
        out = jax.nn.relu(h).mean((1, 2))
        return ((out - y) ** 2).mean(), (mean, var)

    (value, (mean, var)), grads = jax.value_and_grad(loss, has_aux=True)((w, g, b))
    mom = jax.tree_util.tree_map(lambda m, gr: 0.9 * m + gr, mom, grads)
    new = jax.tree_util.tree_map(lambda p, m: p - 0.01 * m, (w, g, b), mom)
    return value, new, mom, 0.9 * run_mean + 0.1 * mean, 0.9 * run_var + 0.1 * var


def resnet_block_train(w1, g1, b1, w2, g2, b2, x):
    """A residual block (two convs, batch norm, ReLU, skip) with the input's and weights' grads."""

    def f(params, x):
        w1, g1, b1, w2, g2, b2 = params
        h = jax.nn.relu(batch_norm_train(conv(x, w1), g1, b1)[0])
        h = batch_norm_train(conv(h, w2), g2, b2)[0]
        return (jax.nn.relu(h + x) ** 2).mean()

    return jax.grad(f, argnums=(0, 1))((w1, g1, b1, w2, g2, b2), x)


def mobilenet_infer(x, dw, pw, g, b):
    """Depthwise-separable conv, batch norm in inference form, ReLU6, global average pool."""
    h = conv(x, dw, groups=x.shape[-1])
    h = conv(h, pw)
    h = (h - 0.1) * jax.lax.rsqrt(1.0 + 1e-3) * g + b
    return jnp.clip(h, 0.0, 6.0).mean((1, 2))


def pooling_net(x, w):
    """Max pooling and average pooling around a convolution (reduce-window kernels)."""
    h = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = jax.nn.relu(conv(h, w))
    s = jax.lax.reduce_window(h, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")
    return s / 9.0


def group_norm_silu(x, g, b):
    """Group normalisation (8 groups) and SiLU, as in diffusion U-Nets."""
    n, h, w, c = x.shape
    xg = x.reshape(n, h, w, 8, c // 8)
    mean = xg.mean((1, 2, 4), keepdims=True)
    var = xg.var((1, 2, 4), keepdims=True)
    y = ((xg - mean) * jax.lax.rsqrt(var + 1e-5)).reshape(n, h, w, c) * g + b
    return jax.nn.silu(y)


def diffusion_step(x, noise, t, w1, w2, temb):
    """One denoising training step of a tiny conv net: noise schedule, time embedding, loss."""
    alpha = jnp.cos(t * math.pi / 2) ** 2
    xt = jnp.sqrt(alpha)[:, None, None, None] * x + jnp.sqrt(1 - alpha)[:, None, None, None] * noise

    def loss(ws):
        w1, w2, temb = ws
        h = jax.nn.silu(conv(xt, w1) + (t[:, None] * temb)[:, None, None, :])
        return ((conv(h, w2) - noise) ** 2).mean()

    return jax.value_and_grad(loss)((w1, w2, temb))


# ---------------------------------------------------------------------------------------------
# Mixture of experts
# ---------------------------------------------------------------------------------------------

E, TOPK = 8, 2


def moe_layer(x, w_gate, w_in, w_out):
    gates = jax.nn.softmax(x @ w_gate, axis=-1)
    top_w, top_i = jax.lax.top_k(gates, TOPK)
    top_w = top_w / top_w.sum(-1, keepdims=True)
    dispatch = jax.nn.one_hot(top_i, E) * top_w[..., None]  # tokens, k, experts
    combine = dispatch.sum(1)  # tokens, experts
    h = jax.nn.relu(jnp.einsum("td,edf->tef", x, w_in))
    out = jnp.einsum("tef,efd->ted", h, w_out)
    return jnp.einsum("ted,te->td", out, combine), gates, top_i


def moe_topk_routing(x, w_gate, w_in, w_out):
    """Top-2 routing over 8 experts with dense expert compute and weighted combination."""
    return moe_layer(x, w_gate, w_in, w_out)[0]


def moe_train(x, y, w_gate, w_in, w_out):
    """MoE layer trained: task loss plus the load-balancing auxiliary loss, gradients."""

    def loss(ws):
        out, gates, top_i = moe_layer(x, *ws)
        frac = jax.nn.one_hot(top_i[:, 0], E).mean(0)
        aux = E * (frac * gates.mean(0)).sum()
        return ((out - y) ** 2).mean() + 0.01 * aux

    return jax.value_and_grad(loss)((w_gate, w_in, w_out))


def moe_capacity_dispatch(x, w_gate, w_exp):
    """Capacity-limited dispatch: position in expert by cumulative sum, tokens over capacity
    dropped, scatter into expert buffers, expert matmul, gather back."""
    t, d = x.shape
    cap = 2 * t // E
    expert = jnp.argmax(x @ w_gate, axis=-1)
    onehot = jax.nn.one_hot(expert, E, dtype=I32)
    pos = (jnp.cumsum(onehot, axis=0) * onehot).sum(-1) - 1
    keep = pos < cap
    slot = jnp.where(keep, expert * cap + pos, E * cap)
    buf = jnp.zeros((E * cap + 1, d)).at[slot].set(x)[:-1].reshape(E, cap, d)
    out = jnp.einsum("ecd,edf->ecf", buf, w_exp).reshape(E * cap, d)
    return jnp.where(keep[:, None], out[jnp.minimum(slot, E * cap - 1)], 0.0)


def moe_sort_dispatch(x, w_gate, w_exp):
    """Sort tokens by expert (argsort), segment them, run experts, unsort."""
    expert = jnp.argmax(x @ w_gate, axis=-1)
    order = jnp.argsort(expert)
    xs = x[order]
    counts = jnp.bincount(expert, length=E)
    ends = jnp.cumsum(counts)
    seg = jnp.searchsorted(ends, jnp.arange(x.shape[0]), side="right")
    ys = jnp.einsum("td,tdf->tf", xs, w_exp[seg])
    return jnp.zeros_like(ys).at[order].set(ys)


# ---------------------------------------------------------------------------------------------
# Recurrent networks and scans
# ---------------------------------------------------------------------------------------------


def lstm_scan(xs, h0, c0, wx, wh, b):
    """An LSTM over 24 steps (lax.scan): four gates from two matmuls, elementwise cell update."""

    def cell(carry, x):
        h, c = carry
        z = x @ wx + h @ wh + b
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    return jax.lax.scan(cell, (h0, c0), xs)


def gru_scan_train(xs, h0, wx, wh, y):
    """A GRU scan with the loss's gradient (the backward pass is a reverse scan)."""

    def loss(ws):
        wx, wh = ws

        def cell(h, x):
            zr = jax.nn.sigmoid(x @ wx[:, :2 * h.shape[-1]] + h @ wh[:, :2 * h.shape[-1]])
            z, r = jnp.split(zr, 2, axis=-1)
            n = jnp.tanh(x @ wx[:, 2 * h.shape[-1]:] + (r * h) @ wh[:, 2 * h.shape[-1]:])
            h = (1 - z) * n + z * h
            return h, h

        h, _ = jax.lax.scan(cell, h0, xs)
        return ((h - y) ** 2).mean()

    return jax.grad(loss)((wx, wh))


def linear_recurrence(a_, b_):
    """A diagonal linear recurrence h_t = a_t h_{t-1} + b_t by associative scan (S4/Mamba-style)."""

    def combine(l, r):
        return l[0] * r[0], r[0] * l[1] + r[1]

    return jax.lax.associative_scan(combine, (a_, b_), axis=0)[1]


def logcumsumexp_scan(x):
    """Running log-sum-exp along time and a cumulative max (two prefix scans)."""
    return jax.lax.cumlogsumexp(x, axis=1), jax.lax.cummax(x, axis=1)


# ---------------------------------------------------------------------------------------------
# Physics and simulation loops
# ---------------------------------------------------------------------------------------------


def nbody_fori(pos, vel, mass):
    """N-body gravity, 20 leapfrog steps in fori_loop: pairwise distances, forces, update."""

    def step(_, state):
        pos, vel = state
        d = pos[None, :, :] - pos[:, None, :]
        r2 = (d * d).sum(-1) + 1e-3
        acc = (d * (mass[None, :, None] / (r2 * jnp.sqrt(r2))[..., None])).sum(1)
        vel = vel + 0.01 * acc
        return pos + 0.01 * vel, vel

    return jax.lax.fori_loop(0, 20, step, (pos, vel))


def heat_equation(u):
    """2-D heat equation, 50 explicit steps: a 5-point stencil with fixed boundaries."""

    def step(_, u):
        lap = (jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1) + jnp.roll(u, -1, 1) - 4 * u)
        u = u + 0.1 * lap
        return u.at[0, :].set(0.0).at[-1, :].set(0.0).at[:, 0].set(0.0).at[:, -1].set(0.0)

    return jax.lax.fori_loop(0, 50, step, u)


def mass_spring_scan(x, v, k):
    """A chain of masses on springs integrated 64 steps by scan, every step's energy kept."""

    def step(state, _):
        x, v = state
        stretch = jnp.diff(x, axis=-1, prepend=0.0)
        force = -k * stretch + jnp.pad(k[..., 1:] * stretch[..., 1:], ((0, 0), (0, 1)))
        v = 0.99 * (v + 0.01 * force)
        x = x + 0.01 * v
        return (x, v), 0.5 * (v * v).sum(-1) + 0.5 * (k * stretch ** 2).sum(-1)

    return jax.lax.scan(step, (x, v), None, length=64)


def newton_while(x0, a_):
    """Newton's method for x^3 = a in a while loop that stops when every residual is small."""

    def cond(state):
        x, i = state
        return jnp.logical_and(jnp.max(jnp.abs(x ** 3 - a_)) > 1e-5, i < 50)

    def body(state):
        x, i = state
        return x - (x ** 3 - a_) / (3 * x * x), i + 1

    return jax.lax.while_loop(cond, body, (x0, 0))


def particles_rng_loop(pos, key):
    """Brownian particles: random kicks drawn each step from a key split in the loop, walls
    reflect, 30 steps."""

    def step(carry, _):
        pos, key = carry
        key, sub = jax.random.split(key)
        pos = pos + 0.05 * jax.random.normal(sub, pos.shape)
        pos = jnp.where(pos > 1.0, 2.0 - pos, jnp.where(pos < -1.0, -2.0 - pos, pos))
        return (pos, key), None

    return jax.lax.scan(step, (pos, jax.random.wrap_key_data(key)), None, length=30)[0][0]


def wave_equation_unrolled(u, u_prev, c):
    """1-D wave equation, 40 steps with the scan unrolled 4 times."""

    def step(state, _):
        u, up = state
        lap = jnp.roll(u, 1, -1) + jnp.roll(u, -1, -1) - 2 * u
        return (2 * u - up + c * lap, u), None

    return jax.lax.scan(step, (u, u_prev), None, length=40, unroll=4)[0]


def fibonacci_swap(a_, b_):
    """A while loop that swaps its carry (a, b) -> (b, a + b): copy insertion must copy."""

    def body(_, state):
        x, y = state
        return y, x + 0.5 * y

    return jax.lax.fori_loop(0, 16, body, (a_, b_))


def fori_row_recurrence(buf):
    """Each row from the one before it, in place: slices, adds and dynamic updates in a loop."""

    def body(i, buf):
        prev = jax.lax.dynamic_slice_in_dim(buf, i - 1, 1, axis=0)
        row = jax.lax.dynamic_slice_in_dim(buf, i, 1, axis=0)
        return jax.lax.dynamic_update_slice_in_dim(buf, row + 0.9 * jnp.tanh(prev), i, axis=0)

    return jax.lax.fori_loop(1, buf.shape[0], body, buf)


def nested_scan(xs, w):
    """A scan inside a scan: inner steps over features, outer steps over time."""

    def outer(h, x):
        def inner(c, col):
            return jnp.tanh(c * col + x), c

        c, cs = jax.lax.scan(inner, h, w)
        return c, cs.sum(0)

    return jax.lax.scan(outer, jnp.zeros(xs.shape[1:]), xs)


def scan_transposed_carry(x, w):
    """A scan whose carry is transposed every step (layout copies inside the loop body)."""

    def step(c, _):
        c = jnp.tanh(c @ w).T
        return c, c[0]

    return jax.lax.scan(step, x, None, length=12)


# ---------------------------------------------------------------------------------------------
# Reinforcement learning
# ---------------------------------------------------------------------------------------------


def ppo_loss_grad(w_pi, w_v, obs, actions, old_logp, adv, returns):
    """PPO: clipped policy ratio, value loss, entropy bonus, gradients of both heads."""

    def loss(ws):
        w_pi, w_v = ws
        logits = jnp.tanh(obs @ w_pi[0]) @ w_pi[1]
        logp_all = jax.nn.log_softmax(logits)
        logp = jnp.take_along_axis(logp_all, actions[:, None], -1)[:, 0]
        ratio = jnp.exp(logp - old_logp)
        a_n = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg = -jnp.minimum(ratio * a_n, jnp.clip(ratio, 0.8, 1.2) * a_n).mean()
        value = (jnp.tanh(obs @ w_v[0]) @ w_v[1])[:, 0]
        entropy = -(jnp.exp(logp_all) * logp_all).sum(-1).mean()
        return pg + 0.5 * ((value - returns) ** 2).mean() - 0.01 * entropy

    return jax.value_and_grad(loss)((w_pi, w_v))


def gae_scan(rewards, values, dones):
    """Generalized advantage estimation: a reverse scan over 128 steps of 64 environments."""

    def step(adv, t):
        r, v, v_next, d = t
        delta = r + 0.99 * v_next * (1 - d) - v
        adv = delta + 0.99 * 0.95 * (1 - d) * adv
        return adv, adv

    xs = (rewards, values[:-1], values[1:], dones)
    _, advs = jax.lax.scan(step, jnp.zeros(rewards.shape[1]), xs, reverse=True)
    return advs, advs + values[:-1]


def dqn_td_loss(w, w_target, obs, actions, rewards, next_obs, dones):
    """Double DQN with a Huber TD loss and its gradient."""

    def q(w, o):
        return jax.nn.relu(o @ w[0]) @ w[1]

    def loss(w):
        q_sa = jnp.take_along_axis(q(w, obs), actions[:, None], -1)[:, 0]
        best = jnp.argmax(q(w, next_obs), -1)
        q_next = jnp.take_along_axis(q(w_target, next_obs), best[:, None], -1)[:, 0]
        target = jax.lax.stop_gradient(rewards + 0.99 * (1 - dones) * q_next)
        err = q_sa - target
        return jnp.where(jnp.abs(err) < 1, 0.5 * err ** 2, jnp.abs(err) - 0.5).mean()

    return jax.grad(loss)(w)


def sac_actor_loss(w, obs, eps, alpha):
    """Soft actor-critic actor: tanh-squashed Gaussian with reparameterisation, log-prob
    correction, and the entropy-weighted objective."""

    def loss(w):
        h = jax.nn.relu(obs @ w[0])
        mu, log_std = jnp.split(h @ w[1], 2, -1)
        log_std = jnp.clip(log_std, -5, 2)
        u = mu + jnp.exp(log_std) * eps
        act = jnp.tanh(u)
        logp = (-0.5 * eps ** 2 - log_std - 0.5 * jnp.log(2 * jnp.pi)).sum(-1)
        logp = logp - jnp.log(1 - act ** 2 + 1e-6).sum(-1)
        q = (jnp.concatenate([obs, act], -1) @ w[2]).sum(-1)
        return (alpha * logp - q).mean()

    return jax.grad(loss)(w)


# ---------------------------------------------------------------------------------------------
# Graph neural networks and segment operations
# ---------------------------------------------------------------------------------------------

NODES, EDGES, FEAT = 256, 1024, 32


def gnn_message_passing(x, senders, receivers, w_msg, w_upd):
    """Two rounds of message passing: gather senders, MLP messages, segment-sum to receivers."""
    for _ in range(2):
        msg = jax.nn.relu(jnp.concatenate([x[senders], x[receivers]], -1) @ w_msg)
        agg = jax.ops.segment_sum(msg, receivers, num_segments=NODES)
        x = x + jnp.tanh(jnp.concatenate([x, agg], -1) @ w_upd)
    return x


def gcn_train(x, senders, receivers, w1, w2, y):
    """A two-layer GCN with symmetric degree normalisation, trained one gradient step."""
    deg = jax.ops.segment_sum(jnp.ones(EDGES), receivers, num_segments=NODES) + 1.0
    norm = jax.lax.rsqrt(deg[senders] * deg[receivers])

    def propagate(h):
        return jax.ops.segment_sum(h[senders] * norm[:, None], receivers, num_segments=NODES) + h / deg[:, None]

    def loss(ws):
        h = jax.nn.relu(propagate(x @ ws[0]))
        return cross_entropy(propagate(h @ ws[1]), y)

    grads = jax.grad(loss)((w1, w2))
    return w1 - 0.1 * grads[0], w2 - 0.1 * grads[1]


def gat_attention(x, senders, receivers, w, att):
    """Graph attention: edge scores, a softmax per receiver with segment max and sum."""
    h = x @ w
    e = jax.nn.leaky_relu((h[senders] * att[0]).sum(-1) + (h[receivers] * att[1]).sum(-1), 0.2)
    e = jnp.exp(e - jax.ops.segment_max(e, receivers, num_segments=NODES)[receivers])
    denom = jax.ops.segment_sum(e, receivers, num_segments=NODES)[receivers]
    return jax.ops.segment_sum((e / denom)[:, None] * h[senders], receivers, num_segments=NODES)


def segment_stats(data, ids):
    """Per-segment mean, variance and max (three segment reductions and a normalisation)."""
    n = 64
    count = jax.ops.segment_sum(jnp.ones(data.shape[0]), ids, num_segments=n)[:, None]
    mean = jax.ops.segment_sum(data, ids, num_segments=n) / jnp.maximum(count, 1)
    var = jax.ops.segment_sum((data - mean[ids]) ** 2, ids, num_segments=n) / jnp.maximum(count, 1)
    return mean, var, jax.ops.segment_max(data, ids, num_segments=n)


def histogram_scatter(values, weights):
    """A weighted histogram by scatter-add into 100 bins, normalised to a density."""
    bins = jnp.clip(((values + 3.0) / 6.0 * 100).astype(I32), 0, 99)
    hist = jnp.zeros(100).at[bins].add(weights)
    return hist / hist.sum()


def embedding_bag(table, ids, offsets_ids):
    """An embedding bag: gather rows, weight them, sum per bag (segment sum), then L2-normalise."""
    rows = table[ids] * jnp.tanh(ids.astype(F32) * 1e-3)[:, None]
    bags = jax.ops.segment_sum(rows, offsets_ids, num_segments=128)
    return bags / jnp.linalg.norm(bags, axis=-1, keepdims=True).clip(1e-6)


def kmeans_step(points, centroids):
    """One k-means iteration: distances, argmin, new centroids as segment means."""
    d = (points ** 2).sum(-1)[:, None] - 2 * points @ centroids.T + (centroids ** 2).sum(-1)[None, :]
    assign = jnp.argmin(d, -1)
    sums = jax.ops.segment_sum(points, assign, num_segments=centroids.shape[0])
    counts = jax.ops.segment_sum(jnp.ones(points.shape[0]), assign, num_segments=centroids.shape[0])
    return sums / jnp.maximum(counts, 1)[:, None], d.min(-1).sum()


# ---------------------------------------------------------------------------------------------
# FFTs
# ---------------------------------------------------------------------------------------------


def fft_lowpass(signal, cutoff):
    """A low-pass filter: rfft, a smooth mask, irfft, then a window."""
    spec = jnp.fft.rfft(signal, axis=-1)
    f = jnp.arange(spec.shape[-1], dtype=F32)
    mask = jax.nn.sigmoid((cutoff[:, None] - f[None, :]) * 0.5)
    out = jnp.fft.irfft(spec * mask, n=signal.shape[-1], axis=-1)
    return out * jnp.hanning(signal.shape[-1])


def fft_conv2d(image, kernel):
    """2-D convolution by FFT: pad, fft2, multiply, ifft2, crop, normalise."""
    n = image.shape[-1]
    k = jnp.pad(kernel, ((0, n - kernel.shape[0]), (0, n - kernel.shape[1])))
    out = jnp.fft.irfft2(jnp.fft.rfft2(image) * jnp.fft.rfft2(k)[None], s=(n, n))
    return (out - out.mean((-1, -2), keepdims=True)) / (out.std((-1, -2), keepdims=True) + 1e-6)


def stft_spectrogram(audio):
    """A log-magnitude spectrogram: frames by strided gather, Hann window, FFT, log."""
    frame, hop = 64, 32
    n = (audio.shape[-1] - frame) // hop + 1
    idx = jnp.arange(n)[:, None] * hop + jnp.arange(frame)[None, :]
    frames = audio[:, idx] * jnp.hanning(frame)
    mag = jnp.abs(jnp.fft.rfft(frames, axis=-1))
    return jnp.log(mag ** 2 + 1e-6)


def spectral_norm_fft(x):
    """FFT along two axes of a complex field, a phase rotation, inverse FFT, and energy."""
    f = jnp.fft.fft2(x.astype(jnp.complex64))
    f = f * jnp.exp(1j * jnp.angle(f) * 0.1)
    y = jnp.fft.ifft2(f)
    return jnp.abs(y), (jnp.abs(f) ** 2).sum()


# ---------------------------------------------------------------------------------------------
# Losses and optimizers
# ---------------------------------------------------------------------------------------------

PARAM_SHAPES = [(128, 64), (64,), (64, 64), (64,), (64, 10), (10,)]


def adamw_clip(params, grads, m, v, step):
    """AdamW with global-norm gradient clipping over six parameters of different shapes."""
    norm = jnp.sqrt(sum((g * g).sum() for g in grads))
    scale = jnp.minimum(1.0, 1.0 / (norm + 1e-6))
    grads = [g * scale for g in grads]
    return adam(list(params), grads, list(m), list(v), step, wd=0.01), norm


def lamb_update(params, grads, m, v):
    """LAMB: Adam moments, then a per-layer trust ratio of parameter and update norms."""
    out = []
    for p, g, m_, v_ in zip(params, grads, m, v):
        m_ = 0.9 * m_ + 0.1 * g
        v_ = 0.999 * v_ + 0.001 * g * g
        u = m_ / (jnp.sqrt(v_) + 1e-6) + 0.01 * p
        ratio = jnp.linalg.norm(p) / (jnp.linalg.norm(u) + 1e-6)
        out.append((p - 1e-3 * jnp.where(ratio > 0, ratio, 1.0) * u, m_, v_))
    return out


def ema_update(params, ema):
    """Exponential moving average of parameters (a polyak update of a target network)."""
    return [0.995 * e + 0.005 * p for p, e in zip(params, ema)]


def contrastive_loss(img, txt, w_i, w_t, temp):
    """CLIP-style loss: project, L2-normalise, similarity matrix, symmetric cross entropy."""

    def loss(ws):
        a_ = img @ ws[0]
        b_ = txt @ ws[1]
        a_ = a_ / jnp.linalg.norm(a_, axis=-1, keepdims=True)
        b_ = b_ / jnp.linalg.norm(b_, axis=-1, keepdims=True)
        logits = a_ @ b_.T * jnp.exp(temp)
        labels = jnp.arange(logits.shape[0])
        return (cross_entropy(logits, labels) + cross_entropy(logits.T, labels)) / 2

    return jax.value_and_grad(loss)((w_i, w_t))


def vae_loss_grad(w_enc, w_dec, x, eps):
    """A VAE: encoder to mean and log-variance, reparameterised sample, decoder, ELBO grads."""

    def loss(ws):
        h = jnp.tanh(x @ ws[0])
        mu, logvar = jnp.split(h, 2, -1)
        z = mu + jnp.exp(0.5 * logvar) * eps
        logits = z @ ws[1]
        rec = (jax.nn.softplus(logits) - x * logits).sum(-1)
        kl = -0.5 * (1 + logvar - mu ** 2 - jnp.exp(logvar)).sum(-1)
        return (rec + kl).mean()

    return jax.value_and_grad(loss)((w_enc, w_dec))


def dropout_mlp_train(w1, w2, x, y, key):
    """An MLP with dropout (random bits from a key) trained one SGD step."""
    k = jax.random.wrap_key_data(key)

    def loss(ws):
        h = jax.nn.relu(x @ ws[0])
        keep = jax.random.bernoulli(k, 0.9, h.shape)
        h = jnp.where(keep, h / 0.9, 0.0)
        return ((h @ ws[1] - y) ** 2).mean()

    g = jax.grad(loss)((w1, w2))
    return w1 - 0.01 * g[0], w2 - 0.01 * g[1]


def focal_loss(logits, labels):
    """Sigmoid focal loss for dense detection (many elementwise ops and one reduction)."""
    p = jax.nn.sigmoid(logits)
    ce = jax.nn.softplus(-logits) * labels + jax.nn.softplus(logits) * (1 - labels)
    pt = p * labels + (1 - p) * (1 - labels)
    alpha = 0.25 * labels + 0.75 * (1 - labels)
    return (alpha * (1 - pt) ** 2 * ce).sum() / jnp.maximum(labels.sum(), 1.0)


def topk_accuracy(logits, labels):
    """Top-5 accuracy and a confusion count: top_k, compare, scatter-add."""
    _, idx = jax.lax.top_k(logits, 5)
    hit = (idx == labels[:, None]).any(-1)
    pred = idx[:, 0]
    conf = jnp.zeros((logits.shape[1], logits.shape[1]), I32).at[labels, pred].add(1)
    return hit.mean(), conf


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


def _params(shapes):
    return tuple(a(*s) for s in shapes)


BLOCK = block_params()
PROGRAMS: list[Program] = [
    # transformers
    Program("decoder_block_fwd", decoder_block_fwd, (BLOCK, a(B, S, D)), "transformer",
            "pre-norm decoder block forward"),
    Program("decoder_block_train", decoder_block_train,
            (BLOCK, BLOCK, BLOCK, a(dtype=I32), a(B, S, D), a(B, S, D)), "transformer",
            "decoder block, backward and AdamW"),
    Program("tiny_lm_train", tiny_lm_train,
            (a(V, D), (BLOCK, BLOCK), a(D), a(D), a(B, S, dtype=I32), a(B, S, dtype=I32)), "transformer",
            "two-layer LM, cross entropy, SGD"),
    Program("llama_block_train", llama_block_train,
            (a(D, D), a(D, D), a(D, D), a(D, D), a(D, FF), a(D, FF), a(FF, D), a(D), a(D), a(B, S, D)),
            "transformer", "RMSNorm, RoPE, SwiGLU, gradients"),
    Program("kv_cache_decode", kv_cache_decode,
            (a(B, 128, D), a(B, 128, D), a(dtype=I32), a(B, D), a(D, D), a(D, D), a(D, D), a(D, D)),
            "transformer", "one decode step with a KV cache"),
    Program("vit_patch_embed", vit_patch_embed, (a(B, 32, 32, 3), a(48, D), a(65, D), a(1, 1, D)),
            "transformer", "ViT patches, class token, positions"),
    Program("attention_backward", attention_backward, (a(2, H, S, 16),) * 4, "transformer",
            "softmax attention vjp"),
    Program("bf16_decoder_train", bf16_decoder_train, (BLOCK, a(B, S, D), a(B, S, D), a()), "mixed-precision",
            "bf16 decoder block, loss scaling, finite check"),
    Program("f16_mlp_train", f16_mlp_train, (a(128, 256), a(256, 256), a(256, 10), a(64, 128),
                                              a(64, dtype=I32)), "mixed-precision", "float16 MLP gradients"),
    Program("label_smoothing_ce", label_smoothing_ce, (a(B, S, V), a(B, S, dtype=I32)), "loss",
            "label smoothing and z-loss"),
    Program("beam_search_step", beam_search_step, (a(B, 4, V), a(B, 4), a(B, 4, 6, dtype=I32)), "transformer",
            "beam search top-k and gather"),
    # conv nets
    Program("conv_bn_relu_train", conv_bn_relu_train,
            (a(3, 3, 8, 16), a(16), a(16), (a(3, 3, 8, 16), a(16), a(16)), a(16), a(16), a(8, 16, 16, 8),
             a(8, 16)), "convnet", "conv, batch norm, momentum SGD"),
    Program("resnet_block_train", resnet_block_train,
            (a(3, 3, 16, 16), a(16), a(16), a(3, 3, 16, 16), a(16), a(16), a(4, 16, 16, 16)), "convnet",
            "residual block gradients"),
    Program("mobilenet_infer", mobilenet_infer, (a(4, 32, 32, 16), a(3, 3, 1, 16), a(1, 1, 16, 32), a(32), a(32)),
            "convnet", "depthwise separable conv"),
    Program("pooling_net", pooling_net, (a(4, 32, 32, 8), a(3, 3, 8, 16)), "convnet", "max and average pooling"),
    Program("group_norm_silu", group_norm_silu, (a(4, 16, 16, 64), a(64), a(64)), "convnet", "group norm"),
    Program("diffusion_step", diffusion_step,
            (a(4, 16, 16, 4), a(4, 16, 16, 4), a(4), a(3, 3, 4, 32), a(3, 3, 32, 4), a(32)), "convnet",
            "denoising step with time embedding"),
    # mixture of experts
    Program("moe_topk_routing", moe_topk_routing, (a(128, D), a(D, E), a(E, D, 128), a(E, 128, D)), "moe",
            "top-2 routing, dense experts"),
    Program("moe_train", moe_train, (a(128, D), a(128, D), a(D, E), a(E, D, 128), a(E, 128, D)), "moe",
            "MoE with load-balancing loss, gradients"),
    Program("moe_capacity_dispatch", moe_capacity_dispatch, (a(128, D), a(D, E), a(E, D, D)), "moe",
            "capacity-limited scatter dispatch"),
    Program("moe_sort_dispatch", moe_sort_dispatch, (a(128, D), a(D, E), a(E, D, D)), "moe",
            "argsort dispatch"),
    # recurrent
    Program("lstm_scan", lstm_scan, (a(24, 8, 32), a(8, 64), a(8, 64), a(32, 256), a(64, 256), a(256)), "rnn",
            "LSTM scan"),
    Program("gru_scan_train", gru_scan_train, (a(24, 8, 32), a(8, 64), a(32, 192), a(64, 192), a(8, 64)),
            "rnn", "GRU scan gradients"),
    Program("linear_recurrence", linear_recurrence, (a(256, 8, 64), a(256, 8, 64)), "rnn",
            "associative scan recurrence"),
    Program("logcumsumexp_scan", logcumsumexp_scan, (a(16, 512),), "rnn", "cumulative logsumexp and max"),
    # physics
    Program("nbody_fori", nbody_fori, (a(128, 3), a(128, 3), a(128)), "physics", "n-body fori_loop"),
    Program("heat_equation", heat_equation, (a(64, 64),), "physics", "stencil fori_loop"),
    Program("mass_spring_scan", mass_spring_scan, (a(16, 32), a(16, 32), a(16, 32)), "physics",
            "spring chain scan with energies"),
    Program("newton_while", newton_while, (a(1024), a(1024)), "physics", "while loop to convergence"),
    Program("particles_rng_loop", particles_rng_loop, (a(1024, 2), a(2, dtype=U32)), "physics",
            "random kicks in a scan"),
    Program("wave_equation_unrolled", wave_equation_unrolled, (a(8, 256), a(8, 256), a()), "physics",
            "unrolled scan"),
    Program("fibonacci_swap", fibonacci_swap, (a(512), a(512)), "loops", "swapped carry"),
    Program("fori_row_recurrence", fori_row_recurrence, (a(64, 128),), "loops", "in-place row recurrence"),
    Program("nested_scan", nested_scan, (a(16, 8, 32), a(6, 8, 32)), "loops", "scan in a scan"),
    Program("scan_transposed_carry", scan_transposed_carry, (a(32, 32), a(32, 32)), "loops",
            "transposed carry"),
    # reinforcement learning
    Program("ppo_loss_grad", ppo_loss_grad,
            ((a(16, 64), a(64, 6)), (a(16, 64), a(64, 1)), a(256, 16), a(256, dtype=I32), a(256), a(256),
             a(256)), "rl", "PPO loss and gradients"),
    Program("gae_scan", gae_scan, (a(128, 64), a(129, 64), a(128, 64)), "rl", "GAE reverse scan"),
    Program("dqn_td_loss", dqn_td_loss,
            ((a(16, 64), a(64, 4)), (a(16, 64), a(64, 4)), a(128, 16), a(128, dtype=I32), a(128), a(128, 16),
             a(128)), "rl", "double DQN Huber loss"),
    Program("sac_actor_loss", sac_actor_loss, ((a(16, 64), a(64, 8), a(20, 1)), a(128, 16), a(128, 4), a()),
            "rl", "SAC actor loss"),
    # graph networks and segments
    Program("gnn_message_passing", gnn_message_passing,
            (a(NODES, FEAT), a(EDGES, dtype=I32), a(EDGES, dtype=I32), a(2 * FEAT, FEAT), a(2 * FEAT, FEAT)),
            "gnn", "message passing with segment sums"),
    Program("gcn_train", gcn_train,
            (a(NODES, FEAT), a(EDGES, dtype=I32), a(EDGES, dtype=I32), a(FEAT, FEAT), a(FEAT, 8),
             a(NODES, dtype=I32)), "gnn", "GCN gradient step"),
    Program("gat_attention", gat_attention,
            (a(NODES, FEAT), a(EDGES, dtype=I32), a(EDGES, dtype=I32), a(FEAT, FEAT), a(2, FEAT)), "gnn",
            "graph attention softmax"),
    Program("segment_stats", segment_stats, (a(2048, 16), a(2048, dtype=I32)), "segment", "segment mean/var/max"),
    Program("histogram_scatter", histogram_scatter, (a(4096), a(4096)), "segment", "scatter-add histogram"),
    Program("embedding_bag", embedding_bag, (a(1000, 32), a(512, dtype=I32), a(512, dtype=I32)), "segment",
            "embedding bag"),
    Program("kmeans_step", kmeans_step, (a(1024, 16), a(32, 16)), "segment", "k-means iteration"),
    # FFTs
    Program("fft_lowpass", fft_lowpass, (a(16, 1024), a(16)), "fft", "rfft low-pass filter"),
    Program("fft_conv2d", fft_conv2d, (a(4, 64, 64), a(7, 7)), "fft", "FFT convolution"),
    Program("stft_spectrogram", stft_spectrogram, (a(4, 2048),), "fft", "log spectrogram"),
    Program("spectral_phase_fft", spectral_norm_fft, (a(32, 32),), "fft", "complex fft2 round trip"),
    # losses and optimizers
    Program("adamw_clip", adamw_clip,
            (_params(PARAM_SHAPES), _params(PARAM_SHAPES), _params(PARAM_SHAPES), _params(PARAM_SHAPES),
             a(dtype=I32)), "optimizer", "AdamW with global norm clipping"),
    Program("lamb_update", lamb_update, (_params(PARAM_SHAPES),) * 4, "optimizer", "LAMB trust ratios"),
    Program("ema_update", ema_update, (_params(PARAM_SHAPES),) * 2, "optimizer", "EMA of parameters"),
    Program("contrastive_loss", contrastive_loss, (a(64, 48), a(64, 32), a(48, 32), a(32, 32), a()), "loss",
            "CLIP loss and gradients"),
    Program("vae_loss_grad", vae_loss_grad, (a(64, 64), a(32, 64), a(32, 64), a(32, 32)), "loss",
            "VAE ELBO gradients"),
    Program("dropout_mlp_train", dropout_mlp_train, (a(64, 128), a(128, 8), a(32, 64), a(32, 8), a(2, dtype=U32)),
            "loss", "dropout from a PRNG key"),
    Program("focal_loss", focal_loss, (a(8, 1024, 16), a(8, 1024, 16)), "loss", "sigmoid focal loss"),
    Program("topk_accuracy", topk_accuracy, (a(256, 32), a(256, dtype=I32)), "loss", "top-5 accuracy, confusion"),
]

BY_NAME = {p.name: p for p in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "program names must be unique"

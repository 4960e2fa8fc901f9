#!/usr/bin/env python3
"""hlofuse's priority-fusion replay next to XLA's whole compile of the same program: a
Python-unrolled stack of transformer blocks (attention, GELU MLP, LayerNorm; d_model 256,
sequence 64, batch 2, 256 layers), compiled deviceless for an H100 with the JAX here.

One run does, back to back and `--repeat` times interleaved:
  xla      a fresh process compiling the stack with jax.jit for the H100 (no dump): XLA's
           compile alone, every pass, LLVM and PTX included
  replay   hlofuse.pipeline.replay of the module from right before fusion (the dump
           compile_jax wrote once, parsed once), in this process
and prints the medians, their ratio, CPU seconds and the load average.

    /work/main/.venv-samples-current/bin/python bench/transformer_stack.py [--layers 256] [--repeat 3]
                                                                     [--keep DIR] [--dump DIR]

`--keep DIR` keeps the dump (a later `--dump DIR` reuses it, and `hlofuse explain DIR` reads it).
Needs JAX with its CUDA plugin (hlofuse[jax]); without it the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.append(str(REPO))  # after PYTHONPATH: the code measured is the one the caller names

D_MODEL, HEADS, SEQ, BATCH, FF = 256, 4, 64, 2, 1024


def _layer_norm(x, g, b):
    import jax
    import jax.numpy as jnp

    mean = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, -1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g + b


def _block(x, p):
    import jax
    import jax.numpy as jnp

    b, s, d = x.shape
    hd = d // HEADS
    h = _layer_norm(x, p["ln1_g"], p["ln1_b"])
    q = (h @ p["wq"]).reshape(b, s, HEADS, hd)
    k = (h @ p["wk"]).reshape(b, s, HEADS, hd)
    v = (h @ p["wv"]).reshape(b, s, HEADS, hd)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.float32(hd))
    mask = jnp.tril(jnp.ones((s, s), bool))
    w = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
    x = x + jnp.einsum("bhqk,bkhd->bqhd", w, v).reshape(b, s, d) @ p["wo"]
    h = _layer_norm(x, p["ln2_g"], p["ln2_b"])
    return x + jax.nn.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def stack(x, params):
    """The forward pass of len(params) blocks, unrolled by Python (one HLO layer per block)."""
    for p in params:
        x = _block(x, p)
    return x


def example_args(layers: int):
    import jax
    import jax.numpy as jnp

    f32 = jnp.float32

    def a(*shape):
        return jax.ShapeDtypeStruct(shape, f32)

    one = {"ln1_g": a(D_MODEL), "ln1_b": a(D_MODEL), "wq": a(D_MODEL, D_MODEL), "wk": a(D_MODEL, D_MODEL),
           "wv": a(D_MODEL, D_MODEL), "wo": a(D_MODEL, D_MODEL), "ln2_g": a(D_MODEL), "ln2_b": a(D_MODEL),
           "w1": a(D_MODEL, FF), "b1": a(FF), "w2": a(FF, D_MODEL), "b2": a(D_MODEL)}
    return a(BATCH, SEQ, D_MODEL), [dict(one) for _ in range(layers)]


XLA_CHILD = r'''
import json, sys, time
sys.path.insert(0, {bench!r})
import jax
from jax.experimental import topologies
import transformer_stack as T
x, params = T.example_args({layers})
spec = open({spec!r}).read()
topo = topologies.get_topology_desc(platform="cuda", target_config=spec, topology="1x1x1")
on = jax.sharding.SingleDeviceSharding(topo.devices[0])
put = lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=on)
x, params = put(x), jax.tree_util.tree_map(put, params)
lowered = jax.jit(T.stack).trace(x, params).lower(lowering_platforms=("cuda",))
t0, c0 = time.perf_counter(), time.process_time()
lowered.compile()
print(json.dumps({{"compile": time.perf_counter() - t0, "compile_cpu": time.process_time() - c0}}))
'''


def xla_compile(layers: int) -> dict:
    code = XLA_CHILD.format(bench=str(HERE), layers=layers,
                            spec=str(REPO / "hlofuse" / "data" / "gpu_specs" / "h100_sxm.txtpb"))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_dump(layers: int, out: str | None):
    import hlofuse

    x, params = example_args(layers)
    return hlofuse.compile_jax(stack, x, params, backend="gpu", gpu="h100_sxm", out=out)


def before_fusion(path) -> object:
    """The module right before fusion in the dump, parsed."""
    from hlofuse.inputs import REPLAY, resolve

    return resolve(str(path), need=REPLAY)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", metavar="DIR", help="keep the dump here")
    ap.add_argument("--dump", metavar="DIR", help="reuse a dump --keep wrote (no compile_jax)")
    ap.add_argument("--no-xla", action="store_true", help="time the replay only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        import jax  # noqa: F401
    except ImportError:
        print("skipped: JAX is not installed here (pip install 'hlofuse[jax]')")
        return 0
    from hlofuse.api import replay_options
    from hlofuse.pipeline import replay

    dump = args.dump or build_dump(args.layers, args.keep)
    resolved = before_fusion(dump)
    options = replay_options(resolved, None, (), None, ())
    rows: dict = {"xla": [], "xla_cpu": [], "replay": [], "replay_cpu": []}
    result = None
    for _ in range(args.repeat):
        if not args.no_xla:
            x = xla_compile(args.layers)
            rows["xla"].append(x["compile"])
            rows["xla_cpu"].append(x["compile_cpu"])
        t, c = time.perf_counter(), time.process_time()
        result = replay(resolved.module, options)
        rows["replay"].append(time.perf_counter() - t)
        rows["replay_cpu"].append(time.process_time() - c)
    med = {k: statistics.median(v) for k, v in rows.items() if v}
    report = {"layers": args.layers, "instructions": resolved.module.instruction_count,
              "kernels": len(result.kernels), "decisions": len(result.decisions), "median_s": med, "runs": rows,
              "load_average": list(os.getloadavg()), "cpus": os.cpu_count()}
    if "xla" in med:
        report["replay_over_xla"] = med["replay"] / med["xla"]
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{args.layers}-layer transformer stack, {report['instructions']} instructions before fusion, "
          f"{report['kernels']} kernels, {report['decisions']} decisions; median of {args.repeat}; "
          f"load average {report['load_average'][0]:.2f} on {report['cpus']} cores")
    if "xla" in med:
        print(f"  XLA compile (deviceless H100): {med['xla']:.2f} s (CPU {med['xla_cpu']:.2f} s)")
    print(f"  hlofuse priority replay:       {med['replay']:.2f} s (CPU {med['replay_cpu']:.2f} s)")
    if "xla" in med:
        print(f"  replay / XLA compile:          {report['replay_over_xla']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Measure the constants of hlofuse's CPU roofline (hlofuse/triage/targets.py, CpuRoofline) on
this machine, with the kernels `hlofuse bench` runs (C compiled by the system compiler, one
thread, timed by the thread's CPU clock).

Each constant comes from a generated module whose one kernel is bound by what it measures:

  bandwidth     y = x + 1 over f32[N] (N = 16M: 64 MiB read, 64 MiB written, far past the
                caches): bytes moved / time;
  flop rate     a chain of 64 multiplies and adds over f32[64K] fused into one kernel (its
                256 KiB stay in cache): flops / time;
  op weights    chains of 16 of one op (exp, sine, divide, ...) over f32[64K], in flops: the
                time per element and op over that of an add;
  launch        2,000 dependent adds of f32[1], unfused: time per kernel;
  dot rate      f32[512,512] x f32[512,512] (NumPy, as bench runs dots): 2 M N K / time.

    python bench/cpu_roofline.py [--repeat 7]

Prints the figures and the Python constants to paste into CpuRoofline (the defaults say when
and where they were measured).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

#: Ops whose weight (cost per element, in adds) is measured; the CPU op table of the roofline.
WEIGHTED_OPS = ("divide", "sqrt", "rsqrt", "exponential", "log", "sine", "cosine", "tanh", "logistic", "power",
                "exponential-minus-one", "log-plus-one", "atan2", "erf", "cbrt", "tan", "remainder")
BINARY = {"divide", "power", "atan2", "remainder"}


def _module(name: str, body: list[str], params: list[str], root: str) -> str:
    lines = [f"HloModule {name}", "", "ENTRY main {"]
    lines += [f"  p{i} = {shape} parameter({i})" for i, shape in enumerate(params)]
    lines += [f"  {line}" for line in body[:-1]] + [f"  ROOT {body[-1]}"]
    lines.append("}")
    return "\n".join(lines) + "\n"


def bandwidth_module(n: int) -> str:
    return _module("bandwidth", [f"c = f32[] constant(1)", f"b = f32[{n}] broadcast(c), dimensions={{}}",
                                 f"y = f32[{n}] add(p0, b)"], [f"f32[{n}]"], "y")


def chain_module(op: str, length: int, n: int) -> str:
    body = []
    prev = "p0"
    for i in range(length):
        if op == "fma":
            body.append(f"m{i} = f32[{n}] multiply({prev}, p1)")
            body.append(f"x{i} = f32[{n}] add(m{i}, p0)")
        elif op in BINARY:
            body.append(f"x{i} = f32[{n}] {op}({prev}, p1)")
        else:
            body.append(f"x{i} = f32[{n}] {op}({prev})")
        prev = f"x{i}"
    return _module(f"chain_{op}", body, [f"f32[{n}]", f"f32[{n}]"], prev)


def launch_module(count: int) -> str:
    body = []
    prev = "p0"
    for i in range(count):
        body.append(f"x{i} = f32[1] add({prev}, p1)")
        prev = f"x{i}"
    return _module("launches", body, ["f32[1]", "f32[1]"], prev)


def time_plan(text: str, plan: str, repeat: int) -> float:
    """Median seconds of one plan of the module `text` (bench's API; checked against the
    reference evaluator)."""
    from hlofuse.bench import choose_device, load_source, make_plans, run_plans

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.hlo"
        path.write_text(text)
        plans = make_plans(load_source(str(path)), [plan])
        (result,) = run_plans(plans, choose_device("cpu"), repeat=repeat)
    if not result.ok:
        raise SystemExit(f"{plan}: {result.error}")
    return result.median_s


def dot_rate(repeat: int) -> float:
    import time

    import numpy as np

    a = np.random.rand(512, 512).astype(np.float32)
    b = np.random.rand(512, 512).astype(np.float32)
    times = []
    for _ in range(repeat):
        start = time.thread_time()
        for _ in range(4):
            a @ b
        times.append((time.thread_time() - start) / 4)
    times.sort()
    return 2 * 512 ** 3 / times[len(times) // 2]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    r = args.repeat
    n_bw = 1 << 24
    t = time_plan(bandwidth_module(n_bw), "replay", r)
    bandwidth = 2 * 4 * n_bw / t
    print(f"bandwidth: {bandwidth / 1e9:.2f} GB/s (f32[{n_bw}] + 1: {t * 1e3:.2f} ms)")
    n, length = 1 << 16, 64
    t = time_plan(chain_module("fma", length, n), "replay", r)
    flops = 2 * length * n / t
    print(f"flop rate: {flops / 1e9:.2f} GFLOP/s ({length} multiply-adds over f32[{n}]: {t * 1e3:.2f} ms)")
    per_add = 1 / flops
    weights = {}
    for op in WEIGHTED_OPS:
        length = 16
        t = time_plan(chain_module(op, length, n), "replay", r)
        per_op = t / (length * n)
        weights[op] = max(1, round(per_op / per_add))
        print(f"  {op:24s} {per_op * 1e9:6.2f} ns per element: {weights[op]} flops")
    count = 2000
    t = time_plan(launch_module(count), "unfused", r)
    launch = t / count
    print(f"launch: {launch * 1e6:.2f} µs per kernel ({count} unfused adds: {t * 1e3:.2f} ms)")
    dots = dot_rate(r)
    print(f"dot rate: {dots / 1e9:.2f} GFLOP/s (NumPy f32[512,512] x f32[512,512])")
    print()
    print(f"BANDWIDTH = {bandwidth:.3g}  # bytes/s")
    print(f"FLOP_RATE = {flops:.3g}  # flops/s")
    print(f"DOT_FLOP_RATE = {dots:.3g}  # flops/s")
    print(f"LAUNCH_US = {launch * 1e6:.2f}")
    print("OP_FLOPS = {" + ", ".join(f'"{op}": {w}' for op, w in weights.items()) + "}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

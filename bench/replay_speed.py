"""How replay time grows with module size: the legacy XLA:GPU pipeline on generated modules
of about 1k, 10k and 100k instructions.

A generated module is a chain of blocks, each like a layer with its own weights: a
normalisation (row reduction, broadcast back, elementwise), an activation with an expensive
op, a concatenate read by two users, slices, a column reduction, and an independent small
output (horizontal fusion candidates).  Every block reads the previous block's result, so the
whole module is one connected computation (as XLA sees a real model), and every fusion pass
has work in every block.  (A value read by every block, e.g. one weight shared by all layers,
makes XLA's sibling multi-output fusion quadratic in its users, in XLA as here.)  Times are
seconds of `hlofuse.pipeline.replay` after parsing: wall-clock, and CPU (steadier on a shared
machine).

    python bench/replay_speed.py [--sizes 1000,10000,100000] [--repeat 1]

Measured on the 2-core development machine (shared with other jobs; CPU seconds):
    986 instructions 2.3 s (pipeline imports included), 9,986: 13 s, 99,986: 151 s,
    about 1.3-1.5 ms per instruction at every size: linear, but 100k is not yet under a minute.
"""

from __future__ import annotations

import argparse
import sys
import time

_BLOCK = """
  w{i}p = f32[256,64]{{1,0}} parameter({w})
  v{i}p = f32[128]{{0}} parameter({v})
  a{i} = f32[256,64]{{1,0}} add({x}, w{i}p)
  r{i} = f32[256]{{0}} reduce(a{i}, c0), dimensions={{1}}, to_apply=add
  b{i} = f32[256,64]{{1,0}} broadcast(r{i}), dimensions={{0}}
  d{i} = f32[256,64]{{1,0}} subtract(a{i}, b{i})
  e{i} = f32[256,64]{{1,0}} exponential(d{i})
  t{i} = f32[256,64]{{1,0}} tanh(e{i})
  m{i} = f32[256,64]{{1,0}} multiply(t{i}, w{i}p)
  s1{i} = f32[256,32]{{1,0}} slice(m{i}), slice={{[0:256], [0:32]}}
  s2{i} = f32[256,32]{{1,0}} slice(m{i}), slice={{[0:256], [32:64]}}
  n{i} = f32[256,32]{{1,0}} negate(s2{i})
  k{i} = f32[256,64]{{1,0}} concatenate(n{i}, s1{i}), dimensions={{1}}
  u{i} = f32[256,64]{{1,0}} abs(k{i})
  v{i} = f32[256,64]{{1,0}} maximum(k{i}, u{i})
  w{i} = f32[64]{{0}} reduce(v{i}, c0), dimensions={{0}}, to_apply=add
  wb{i} = f32[256,64]{{1,0}} broadcast(w{i}), dimensions={{1}}
  y{i} = f32[256,64]{{1,0}} add(v{i}, wb{i})
  q{i} = f32[128]{{0}} sqrt(v{i}p)
  o{i} = f32[128]{{0}} multiply(q{i}, v{i}p)
"""
_LINES_PER_BLOCK = _BLOCK.count(" = ")


def generate(instructions: int) -> str:
    """HLO text of a module with about `instructions` instructions."""
    blocks = max(1, (instructions - 6) // _LINES_PER_BLOCK)
    body = []
    x = "p0"
    outs = []
    for i in range(blocks):
        body.append(_BLOCK.format(i=i, x=x, w=1 + 2 * i, v=2 + 2 * i))
        x = f"y{i}"
        outs.append(f"o{i}")
    tuple_shape = ", ".join(["f32[256,64]{1,0}"] + ["f32[128]{0}"] * len(outs))
    return "\n".join([
        "HloModule generated",
        "add {\n  l = f32[] parameter(0)\n  r = f32[] parameter(1)\n  ROOT s = f32[] add(l, r)\n}",
        "ENTRY main {",
        "  p0 = f32[256,64]{1,0} parameter(0)",
        "  c0 = f32[] constant(0)",
        *body,
        f"  ROOT out = ({tuple_shape}) tuple({x}, {', '.join(outs)})",
        "}",
    ])


def measure(instructions: int, repeat: int = 1) -> dict:
    import hlofuse
    from hlofuse.pipeline import Options, replay

    text = generate(instructions)
    start = time.perf_counter()
    module = hlofuse.loads(text)
    parse = time.perf_counter() - start
    best = best_cpu = None
    result = None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = replay(module, Options(backend="gpu", pipeline="legacy", gpu="rtx2080ti"))
        took, took_cpu = time.perf_counter() - start, time.process_time() - start_cpu
        best = took if best is None else min(best, took)
        best_cpu = took_cpu if best_cpu is None else min(best_cpu, took_cpu)
    return {"instructions": module.instruction_count, "parse_s": parse, "replay_s": best, "cpu_s": best_cpu,
            "kernels": len(result.kernels), "decisions": len(result.decisions)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"{'instructions':>12} {'parse s':>8} {'replay s':>9} {'cpu s':>7} {'us/instr':>9} {'kernels':>8} "
          f"{'decisions':>10}")
    for size in (int(s) for s in args.sizes.split(",")):
        row = measure(size, args.repeat)
        per = row["replay_s"] / row["instructions"] * 1e6
        print(f"{row['instructions']:>12} {row['parse_s']:>8.2f} {row['replay_s']:>9.2f} {row['cpu_s']:>7.2f} {per:>9.1f} "
              f"{row['kernels']:>8} {row['decisions']:>10}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

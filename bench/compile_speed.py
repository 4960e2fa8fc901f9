#!/usr/bin/env python3
"""What `hlofuse.compile_jax` + `hlofuse.explain` cost next to XLA's own compile of the same
function, measured in one run.

For each program of sample_dumps/programs.py and each target (a GPU described, compiled
without one, or the CPU), interleaved `--repeat` times:
  xla        a fresh Python process doing what a JAX user's program does before its first
             step: import JAX, trace, lower and compile with jax.jit (no dump); the process's
             wall time, and XLA's compile alone inside it
  compile    hlofuse.compile_jax: its fresh process, the same compile with XLA dumping the
             snapshots around fusion, and the dump folder kept; wall time, and XLA's compile
             inside it
  explain    hlofuse.explain of that dump, in this process (parsing XLA's files included;
             warmed up once, so the grammar is loaded)
Medians are printed; `--json` prints every run.

    /work/main/.venv-samples-current/bin/python bench/compile_speed.py            # needs hlofuse[jax]
    ... bench/compile_speed.py --program attention --target h100_sxm --repeat 5
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
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "sample_dumps"))

DEFAULT_PROGRAMS = ("cartpole_b_concat", "cartpole_a_rng", "mlp", "attention", "rnn_scan", "adam_update")
DEFAULT_TARGETS = ("h100_sxm", "cpu")

XLA_CHILD = r'''
import json, sys, time
t0 = time.perf_counter()
import jax
sys.path.insert(0, {samples!r})
import programs as P
prog, target = P.BY_NAME[{program!r}], {target!r}
for key, value in prog.jax_config.items():
    jax.config.update(key, value)
t1 = time.perf_counter()
if target == "cpu":
    args = [jax.ShapeDtypeStruct(s, d) for s, d in prog.args]
    lowered = jax.jit(prog.fn).trace(*args).lower()
else:
    from jax.experimental import topologies
    spec = open({spec_dir!r} + "/" + target + ".txtpb").read()
    topo = topologies.get_topology_desc(platform="cuda", target_config=spec, topology="1x1x1")
    on = jax.sharding.SingleDeviceSharding(topo.devices[0])
    args = [jax.ShapeDtypeStruct(s, d, sharding=on) for s, d in prog.args]
    lowered = jax.jit(prog.fn).trace(*args).lower(lowering_platforms=("cuda",))
t2 = time.perf_counter()
lowered.compile()
t3 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "trace_lower": t2 - t1, "compile": t3 - t2}}))
'''


def xla_alone(program: str, target: str) -> dict:
    code = XLA_CHILD.format(samples=str(REPO / "sample_dumps"), program=program, target=target,
                            spec_dir=str(REPO / "hlofuse" / "data" / "gpu_specs"))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "1"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    inner = json.loads(done.stdout.strip().splitlines()[-1])
    return {"wall": wall, "compile": inner["compile"]}


def hlofuse_run(program: str, target: str) -> dict:
    import jax

    import hlofuse
    import programs as P

    prog = P.BY_NAME[program]
    before = {key: getattr(jax.config, key) for key in prog.jax_config}
    for key, value in prog.jax_config.items():  # carried into the compiling process
        jax.config.update(key, value)
    args = [jax.ShapeDtypeStruct(s, d) for s, d in prog.args]
    start = time.perf_counter()
    dump = hlofuse.compile_jax(prog.fn, *args, backend="cpu" if target == "cpu" else "gpu",
                               gpu=None if target == "cpu" else target)
    compiled = time.perf_counter() - start
    start = time.perf_counter()
    report = hlofuse.explain(dump)
    explained = time.perf_counter() - start
    for key, value in before.items():  # as it was, for the next program
        jax.config.update(key, value)
    return {"wall": compiled, "compile": dump.compile_seconds, "explain": explained,
            "kernels": report.summary()["kernels"], "boundaries": len(report.boundaries)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", action="append", help=f"default: {', '.join(DEFAULT_PROGRAMS)}")
    ap.add_argument("--target", action="append", help=f"a GPU description or cpu; default: {', '.join(DEFAULT_TARGETS)}")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print every run as JSON")
    args = ap.parse_args(argv)
    try:
        import jax
    except ImportError:
        print("skipped: JAX is not installed here (pip install 'hlofuse[jax]')")
        return 0
    jax.config.update("jax_platforms", "cpu")
    import hlofuse

    programs, targets = args.program or DEFAULT_PROGRAMS, args.target or DEFAULT_TARGETS
    hlofuse.explain(REPO / "sample_dumps" / "gpu-current-h100" / "softmax")  # load the grammar, import everything
    runs: dict = {}
    for _ in range(args.repeat):  # interleaved, so that a change of load hits every row alike
        for program in programs:
            for target in targets:
                row = runs.setdefault((program, target), {"xla": [], "hlofuse": []})
                row["xla"].append(xla_alone(program, target))
                row["hlofuse"].append(hlofuse_run(program, target))
    if args.json:
        print(json.dumps([{"program": p, "target": t, **v} for (p, t), v in runs.items()], indent=1))
        return 0
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"jax {jax.__version__}; median of {args.repeat} runs; seconds; load average {load:.1f} on "
          f"{os.cpu_count()} cores")
    head = ("program", "target", "kernels", "XLA compile", "jax.jit process", "compile_jax", "XLA compile (dumping)",
            "explain", "compile_jax+explain", "/ jax.jit process")
    print(" | ".join(head))
    for (program, target), row in runs.items():
        def med(side, key):
            return statistics.median(r[key] for r in row[side])

        total = med("hlofuse", "wall") + med("hlofuse", "explain")
        print(" | ".join([program, target, str(row["hlofuse"][0]["kernels"]), f"{med('xla', 'compile'):.2f}",
                          f"{med('xla', 'wall'):.2f}", f"{med('hlofuse', 'wall'):.2f}", f"{med('hlofuse', 'compile'):.2f}",
                          f"{med('hlofuse', 'explain'):.2f}", f"{total:.2f}", f"{total / med('xla', 'wall'):.1f}x"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

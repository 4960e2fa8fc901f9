"""Time the sample programs as real XLA runs them (JAX on this machine's default device).

`hlofuse bench` times XLA's fused plan by running hlofuse's own kernels for it; this script is
its judge: the same JAX programs (sample_dumps/programs.py), compiled and run by XLA itself,
timed the same way (median of interleaved runs after a warm-up), with the paper's section V
ratios between the cart-pole variants. With --dump, XLA's own modules are kept (one .tar.gz):
the snapshots around its fusion passes and after optimisation, so that `hlofuse check` can
replay what this XLA did on a real device.

    python bench/xla_on_gpu.py --json out/xla_gpu.json           # the cart-pole variants
    python bench/xla_on_gpu.py --all --dump out/xla_gpu_dumps.tar.gz

Needs JAX (and a GPU for GPU figures); not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: snapshots kept around the fusion passes of today's XLA:GPU (as sample_dumps/generate.py)
FUSION_PASSES = "^(variadic-op-splitter|priority-fusion|multi_output_fusion)$"
#: calls issued back to back for the pipelined figure
PIPELINED_CALLS = 20

#: the paper's section V: (what changed, paper's speedup, slower program, faster program)
COMPARISONS = [
    ("remove the RNG custom call (precomputed pool)", "1.87x", "cartpole_a_rng_customcall", "cartpole_b_concat"),
    ("remove the concatenate (separate state arrays)", "3.41x", "cartpole_b_concat", "cartpole_c_separate"),
    ("unroll the scan 10x", "3.5x", "cartpole_c_separate", "cartpole_d_unroll10"),
]


def inputs_for(program, seed: int):
    """The paper's simulator inputs by shape: floats uniform in ±0.05, int32 actions 0 or 1,
    a raw uint32 threefry key."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in program.args:
        kind = np.dtype(dtype)
        if kind == np.uint32:
            out.append(rng.integers(0, 2**32, shape, dtype=np.uint32))
        elif kind.kind in "iu":
            out.append(rng.integers(0, 2, shape).astype(kind))
        else:
            out.append(rng.uniform(-0.05, 0.05, shape).astype(kind))
    return out


def one_program(name: str, repeat: int, seed: int) -> dict:
    """Compile and time one program in this process (called in a fresh subprocess per program,
    so that jax.config changes and the dump folder stay the program's own)."""
    import jax

    sys.path.insert(0, str(REPO / "sample_dumps"))
    from programs import PROGRAMS  # noqa: E402

    program = next(p for p in PROGRAMS if p.name == name)
    for key, value in program.jax_config.items():
        try:
            jax.config.update(key, value)
        except (AttributeError, KeyError, ValueError) as err:
            return {"program": name, "error": f"jax.config {key}: {err}"}
    args = [jax.device_put(a) for a in inputs_for(program, seed)]
    fn = jax.jit(program.fn)
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    compile_s = time.perf_counter() - start
    for _ in range(3):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    # Back-to-back calls with one wait at the end: JAX's dispatch of a call overlaps the GPU's
    # work on the previous one, so for programs longer than their dispatch this is the device's
    # time per call (the figure hlofuse's CUDA events measure), not the host's.
    pipelined = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(PIPELINED_CALLS):
            out = fn(*args)
        jax.block_until_ready(out)
        pipelined.append((time.perf_counter() - start) / PIPELINED_CALLS)
    device = jax.devices()[0]
    # XLA's kernels in its optimised module (fusions and library calls, per run of the text:
    # a kernel inside a while body counts once), to set beside the dump's plan
    text = fn.lower(*args).compile().as_text() or ""
    kernels = len(re.findall(r"= [^=]*\b(?:fusion|custom-call)\(", text))
    return {"program": name, "device": f"{device.platform} ({device.device_kind})", "jax": jax.__version__,
            "compile_s": compile_s, "median_s": statistics.median(times), "min_s": min(times), "times": times,
            "pipelined_s": statistics.median(pipelined), "kernels": kernels}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--all", action="store_true", help="every sample program, not only the cart-pole")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write every program's numbers here")
    parser.add_argument("--dump", help="keep XLA's optimised modules in this .tar.gz")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: time one program
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_program(args.one, args.repeat, args.seed)))
        return 0

    sys.path.insert(0, str(REPO / "sample_dumps"))
    from programs import PROGRAMS  # noqa: E402

    names = [p.name for p in PROGRAMS if args.all or p.group == "cartpole"]
    results = {}
    with tempfile.TemporaryDirectory(prefix="hlofuse-xla-gpu-") as dumps:
        for name in names:
            env = dict(os.environ)
            if args.dump:
                flags = f"--xla_dump_to={dumps}/{name} --xla_dump_hlo_as_text --xla_dump_hlo_pass_re={FUSION_PASSES}"
                env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flags).strip()
            proc = subprocess.run([sys.executable, __file__, "--one", name, "--repeat", str(args.repeat),
                                   "--seed", str(args.seed)], capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                results[name] = {"program": name, "error": proc.stderr.strip().splitlines()[-1:] or ["failed"]}
            else:
                results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
            r = results[name]
            shown = f"{r['median_s'] * 1e3:8.3f} ms (compile {r['compile_s']:.1f} s)" if "median_s" in r \
                else f"error: {r['error']}"
            print(f"{name:28s} {shown}", flush=True)
        if args.dump:
            with tarfile.open(args.dump, "w:gz") as tar:
                for path in sorted(Path(dumps).rglob("*.txt")):
                    tar.add(path, arcname=str(path.relative_to(dumps)))
    print()
    print("| the paper's change | paper (RTX 2080 Ti) | real XLA here | programs |")
    print("|---|---:|---:|---|")
    ratios = []
    for label, paper, slow, fast in COMPARISONS:
        s, f = results.get(slow, {}), results.get(fast, {})
        if "median_s" not in s or "median_s" not in f:
            print(f"| {label} | {paper} | n/a | {slow} / {fast} |")
            continue
        ratio = s["median_s"] / f["median_s"]
        ratios.append({"change": label, "paper": paper, "ours": ratio, "slower": slow, "faster": fast})
        print(f"| {label} | {paper} | {ratio:.2f}x | {slow} / {fast} |")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"programs": results, "ratios": ratios}, indent=2))
    return 0 if all("median_s" in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

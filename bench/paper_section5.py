"""The paper's section V ("Operator Fusion in XLA", Snider & Liang), measured in one run.

The cart-pole variants of sample_dumps/ (2048 environments, a scan of 100 steps) are run as
real kernels with `hlofuse bench`'s machinery, every plan checked against the reference
evaluator, all plans timed interleaved on the same machine, and the paper's speedups set
against ours:

    paper                               ours (plan of a variant / plan of a variant)
    1.87x  remove the RNG custom call   a: RNG in loop (xla)        / b: concat baseline (xla)
    ~1.1x  let the concatenate fuse     b (replay)                  / b (relax:concat)
    3.41x  remove the concatenate       b (xla)                     / c: separate state (xla)
    3.5x   unroll the scan 10x          c (xla)                     / d: unroll 10 (xla)
    2.7x   hand-written CUDA            d (xla)                     / b (loop: one kernel)

Inputs follow the paper's simulator: states and resets uniform in ±0.05, actions 0 or 1
(the same numbers for every variant, laid out as each variant takes them).

    .venv/bin/python bench/paper_section5.py                      # CPU, legacy XLA:GPU dumps
    .venv/bin/python bench/paper_section5.py --dumps sample_dumps/gpu-current-h100 --device cuda
    .venv/bin/python bench/paper_section5.py --markdown out/section5.md --json out/section5.json
    HLOFUSE_JAX_PYTHON=.venv-samples-current/bin/python \
        .venv/bin/python bench/paper_section5.py --dumps sample_dumps/cpu --compare-xla   # XLA:CPU's plans

With --compare-xla, XLA's own compiled program of each variant (XLA:CPU, single-threaded, as
`bench --compare-xla` runs it) takes its turn in the same rounds: the table gains XLA's time
per variant, and each of the paper's changes XLA's own ratio beside hlofuse's.  NumPy's BLAS
is held to one thread (OPENBLAS_NUM_THREADS=1, set before NumPy loads) as the kernels are.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hlofuse import bench  # noqa: E402

VARIANTS = {
    "a": ("cartpole_a_rng_customcall", "cartpole_a_rng"),  # the custom call where the dump has it
    "b": ("cartpole_b_concat_vecdone",),
    "c": ("cartpole_c_separate",),
    "d": ("cartpole_d_unroll10",),
}
PLANS = {"a": ["unfused", "xla"], "b": ["unfused", "xla", "replay", "relax:concat", "loop"],
         "c": ["unfused", "xla"], "d": ["unfused", "xla", "loop"]}
#: (what the paper changed, paper's speedup, slower (variant, plan), faster (variant, plan))
COMPARISONS = [
    ("remove the RNG custom call (precomputed pool)", "1.87x", ("a", "xla"), ("b", "xla")),
    ("let the concatenate fuse (relax:concat vs the replay)", "~1.1x", ("b", "replay"), ("b", "relax:concat")),
    ("let the concatenate fuse (relax:concat vs XLA)", "~1.1x", ("b", "xla"), ("b", "relax:concat")),
    ("remove the concatenate (separate state arrays)", "3.41x", ("b", "xla"), ("c", "xla")),
    ("unroll the scan 10x", "3.5x", ("c", "xla"), ("d", "xla")),
    ("hand-written CUDA: the loop in one kernel", "2.7x", ("d", "xla"), ("b", "loop")),
    ("the same, one program: unroll 10 in one kernel", "2.7x", ("d", "xla"), ("d", "loop")),
    ("overall: loop kernel vs the RNG baseline", "—", ("a", "xla"), ("b", "loop")),
]


def paper_inputs(module, variant: str, seed: int) -> list[np.ndarray]:
    """The paper's simulator inputs, arranged as this variant's entry parameters want them."""
    rng = np.random.default_rng(seed)
    params = module.entry.parameters
    envs = params[0].shape.dims[0]
    steps = next((p.shape.dims[0] for p in params if p.shape.element_type == "s32" and p.shape.rank == 2), 100)
    state = rng.uniform(-0.05, 0.05, (envs, 4)).astype(np.float32)
    actions = rng.integers(0, 2, (steps, envs)).astype(np.int32)
    resets = rng.uniform(-0.05, 0.05, (steps, envs, 4)).astype(np.float32)
    key = rng.integers(0, 2**32, 2, dtype=np.uint32)
    if variant == "a":
        return [state, key]
    if variant == "b":
        return [state, actions, resets]
    return [state[:, k].copy() for k in range(4)] + [actions] + [resets[:, :, k].copy() for k in range(4)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dumps", default=str(REPO / "sample_dumps" / "gpu-legacy-rtx2080ti"),
                        help="folder of the cart-pole dumps (default: the paper's era and GPU)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", help="write the table (markdown) here too")
    parser.add_argument("--json", help="write every plan's numbers (JSON) here")
    parser.add_argument("--compare-xla", action="store_true",
                        help="run XLA's own program of each variant beside the plans (XLA:CPU; needs JAX)")
    args = parser.parse_args()

    device = bench.choose_device(args.device)
    groups, sources = {}, {}
    for variant, names in VARIANTS.items():
        folder = next((Path(args.dumps) / n for n in names if (Path(args.dumps) / n).is_dir()), None)
        if folder is None:
            print(f"no dump for variant {variant} ({' or '.join(names)}) in {args.dumps}", file=sys.stderr)
            return 2
        source = bench.load_source(str(folder))
        plans = bench.make_plans(source, PLANS[variant])
        module = next(p.module for p in plans if p.module is not None)
        print(f"{variant}: {folder.name}: compiling and checking {', '.join(PLANS[variant])}", file=sys.stderr)
        groups[variant] = bench.prepare(plans, device, inputs=paper_inputs(module, variant, args.seed),
                                        xla_program=source.program if args.compare_xla else False)
        sources[variant] = folder.name
    print(f"timing {args.repeat} interleaved runs of every plan on {device.describe()}", file=sys.stderr)
    bench.time_prepared(list(groups.values()), device, repeat=args.repeat)

    result = {v: {r.name: r for r in g.results} for v, g in groups.items()}
    xla = {v: g.xla for v, g in groups.items() if g.xla is not None and g.xla.median_s}
    load = os.getloadavg()
    lines = [f"Cart-pole, {Path(args.dumps).name} dumps, on {device.describe()}; median of {args.repeat} "
             f"interleaved runs (load average {load[0]:.2f} after); every plan checked against the reference "
             f"evaluator.", "",
             "| variant | plan | kernels | launches | MB moved | median | spread | vs unfused | vs XLA | max rel. error | ok |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    all_ok = True
    for v, plans in result.items():
        for r in plans.values():
            all_ok &= r.ok
            if r.median_s is None:
                lines.append(f"| {v}: {sources[v]} | {r.name} | | | | | | | | | no: {r.error} |")
                continue
            vs = f"{r.vs_xla:.2f}x" if r.vs_xla else ""
            lines.append(f"| {v}: {sources[v]} | {r.name} | {r.kernels} | {r.launches} | {r.bytes / 1e6:.1f} | "
                         f"{r.median_s * 1e3:.2f} ms | {r.spread or 0:.0%} | {r.speedup:.2f}x | {vs} | "
                         f"{r.max_rel_error:.1g} | {'yes' if r.ok else 'no'} |")
        if v in xla:
            x = xla[v]
            lines.append(f"| {v}: {sources[v]} | {x.runner} | | | | {x.median_s * 1e3:.2f} ms | {x.spread or 0:.0%} "
                         f"| | 1.00x | {x.max_rel_error:.1g} | {'yes' if x.ok else 'no'} |")
    lines += ["", "| the paper's change | paper (RTX 2080 Ti) | ours | XLA's own | ratio of |",
              "|---|---:|---:|---:|---|"]
    ratios = []
    for label, paper, (sv, sp), (fv, fp) in COMPARISONS:
        slow, fast = result[sv].get(sp), result[fv].get(fp)
        if slow is None or fast is None or not slow.median_s or not fast.median_s:
            lines.append(f"| {label} | {paper} | n/a | | {sv}.{sp} / {fv}.{fp} |")
            continue
        ratio = slow.median_s / fast.median_s
        # XLA's own program has one plan per variant: its ratio where both sides are XLA's plan
        own = xla[sv].median_s / xla[fv].median_s if sp == fp == "xla" and sv in xla and fv in xla else None
        ratios.append({"change": label, "paper": paper, "ours": ratio, "slower": f"{sv}.{sp}", "faster": f"{fv}.{fp}",
                       "xla_own": own})
        lines.append(f"| {label} | {paper} | {ratio:.2f}x | {f'{own:.2f}x' if own else ''} | {sv}.{sp} / {fv}.{fp} |")
    fused_faster = all(result[v]["xla"].median_s < result[v]["unfused"].median_s for v in result
                       if result[v]["xla"].median_s and result[v]["unfused"].median_s)
    lines += ["", f"Every plan matches the reference: {'yes' if all_ok else 'NO'}. "
                  f"XLA's fused plan faster than unfused in every variant: {'yes' if fused_faster else 'NO'}."]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(text + "\n")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({
            "device": device.describe(), "dumps": args.dumps, "repeat": args.repeat,
            "plans": {v: [r.to_dict() | {"times": r.times} for r in g.results] for v, g in groups.items()},
            "xla": {v: g.xla.to_dict() | {"times": g.xla.times} for v, g in groups.items() if g.xla is not None},
            "load_average": load, "ratios": ratios}, indent=2))
    return 0 if all_ok and fused_faster else 1


if __name__ == "__main__":
    sys.exit(main())

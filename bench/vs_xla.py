"""hlofuse's kernels against XLA's own: each CPU sample program run as hlofuse's plans and as
XLA:CPU's compiled program, side by side in one process's rounds.

For every program folder (default: sample_dumps/cpu/*), the plans (`xla`: XLA's fused module
as hlofuse's kernels; `loop`: while loops as one kernel, where a loop allows it) and XLA's
own program (the dump's module before optimizations, compiled by the XLA:CPU of an installed
JAX: `bench --compare-xla`) run on the same inputs, every output checked against the
reference evaluator, then timed in interleaved rounds (plan, plan, XLA, plan, plan, XLA, ...).

Fairness: both sides single-threaded.  hlofuse's kernels run on the calling thread and are
timed by its CPU time; XLA runs with --xla_cpu_multi_thread_eigen=false and NPROC=1 and is
timed by its process's CPU time; NumPy's BLAS (the library calls' dots) is held to one
thread (OPENBLAS_NUM_THREADS=1, set here before NumPy loads).  The machine's load average is
printed before and after: on a shared machine, read the spreads too.

    HLOFUSE_JAX_PYTHON=.venv-samples-current/bin/python .venv/bin/python bench/vs_xla.py
    ... bench/vs_xla.py sample_dumps/cpu/cartpole_c_separate --repeat 21 --markdown out.md --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hlofuse import bench  # noqa: E402
from hlofuse.errors import HlofuseError  # noqa: E402

PLANS = ("xla", "loop")


def _ms(s) -> str:
    return f"{s * 1e3:.3f}" if s is not None else ""


def _pct(x) -> str:
    return f"{x:.0%}" if x is not None else ""


def run_program(folder: Path, device, repeat: int, threads: str) -> dict:
    source = bench.load_source(str(folder))
    plans = bench.make_plans(source, list(PLANS))
    prepared = bench.prepare(plans, device, xla_program=source.program, xla_threads=threads)
    try:
        bench.time_prepared([prepared], device, repeat=repeat)
    finally:
        prepared.close()
    return {"program": folder.name, "plans": {r.name: r for r in prepared.results}, "xla": prepared.xla}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("programs", nargs="*", help="dump folders (default: every folder of sample_dumps/cpu)")
    parser.add_argument("--repeat", type=int, default=11, help="interleaved rounds (default 11)")
    parser.add_argument("--xla-threads", default="single", choices=["single", "xla-default"])
    parser.add_argument("--markdown", help="write the table here too")
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args()
    folders = [Path(p) for p in args.programs] or sorted(p for p in (REPO / "sample_dumps" / "cpu").iterdir()
                                                           if p.is_dir())
    device = bench.choose_device("cpu")
    load_before = os.getloadavg()
    rows, records = [], []
    for folder in folders:
        print(f"{folder.name} ...", file=sys.stderr)
        try:
            record = run_program(folder, device, args.repeat, args.xla_threads)
        except HlofuseError as err:
            rows.append(f"| {folder.name} | | | | | | | error: {err} |")
            continue
        xla, plans = record["xla"], record["plans"]
        cells = [folder.name, f"{_ms(xla.median_s)} ({_pct(xla.spread)})" if xla.ran else f"– ({xla.why_not})"]
        ok = xla.ok if xla.ran else True
        for name in PLANS:
            r = plans.get(name)
            ok &= r is None or r.ok or r.skipped is not None
            if r is None or r.median_s is None:
                cells += ["n/a" if r is not None and r.skipped else (r.error if r is not None else ""), ""]
                continue
            cells += [f"{_ms(r.median_s)} ({_pct(r.spread)})", f"{r.vs_xla:.2f}x" if r.vs_xla else ""]
        cells.append("yes" if ok else "NO")
        rows.append("| " + " | ".join(cells) + " |")
        records.append({"program": folder.name, "xla": xla.to_dict(),
                        "plans": {n: r.to_dict() | {"times": r.times} for n, r in plans.items()},
                        "xla_times": xla.times})
    load_after = os.getloadavg()
    head = [f"hlofuse plans against XLA:CPU's own program, on {device.describe()}; XLA {args.xla_threads}-threaded; "
            f"median of {args.repeat} interleaved rounds, ms (spread: IQR over median); load average "
            f"{load_before[0]:.2f} before, {load_after[0]:.2f} after.", "",
            "| program | XLA:CPU ms | xla plan ms | xla / XLA | loop plan ms | loop / XLA | all match the reference |",
            "|---|---:|---:|---:|---:|---:|---|"]
    text = "\n".join(head + rows)
    print(text)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(text + "\n")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"device": device.describe(), "repeat": args.repeat,
                                               "load_before": load_before, "load_after": load_after,
                                               "programs": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

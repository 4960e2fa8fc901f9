"""hlofuse's CUDA kernels for XLA's own plans against XLA's own run of the same programs, on a GPU.

For every sample program folder (default: sample_dumps/gpu-current-h100/*): the `unfused` and
`xla` plans run as hlofuse's kernels on CuPy (CUDA events, median of --repeat after a warm-up,
every output checked against the reference evaluator), then the same JAX program
(sample_dumps/programs.py) compiled and run by the JAX of this machine (bench/xla_on_gpu.py
--one, a fresh process per program): its wall-clock time per call (dispatch included) and its
time per call when 20 calls are issued back to back (dispatch overlapping the GPU's work: the
device's time for programs longer than their dispatch).  The ratio is hlofuse's `xla` plan over
XLA's pipelined time.  The dumps are jax 0.10.2's; the XLA run is whatever JAX is installed, so
its fusion may differ.  The kernels column is hlofuse's (a GEMM fusion runs as its prologue,
cuBLAS and its epilogue: up to three).  Programs without loops replay as one CUDA graph, loops
launch each kernel from Python (--graphs: loops unrolled into the graph too, or no graphs).

    python bench/gpu_vs_xla.py --json out/gpu_vs_xla.json --markdown out/gpu_vs_xla.md
    python bench/gpu_vs_xla.py --only softmax,layer_norm --device cpu     # the plumbing, no GPU

Needs CuPy and a GPU for GPU figures (`--device cpu` runs the same loop with the C kernels and
XLA's CPU run, to check the script); not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hlofuse import bench  # noqa: E402
from hlofuse.errors import HlofuseError  # noqa: E402


def xla_run(name: str, repeat: int, python: str) -> dict:
    proc = subprocess.run([python, str(REPO / "bench" / "xla_on_gpu.py"), "--one", name, "--repeat", str(repeat)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def hlofuse_run(folder: Path, device, repeat: int) -> dict:
    try:
        source = bench.load_source(str(folder))
        results = bench.run_plans(bench.make_plans(source, ["unfused", "xla"]), device, repeat=repeat)
    except HlofuseError as err:
        return {"error": str(err)}
    return bench.to_json(device.name, results, source)


def _ms(s) -> str:
    return f"{s * 1e3:.3f}" if isinstance(s, (int, float)) else "–"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dumps", default=str(REPO / "sample_dumps" / "gpu-current-h100"))
    parser.add_argument("--only", help="comma-separated program names")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu", "auto"])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--graphs", default="straight", choices=["straight", "loops", "off"],
                        help="CUDA: which programs replay as one CUDA graph (hlofuse/execute/cuda.py: GRAPH_POLICIES)")
    parser.add_argument("--xla-repeat", type=int, default=30)
    parser.add_argument("--xla-python", default=sys.executable, help="a Python with JAX (default: this one)")
    parser.add_argument("--json", help="write every program's numbers here (rewritten after each program)")
    parser.add_argument("--markdown", help="write the table here too")
    args = parser.parse_args()

    device = bench.choose_device(args.device)
    if hasattr(device, "graphs"):
        device.graphs = args.graphs
    folders = sorted(p for p in Path(args.dumps).iterdir() if p.is_dir())
    if args.only:
        wanted = set(args.only.split(","))
        folders = [f for f in folders if f.name in wanted]
    rows, results = [], {}
    header = ("| program | kernels: xla plan / XLA here | hlofuse unfused ms | hlofuse xla plan ms | ok | "
              "XLA per call ms | XLA pipelined ms | xla plan / XLA pipelined |")
    print(header + "\n|---|---:|---:|---:|---|---:|---:|---:|", flush=True)
    for folder in folders:
        ours = hlofuse_run(folder, device, args.repeat)
        xla = xla_run(folder.name, args.xla_repeat, args.xla_python)
        results[folder.name] = {"hlofuse": ours, "xla": xla}
        plans = {p["name"]: p for p in ours.get("plans", [])}
        unfused, fused = plans.get("unfused", {}), plans.get("xla", {})
        ratio = None
        if isinstance(fused.get("median_s"), float) and isinstance(xla.get("pipelined_s"), float):
            ratio = fused["median_s"] / xla["pipelined_s"]
        results[folder.name]["ratio"] = ratio
        ok = all(p.get("ok") for p in plans.values()) if plans else False
        row = (f"| {folder.name} | {fused.get('kernels', '–')} / {xla.get('kernels', '–')} | "
               f"{_ms(unfused.get('median_s'))} | "
               f"{_ms(fused.get('median_s'))} | {'yes' if ok else 'NO: ' + str(ours.get('error', ''))[:60]} | "
               f"{_ms(xla.get('median_s'))} | {_ms(xla.get('pipelined_s'))} | "
               f"{f'{ratio:.2f}x' if ratio else xla.get('error', '–')[:60]} |")
        rows.append(row)
        print(row, flush=True)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps({"device": device.name, "programs": results}, indent=1))
    if args.markdown:
        Path(args.markdown).write_text("\n".join([header, "|---|---:|---:|---:|---|---:|---:|---:|", *rows]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

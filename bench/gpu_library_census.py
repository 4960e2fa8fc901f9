"""How many array-library calls and host synchronisations each library kernel of XLA's plans
costs on the GPU path, counted without a GPU: the plans run on the emulated CUDA device
(execute/cuda_emulate.py), whose library calls go through the same code as CuPy's with NumPy
standing in for it (execute/array_census.py).  On a GPU every counted call is at least one
launch plus CuPy's Python overhead (~5-10 µs), and every synchronisation drains the queue.

    python bench/gpu_library_census.py [--only mlp,top_k] [--dumps sample_dumps/gpu-current-h100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hlofuse import bench  # noqa: E402
from hlofuse.errors import HlofuseError  # noqa: E402
from hlofuse.execute.cuda_emulate import EmulatedCudaDevice  # noqa: E402

PROGRAMS = "mlp,attention,rnn_scan,argsort_rows,top_k,segment_sum,conv2d_bias_relu"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dumps", default=str(REPO / "sample_dumps" / "gpu-current-h100"))
    parser.add_argument("--only", default=PROGRAMS, help="comma-separated program names")
    parser.add_argument("--plan", default="xla")
    args = parser.parse_args()
    print("| program | kernel | array calls | host syncs | ok |\n|---|---|---:|---:|---|")
    for name in args.only.split(","):
        device = EmulatedCudaDevice()
        try:
            results = bench.run_plans(bench.make_plans(bench.load_source(str(Path(args.dumps) / name)), [args.plan]),
                                      device, repeat=1, warmup=0)
        except HlofuseError as err:
            print(f"| {name} | – | – | – | {err} |")
            continue
        ok = "yes" if all(r.ok for r in results) else f"NO: {results[0].error}"
        if not device.census_by_kernel:
            print(f"| {name} | (no library kernel) | 0 | 0 | {ok} |")
        for label, (calls, syncs) in device.census_by_kernel.items():
            print(f"| {name} | {label} | {calls} | {syncs} | {ok} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

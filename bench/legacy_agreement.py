"""How much of real XLA's legacy fusion hlofuse reproduces.

For every program of sample_dumps/gpu-legacy-rtx2080ti (jax 0.4.35, xla_gpu_enable_priority_
fusion=false, the paper's RTX 2080 Ti), replay the legacy pipeline from XLA's snapshot right
before its fusion passes and compare with XLA's snapshot right after them (hlofuse.check:
kernels matched by the instructions they compute, not by name).  Prints, per program, XLA's
kernel count, how many hlofuse reproduced exactly, and the differences.

    python bench/legacy_agreement.py [--build gpu-legacy-rtx2080ti] [--json] [-v]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_dumps"


@dataclass
class Row:
    program: str
    xla_kernels: int
    reproduced: int
    seconds: float
    missing: list
    extra: list
    error: str | None = None

    @property
    def agreement(self) -> float:
        return self.reproduced / self.xla_kernels if self.xla_kernels else 1.0


def programs(build: str = "gpu-legacy", gpu: str = "rtx2080ti") -> list[dict]:
    """MANIFEST.json entries of one build and GPU that have both fusion snapshots."""
    manifest = json.loads((SAMPLES / "MANIFEST.json").read_text())
    out = []
    for entry in manifest["programs"]:
        if entry["build"] != build or entry["gpu"] != gpu:
            continue
        files = entry.get("files") or {}
        if files.get("before_fusion") and files.get("after_fusion"):
            out.append(entry)
    return sorted(out, key=lambda e: e["program"])


def measure(entry: dict) -> Row:
    import hlofuse
    from hlofuse.check import check
    from hlofuse.pipeline import Options
    from hlofuse.printer import print_back_error

    folder = SAMPLES / entry["path"]
    start = time.perf_counter()
    try:
        before = hlofuse.load(str(folder / entry["files"]["before_fusion"]))
        after = hlofuse.load(str(folder / entry["files"]["after_fusion"]))
        # The description XLA compiled for (the manifest's build GPU name is not a spec name).
        gpu = str(REPO / entry["gpu_spec"])
        result = check(before, after, Options(backend="gpu", pipeline="legacy", gpu=gpu))
        problem = print_back_error(result.replay.module)
        if problem:
            raise AssertionError(problem)
    except Exception as err:  # reported per program, never hidden
        return Row(entry["program"], 0, 0, time.perf_counter() - start, [], [], f"{type(err).__name__}: {err}")
    seconds = time.perf_counter() - start
    missing = [m for m in result.matches if m.status == "missing"]
    extra = [m for m in result.matches if m.status == "extra"]

    def describe(m):
        decisions = result.decisions.get((m.computation, m.xla_kernel, m.ours), ())
        rules = sorted({d.rule for d in decisions if d.rule})
        return {"computation": m.computation, "kernel": m.xla_kernel or m.ours, "size": len(m.members),
                "rules": rules}

    return Row(entry["program"], result.xla_kernels, result.reproduced, seconds,
               [describe(m) for m in missing], [describe(m) for m in extra])


def table(rows: list[Row]) -> str:
    lines = [f"{'program':32} {'XLA kernels':>11} {'reproduced':>10} {'agreement':>9} {'seconds':>8}"]
    for r in rows:
        if r.error:
            lines.append(f"{r.program:32} error: {r.error}")
            continue
        lines.append(f"{r.program:32} {r.xla_kernels:>11} {r.reproduced:>10} {r.agreement:>9.1%} {r.seconds:>8.2f}")
    ok = [r for r in rows if not r.error]
    if ok:
        mean = sum(r.agreement for r in ok) / len(ok)
        total_x = sum(r.xla_kernels for r in ok)
        total_r = sum(r.reproduced for r in ok)
        lines.append(f"{'average over ' + str(len(ok)) + ' programs':32} {total_x:>11} {total_r:>10} {mean:>9.1%}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="gpu-legacy")
    parser.add_argument("--gpu", default="rtx2080ti")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true", help="list every kernel hlofuse did not reproduce")
    args = parser.parse_args(argv)
    rows = [measure(e) for e in programs(args.build, args.gpu)]
    if args.json:
        print(json.dumps([{**r.__dict__, "agreement": r.agreement} for r in rows], indent=2))
        return 0
    print(table(rows))
    if args.verbose:
        for r in rows:
            for kind, items in (("missing", r.missing), ("extra", r.extra)):
                for m in items:
                    print(f"  {r.program}: {kind} {m['computation']}/{m['kernel']} ({m['size']} instr.) "
                          f"rules: {', '.join(m['rules']) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

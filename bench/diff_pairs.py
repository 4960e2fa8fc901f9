#!/usr/bin/env python3
"""The headlines `hlofuse diff` prints for the real pairs of sample_dumps/ (README, "Comparing
two compiles"), and a summary line per pair: kernels, launches and bytes per run of each side,
the kernel matches and the one-sided boundaries.

    python bench/diff_pairs.py            # the README's pairs, as the command prints them
    python bench/diff_pairs.py --all      # every program both builds of each pair have, summaries only
    python bench/diff_pairs.py --renamed  # every sample dump against itself with every name renumbered

Pairs: the legacy pipeline (jax 0.4.35) against priority fusion (jax 0.10.2) on each GPU, the
RTX 2080 Ti against the H100 (jax 0.10.2), XLA:CPU without and with YNNPACK fusion, and the
paper's source change (the state as one concatenate, then as separate arrays).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_dumps"

README_PAIRS = [
    ("gpu-legacy-rtx2080ti/cartpole_a_rng", "gpu-current-rtx2080ti/cartpole_a_rng"),
    ("gpu-legacy-h100/softmax", "gpu-current-h100/softmax"),
    ("gpu-current-rtx2080ti/adam_update", "gpu-current-h100/adam_update"),
    ("cpu-noynn/logsumexp", "cpu/logsumexp"),
    ("gpu-legacy-rtx2080ti/cartpole_b_concat", "gpu-legacy-rtx2080ti/cartpole_c_separate"),
]
BUILD_PAIRS = [
    ("gpu-legacy-rtx2080ti", "gpu-current-rtx2080ti"),
    ("gpu-legacy-h100", "gpu-current-h100"),
    ("gpu-current-rtx2080ti", "gpu-current-h100"),
    ("cpu-noynn", "cpu"),
]
SOURCE_CHANGES = [("cartpole_b_concat", "cartpole_c_separate"), ("cartpole_a_rng_customcall", "cartpole_a_rng")]


def headline(a: str, b: str, columns: int = 120) -> str:
    """What the command prints above its tables (the headline), as a user sees it piped."""
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "hlofuse", "diff", str(SAMPLES / a), str(SAMPLES / b)],
                         capture_output=True, text=True, env=env, check=True).stdout
    lines = []
    for line in out.splitlines():
        if line.startswith("A: "):
            break
        lines.append(line.rstrip())
    return "\n".join(lines)


def summary(a: str, b: str) -> str:
    import hlofuse

    d = hlofuse.diff(SAMPLES / a, SAMPLES / b)
    s = d.to_dict()["summary"]
    ta, tb = d.a_totals, d.b_totals
    return (f"{a} -> {b}: kernels {ta.kernels} -> {tb.kernels}, launches {ta.launches_per_run} -> "
            f"{tb.launches_per_run}, bytes/run {ta.bytes_per_run} -> {tb.bytes_per_run}; "
            f"{s['kernel_matches']}; boundaries +{s['boundaries_added']} -{s['boundaries_removed']}")


def every_pair() -> list[tuple[str, str]]:
    pairs = []
    for x, y in BUILD_PAIRS:
        for program in sorted(p.name for p in (SAMPLES / x).iterdir() if p.is_dir()):
            if (SAMPLES / y / program).is_dir():
                pairs.append((f"{x}/{program}", f"{y}/{program}"))
    for build in sorted(p.name for p in SAMPLES.iterdir() if p.is_dir()):
        for before, after in SOURCE_CHANGES:
            if (SAMPLES / build / before).is_dir() and (SAMPLES / build / after).is_dir():
                pairs.append((f"{build}/{before}", f"{build}/{after}"))
    return pairs


def renamed_sweep() -> int:
    """Diff every sample dump with a copy whose instructions and computations are all renamed
    (tests/test_diff.py's renaming); print those that do not come out unchanged."""
    import tempfile

    import hlofuse

    sys.path.insert(0, str(REPO / "tests"))
    from test_diff import renamed_dump

    checked = changed = 0
    for build in sorted(p for p in SAMPLES.iterdir() if p.is_dir()):
        for dump in sorted(p for p in build.iterdir() if p.is_dir()):
            with tempfile.TemporaryDirectory() as tmp:
                same, renamed = renamed_dump(dump, Path(tmp))
                d = hlofuse.diff(same, renamed)
            checked += 1
            if not d.unchanged:
                changed += 1
                print(f"{build.name}/{dump.name}: {d.headline}", flush=True)
    print(f"{checked} dumps renamed, {changed} not unchanged")
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--all", action="store_true", help="every pair of programs, one summary line each")
    parser.add_argument("--renamed", action="store_true", help="every sample dump against itself renamed")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    if args.renamed:
        sys.exit(1 if renamed_sweep() else 0)
    if args.all:
        for a, b in every_pair():
            print(summary(a, b), flush=True)
        return
    for a, b in README_PAIRS:
        print(f"$ hlofuse diff sample_dumps/{a} sample_dumps/{b}")
        print(headline(a, b), flush=True)


if __name__ == "__main__":
    main()

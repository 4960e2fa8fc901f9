#!/usr/bin/env python3
"""`make bench`: run every benchmark script listed here, one after another, each in its own
process (so one script's memory does not count against the next).  Add yours to SCRIPTS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SCRIPTS = [
    "parse_speed.py",  # HLO text -> Module: MB/s, instructions/s, peak memory
    "paper_section5.py",  # the paper's section V: cart-pole plans run as kernels, checked and timed
    "compile_speed.py",  # compile_jax + explain next to jax.jit's compile (skipped without JAX)
    "wide_concat.py",  # replay and explain of a 100k-operand concatenate: time per operand
]


def main() -> int:
    failed = []
    for script in SCRIPTS:
        print(f"== bench/{script}", flush=True)
        if subprocess.run([sys.executable, str(HERE / script)]).returncode != 0:
            failed.append(script)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

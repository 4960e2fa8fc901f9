#!/usr/bin/env python3
"""`make bench`: the replay table (1k/10k/100k instructions, and 300k with --300k, for the three
pipelines), parse MB/s beside XLA's own parser (when jaxlib is importable here or by
--xla-python), then the other benchmarks, each script in its own process (so one script's
memory does not count against the next).  Every script's line ends with the CPU seconds it
used and the machine's load average before and after it: on a shared machine a figure means
little without them.  hlofuse's cache of results is off for all of them (HLOFUSE_NO_CACHE):
they time the work, not the cache.

    python bench/run.py [--300k] [--xla-python PYTHON] [--only replay_speed,parse_speed]

Add a script to SCRIPTS."""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

SCRIPTS = [
    # the replay table: CPU and wall seconds of each pipeline's replay per module size
    ("replay_speed.py", ["--pipeline", "all"]),
    # HLO text -> Module at 1, 12 and 40 MB: MB/s, instructions/s, CPU seconds, peak memory (the
    # whole process and the parse's own), and XLA's parser on the same files
    ("parse_speed.py", ["--mb", "1,12,40"]),
    # the paper's section V: cart-pole plans run as kernels, checked and timed
    ("paper_section5.py", []),
    # compile_jax + explain next to jax.jit's compile (skipped without JAX)
    ("compile_speed.py", []),
    # replay and explain of a 100k-operand concatenate: time per operand
    ("wide_concat.py", []),
]
SIZES = "1000,10000,100000"


def arguments(script: str, args: list[str], options) -> list[str]:
    if script == "replay_speed.py":
        return [*args, "--sizes", SIZES + (",300000" if options.with_300k else "")]
    if script == "parse_speed.py" and options.xla_python:
        return [*args, "--xla-python", options.xla_python]
    return args


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--300k", dest="with_300k", action="store_true",
                        help="add 300k-instruction modules to the replay table (several more minutes)")
    parser.add_argument("--xla-python", metavar="PYTHON",
                        help="a Python with jaxlib, to time XLA's parser beside hlofuse's (default: this one, "
                             "when it has jaxlib)")
    parser.add_argument("--only", metavar="NAMES", help="only these scripts (comma-separated, without .py)")
    options = parser.parse_args(argv)
    only = {n.strip().removesuffix(".py") for n in options.only.split(",")} if options.only else None
    env = {**os.environ, "HLOFUSE_NO_CACHE": "1"}
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average {load()} (1/5/15 min)",
          flush=True)
    failed = []
    for script, args in SCRIPTS:
        if only is not None and script.removesuffix(".py") not in only:
            continue
        print(f"== bench/{script}", flush=True)
        before, start, load_before = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter(), load()
        code = subprocess.run([sys.executable, str(HERE / script), *arguments(script, args, options)],
                              env=env).returncode
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        print(f"-- bench/{script}: {time.perf_counter() - start:.1f} s wall, {cpu:.1f} s CPU; load average "
              f"{load_before} before, {load()} after" + ("" if code == 0 else f"; exit status {code}"), flush=True)
        if code != 0:
            failed.append(script)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

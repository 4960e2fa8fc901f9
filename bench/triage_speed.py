#!/usr/bin/env python3
"""How long `hlofuse explain` (table, JSON, HTML) and `hlofuse render` take on large inputs:
the largest sample dumps, the transformer training steps of bench/triage_programs.py (when
compiled into bench/out/triage/) and generated modules of bench/replay_speed.py (before
fusion, so explain replays them).

Each command runs as a user runs it, in a fresh process (wall-clock seconds, Python's start
included), `--repeat` times; the table gives the median.  `render --dot` writes the DOT source
without running Graphviz, so render minus render --dot is Graphviz's share.

    python bench/triage_speed.py [--repeat 3] [--only NAME] [--sizes 10000] [--commands explain,render]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out" / "triage"

INPUTS = [
    ("cpu/cartpole_d_unroll10", REPO / "sample_dumps" / "cpu" / "cartpole_d_unroll10"),
    ("gpu-current-rtx2080ti/cartpole_a_rng", REPO / "sample_dumps" / "gpu-current-rtx2080ti" / "cartpole_a_rng"),
    ("h100 transformer_train_adam", OUT / "h100_sxm" / "transformer_train_adam"),
    ("cpu transformer_train_adam", OUT / "cpu" / "transformer_train_adam"),
    ("h100 transformer_train_adam_deep", OUT / "h100_sxm" / "transformer_train_adam_deep"),
]

COMMANDS = {
    "explain": lambda src, tmp: ["explain", src],
    "explain --json": lambda src, tmp: ["explain", src, "--json"],
    "explain --html": lambda src, tmp: ["explain", src, "--html", str(Path(tmp) / "r.html")],
    "render": lambda src, tmp: ["render", src, "-o", str(Path(tmp) / "r.svg")],
    "render --dot": lambda src, tmp: ["render", src, "-o", str(Path(tmp) / "r.dot"), "--dot"],
}


def generated(size: int, pipeline: str) -> Path:
    """A generated module before fusion of about `size` instructions (bench/replay_speed.py)."""
    sys.path.insert(0, str(HERE))
    import replay_speed

    path = OUT / "generated" / f"{pipeline}_{size}.hlo"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(replay_speed.generate_for(pipeline, size))
    return path


def run(args: list[str], extra: list[str], code: Path = REPO) -> tuple[float, int]:
    env = dict(os.environ, PYTHONPATH=str(code), COLUMNS="160")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "hlofuse", *args, *extra], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, env=env, cwd=code)
    return time.perf_counter() - start, done.returncode


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", action="append", help="inputs whose name contains this (or is this, with --exact)")
    ap.add_argument("--exact", action="store_true", help="--only names inputs exactly")
    ap.add_argument("--code", default=str(REPO),
                    help="the checkout whose hlofuse runs (e.g. an older commit's, to compare back to back)")
    ap.add_argument("--sizes", default="10000", help="generated module sizes (comma-separated; '' for none)")
    ap.add_argument("--commands", default=",".join(COMMANDS), help="which commands (comma-separated)")
    ap.add_argument("--extra", default="", help="options added to every command (e.g. --no-predict)")
    args = ap.parse_args(argv)
    inputs = [(n, p) for n, p in INPUTS if p.exists()]
    for size in [int(s) for s in args.sizes.split(",") if s]:
        for pipeline in ("priority", "cpu"):
            inputs.append((f"generated {pipeline} {size}", generated(size, pipeline)))
    if args.only:
        inputs = [(n, p) for n, p in inputs if any(o == n if args.exact else o in n for o in args.only)]
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    extra = args.extra.split()
    print(f"load average {os.getloadavg()[0]:.1f}; median of {args.repeat} (wall-clock s, fresh process)")
    print(f"{'input':40s} " + " ".join(f"{c:>15s}" for c in commands))
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in inputs:
            cells = []
            for command in commands:
                cmd = COMMANDS[command](str(path), tmp)
                if command.startswith("render") and "--no-predict" in extra:
                    cmd_extra = [e for e in extra if e != "--no-predict"]
                else:
                    cmd_extra = extra
                times, codes = [], set()
                for _ in range(args.repeat):
                    t, code = run(cmd, cmd_extra, Path(args.code))
                    times.append(t)
                    codes.add(code)
                cell = f"{statistics.median(times):.2f}"
                if codes != {0}:
                    cell += f" (exit {sorted(codes)})"
                cells.append(cell)
            print(f"{name:40s} " + " ".join(f"{c:>15s}" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compile bench/explain_programs.py with real XLA:GPU into dump folders for
bench/explain_agreement.py.

Needs jax 0.10.2 with the CUDA plugin (no GPU: XLA:GPU compiles for a described device, a
GpuTargetConfigProto from hlofuse/data/gpu_specs/, through JAX's deviceless topology API, as
sample_dumps/generate.py does).  Each program is compiled in a fresh process (XLA numbers its
module 1 and the folder holds that program alone) with `--xla_dump_hlo_pass_re` matching the
GPU fusion passes, so the folder has the snapshot before fusion, the snapshots after each
fusion pass, XLA's priority-fusion log and the after_optimizations module.  Other files are
dropped.

    /work/main/.venv-samples-current/bin/python bench/explain_compile.py               # all, both GPUs
    ... bench/explain_compile.py --gpu h100_sxm --only moe_train --force
    ... bench/explain_compile.py --out /tmp/dumps
    ... bench/explain_compile.py --gpu cpu            # XLA:CPU instead (no fusion log; unknowns only)

Folders: OUT/<gpu>/<program>/ (default OUT: bench/out/explain, ignored by git).  A folder that
already holds an after_optimizations file is kept unless --force.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SPEC_DIR = REPO / "hlofuse" / "data" / "gpu_specs"
DEFAULT_OUT = HERE / "out" / "explain"
DEFAULT_GPUS = ("h100_sxm", "a100_sxm_80")
FUSION_PASSES = {"gpu": ("variadic-op-splitter", "sort-iota-fusion", "priority-fusion", "multi_output_fusion"),
                 "cpu": ("fusion", "fusion-wrapper")}


def pass_re(platform: str) -> str:
    return "^(" + "|".join(re.escape(p) for p in FUSION_PASSES[platform]) + ")$"
#: The files kept: XLA's stage files, per-pass snapshots and the priority-fusion log.
KEEP = re.compile(r"\.(before_optimizations|[\w.]*after_optimizations|priority_fusion_dump|"
                  r"\d{4}\.[\w-]+\.after_[\w-]+\.before_[\w-]+)\.txt$")


def compile_child(program: str, gpu: str, dump_dir: str, programs: str = "explain_programs") -> None:
    """In the child process: trace, lower and compile one program of the module `programs`
    (a file of bench/) for `gpu`."""
    import importlib

    import jax
    from jax.experimental import topologies

    sys.path.insert(0, str(HERE))
    P = importlib.import_module(programs)

    prog = P.BY_NAME[program]
    jax.config.update("jax_hlo_source_file_canonicalization_regex", "^" + re.escape(str(REPO) + "/"))
    for key, value in prog.jax_config.items():
        jax.config.update(key, value)
    fn = types.FunctionType(prog.fn.__code__, prog.fn.__globals__, prog.name, prog.fn.__defaults__,
                            prog.fn.__closure__)
    leaf = {"is_leaf": lambda x: isinstance(x, P.Arg)}
    if gpu == "cpu":
        args = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), prog.args, **leaf)
        lowered = jax.jit(fn).trace(*args).lower()
    else:
        spec = (SPEC_DIR / f"{gpu}.txtpb").read_text()
        topo = topologies.get_topology_desc(platform="cuda", target_config=spec, topology="1x1x1")
        sharding = jax.sharding.SingleDeviceSharding(topo.devices[0])
        args = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding),
                                      prog.args, **leaf)
        lowered = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
    platform = "cpu" if gpu == "cpu" else "gpu"
    lowered.compile(compiler_options={"xla_dump_to": dump_dir, "xla_dump_hlo_pass_re": pass_re(platform)})
    print(json.dumps({"jax": jax.__version__}))


def program_names(programs: str = "explain_programs") -> list[str]:
    code = (f"import sys, json; sys.path.insert(0, {str(HERE)!r}); import {programs} as P; "
            "print(json.dumps([p.name for p in P.PROGRAMS]))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    if res.returncode != 0:
        sys.exit(res.stderr)
    return json.loads(res.stdout.strip().splitlines()[-1])


def _env() -> dict:
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"  # no GPU here: XLA:GPU compiles for the described device
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env["PYTHONHASHSEED"] = "0"
    return env


def compile_one(program: str, gpu: str, dest: Path, programs: str = "explain_programs") -> str | None:
    """Compile into `dest` (replaced); None on success, else the error's last line."""
    with tempfile.TemporaryDirectory(prefix="xla-dump-") as tmp:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", program, "--gpu", gpu, "--out", tmp,
               "--programs", programs]
        res = subprocess.run(cmd, capture_output=True, text=True, env=_env())
        if res.returncode != 0:
            lines = res.stderr.strip().splitlines()
            return lines[-1] if lines else f"exit code {res.returncode}"
        mine = [n for n in os.listdir(tmp) if f".jit_{program}." in n and KEEP.search(n)]
        if not any("after_optimizations" in n for n in mine):
            return "XLA wrote no after_optimizations file"
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for n in mine:
            shutil.copyfile(Path(tmp) / n, dest / n)
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="dump root (default: bench/out/explain, or bench/out/triage "
                                                "for --programs triage_programs)")
    ap.add_argument("--programs", default="explain_programs",
                    help="the module of bench/ holding PROGRAMS (explain_programs, triage_programs)")
    ap.add_argument("--gpu", action="append",
                    help=f"GPU spec name, or cpu for XLA:CPU (default: {', '.join(DEFAULT_GPUS)})")
    ap.add_argument("--only", action="append", help="only these programs")
    ap.add_argument("--force", action="store_true", help="recompile folders that exist")
    ap.add_argument("--child", metavar="PROGRAM", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        compile_child(args.child, args.gpu[0], args.out, args.programs)
        return 0
    if args.out is None:
        args.out = str(DEFAULT_OUT if args.programs == "explain_programs" else HERE / "out" / "triage")
    names = program_names(args.programs)
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            sys.exit(f"unknown programs: {', '.join(unknown)}")
        names = [n for n in names if n in args.only]
    failures = []
    for gpu in args.gpu or DEFAULT_GPUS:
        for name in names:
            dest = Path(args.out) / gpu / name
            if not args.force and dest.is_dir() and any("after_optimizations" in n for n in os.listdir(dest)):
                continue
            start = time.time()
            error = compile_one(name, gpu, dest, args.programs)
            status = "ok" if error is None else f"FAILED: {error}"
            print(f"[{gpu}] {name}: {status} ({time.time() - start:.1f}s)", flush=True)
            if error is not None:
                failures.append((gpu, name, error))
    for gpu, name, error in failures:
        print(f"failed: {gpu} {name}: {error}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

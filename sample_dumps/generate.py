#!/usr/bin/env python3
"""Regenerate the real XLA dumps in sample_dumps/ for one build.

    python sample_dumps/generate.py --build gpu-current   # jax 0.10.2 + CUDA plugin
    python sample_dumps/generate.py --build gpu-legacy    # jax 0.4.35 + CUDA plugin
    python sample_dumps/generate.py --build cpu           # jax 0.10.2, XLA:CPU
    python sample_dumps/generate.py --build cpu-noynn     # as cpu, no YNNPACK library fusions

Run it with the virtualenv of the build (regenerate.sh does all of this). No GPU is needed:
XLA:GPU compiles for a described device (a GpuTargetConfigProto text from
hlofuse/data/gpu_specs/) through JAX's deviceless topology API.

Every program is compiled in a fresh subprocess (so XLA numbers its module 1, jax.config
changes stay local and the dump directory holds that program alone); then the dump is pruned
to XLA's own files around the fusion passes, kept under the names XLA gave them, and
MANIFEST.json is updated with this build's entries. `--explore DIR` instead keeps the whole
dump of a permissive regex, to find pass names.
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

# The XLA commit each jaxlib was built from: jaxlib/version.py's _git_hash is the jax commit
# (tags jax-v0.10.2 and jax-v0.4.35); that commit's third_party/xla/revision.bzl (0.10.2) or
# third_party/xla/workspace.bzl (0.4.35) names XLA_COMMIT.
XLA_COMMITS = {
    "0.10.2": "5a9e73cbd92530cac2ac36f4736a774b2412afe2",
    "0.4.35": "76da730179313b3bebad6dea6861768421b7358c",
}

# GPU short name -> description file (the paper's RTX 2080 Ti and XLA's H100 SXM).
GPUS = {"h100": "h100_sxm.txtpb", "rtx2080ti": "rtx2080ti.txtpb"}

# The fusion passes around which snapshots are kept, per build.
CURRENT_FUSION_PASSES = ["variadic-op-splitter", "priority-fusion", "multi_output_fusion"]
LEGACY_FUSION_PASSES = [
    "variadic-op-splitter",
    "fusion",
    "fusion_merger",
    "multi_output_fusion",
    "horizontal_loop_fusion",
    "horizontal_input_fusion",
]
CPU_FUSION_PASSES = ["fusion"]


def _pass_re(names):
    return "^(" + "|".join(re.escape(n) for n in names) + ")$"


BUILDS = {
    "gpu-current": {
        "jax": "0.10.2",
        "platform": "cuda",
        "gpus": ["h100", "rtx2080ti"],
        "extra_gpu": "h100",
        "fusion_passes": CURRENT_FUSION_PASSES,
        "fusion_pipelines": ["fusion"],
        "omit_after": ["priority-fusion"],
        "options": {},
    },
    "gpu-legacy": {
        "jax": "0.4.35",
        "platform": "cuda",
        "gpus": ["rtx2080ti", "h100"],
        "extra_gpu": "rtx2080ti",
        "fusion_passes": LEGACY_FUSION_PASSES,
        "fusion_pipelines": ["fusion", "horizontal_fusion"],
        "omit_after": ["fusion_merger", "multi_output_fusion"],
        # The paper's GPU keeps every per-pass snapshot; the H100 only the stage files.
        "all_snapshots_gpu": "rtx2080ti",
        # The legacy pipeline (fusion, fusion, fusion_merger, multi_output_fusion, then the
        # horizontal fusions). Autotuning needs a real GPU; level 0 uses XLA's defaults.
        "options": {"xla_gpu_enable_priority_fusion": False, "xla_gpu_autotune_level": 0},
    },
    "cpu": {
        "jax": "0.10.2",
        "platform": "cpu",
        "gpus": [None],
        "fusion_passes": CPU_FUSION_PASSES,
        "fusion_pipelines": None,
        "omit_after": [],
        "options": {},
    },
    "cpu-noynn": {
        "jax": "0.10.2",
        "platform": "cpu",
        "gpus": [None],
        "fusion_passes": CPU_FUSION_PASSES,
        "fusion_pipelines": None,
        "omit_after": [],
        # An empty list of YNNPACK fusion types: no library fusions on XLA:CPU.
        "options": {"xla_cpu_experimental_ynn_fusion_type": ""},
        # A program whose files come out byte-identical to the cpu build's (no dot, no
        # reduction YNNPACK would take) is a symbolic link to that folder, not a second copy.
        "link_identical_to": "cpu",
    },
}


def folder_name(build: str, gpu: str | None) -> str:
    return build if gpu is None else f"{build}-{gpu}"


def programs_for(build: str, gpu: str | None):
    import programs as P  # noqa: E402  (imports jax)

    cfg = BUILDS[build]
    out = []
    for p in P.PROGRAMS:
        if p.gpu_only and cfg["platform"] != "cuda":
            continue
        if p.group == "extra" and gpu is not None and gpu != cfg["extra_gpu"]:
            continue
        out.append(p)
    return out


def program_names_for(build: str, gpu: str | None) -> list[str]:
    """Program names without importing JAX in this process (asks a child once)."""
    code = (
        "import sys, json; sys.path.insert(0, %r); import generate as g; "
        "print(json.dumps([p.name for p in g.programs_for(%r, %r)]))" % (str(HERE), build, gpu)
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    if res.returncode != 0:
        sys.exit(res.stderr)
    return json.loads(res.stdout.strip().splitlines()[-1])


def _env():
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"  # no GPU here: XLA:GPU compiles for the described device
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env["PYTHONHASHSEED"] = "0"
    return env


# ---------------------------------------------------------------------------------------------
# Child: compile one program into a dump directory
# ---------------------------------------------------------------------------------------------


def compile_one(build: str, gpu: str | None, program: str, dump_dir: str, pass_re: str) -> dict:
    import jax

    import programs as P

    cfg = BUILDS[build]
    if jax.__version__ != cfg["jax"]:
        sys.exit(f"build {build} wants jax {cfg['jax']}, this interpreter has {jax.__version__}")
    prog = P.BY_NAME[program]
    # Source paths in the dumps' metadata: relative to the repository root, not this machine.
    jax.config.update("jax_hlo_source_file_canonicalization_regex", "^" + re.escape(str(REPO) + "/"))
    for key, value in prog.jax_config.items():
        jax.config.update(key, value)

    # A copy of the function named after the program: the HLO module is called jit_<program>.
    fn = prog.fn
    fn = types.FunctionType(fn.__code__, fn.__globals__, prog.name, fn.__defaults__, fn.__closure__)

    options = {"xla_dump_to": dump_dir, "xla_dump_hlo_pass_re": pass_re, **cfg["options"]}
    how = ""
    if cfg["platform"] == "cuda":
        from jax.experimental import topologies

        spec = (SPEC_DIR / GPUS[gpu]).read_text()
        topo = topologies.get_topology_desc(platform="cuda", target_config=spec, topology="1x1x1")
        sharding = jax.sharding.SingleDeviceSharding(topo.devices[0])
        args = [jax.ShapeDtypeStruct(s, d, sharding=sharding) for s, d in prog.args]
        try:
            lowered = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
            how = 'jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",)).compile(...)'
        except (AttributeError, TypeError):
            lowered = jax.jit(fn).lower(*args)
            how = "jax.jit(f).lower(*args).compile(...)"
    else:
        args = [jax.ShapeDtypeStruct(s, d) for s, d in prog.args]
        lowered = jax.jit(fn).trace(*args).lower()
        how = "jax.jit(f).trace(*args).lower().compile(...)"
    lowered.compile(compiler_options=options)
    return {"api": how, "options": options}


# ---------------------------------------------------------------------------------------------
# Parent: prune a dump directory to the kept stages
# ---------------------------------------------------------------------------------------------

# The snapshot written right after priority-fusion (current) or fusion_merger and
# multi_output_fusion (legacy), before cse and dce run, still holds the fused computations the
# pass built and then discarded, and the duplicates cse removes (several MB for the cart-pole
# loops). It is not kept: the next snapshot (after_dce.before_multi_output_fusion, or the
# horizontal_fusion pipeline's first) holds the module the pass produced, cleaned up.
OMIT_REASON = (
    "not kept: written before cse and dce, it holds what the pass left unreachable or "
    "duplicated (several MB for the cart-pole loops); the next kept snapshot holds the "
    "module the pass produced, after cse and dce"
)
LEAN_REASON = (
    "not kept: intermediate snapshot on the era's second GPU; the per-pass snapshots are "
    "kept for the paper's GPU (rtx2080ti) of this era"
)

SNAPSHOT_RE = re.compile(
    r"^module_(?P<mod>\d+)\.(?P<name>[^.]+)\.(?P<seq>\d{4})\.(?P<pipeline>[^.]+)"
    r"\.after_(?P<after>[^.]+)\.before_(?P<before>[^.]+)\.txt$"
)


def select_files(dump_dir: Path, module_name: str, build: str, lean: bool = False) -> dict:
    """Choose the files to keep from one program's dump directory. Deterministic.

    Kept: before_optimizations, the per-pass snapshots of the build's fusion pipelines,
    after_optimizations and the priority fusion log. A snapshot byte-identical to the one
    kept just before it (a pass that changed nothing) is not kept twice: the manifest lists it
    with `same_as`, the file that holds the same module text.
    """
    names = sorted(os.listdir(dump_dir))
    mine = [n for n in names if re.match(r"^module_\d+\.%s\." % re.escape(module_name), n)]
    mods = sorted({n.split(".")[0] for n in mine if n.endswith(".before_optimizations.txt")})
    if len(mods) != 1:
        raise RuntimeError(f"expected one module {module_name} in {dump_dir}, found {mods}")
    prefix = mods[0] + "." + module_name + "."
    mine = [n for n in mine if n.startswith(prefix)]

    def one(pattern):
        found = [n for n in mine if re.fullmatch(re.escape(prefix) + pattern, n)]
        if len(found) > 1:
            raise RuntimeError(f"several files match {pattern}: {found}")
        return found[0] if found else None

    cfg = BUILDS[build]
    passes = set(cfg["fusion_passes"])
    pipelines = cfg["fusion_pipelines"]
    found = []
    for n in mine:
        m = SNAPSHOT_RE.match(n)
        if not m or not (m["after"] in passes or m["before"] in passes):
            continue
        if pipelines is not None and m["pipeline"] not in pipelines:
            continue
        found.append((int(m["seq"]), n, m.groupdict()))
    found.sort()
    snapshots, last_kept, last_text = [], None, None
    for _, n, g in found:
        text = (dump_dir / n).read_bytes()
        entry = {"file": n, "pipeline": g["pipeline"], "after_pass": g["after"],
                 "before_pass": g["before"]}
        if g["after"] in cfg["omit_after"] and g["before"] == "cse":
            entry["omitted"] = OMIT_REASON
        elif text == last_text:
            entry["same_as"] = last_kept
        else:
            last_kept, last_text = n, text
        snapshots.append(entry)

    def held(entry):
        return entry.get("same_as", entry["file"])

    before = one(r"before_optimizations\.txt")
    after = one(r"(sm_[0-9a-z.]+_gpu_|cpu_)?after_optimizations\.txt")
    pfd = one(r"priority_fusion_dump\.txt")
    if before is None or after is None:
        raise RuntimeError(f"missing before/after_optimizations for {module_name} in {dump_dir}")
    before_fusion = next((held(e) for e in snapshots if e["before_pass"] in passes), None)
    after_fusion = None
    for e in snapshots:  # the snapshot written right after the last fusion pass that ran
        if e["after_pass"] in passes and "omitted" not in e:
            after_fusion = held(e)
    stages = {before_fusion, after_fusion}
    if lean:  # stage files only: drop the intermediate snapshots
        for e in snapshots:
            if "omitted" in e or e.get("same_as", e["file"]) in stages:
                continue
            e.pop("same_as", None)
            e["omitted"] = LEAN_REASON
    return {
        "module": mods[0] + "." + module_name,
        "before_optimizations": before,
        "before_fusion": before_fusion,
        "after_fusion": after_fusion,
        "after_optimizations": after,
        "priority_fusion_dump": pfd,
        "snapshots": snapshots,
        "keep": sorted({before, after, *([pfd] if pfd else []),
                        *(e["file"] for e in snapshots
                          if "same_as" not in e and "omitted" not in e)}),
    }


def run_build(build: str, out_root: Path, only: list[str] | None, gpus: list[str] | None):
    import jax  # only for the version check and the manifest

    cfg = BUILDS[build]
    if jax.__version__ != cfg["jax"]:
        sys.exit(f"build {build} wants jax {cfg['jax']}, this interpreter has {jax.__version__}")
    pass_re = _pass_re(cfg["fusion_passes"])
    manifest_path = out_root / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    entries = {(e["folder"], e["program"]): e for e in manifest.get("programs", [])}
    versions = _versions()
    failures = []
    for gpu in cfg["gpus"]:
        if gpus and gpu not in gpus:
            continue
        folder = folder_name(build, gpu)
        names = program_names_for(build, gpu)
        if only:
            names = [n for n in names if n in only]
        else:
            # a full run of a folder owns it: programs no longer defined disappear
            if (out_root / folder).exists():
                shutil.rmtree(out_root / folder)
            entries = {k: v for k, v in entries.items() if k[0] != folder}
        for name in names:
            t0 = time.time()
            with tempfile.TemporaryDirectory(prefix="xla-dump-") as tmp:
                cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--build", build,
                       "--program", name, "--dump-dir", tmp, "--pass-re", pass_re]
                if gpu:
                    cmd += ["--gpu", gpu]
                res = subprocess.run(cmd, capture_output=True, text=True, env=_env())
                if res.returncode != 0:
                    tail = "\n".join(res.stderr.strip().splitlines()[-15:])
                    print(f"[{folder}] {name}: FAILED\n{tail}", flush=True)
                    failures.append((folder, name, tail.splitlines()[-1] if tail else "?"))
                    continue
                info = json.loads(res.stdout.strip().splitlines()[-1])
                lean = cfg.get("all_snapshots_gpu") not in (None, gpu)
                sel = select_files(Path(tmp), "jit_" + name, build, lean)
                dest = out_root / folder / name
                if dest.is_symlink():
                    dest.unlink()
                elif dest.exists():
                    shutil.rmtree(dest)
                dest.mkdir(parents=True)
                keep = sel["keep"]
                for n in keep:
                    shutil.copyfile(Path(tmp) / n, dest / n)
            same_as = None
            twin = cfg.get("link_identical_to")
            if twin and _same_tree(dest, out_root / twin / name):
                shutil.rmtree(dest)
                os.symlink(os.path.join("..", twin, name), dest)
                same_as = f"{twin}/{name}"
            opts = {k: v for k, v in info["options"].items() if k != "xla_dump_to"}
            entries[(folder, name)] = {
                "folder": folder,
                "path": f"{folder}/{name}",
                "build": build,
                "gpu": gpu,
                "gpu_spec": f"hlofuse/data/gpu_specs/{GPUS[gpu]}" if gpu else None,
                "platform": cfg["platform"],
                "program": name,
                **_prog_meta(name),
                "jax_version": versions,
                "compiler_options": opts,
                "api": info["api"],
                "module": sel["module"],
                "same_as": same_as,
                "files": {k: sel[k] for k in ("before_optimizations", "before_fusion",
                                              "after_fusion", "after_optimizations",
                                              "priority_fusion_dump")},
                "snapshots": sel["snapshots"],
            }
            how = f"link to {same_as}" if same_as else f"kept {len(keep)} files"
            print(f"[{folder}] {name}: {how} ({time.time() - t0:.1f}s)", flush=True)
    manifest.setdefault("builds", {})[build] = {
        "jax_version": versions,
        "xla_commit": XLA_COMMITS.get(versions.get("jaxlib")),
        "platform": cfg["platform"],
        "gpus": cfg["gpus"],
        "xla_dump_hlo_pass_re": pass_re,
        "compiler_options": cfg["options"],
        "regenerate": f"python sample_dumps/generate.py --build {build}",
    }
    manifest["about"] = (
        "Real XLA dumps; see README.md. Each program entry names its kept files by stage; "
        "'snapshots' lists every per-pass snapshot XLA wrote around the fusion passes, "
        "with 'same_as' (byte-identical to an earlier kept one) or 'omitted' (not kept, why)."
    )
    manifest["programs"] = [entries[k] for k in sorted(entries)]
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if failures:
        print("failures:")
        for f in failures:
            print("  ", *f)
    return failures


def _same_tree(a: Path, b: Path) -> bool:
    """Both folders hold the same file names with the same bytes."""
    if not b.is_dir() or b.is_symlink():
        return False
    names = sorted(os.listdir(a))
    return names == sorted(os.listdir(b)) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names)


def _prog_meta(name):
    import programs as P

    p = P.BY_NAME[name]
    return {"variant": p.variant, "description": p.description, "group": p.group,
            "jax_config": dict(p.jax_config)}


def _versions() -> dict:
    from importlib import metadata

    out = {}
    for dist in ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    try:
        import jaxlib.version as jv

        out["jaxlib_git_hash"] = getattr(jv, "_git_hash", None)
    except ImportError:
        pass
    return out


def explore(build: str, gpu: str | None, program: str, dump_dir: str, pass_re: str):
    """Compile one program with a permissive pass regex and keep everything (no pruning)."""
    os.makedirs(dump_dir, exist_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--build", build,
           "--program", program, "--dump-dir", dump_dir, "--pass-re", pass_re]
    if gpu:
        cmd += ["--gpu", gpu]
    res = subprocess.run(cmd, env=_env())
    return res.returncode


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, choices=sorted(BUILDS))
    ap.add_argument("--gpu", choices=sorted(GPUS), action="append",
                    help="limit to this GPU (repeatable); default: the build's GPUs")
    ap.add_argument("--program", action="append", help="limit to this program (repeatable)")
    ap.add_argument("--out", default=str(HERE), help="root of the dump tree (default: here)")
    ap.add_argument("--explore", metavar="DIR", help="keep the full dump of --pass-re in DIR")
    ap.add_argument("--pass-re", default=".*")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dump-dir", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    if a.child:
        gpu = a.gpu[0] if a.gpu else None
        info = compile_one(a.build, gpu, a.program[0], a.dump_dir, a.pass_re)
        print(json.dumps(info))
        return 0
    if a.explore:
        gpu = a.gpu[0] if a.gpu else BUILDS[a.build]["gpus"][0]
        return explore(a.build, gpu, a.program[0], a.explore, a.pass_re)
    failures = run_build(a.build, Path(a.out), a.program, a.gpu)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

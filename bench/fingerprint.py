#!/usr/bin/env python3
"""A fingerprint of what the replay and the explainer decide, to show that a speed change
changes nothing else: a SHA-256 of `fuse --json`'s payload (kernels and every decision) and of
`explain --json`'s, per input, over

  * every sample dump folder, replayed from right before fusion with the pipeline the dump
    shows, and GPU dumps also with the other GPU pipeline (legacy <-> priority);
  * the generated modules of bench/replay_speed.py (1k and 10k instructions; `--large` adds
    100k) for the three pipelines, and the GPU ones for an H100 too (Triton tiling);
  * `--dump DIR` (repeatable): a dump folder of yours (bench/transformer_stack.py --keep DIR).

    python bench/fingerprint.py -o before.json            # the code on PYTHONPATH (or this checkout)
    python bench/fingerprint.py -o after.json --compare before.json

`--compare` prints every input whose hash differs (with the kernel and decision counts) and
exits 1 if any does.  Runs the inputs in one process; a 10k priority replay takes seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.append(str(REPO))  # after PYTHONPATH: the code measured is the one the caller names
sys.path.insert(0, str(HERE))


def _digest(payload) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _fuse_payload(result) -> dict:
    """What `hlofuse fuse --json` prints of a replay (the printed fused module included)."""
    from hlofuse.printer import print_module

    payload = result.to_dict()
    payload["fused_module"] = hashlib.sha256(print_module(result.module).encode()).hexdigest()
    return payload


def sample_folders() -> list[Path]:
    out = []
    root = REPO / "sample_dumps"
    for build in sorted(p for p in root.iterdir() if p.is_dir()):
        out += sorted(p for p in build.iterdir() if p.is_dir())
    return out


def fingerprint_folder(folder: Path, explain: bool) -> dict:
    from hlofuse.api import explain_resolved, replay_options
    from hlofuse.inputs import EXPLAIN, REPLAY, resolve
    from hlofuse.pipeline import replay

    out = {}
    resolved = resolve(str(folder), need=REPLAY)
    pipelines = [resolved.pipeline]
    if resolved.backend == "gpu":
        pipelines.append("legacy" if resolved.pipeline == "priority" else "priority")
    base = replay_options(resolved, None)
    from dataclasses import replace

    for pipeline in pipelines:
        result = replay(resolved.module, replace(base, pipeline=pipeline))
        out[f"{folder.relative_to(REPO)}:fuse:{pipeline}"] = _entry(_fuse_payload(result), result)
    if explain:
        resolved = resolve(str(folder), need=EXPLAIN)
        report = explain_resolved(resolved)
        payload = report.to_dict()
        out[f"{folder.relative_to(REPO)}:explain"] = {"sha": _digest(payload), "kernels": len(payload["kernels"]),
                                                      "decisions": len(payload["boundaries"])}
    return out


def _entry(payload: dict, result) -> dict:
    return {"sha": _digest(payload), "kernels": len(result.kernels), "decisions": len(result.decisions)}


def fingerprint_generated(sizes: list[int]) -> dict:
    import hlofuse
    import replay_speed as R
    from hlofuse.pipeline import Options, replay

    out = {}
    for size in sizes:
        for pipeline, opts in R.PIPELINES.items():
            module = hlofuse.loads(R.generate_for(pipeline, size))
            variants = [("", opts)]
            if opts["backend"] == "gpu":
                variants.append(("@h100", {**opts, "gpu": "h100_sxm"}))
            for suffix, o in variants:
                result = replay(module, Options(**o))
                out[f"generated:{pipeline}{suffix}:{size}"] = _entry(_fuse_payload(result), result)
    return out


def fingerprint_dump(path: str) -> dict:
    from hlofuse.api import replay_options
    from hlofuse.inputs import REPLAY, resolve
    from hlofuse.pipeline import replay

    resolved = resolve(path, need=REPLAY)
    result = replay(resolved.module, replay_options(resolved, None))
    return {f"dump:{Path(path).name}:fuse:{resolved.pipeline}": _entry(_fuse_payload(result), result)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True, help="write the fingerprint here (JSON)")
    ap.add_argument("--compare", metavar="OLD", help="compare with an earlier fingerprint")
    ap.add_argument("--large", action="store_true", help="also the 100k generated modules")
    ap.add_argument("--no-samples", action="store_true")
    ap.add_argument("--no-explain", action="store_true", help="skip explain's fingerprints")
    ap.add_argument("--dump", action="append", default=[], metavar="DIR")
    ap.add_argument("--generated", default="1000,10000", metavar="SIZES",
                    help="sizes of the generated modules (comma-separated; empty for none)")
    args = ap.parse_args(argv)
    import hlofuse

    start = time.perf_counter()
    prints: dict = {}
    if not args.no_samples:
        for folder in sample_folders():
            prints.update(fingerprint_folder(folder, not args.no_explain))
    sizes = [int(n) for n in args.generated.split(",") if n]
    prints.update(fingerprint_generated(sizes + ([100000] if args.large else [])))
    for path in args.dump:
        prints.update(fingerprint_dump(path))
    whole = _digest(prints)
    report = {"hlofuse": os.path.dirname(hlofuse.__file__), "core": getattr(getattr(hlofuse, "native", None), "active", "python (no compiled core)"),
              "inputs": len(prints), "digest": whole,
              "seconds": round(time.perf_counter() - start, 1), "fingerprints": prints}
    Path(args.output).write_text(json.dumps(report, indent=1, sort_keys=True))
    print(f"{len(prints)} inputs, digest {whole[:16]} ({report['seconds']} s, code from {report['hlofuse']}, "
          f"{report['core']})")
    if args.compare:
        old = json.loads(Path(args.compare).read_text())["fingerprints"]
        differ = [k for k in sorted(set(old) | set(prints)) if old.get(k, {}).get("sha") != prints.get(k, {}).get("sha")]
        for key in differ:
            print(f"DIFFERS {key}: was {old.get(key)}, now {prints.get(key)}")
        print("identical" if not differ else f"{len(differ)} of {len(prints)} differ")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

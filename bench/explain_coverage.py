"""How many kernel boundaries `hlofuse explain` explains with a known rule.

Runs `explain` on every sample dump (sample_dumps/<build>/<program>, the after_optimizations
module) and on every module of the shared parser corpus that contains a fusion (explained as
the fused modules they are), and prints, per group: modules, modules that failed, boundaries,
boundaries left `unknown`, how often our rule agrees with the reason in XLA's own fusion log
(where the dump has one), and who explained them (boundary rules, the pipeline's
explain_boundary, XLA's own log).

    .venv/bin/python bench/explain_coverage.py            # the table
    .venv/bin/python bench/explain_coverage.py --unknown  # also list every unknown boundary
    .venv/bin/python bench/explain_coverage.py --json     # machine-readable
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hlofuse.errors import HlofuseError, HloVerifierError  # noqa: E402
from hlofuse.explain import dump_context, explain  # noqa: E402
from hlofuse.parse import parse_text  # noqa: E402


def shared_dir() -> Path:
    return Path(os.environ.get("HLOFUSE_SHARED", REPO.parent / "shared"))


def sample_inputs():
    root = REPO / "sample_dumps"
    for build in sorted(p for p in root.iterdir() if p.is_dir()):
        for program in sorted(p for p in build.iterdir() if p.is_dir()):
            yield build.name, str(program)


def corpus_inputs():
    folder = shared_dir() / "corpus" / "parser"
    manifest = folder / "MANIFEST.tsv"
    if not manifest.exists():
        return
    with open(manifest, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["expect"] != "ok":
                continue
            path = folder / row["file"]
            text = path.read_text(encoding="utf-8", errors="replace")
            if "fusion(" not in text:
                continue
            yield "corpus/parser", str(path)


def explain_one(group: str, path: str):
    if group.startswith("corpus"):
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        module = parse_text(text, path)
        if not any(i.opcode == "fusion" for _, i in module.instructions()):
            return None
        return explain(module, fused=True)
    dump = dump_context(path)
    text = dump.chosen.path.read_text(encoding="utf-8", errors="replace")
    module = parse_text(text, str(dump.chosen.path))
    return explain(module, dump=dump)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unknown", action="store_true", help="list every boundary left unknown")
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    ap.add_argument("--only", help="only groups whose name contains this")
    args = ap.parse_args(argv)

    rows: dict[str, dict] = defaultdict(lambda: {"modules": 0, "failed": 0, "boundaries": 0, "unknown": 0,
                                                "by": Counter(), "xla": Counter(), "seconds": 0.0})
    unknown_list = []
    failures = []
    invalid = []
    inputs = list(sample_inputs()) + list(corpus_inputs())
    for group, path in inputs:
        if args.only and args.only not in group:
            continue
        row = rows[group]
        start = time.perf_counter()
        try:
            ex = explain_one(group, path)
        except HloVerifierError as err:  # a parser test XLA's verifier rejects: not ours to explain
            invalid.append((group, path, str(err)))
            continue
        except (HlofuseError, Exception) as err:  # noqa: BLE001 - count and report every failure
            row["modules"] += 1
            row["failed"] += 1
            failures.append((group, path, f"{type(err).__name__}: {err}"))
            continue
        finally:
            row["seconds"] += time.perf_counter() - start
        if ex is None:
            continue
        row["modules"] += 1
        row["boundaries"] += len(ex.boundaries)
        row["unknown"] += ex.unknown
        row["by"].update(b.explained_by for b in ex.boundaries)
        row["xla"].update({True: "agree", False: "differ", None: "n/a"}[b.agrees_with_xla]
                          for b in ex.boundaries if b.xla_reason)
        for b in ex.boundaries:
            if b.rule == "unknown":
                unknown_list.append((group, path, f"{b.producer_kernel} -> {b.consumer_kernel or b.consumer}"))

    total = {"modules": 0, "failed": 0, "boundaries": 0, "unknown": 0, "by": Counter(), "xla": Counter(),
             "seconds": 0.0}
    for row in rows.values():
        for k in ("modules", "failed", "boundaries", "unknown", "seconds"):
            total[k] += row[k]
        total["by"].update(row["by"])
        total["xla"].update(row["xla"])

    if args.json:
        out = {g: {**r, "by": dict(r["by"]), "xla": dict(r["xla"])} for g, r in rows.items()}
        out["total"] = {**total, "by": dict(total["by"]), "xla": dict(total["xla"])}
        out["failures"] = [{"group": g, "path": p, "error": e} for g, p, e in failures]
        out["invalid"] = [{"group": g, "path": p, "error": e} for g, p, e in invalid]
        print(json.dumps(out, indent=2))
        return 0

    header = (f"{'group':<24} {'modules':>7} {'failed':>6} {'boundaries':>10} {'unknown':>7} {'known %':>7} "
              f"{'XLA log: agree/differ/n.a.':>27}  explained by")
    print(header)
    print("-" * len(header))
    for group in sorted(rows):
        _print_row(group, rows[group])
    print("-" * len(header))
    _print_row("total", total)
    for group, path, error in failures:
        print(f"FAILED {group} {path}: {error}")
    for group, path, error in invalid:
        print(f"invalid HLO (XLA's verifier rejects it; not counted) {group}: {error}")
    if args.unknown:
        for group, path, edge in unknown_list:
            print(f"unknown  {group}  {Path(path).name}  {edge}")
    return 0


def _print_row(name: str, row: dict) -> None:
    known = row["boundaries"] - row["unknown"]
    pct = f"{100 * known / row['boundaries']:.1f}" if row["boundaries"] else "-"
    by = ", ".join(f"{k} {v}" for k, v in sorted(row["by"].items(), key=lambda kv: -kv[1]))
    xla = row["xla"]
    agreement = f"{xla['agree']}/{xla['differ']}/{xla['n/a']}" if xla else "-"
    print(f"{name:<24} {row['modules']:>7} {row['failed']:>6} {row['boundaries']:>10} {row['unknown']:>7} "
          f"{pct:>7} {agreement:>27}  {by}   ({row['seconds']:.1f}s)")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""How often `hlofuse explain` gives the reason XLA itself logged, on programs nobody tuned it for.

Explains every dump folder that bench/explain_compile.py made (bench/explain_programs.py
compiled by jax 0.10.2 for several GPU specs; default root bench/out/explain/<gpu>/<program>),
as a user would: `hlofuse explain FOLDER` on XLA's after_optimizations module.  For every
kernel boundary where XLA's own fusion log (`*.priority_fusion_dump.txt`) gives a reason,
the boundary's `agrees_with_xla` says whether our primary reason is XLA's; this script counts
them and lists the disagreements by (our rule, XLA's reason), and the boundaries left `unknown`.

    /work/main/.venv-samples-current/bin/python bench/explain_compile.py   # once: the dumps
    .venv/bin/python bench/explain_agreement.py                           # the figure
    .venv/bin/python bench/explain_agreement.py --verbose                 # every disagreement
    .venv/bin/python bench/explain_agreement.py --json > agreement.json
    .venv/bin/python bench/explain_agreement.py --root DIR --only moe_train

Agreement = boundaries whose reason agrees with XLA's / boundaries with a reason in XLA's log
(a boundary XLA logged but we cannot compare counts against us).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEFAULT_ROOT = REPO / "bench" / "out" / "explain"


def folders(root: Path, only: list[str] | None, gpus: list[str] | None):
    for gpu_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if gpus and gpu_dir.name not in gpus:
            continue
        for program in sorted(p for p in gpu_dir.iterdir() if p.is_dir()):
            if only and program.name not in only:
                continue
            yield gpu_dir.name, program


def explain_folder(folder: Path):
    from hlofuse.explain import dump_context, explain
    from hlofuse.parse import parse_text

    dump = dump_context(str(folder))
    module = parse_text(dump.chosen.path.read_text(encoding="utf-8", errors="replace"), str(dump.chosen.path))
    gpu = folder.parent.name
    return explain(module, dump=dump, gpu=None if gpu == "cpu" else gpu)


_NUMBERS = re.compile(r"\d+(\.\d+)?")


def short_reason(text: str | None) -> str:
    """XLA's reason with the numbers and names blurred, so equal reasons group together."""
    if text is None:
        return "-"
    text = _NUMBERS.sub("N", text.strip())
    return text if len(text) <= 90 else text[:87] + "..."


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(DEFAULT_ROOT), help="dump root of bench/explain_compile.py")
    ap.add_argument("--only", action="append", help="only these programs")
    ap.add_argument("--gpu", action="append", help="only these GPU folders")
    ap.add_argument("--verbose", action="store_true", help="list every disagreement and unknown boundary")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    args = ap.parse_args(argv)
    root = Path(args.root)
    if not root.is_dir():
        sys.exit(f"{root}: no dumps; run bench/explain_compile.py first (with jax 0.10.2)")

    per_gpu: dict[str, Counter] = defaultdict(Counter)
    pairs: Counter = Counter()
    by_rule: Counter = Counter()
    listing: list[dict] = []
    failures: list[tuple[str, str, str]] = []
    seconds: dict[str, float] = {}
    for gpu, folder in folders(root, args.only, args.gpu):
        start = time.perf_counter()
        try:
            ex = explain_folder(folder)
        except Exception as err:  # noqa: BLE001 - count and report every failure
            failures.append((gpu, folder.name, f"{type(err).__name__}: {err}"))
            continue
        seconds[f"{gpu}/{folder.name}"] = time.perf_counter() - start
        row = per_gpu[gpu]
        row["programs"] += 1
        row["boundaries"] += len(ex.boundaries)
        row["unknown"] += ex.unknown
        for b in ex.boundaries:
            if b.rule == "unknown":
                listing.append({"gpu": gpu, "program": folder.name, "kind": "unknown",
                                "edge": f"{b.producer_kernel} -> {b.consumer_kernel or b.consumer}"})
            if b.xla_reason is None:
                continue
            row["with_xla_reason"] += 1
            verdict = {True: "agree", False: "differ", None: "not_compared"}[b.agrees_with_xla]
            row[verdict] += 1
            if b.agrees_with_xla and "xla_logged_for_user" in (b.facts or {}):
                row["agree_via_other_user"] += 1  # XLA's line names another user of the producer
            by_rule[(b.rule, verdict)] += 1
            if b.agrees_with_xla is not True:
                pairs[(b.rule, short_reason(b.xla_reason))] += 1
                listing.append({"gpu": gpu, "program": folder.name, "kind": verdict,
                                "edge": f"{b.producer} ({b.producer_kernel}) -> {b.consumer} "
                                        f"({b.consumer_kernel or '-'})",
                                "rule": b.rule, "decided_in": getattr(b, "decided_in", None),
                                "reason": b.reason, "xla_reason": b.xla_reason})

    total = Counter()
    for row in per_gpu.values():
        total.update(row)
    if args.json:
        print(json.dumps({
            "per_gpu": {g: dict(r) for g, r in per_gpu.items()}, "total": dict(total),
            "agreement": _ratio(total), "disagreements": [
                {"rule": r, "xla_reason": x, "count": n} for (r, x), n in pairs.most_common()],
            "listing": listing, "failures": [{"gpu": g, "program": p, "error": e} for g, p, e in failures],
            "seconds": seconds}, indent=1))
        return 0

    print(f"{'gpu':<14} {'programs':>8} {'boundaries':>10} {'unknown':>7} {'XLA reason':>10} {'agree':>6} "
          f"{'differ':>6} {'n/a':>4} {'agreement':>9}")
    for gpu in sorted(per_gpu):
        _row(gpu, per_gpu[gpu])
    _row("total", total)
    print(f"agreements read from XLA's line for another user of the producer (all users or none): "
          f"{total['agree_via_other_user']}")
    if pairs:
        print("\nnot agreeing, by (our rule, XLA's reason):")
        for (rule, xla), n in pairs.most_common():
            print(f"  {n:>4}  {rule:<34} {xla}")
    if args.verbose:
        print()
        for item in listing:
            print(f"  [{item['gpu']}] {item['program']}: {item['kind']}: {item['edge']}")
            if "rule" in item:
                print(f"      ours ({item['rule']}, {item.get('decided_in')}): {item['reason']}")
                print(f"      XLA: {item['xla_reason']}")
    for gpu, program, error in failures:
        print(f"FAILED [{gpu}] {program}: {error}")
    slowest = sorted(seconds.items(), key=lambda kv: -kv[1])[:3]
    print(f"\n{len(seconds)} dumps explained in {sum(seconds.values()):.1f} s "
          f"(slowest: {', '.join(f'{k} {v:.1f} s' for k, v in slowest)})")
    return 1 if failures else 0


def _ratio(row) -> float | None:
    return round(row["agree"] / row["with_xla_reason"], 4) if row["with_xla_reason"] else None


def _row(name: str, row) -> None:
    ratio = _ratio(row)
    pct = f"{100 * ratio:.1f}%" if ratio is not None else "-"
    print(f"{name:<14} {row['programs']:>8} {row['boundaries']:>10} {row['unknown']:>7} "
          f"{row['with_xla_reason']:>10} {row['agree']:>6} {row['differ']:>6} {row['not_compared']:>4} {pct:>9}")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""How closely hlofuse's `--pipeline priority` replay reproduces real XLA:GPU (jaxlib 0.10.2).

For every program of sample_dumps/gpu-current-* (MANIFEST.json names each program's
before-fusion and after-fusion snapshots), and for any extra dump folder given on the command
line, replay the priority pipeline from XLA's module right before its fusion passes and
compare the kernels with XLA's module right after them (hlofuse.check: kernels matched by the
before-fusion instructions they compute, not by name).  Also, where XLA's own fusion log is in
the dump, the fraction of our refusal reasons that equal XLA's logged reason for the same
producer.

    python bench/priority_agreement.py                 # all gpu-current sample programs
    python bench/priority_agreement.py --json          # machine-readable
    python bench/priority_agreement.py --verbose       # list every kernel that differs
    python bench/priority_agreement.py DUMP_DIR --gpu a6000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hlofuse import load, xla_log  # noqa: E402
from hlofuse.check import CheckResult, check  # noqa: E402
from hlofuse.decision import Verdict  # noqa: E402
from hlofuse.pipeline import Options  # noqa: E402
from hlofuse.printer import print_back_error  # noqa: E402


@dataclass
class ProgramResult:
    name: str
    gpu: str
    xla_kernels: int
    reproduced: int
    seconds: float
    differences: list[dict] = field(default_factory=list)
    reasons_compared: int = 0
    reasons_agreeing: int = 0
    reason_mismatches: list[dict] = field(default_factory=list)
    error: str | None = None

    @property
    def agreement(self) -> float:
        return self.reproduced / self.xla_kernels if self.xla_kernels else 1.0

    def to_dict(self) -> dict:
        return {"program": self.name, "gpu": self.gpu, "xla_kernels": self.xla_kernels,
                "reproduced": self.reproduced, "agreement": round(self.agreement, 4),
                "seconds": round(self.seconds, 2), "differences": self.differences,
                "reasons_compared": self.reasons_compared, "reasons_agreeing": self.reasons_agreeing,
                "reason_mismatches": self.reason_mismatches, "error": self.error}


def sample_programs(folders: list[str] | None = None) -> list[tuple[str, Path, Path, Path | None, str]]:
    """(name, before, after, log, gpu) for the gpu-current programs of MANIFEST.json."""
    manifest = json.loads((REPO / "sample_dumps" / "MANIFEST.json").read_text())
    out = []
    for p in manifest["programs"]:
        if not p["folder"].startswith("gpu-current") or (folders and p["folder"] not in folders):
            continue
        files = p["files"]
        if not files.get("before_fusion") or not files.get("after_fusion"):
            continue
        base = REPO / "sample_dumps" / p["path"]
        log = base / files["priority_fusion_dump"] if files.get("priority_fusion_dump") else None
        gpu = Path(p["gpu_spec"]).stem if p.get("gpu_spec") else "h100_sxm"
        out.append((p["path"], base / files["before_fusion"], base / files["after_fusion"], log, gpu))
    return out


def folder_program(folder: Path, gpu: str) -> tuple[str, Path, Path, Path | None, str]:
    """A dump folder of XLA:GPU (jaxlib 0.10.2) with the priority pipeline's snapshots."""
    from hlofuse.dumpdir import choose_module, fusion_snapshot, priority_fusion_log, scan

    files = choose_module(scan(folder), None, str(folder))
    before = fusion_snapshot(files, "before_fusion", "priority")
    after = fusion_snapshot(files, "after_fusion", "priority")
    if before is None or after is None:
        raise SystemExit(f"{folder}: no snapshots around the priority fusion passes")
    log = priority_fusion_log(files)
    return str(folder), before.path, after.path, log.path if log else None, gpu


def reason_agreement(result: CheckResult, log: xla_log.FusionLog) -> tuple[int, int, list[dict]]:
    """For every producer both XLA's log and the replay refuse: does the replay give XLA's
    reason?  XLA logs one reason per producer (that of its first refusing user), so the replay's
    decision compared is the one marked `logged_for_producer`; a cost-model refusal counts when
    XLA's last priority for the producer was negative too."""
    compared = agreeing = 0
    mismatches = []
    for d in result.replay.decisions:
        if d.pass_name != "priority-fusion" or d.verdict != Verdict.BLOCKED:
            continue
        if not d.facts.get("logged_for_producer"):
            continue
        verdict = log.verdict(d.producer_members or (d.producer,), d.consumer_members or (d.consumer,))
        if verdict is None or verdict.status not in ("ineligible", "unprofitable"):
            continue
        compared += 1
        if verdict.status == "unprofitable":
            same = d.rule in ("PF-UNPROFITABLE", "PF-CONCAT-PENALTY")
        else:
            same = d.xla_reason == verdict.reason
        if same:
            agreeing += 1
        else:
            mismatches.append({"producer": d.producer, "consumer": d.consumer, "rule": d.rule,
                               "ours": d.xla_reason, "xla": verdict.reason})
    return compared, agreeing, mismatches


def run_one(name: str, before_path: Path, after_path: Path, log_path: Path | None, gpu: str) -> ProgramResult:
    start = time.perf_counter()
    try:
        before, after = load(str(before_path)), load(str(after_path))
        result = check(before, after, Options(backend="gpu", pipeline="priority", gpu=gpu))
        problem = print_back_error(result.replay.module)
        if problem:
            raise AssertionError(problem)
    except Exception as err:  # report, keep going
        import traceback

        return ProgramResult(name, gpu, 0, 0, time.perf_counter() - start,
                             error=f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=4)}")
    out = ProgramResult(name, gpu, result.xla_kernels, result.reproduced, time.perf_counter() - start)
    for m in result.matches:
        if m.status != "exact":
            out.differences.append({"status": m.status, "computation": m.computation, "xla": m.xla_kernel,
                                    "ours": m.ours, "instructions": list(m.members)})
    if log_path is not None and Path(log_path).exists():
        compared, agreeing, mismatches = reason_agreement(result, xla_log.load(log_path))
        out.reasons_compared, out.reasons_agreeing, out.reason_mismatches = compared, agreeing, mismatches
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", help="extra XLA:GPU dump folders (jaxlib 0.10.2)")
    parser.add_argument("--gpu", default="h100_sxm", help="GPU description of the extra folders")
    parser.add_argument("--only", action="append", help="sample folder(s) to use, e.g. gpu-current-h100")
    parser.add_argument("--no-samples", action="store_true", help="only the folders given")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args(argv)

    programs = [] if args.no_samples else sample_programs(args.only)
    programs += [folder_program(Path(f), args.gpu) for f in args.folders]
    results = [run_one(*p) for p in programs]
    ok = [r for r in results if r.error is None]
    mean = sum(r.agreement for r in ok) / len(ok) if ok else 0.0
    compared = sum(r.reasons_compared for r in ok)
    agreeing = sum(r.reasons_agreeing for r in ok)
    summary = {
        "programs": len(results), "errors": len(results) - len(ok), "mean_agreement": round(mean, 4),
        "kernels": sum(r.xla_kernels for r in ok), "reproduced": sum(r.reproduced for r in ok),
        "exact_programs": sum(1 for r in ok if r.reproduced == r.xla_kernels),
        "reasons_compared": compared, "reasons_agreeing": agreeing,
        "reason_agreement": round(agreeing / compared, 4) if compared else None,
        "seconds": round(sum(r.seconds for r in results), 1),
    }
    if args.json:
        print(json.dumps({"summary": summary, "results": [r.to_dict() for r in results]}, indent=2))
        return 0
    width = max((len(r.name) for r in results), default=10)
    for r in results:
        if r.error:
            print(f"{r.name:<{width}}  ERROR {r.error.splitlines()[0]}")
            continue
        reasons = f"  reasons {r.reasons_agreeing}/{r.reasons_compared}" if r.reasons_compared else ""
        print(f"{r.name:<{width}}  {r.reproduced:>3}/{r.xla_kernels:<3} {100 * r.agreement:6.1f}%  "
              f"{r.seconds:5.1f}s{reasons}")
        if args.verbose:
            for d in r.differences:
                print(f"    {d['status']:<8} {d['computation']}: xla {d['xla']} ours {d['ours']}: "
                      f"{', '.join(d['instructions'][:8])}{' ...' if len(d['instructions']) > 8 else ''}")
            for m in r.reason_mismatches[:10]:
                print(f"    reason {m['producer']} -> {m['consumer']}: ours {m['ours']!r} ({m['rule']}), xla {m['xla']!r}")
    print(f"\n{summary['programs']} programs ({summary['errors']} errors): mean agreement "
          f"{100 * summary['mean_agreement']:.1f}% ({summary['reproduced']}/{summary['kernels']} kernels, "
          f"{summary['exact_programs']} programs exact); refusal reasons agreeing with XLA's log: "
          f"{summary['reasons_agreeing']}/{summary['reasons_compared']}; {summary['seconds']}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

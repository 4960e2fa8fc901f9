#!/usr/bin/env python3
"""How well `hlofuse explain`'s predicted fixes rank against measurements of the same changes.

For every XLA:CPU program (sample_dumps/cpu and the small programs of
bench/triage_programs.py compiled into bench/out/triage/cpu): `explain` predicts, for each
relaxable rule that decided a group of boundaries, the modelled time of the replay with that
rule relaxed (the CPU roofline's constants, the same for every program: nothing is tuned per
program); `hlofuse bench` then runs the replay and each relaxed replay as kernels on this CPU
(`--plan replay --plan relax:RULE`, every plan checked against the reference evaluator, all
plans of all programs timed interleaved) and the two are compared:

  * rank correlation (Spearman) between predicted and measured speedups of all fixes;
  * sign: how often the prediction says faster/slower as the measurement does (fixes whose
    measured change lies within the plans' noise left out);
  * top fix: on programs with two fixes or more, how often the best predicted is the best
    measured.

Then the paper's cart-pole: the predicted gain of each of its three fixes (the hint's
prediction on the variant before the fix) beside the measured change between the variants
(XLA's modules of each, on this CPU), and the legacy XLA:GPU model's predictions for the
RTX 2080 Ti beside the paper's own figures on that GPU.

    python bench/triage_accuracy.py [--repeat 7] [--only NAME] [--json out.json] [--markdown out.md]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

import hlofuse  # noqa: E402
from hlofuse import bench  # noqa: E402

FOLDERS = [REPO / "sample_dumps" / "cpu", HERE / "out" / "triage" / "cpu"]
#: Programs too large to run every relaxed plan of in a few minutes (hundreds of kernels).
SKIP = {"transformer_train_adam", "transformer_train_adam_deep"}


def programs(only) -> list[Path]:
    out = []
    for folder in FOLDERS:
        if not folder.is_dir():
            print(f"(no {folder}: compile it with bench/explain_compile.py --programs triage_programs --gpu cpu)",
                  file=sys.stderr)
            continue
        out += sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in SKIP)
    if only:
        out = [p for p in out if any(o in p.name for o in only)]
    return out


# ------------------------------------------------------------------------------------------
# Fixes: predicted against measured
# ------------------------------------------------------------------------------------------


def predicted_fixes(folder: Path) -> tuple[dict, float]:
    """rule → predicted Change, and the modelled µs of the replay (every relaxable group)."""
    from hlofuse.api import explain_resolved, resolve_for_explain, triage_options

    resolved, flags = resolve_for_explain(str(folder))
    report = explain_resolved(resolved, xla_flags=flags, triage=triage_options(predict=True, predict_top=None))
    ex = report.explanation
    fixes = {}
    for g in ex.groups:
        if g.fix is not None and g.fix.error is None and g.rule not in fixes:
            fixes[g.rule] = g.fix
    baseline = next(iter(fixes.values())).baseline_us if fixes else None
    return fixes, baseline


def measure(entries: list[tuple[str, list[str]]], device, repeat: int) -> tuple[dict, dict]:
    """(folder, plans) → ({folder: {plan: PlanResult}}, all timed interleaved; {folder: the
    relaxed plans whose module is the replay's, not run})."""
    from hlofuse import dumps

    prepared, same = {}, {}
    for folder, plans in entries:
        source = bench.load_source(folder)
        made = bench.make_plans(source, plans)
        replay_text = dumps(made[0].module) if made[0].module is not None else None
        same[folder] = {p.name for p in made[1:] if p.module is not None and dumps(p.module) == replay_text}
        made = [p for p in made if p.name not in same[folder]]
        print(f"  preparing {Path(folder).name}: {', '.join(p.name for p in made)}", file=sys.stderr, flush=True)
        prepared[folder] = bench.prepare(made, device)
    print(f"timing {repeat} interleaved runs of {sum(len(p.results) for p in prepared.values())} plans",
          file=sys.stderr, flush=True)
    bench.time_prepared(list(prepared.values()), device, repeat=repeat)
    return {f: {r.name: r for r in p.results} for f, p in prepared.items()}, same


def spearman(x: list[float], y: list[float]) -> float | None:
    if len(x) < 3:
        return None
    rx, ry = _ranks(x), _ranks(y)
    if np.std(rx) == 0 or np.std(ry) == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: list[float]) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = np.asarray(values)[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2
        i = j + 1
    return ranks


# ------------------------------------------------------------------------------------------
# The paper's cart-pole
# ------------------------------------------------------------------------------------------

#: (the paper's fix, the paper's measured speedup on its RTX 2080 Ti, the hint, the variant the
#: hint is read on, the variant after the fix)
PAPER = [
    ("precompute the random numbers", "1.87x", "rng-in-loop", "a", "b"),
    ("pass the state as separate arrays", "3.41x", "packed-state", "b", "c"),
    ("unroll the scan 10x", "3.5x", "unroll", "c", "d"),
]
CPU_VARIANTS = {"a": "cartpole_a_rng", "b": "cartpole_b_concat_vecdone", "c": "cartpole_c_separate",
                "d": "cartpole_d_unroll10"}
GPU_VARIANTS = {"a": "cartpole_a_rng_customcall", "b": "cartpole_b_concat_vecdone", "c": "cartpole_c_separate",
                "d": "cartpole_d_unroll10"}


def hint_prediction(folder: Path, kind: str) -> tuple[str, float | None]:
    """The hint of `kind` on a variant: (what it says, predicted speedup), or why it did not fire."""
    ex = hlofuse.explain(folder, predict=False).explanation
    group = next((g for g in ex.groups if g.hint_kind == kind and g.hint_fix is not None), None)
    if group is None:
        loop = ex.loops[0] if ex.loops else None
        why = (f"no hint: its premise does not hold ({loop.kernels_per_iteration} kernels per iteration, "
               f"more than a few)") if kind == "unroll" and loop is not None else "no hint"
        return why, None
    change = group.hint_fix
    return change.words(change.baseline_us), change.ratio


def paper_section(device, repeat: int) -> list[str]:
    from paper_section5 import paper_inputs

    lines = ["", "The paper's cart-pole (2048 environments, 100 steps): each fix's predicted gain (its hint on the "
                 "variant before the fix) beside the measured change between the variants.", "",
             "| the paper's fix | paper, measured (RTX 2080 Ti) | predicted, legacy XLA:GPU model for the RTX 2080 Ti "
             "| predicted, CPU roofline | measured on this CPU (XLA's modules) | modelled, CPU roofline (XLA's modules) |",
             "|---|---:|---:|---:|---:|---:|"]
    cpu_dir = REPO / "sample_dumps" / "cpu"
    gpu_dir = REPO / "sample_dumps" / "gpu-legacy-rtx2080ti"
    groups, results = {}, {}
    for v, name in CPU_VARIANTS.items():
        source = bench.load_source(str(cpu_dir / name))
        plans = bench.make_plans(source, ["xla"])
        groups[v] = bench.prepare(plans, device, inputs=paper_inputs(plans[0].module, v, 0))
    bench.time_prepared(list(groups.values()), device, repeat=repeat)
    for v, g in groups.items():
        results[v] = g.results[0]
    for label, paper, kind, before, after in PAPER:
        _, gpu_ratio = hint_prediction(gpu_dir / GPU_VARIANTS[before], kind)
        cpu_words, cpu_ratio = hint_prediction(cpu_dir / CPU_VARIANTS[before], kind)
        slow, fast = results[before], results[after]
        measured = slow.median_s / fast.median_s if slow.median_s and fast.median_s else None
        modelled = _modelled(cpu_dir / CPU_VARIANTS[before]) / _modelled(cpu_dir / CPU_VARIANTS[after])
        lines.append(f"| {label} | {paper} | {_x(gpu_ratio)} | {_x(cpu_ratio) if cpu_ratio else cpu_words} | "
                     f"{_x(measured)} ({before}.xla / {after}.xla) | {_x(modelled)} |")
    lines.append("")
    lines.append("The measured change between two variants is more than the fix: b has no random numbers at all "
                 "(a → b removes the RNG's work; precomputing keeps it, once, outside the loop), and c and d differ "
                 "as XLA fuses each.  The last column prices XLA's two modules with the same roofline.")
    return lines


def _modelled(folder: Path) -> float:
    return hlofuse.explain(folder, predict=False).summary()["modelled"]["modelled_us_per_run"]


def _x(ratio) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}x"


# ------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", action="append")
    ap.add_argument("--no-paper", action="store_true", help="skip the cart-pole section")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args(argv)
    device = bench.choose_device("cpu")
    start = time.time()
    predictions, entries = {}, []
    for folder in programs(args.only):
        fixes, baseline = predicted_fixes(folder)
        if not fixes:
            continue
        predictions[str(folder)] = (fixes, baseline)
        entries.append((str(folder), ["replay"] + [f"relax:{r}" for r in fixes]))
    print(f"{len(entries)} programs with relaxable boundaries, {sum(len(p) - 1 for _, p in entries)} fixes",
          file=sys.stderr)
    measured, same = measure(entries, device, args.repeat)
    rows = []
    for folder, (fixes, baseline) in predictions.items():
        plans = measured[folder]
        base = plans["replay"]
        for rule, change in fixes.items():
            if f"relax:{rule}" in same[folder]:
                rows.append({"program": Path(folder).name, "rule": rule, "same_module": True,
                             "predicted_speedup": change.ratio, "predicted_us_delta": change.modelled_us_delta})
                continue
            r = plans.get(f"relax:{rule}")
            if r is None or not r.ok or not r.median_s or not base.median_s:
                rows.append({"program": Path(folder).name, "rule": rule, "error": r.error if r else "not run"})
                continue
            floor = bench.noise_floor(base, r)
            ratio = base.median_s / r.median_s
            rows.append({
                "program": Path(folder).name, "folder": folder, "rule": rule,
                "predicted_speedup": change.ratio, "predicted_us_delta": change.modelled_us_delta,
                "modelled_us": baseline, "measured_speedup": ratio,
                "measured_us_delta": (r.median_s - base.median_s) * 1e6, "replay_s": base.median_s,
                "within_noise": floor is not None and 1 / floor < ratio < floor,
                "kernels_delta": change.kernels_delta,
            })
    good = [r for r in rows if "error" not in r and "same_module" not in r and r["predicted_speedup"]]
    unchanged = [r for r in rows if "same_module" in r]
    rho = spearman([math.log(r["predicted_speedup"]) for r in good], [math.log(r["measured_speedup"]) for r in good])
    clear = [r for r in good if not r["within_noise"]]
    signs = sum(1 for r in clear if (r["predicted_speedup"] > 1) == (r["measured_speedup"] > 1))
    tops, per_program = 0, 0
    by_program: dict = {}
    for r in good:
        by_program.setdefault(r["program"], []).append(r)
    for prog, fixes in by_program.items():
        if len(fixes) < 2:
            continue
        per_program += 1
        best_predicted = max(fixes, key=lambda r: r["predicted_speedup"])
        best_measured = max(fixes, key=lambda r: r["measured_speedup"])
        tops += best_predicted is best_measured
    lines = [f"Predicted fixes against `hlofuse bench` on {device.describe()}; median of {args.repeat} interleaved "
             f"runs; {len(by_program)} programs, {len(good)} fixes (relaxed rules).", "",
             "| program | relaxed rule | kernels | predicted | measured |", "|---|---|---:|---:|---:|"]
    for r in sorted(good, key=lambda r: (r["program"], r["rule"])):
        noise = " (noise)" if r["within_noise"] else ""
        kd = f"{r['kernels_delta']:+d}" if r["kernels_delta"] is not None else ""
        lines.append(f"| {r['program']} | {r['rule']} | {kd} | {r['predicted_speedup']:.2f}x | "
                     f"{r['measured_speedup']:.2f}x{noise} |")
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['program']} | {r['rule']} | | | failed: {r['error']} |")
    exact = sum(1 for r in unchanged if r["predicted_us_delta"] == 0)
    lines += ["", f"Relaxing the rule left the replay's module unchanged (another rule keeps the kernels apart) for "
                  f"{len(unchanged)} more fixes, not run: the prediction says no change for {exact} of them."]
    lines += ["", f"Rank correlation (Spearman) of predicted and measured speedups, all fixes: "
                  f"{'n/a' if rho is None else f'{rho:.2f}'} (n = {len(good)}).",
              f"Same direction (faster or slower) as measured: {signs} of {len(clear)} fixes whose measured change "
              f"is outside the noise.",
              f"Best predicted fix is the best measured one: {tops} of {per_program} programs with two fixes or more."]
    replays = {}
    for r in good:
        replays.setdefault(r["program"], (r["modelled_us"], r["replay_s"] * 1e6))
    if len(replays) >= 3:
        modelled = [m for m, _ in replays.values()]
        actual = [a for _, a in replays.values()]
        ratios = sorted(a / m for m, a in replays.values() if m)
        lines += ["", f"The replay's modelled time against its measured time, {len(replays)} programs: rank correlation "
                      f"{spearman(modelled, actual):.2f}; measured / modelled from {ratios[0]:.2f} to {ratios[-1]:.2f} "
                      f"(median {ratios[len(ratios) // 2]:.2f})."]
    if not args.no_paper:
        lines += paper_section(device, args.repeat)
    lines.append(f"\n({time.time() - start:.0f} s)")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "spearman": rho, "signs": [signs, len(clear)],
                                               "top": [tops, per_program], "device": device.describe()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

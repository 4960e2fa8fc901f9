"""Honest counts (issue 17, items 13 and 15): each command says which module its kernel count
is of and why two counts of one program differ; bench reports the spread of its runs and
flags the plans whose ratios it cannot trust."""

from __future__ import annotations

import io
import json
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from hlofuse import bench
from hlofuse.cli import main

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_dumps"
# fuse 3 kernels, check 3, explain 6: XLA's final module has 3 copies that copy insertion adds.
CARTPOLE = SAMPLES / "gpu-current-h100" / "cartpole_b_concat"
CPU_RNG = SAMPLES / "cpu" / "cartpole_a_rng"  # 24 kernels after fusion, 60 in the final module


def run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def by_what(payload):
    return {c["what"]: c for c in payload["counts"]}


def test_fuse_counts_the_replay_and_says_why_xla_counts_more():
    payload = json.loads(run("fuse", CARTPOLE, "--json").stdout)
    counts = by_what(payload)
    assert payload["counts"][0]["what"] == "replay" and counts["replay"]["kernels"] == len(payload["kernels"]) == 3
    assert counts["xla_after_fusion"]["kernels"] == 3 and counts["xla_final"]["kernels"] == 6
    assert counts["xla_final"]["by_kind"]["copy"] == 3
    assert payload["replayed_from"].endswith("before_variadic-op-splitter.txt")
    [why] = payload["counts_differ"]
    assert "XLA's final module (after_optimizations) has 6 kernels, +3 against hlofuse's replay (3)" in why
    assert "+3 copy" in why and "copy insertion adds copies after fusion" in why
    text = run("fuse", CARTPOLE).stdout
    assert "3 kernels in hlofuse's gpu/priority replay" in text and "XLA's snapshot right before fusion" in text
    assert "copy insertion adds copies after fusion" in text


def test_check_counts_xla_after_fusion_and_the_replay():
    payload = json.loads(run("check", CPU_RNG, "--json").stdout)
    counts = by_what(payload)
    assert payload["counts"][0]["what"] == "xla_after_fusion" and payload["xla_kernels"] == 24
    assert payload["replay_kernels"] == counts["replay"]["kernels"] == 24
    assert counts["xla_final"]["kernels"] == 60
    assert any("+36 copy" in line and "copy insertion" in line for line in payload["counts_differ"])
    text = run("check", CPU_RNG).stdout
    assert "24 of 24 kernels of XLA's snapshot right after fusion reproduced exactly" in text
    assert "which has 24 kernels" in text


def test_explain_counts_the_final_module_and_launches_per_run():
    payload = json.loads(run("explain", CARTPOLE, "--json").stdout)
    counts = by_what(payload)
    assert payload["counts"][0]["what"] == "xla_final" and payload["summary"]["kernels"] == 6
    assert payload["launches_per_run"] == payload["summary"]["kernels_launched"] == 302
    assert counts["xla_after_fusion"]["kernels"] == 3
    assert any("+3 copy (copy insertion adds copies after fusion)" in n for n in payload["notes"])
    text = run("explain", CARTPOLE).stdout
    assert "6 kernels in XLA's final module (after_optimizations); 302 launches per run" in text


def test_explain_of_a_replay_says_so():
    payload = json.loads(run("explain", CARTPOLE, "--stage", "before_fusion", "--json").stdout)
    assert payload["stage"] == "replayed" and payload["counts"][0]["what"] == "replay"
    assert "kernels in hlofuse's replay" in run("explain", CARTPOLE, "--stage", "before_fusion").stdout


def test_parse_says_which_module_it_counts():
    payload = json.loads(run("parse", CARTPOLE, "--json").stdout)
    assert payload["kernels"]["total"] == 6
    assert payload["kernels"]["counted_in"] == "XLA's final module (after_optimizations)"
    assert "6 kernels in XLA's final module" in run("parse", CARTPOLE).stdout


# ------------------------------------------------------------------------------------------
# 15. Bench: the spread of the runs
# ------------------------------------------------------------------------------------------


class ScriptedRunner:
    def __init__(self, times):
        self.times = iter(times)

    def run(self):
        return next(self.times)


class ScriptedDevice:
    """A device whose measurements are given: a runner's run() returns its next time."""

    def measure(self, fn):
        return fn()


def timed(times: dict) -> list[bench.PlanResult]:
    results = [bench.PlanResult(name, kernels=1, launches=1, bytes=0, ok=True) for name in times]
    prepared = bench.Prepared(results, {name: ScriptedRunner(values) for name, values in times.items()})
    bench.time_prepared([prepared], ScriptedDevice(), repeat=len(next(iter(times.values()))), warmup=0)
    return results


def test_bench_reports_min_median_max_and_flags_wide_spread():
    unfused, xla, noisy = timed({
        "unfused": [10.0, 10.1, 10.2, 9.9, 10.0],
        "xla": [5.0, 5.05, 4.95, 5.0, 5.1],
        "relax:concat": [9.0, 13.0, 10.0, 8.5, 12.0],
    })
    assert (unfused.min_s, unfused.median_s, unfused.max_s) == (9.9, 10.0, 10.2)
    assert not unfused.noisy and not xla.noisy and noisy.noisy
    assert noisy.spread > bench.NOISY_SPREAD and noisy.iqr_s == 12.0 - 9.0
    assert xla.speedup == 2.0 and xla.speedup_within_noise is False
    # relax:concat is 1.0x unfused by its median: within the spread, so no ratio to trust
    assert noisy.speedup == 1.0 and noisy.speedup_within_noise is True
    assert bench.noise_floor(noisy, unfused) > 1.3

    out = io.StringIO()
    from hlofuse.commands.bench import _table

    _table(Console(file=out, width=200), [unfused, xla, noisy], "scripted")
    text = out.getvalue()
    assert "min – max" in text and "IQR" in text and "9.90 s – 10.20 s" in text
    assert "noisy: relax:concat spreads 30% around its median (over 10%): do not trust ratios below" in text


def test_bench_spread_with_few_runs_is_max_minus_min():
    [one] = timed({"xla": [2.0, 3.0]})
    assert one.iqr_s is None and one.spread == 1.0 / 2.5
    [single] = timed({"xla": [2.0]})
    assert single.spread is None and not single.noisy


def test_bench_json_and_csv_carry_the_spread(tmp_path):
    csv = tmp_path / "plans.csv"
    result = run("bench", SAMPLES / "gpu-current-h100" / "softmax", "--device", "cpu", "--plan", "unfused",
                 "--plan", "xla", "--repeat", "4", "--json", "--csv", csv)
    payload = json.loads(result.stdout)
    assert payload["noisy_spread"] == bench.NOISY_SPREAD
    for p in payload["plans"]:
        assert p["runs"] == 4 and p["min_s"] <= p["median_s"] <= p["max_s"]
        assert p["iqr_s"] is not None and p["spread"] == p["iqr_s"] / p["median_s"]
        assert isinstance(p["noisy"], bool)
    header = csv.read_text().splitlines()[0].split(",")
    assert header[:8] == ["name", "kernels", "launches", "bytes", "median_s", "speedup", "max_rel_error", "ok"]
    assert {"min_s", "max_s", "iqr_s", "spread", "noisy", "runs", "skipped"} <= set(header)

"""The triage (hlofuse/triage): kernels and boundaries priced, boundaries grouped by cause and
ranked, predicted fixes, the --fail-on gate, DataFrames, and output that fits the terminal."""

from __future__ import annotations

import io
import json
import math
import re

import pytest
from click.testing import CliRunner

import hlofuse
from hlofuse.cli import main
from hlofuse.triage import CpuRoofline, GpuTarget, TriageOptions, price_module, target_for, triage

from conftest import REPO

SAMPLES = REPO / "sample_dumps"
CARTPOLE_GPU = SAMPLES / "gpu-legacy-rtx2080ti" / "cartpole_b_concat_vecdone"
CARTPOLE_CPU = SAMPLES / "cpu" / "cartpole_b_concat_vecdone"
SOFTMAX_CPU = SAMPLES / "cpu" / "softmax"
ADAM_GPU = SAMPLES / "gpu-current-rtx2080ti" / "adam_update"


@pytest.fixture(scope="module")
def cartpole():
    return hlofuse.explain(CARTPOLE_CPU, predict=True).explanation


@pytest.fixture(scope="module")
def adam():
    return hlofuse.explain(ADAM_GPU, predict=False).explanation


# ------------------------------------------------------------------------------------------
# Totals add up
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cartpole", "adam"])
def test_groups_partition_the_boundaries_and_their_totals_add_up(name, request):
    ex = request.getfixturevalue(name)
    assert ex.groups and ex.cost is not None
    members = [i for g in ex.groups for i in g.boundaries]
    assert sorted(members) == list(range(len(ex.boundaries)))  # every boundary in exactly one group
    assert sum(g.count for g in ex.groups) == len(ex.boundaries)
    assert sum(g.bytes for g in ex.groups) == sum(b.bytes for b in ex.boundaries) == \
        ex.summary()["bytes_across_boundaries"]
    assert sum(g.bytes_per_run for g in ex.groups) == ex.summary()["bytes_across_boundaries_per_run"]
    assert math.isclose(sum(g.modelled_us for g in ex.groups), sum(b.modelled_us for b in ex.boundaries))
    for g in ex.groups:
        inside = [ex.boundaries[i] for i in g.boundaries]
        assert {(b.rule, b.source.file if b.source else None, b.source.line if b.source else None)
                for b in inside} == {g.key}
        assert math.isclose(g.share, g.modelled_us / ex.cost.total_us)
    ranked = [g.modelled_us for g in ex.groups]
    assert ranked == sorted(ranked, reverse=True)


@pytest.mark.parametrize("name", ["cartpole", "adam"])
def test_kernel_times_add_up_to_the_program_per_computation_and_per_loop(name, request):
    ex = request.getfixturevalue(name)
    s = ex.summary()
    per_run = sum(k.modelled_us * k.launches for k in ex.kernels)
    assert math.isclose(per_run, s["modelled"]["modelled_us_per_run"], rel_tol=1e-6)
    assert sum(k.launches for k in ex.kernels) == s["kernels_launched"] == s["modelled"]["launches_per_run"]
    comps = s["kernels_per_computation"]
    assert math.isclose(sum(c["modelled_us_per_run"] for c in comps), per_run, rel_tol=1e-6)
    for lp in s["loops"]:
        body = next(c for c in comps if c["computation"] == lp["body"])
        assert math.isclose(lp["modelled_us_per_iteration"] * lp["trip_count"], lp["modelled_us_per_run"],
                            rel_tol=1e-6)
        assert lp["modelled_us_per_run"] >= body["modelled_us_per_run"]


def test_a_boundary_costs_its_share_of_the_write_its_read_and_its_share_of_the_launch(cartpole):
    ex = cartpole
    target = target_for("cpu", "cpu", None)
    runs = ex.cost.runs
    by_value: dict = {}
    for b in ex.boundaries:
        by_value.setdefault((b.producer_computation, b.producer_kernel, b.output), []).append(b)
    for (comp, kernel, _), carried in by_value.items():
        # the value is written once per run of its computation, whoever reads it
        writes = sum(b.cost.write_us for b in carried)
        assert math.isclose(writes, target.transfer_us(carried[0].bytes) * runs[comp], rel_tol=1e-9)
    for b in ex.boundaries:
        expected_read = target.transfer_us(b.bytes) * runs[b.consumer_computation] if b.consumer_kernel else 0.0
        assert math.isclose(b.cost.read_us, expected_read, abs_tol=1e-12)
        if b.crossing or b.consumer_kernel is None:
            assert b.cost.launch_us == 0  # fusion never joins kernels across a loop or into a buffer
    launches: dict = {}
    for b in ex.boundaries:
        launches.setdefault((b.producer_computation, b.producer_kernel), []).append(b.cost.launch_us)
    for (comp, kernel), shares in launches.items():
        if any(shares):
            priced = ex.cost.kernel(comp, kernel)
            assert math.isclose(sum(shares), priced.launch_us * priced.launches, rel_tol=1e-9)


# ------------------------------------------------------------------------------------------
# Targets
# ------------------------------------------------------------------------------------------

ELEMENTWISE = """
HloModule m

f {
  p = f32[1048576] parameter(0)
  s = f32[1048576] sine(p)
  ROOT a = f32[1048576] add(s, p)
}

ENTRY e {
  x = f32[1048576] parameter(0)
  ROOT k = f32[1048576] fusion(x), kind=kLoop, calls=f
}
"""


def test_cpu_roofline_takes_the_slower_of_memory_and_compute():
    module = hlofuse.loads(ELEMENTWISE)
    n = 1048576
    roofline = CpuRoofline()
    (kernel,) = price_module(module, roofline).kernels
    flops = n * (roofline.op_flops["sine"] + 1)
    assert kernel.flops == flops and kernel.bytes == 8 * n
    assert math.isclose(kernel.exec_us, max(flops / roofline.flop_rate, 8 * n / roofline.bandwidth) * 1e6)
    assert kernel.launch_us == roofline.launch_us and kernel.priced_by == "roofline"
    fast = CpuRoofline().with_overrides(flop_rate=1e15)  # compute free: the bandwidth decides
    (bound,) = price_module(module, fast).kernels
    assert math.isclose(bound.exec_us, 8 * n / fast.bandwidth * 1e6)


def test_gpu_target_is_the_replays_performance_model_plus_its_launch_overhead():
    from hlofuse.cost import durations
    from hlofuse.cost.model import GpuPerformanceModel
    from hlofuse.device import load_gpu
    from hlofuse.gpu.config import ERA_PRIORITY, GpuConfig
    from hlofuse.graph import Program

    module = hlofuse.loads(ELEMENTWISE)
    (kernel,) = price_module(module, GpuTarget("h100_sxm", "priority")).kernels
    device = load_gpu("h100_sxm")
    program = Program.from_module(module)
    node = program.entry.get("k")
    expected = durations.to_us(GpuPerformanceModel(device, GpuConfig(device, ERA_PRIORITY)).estimate(node).exec_time)
    assert kernel.priced_by == "cost-model" and math.isclose(kernel.exec_us, expected) and kernel.launch_us == 1.0
    legacy = price_module(module, GpuTarget("rtx2080ti", "legacy")).kernels[0]
    assert legacy.priced_by == "cost-model" and legacy.exec_us > 0


def test_library_calls_the_model_cannot_price_get_a_roofline(adam):
    module = hlofuse.load(next((SAMPLES / "gpu-current-rtx2080ti" / "attention").glob("*after_optimizations.txt")))
    cost = price_module(module, GpuTarget("rtx2080ti", "priority"))
    calls = [k for k in cost.kernels if k.name.startswith("custom-call")]
    assert calls and all(k.priced_by == "roofline" and k.exec_us > 0 and k.flops > 0 for k in calls)


def test_a_loop_with_an_unknown_trip_count_is_counted_once_and_said_so():
    text = """
HloModule m

cond {
  c = (s32[], f32[64]) parameter(0)
  v = f32[64] get-tuple-element(c), index=1
  z = f32[] constant(0)
  r = f32[] reduce(v, z), dimensions={0}, to_apply=add
  ROOT lt = pred[] compare(r, z), direction=LT
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

body {
  p = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = f32[64] get-tuple-element(p), index=1
  n = f32[64] negate(v)
  ROOT t = (s32[], f32[64]) tuple(i, n)
}

ENTRY e {
  x = f32[64] parameter(0)
  i0 = s32[] constant(0)
  t0 = (s32[], f32[64]) tuple(i0, x)
  ROOT w = (s32[], f32[64]) while(t0), condition=cond, body=body
}
"""
    cost = price_module(hlofuse.loads(text), CpuRoofline())
    assert set(cost.unknown_runs) == {"body", "cond"} and cost.runs["body"] == 1


# ------------------------------------------------------------------------------------------
# Predicted fixes
# ------------------------------------------------------------------------------------------


def test_relaxing_a_rule_is_predicted_by_a_replay_with_it_relaxed():
    from hlofuse.pipeline import Options, replay

    ex = hlofuse.explain(SOFTMAX_CPU, predict=True).explanation
    group = next(g for g in ex.groups if g.rule == "CPU-EXPENSIVE-REUSE")
    fix = group.fix
    assert fix is not None and fix.basis == "relax:CPU-EXPENSIVE-REUSE" and fix.error is None
    before = ex.replay_result
    after = replay(before.input, Options(backend="cpu", pipeline="cpu", relax=("CPU-EXPENSIVE-REUSE",)))
    roofline = CpuRoofline()
    assert fix.kernels_delta == len(after.kernels) - len(before.kernels) == -1
    expected = price_module(after.module, roofline).total_us - price_module(before.module, roofline).total_us
    assert math.isclose(fix.modelled_us_delta, expected, rel_tol=1e-9)
    assert fix.worse == (expected > 0)
    assert "predicted" in ex.predictions and ex.predictions.count("replay") == 1


def test_predictions_can_be_turned_off_and_are_bounded_to_the_costliest_groups():
    ex = hlofuse.explain(SOFTMAX_CPU, predict=False).explanation
    assert all(g.fix is None for g in ex.groups) and "--no-predict" in ex.predictions
    top = triage(hlofuse.explain(ADAM_GPU, predict=False).explanation, TriageOptions(predict=True, predict_top=1))
    asked = [g for g in top.groups[1:] if g.relaxable and g.rule != top.groups[0].rule]
    assert all(g.fix is None for g in asked)


def test_a_relaxation_that_fails_is_reported_not_raised(monkeypatch):
    from hlofuse.triage import fixes

    def broken(variant):
        return fixes._Outcome(0, 0, 0.0, 0.0, "the replay failed")

    monkeypatch.setattr(fixes, "_run_one", broken)
    ex = hlofuse.explain(SOFTMAX_CPU, predict=True).explanation
    fix = next(g.fix for g in ex.groups if g.rule == "CPU-EXPENSIVE-REUSE")
    assert fix.error == "the replay failed" and fix.modelled_us_delta is None and "not predicted" in fix.words(1.0)


def test_hints_carry_a_prediction_for_this_program_and_cite_the_paper_as_context(cartpole):
    hinted = [g for g in cartpole.groups if g.hint]
    assert hinted
    for g in hinted:
        assert g.hint_fix is not None and g.hint_fix.modelled_us_delta is not None
        assert "predicted for this program" in g.hint
        if "paper measured" in g.hint:  # the paper's figure follows the prediction, as context
            assert g.hint.index("predicted for this program") < g.hint.index("paper measured")
    unroll = next(g for g in hinted if g.hint_kind == "unroll")
    loop = cartpole.loops[0]
    kept = math.ceil(loop.trip_count / 10)
    assert unroll.hint_fix.launches_delta == -loop.kernels_per_iteration * (loop.trip_count - kept)


def test_the_rng_hint_predicts_the_launches_precomputing_saves():
    ex = hlofuse.explain(SAMPLES / "gpu-legacy-rtx2080ti" / "cartpole_a_rng_customcall", predict=False).explanation
    rng = next(g for g in ex.groups if g.hint_kind == "rng-in-loop")
    change = rng.hint_fix
    # every RNG kernel of the body launches once instead of once per step: 100 steps, 1 launch left
    assert change.launches_delta < 0 and change.launches_delta % 99 == 0
    assert math.isclose(change.modelled_us_delta, change.launches_delta * 1.0)  # 1 µs per launch


# ------------------------------------------------------------------------------------------
# --fail-on
# ------------------------------------------------------------------------------------------


def _run(*args):
    return CliRunner().invoke(main, ["explain", str(SOFTMAX_CPU), "--no-predict", *args])


@pytest.mark.parametrize("condition,code", [
    ("CPU-EXPENSIVE-REUSE", 10), ("cpu-expensive-reused", 10), ("CPU-*", 10), ("expensive", 10),
    ("us>0", 10), ("bytes>1", 10), ("CPU-EXPENSIVE-REUSE&us>0", 10),
    ("CPU-CONCATENATE", 0), ("us>1e9", 0), ("bytes>1G", 0), ("CPU-EXPENSIVE-REUSE&bytes>1G", 0), ("rng", 0),
    ("NO-SUCH-RULE", 4), ("us>", 2), ("bytes>3X", 2), ("us>5K", 2), ("&", 2),
])
def test_fail_on_exit_codes(condition, code):
    result = _run("--fail-on", condition)
    assert result.exit_code == code, result.output
    if code == 10:
        assert "failed: --fail-on" in result.stderr and "Costliest causes" in result.stdout


def test_fail_on_with_json_reports_the_matches():
    result = _run("--fail-on", "CPU-EXPENSIVE-REUSE", "--fail-on", "CPU-CONCATENATE", "--json")
    assert result.exit_code == 10
    payload = json.loads(result.stdout)
    gate = payload["fail_on"]
    assert gate["failed"] and gate["conditions"] == ["CPU-EXPENSIVE-REUSE", "CPU-CONCATENATE"]
    assert {m["rule"] for m in gate["matches"]} == {"CPU-EXPENSIVE-REUSE"}
    assert payload["groups"][gate["matches"][0]["group"]]["rule"] == "CPU-EXPENSIVE-REUSE"
    passing = _run("--fail-on", "CPU-CONCATENATE", "--json")
    assert passing.exit_code == 0 and json.loads(passing.stdout)["fail_on"]["failed"] is False


# ------------------------------------------------------------------------------------------
# The Python API: DataFrames and the notebook view
# ------------------------------------------------------------------------------------------


def test_dataframes_of_kernels_boundaries_and_groups():
    from hlofuse.render.frames import BOUNDARY_COLUMNS, GROUP_COLUMNS, KERNEL_COLUMNS

    report = hlofuse.explain(CARTPOLE_CPU, predict=True)
    kernels, boundaries, groups = report.kernels, report.boundaries, report.groups
    assert tuple(kernels.columns) == KERNEL_COLUMNS and len(kernels) == len(report.explanation.kernels)
    assert tuple(boundaries.columns) == BOUNDARY_COLUMNS and len(boundaries) == len(report.explanation.boundaries)
    assert tuple(groups.columns) == GROUP_COLUMNS and len(groups) == len(report.explanation.groups)
    assert str(kernels["modelled_us"].dtype) == "float64" and str(kernels["launches"].dtype) == "Int64"
    assert math.isclose(kernels["modelled_us_per_run"].sum(), report.summary()["modelled"]["modelled_us_per_run"],
                        rel_tol=1e-6)
    assert math.isclose(groups["modelled_us"].sum(), boundaries["modelled_us"].sum())
    assert groups["count"].sum() == len(boundaries)
    assert list(groups["modelled_us"]) == sorted(groups["modelled_us"], reverse=True)
    first = groups.iloc[0]
    assert set(boundaries.iloc[first["boundaries"]]["rule"]) == {first["rule"]}
    assert groups["fix_us_delta"].notna().any()


def test_the_notebook_view_is_the_commands_summary():
    report = hlofuse.explain(CARTPOLE_CPU, predict=True)
    html = report._repr_html_()
    ex = report.explanation
    assert "Modelled:" in html and "Costliest causes" in html
    for g in ex.groups[:10]:
        assert g.rule in html
    assert "<script" not in html


# ------------------------------------------------------------------------------------------
# Terminal
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [60, 80, 120])
def test_rule_ids_and_paths_are_never_cut(width, adam):
    from rich.console import Console

    from hlofuse.render.table import print_explanation

    out = io.StringIO()
    print_explanation(adam, Console(file=out, width=width, force_terminal=False), full=True)
    text = out.getvalue()
    words = set(text.split())
    for b in adam.boundaries:
        assert b.rule in words
        if b.source is not None:
            assert b.source.short() in words
        assert b.producer in text and b.consumer in text
    for line in text.splitlines():
        if len(line) > width:  # only a single word longer than the line may run past it
            assert max(len(w) for w in line.split()) > width - 12, line


def test_piped_output_is_not_wrapped_inside_file_names():
    result = CliRunner().invoke(main, ["explain", str(ADAM_GPU), "--no-predict", "--all"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    sources = set(re.findall(r"sample_dumps/programs\.py:\d+", result.stdout))
    assert sources  # whole paths, on one line each
    assert not re.search(r"sample_dumps/\n|programs\.\n", result.stdout)


# ------------------------------------------------------------------------------------------
# Many modules
# ------------------------------------------------------------------------------------------


def test_all_modules_ranks_the_groups_of_every_module_of_a_folder(tmp_path):
    import shutil

    for program in ("softmax", "layer_norm", "cartpole_c_separate"):
        for f in (SAMPLES / "cpu" / program).iterdir():
            shutil.copy(f, tmp_path / f.name)
    result = CliRunner().invoke(main, ["explain", str(tmp_path), "--all-modules", "--json", "--no-predict"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["schema"] == "hlofuse.explain-modules/1"
    assert sorted(m["module"] for m in payload["modules"]) == [
        "module_0000.jit_cartpole_c_separate", "module_0000.jit_layer_norm", "module_0000.jit_softmax"]
    assert all(m["error"] is None for m in payload["modules"])
    alone = {m: hlofuse.explain(tmp_path, module=m, predict=False).explanation for m in
             (x["module"] for x in payload["modules"])}
    assert len(payload["groups"]) == sum(len(ex.groups) for ex in alone.values())
    costs = [g["modelled_us"] for g in payload["groups"]]
    assert costs == sorted(costs, reverse=True)
    for m, ex in alone.items():
        mine = [g for g in payload["groups"] if g["module"] == m]
        assert [g["rule"] for g in mine] == [g.rule for g in ex.groups]
    text = CliRunner().invoke(main, ["explain", str(tmp_path), "--all-modules", "--no-predict", "--top", "3"])
    assert text.exit_code == 0 and "3 modules in" in text.stdout and "Costliest causes across the modules" in text.stdout
    gate = CliRunner().invoke(main, ["explain", str(tmp_path), "--all-modules", "--no-predict", "--fail-on",
                                     "BND-COPY-INSERTED"])
    assert gate.exit_code == 10
    misuse = CliRunner().invoke(main, ["explain", str(tmp_path), "--all-modules", "--module", "jit_softmax"])
    assert misuse.exit_code == 2


def test_automatic_predictions_stay_within_their_modelled_time_budget(monkeypatch):
    import hlofuse.triage as t

    ex = hlofuse.explain(SOFTMAX_CPU, predict=False).explanation
    size = sum(len(c.instructions) for c in ex.replay_result.input.computations)
    quick = triage(ex, TriageOptions(jobs=1))
    assert any(g.fix is not None for g in quick.groups)
    # a replay modelled to take the whole budget: one replay per variant would overrun it
    monkeypatch.setitem(t.REPLAY_US_PER_INSTRUCTION, "cpu", t.PREDICT_BUDGET_SECONDS * 1e6 / size)
    slow = triage(ex, TriageOptions(jobs=1))
    assert all(g.fix is None for g in slow.groups) and "would take about" in slow.predictions
    assert "--predict runs them" in slow.predictions
    forced = triage(ex, TriageOptions(predict=True, jobs=1))
    assert any(g.fix is not None for g in forced.groups)


def test_automatic_predictions_do_not_depend_on_the_machine_s_load(monkeypatch):
    """Whether fixes are predicted is decided by a model of the replay's cost, not by the time
    this machine took: a slow, loaded machine explains the same input the same way."""
    import os
    import time as time_module

    first = hlofuse.explain(SOFTMAX_CPU).to_dict()
    real = time_module.perf_counter
    monkeypatch.setattr(time_module, "perf_counter", lambda: real() * 1e5)  # a clock 100,000x slower
    monkeypatch.setattr(os, "getloadavg", lambda: (64.0, 64.0, 64.0))
    second = hlofuse.explain(SOFTMAX_CPU).to_dict()
    assert "predicted for" in first["summary"]["modelled"]["predictions"]
    assert second == first


def test_a_relaxable_group_says_once_why_it_was_not_predicted():
    result = CliRunner().invoke(main, ["explain", str(REPO / "sample_dumps/gpu-legacy-h100/softmax"), "--no-predict"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "is relaxable" in line]
    assert lines and all("--no-predict" in line and line.count("not predicted") == 1 for line in lines), lines

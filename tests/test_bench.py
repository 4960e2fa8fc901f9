"""`hlofuse bench`: plans of a cart-pole dump run on the CPU, checked and timed; JSON and
CSV output; relaxed replays; clear errors (no CUDA, an op the generator cannot emit,
buffers that do not fit)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from hlofuse import bench
from hlofuse.cli import main
from hlofuse.errors import EXIT_BACKEND
from hlofuse.execute import cuda
from hlofuse.execute.cpu import CpuDevice
from hlofuse.execute.inputs import random_inputs, relative_error
from hlofuse.execute.interp import evaluate

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_dumps"
VECDONE = SAMPLES / "gpu-legacy-rtx2080ti" / "cartpole_b_concat_vecdone"


def invoke(*args):
    return CliRunner().invoke(main, ["bench", *map(str, args)], catch_exceptions=False)


def test_bench_cpu_on_a_cartpole_dump_json(tmp_path):
    csv = tmp_path / "plans.csv"
    result = invoke(VECDONE, "--device", "cpu", "--plan", "unfused", "--plan", "xla", "--plan", "loop",
                    "--repeat", "2", "--json", "--csv", csv)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["device"].startswith("cpu")
    plans = {p["name"]: p for p in payload["plans"]}
    assert list(plans) == ["unfused", "xla", "loop"]
    for p in plans.values():
        assert set(p) >= {"name", "kernels", "launches", "bytes", "median_s", "speedup", "max_rel_error", "ok"}
        # single-precision sine and cosine: within a few 1e-7 of the double-precision reference
        assert p["ok"] is True and p["max_rel_error"] <= 1e-6 and p["median_s"] > 0
    assert plans["unfused"]["speedup"] == 1.0
    # 100 loop iterations: XLA's 2 simulation kernels + counter + copy... per step, one loop kernel
    assert plans["unfused"]["launches"] > plans["xla"]["launches"] > plans["loop"]["launches"]
    assert plans["xla"]["bytes"] < plans["unfused"]["bytes"]
    table = csv.read_text().splitlines()
    assert table[0].startswith("name,kernels,launches,bytes,median_s,speedup,max_rel_error,ok")
    assert len(table) == 4


def test_bench_human_table_and_relaxed_replay():
    result = invoke(VECDONE, "--device", "cpu", "--plan", "xla", "--plan", "relax:concat", "--repeat", "1")
    assert result.exit_code == 0, result.output
    assert "relax:concat" in result.output and "plans on cpu" in result.output


def test_relaxed_plan_is_the_replay_with_the_rule_relaxed():
    source = bench.load_source(str(VECDONE))
    plain, relaxed = bench.make_plans(source, ["relax:nothing-matches-this", "relax:concat"])
    assert plain.module is None and "nothing-matches-this" in plain.error
    assert relaxed.module is not None and "concat relaxed" in relaxed.origin
    from hlofuse.kernels import count_kernels

    body_kernels = {k.computation: k.kernels for k in count_kernels(relaxed.module)}
    assert body_kernels  # a fused module XLA did not make, ready to run


def test_given_inputs_are_the_ones_every_plan_runs_on():
    source = bench.load_source(str(SAMPLES / "gpu-current-h100" / "softmax"))
    plans = bench.make_plans(source, ["unfused", "xla"])
    args = random_inputs(bench.signature(plans[0].module), 11)
    results = bench.run_plans(plans, CpuDevice(), inputs=args, repeat=1, warmup=0)
    want = evaluate(plans[0].module, args)
    assert all(r.ok for r in results)
    # the inputs were used: another seed gives other outputs
    other = evaluate(plans[0].module, random_inputs(bench.signature(plans[0].module), 12))
    assert relative_error(np.asarray(other), np.asarray(want)) > 1e-3


def test_error_measure_forgives_cancellation_and_catches_wrong_values():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.02, 0.2, (64, 256)).astype(np.float32)
    # layer norm without scale: elements near zero come out of x - mean
    def norm(mean):
        return ((x - mean[:, None]) / x.std(axis=1, keepdims=True)).astype(np.float32)
    pairwise = x.mean(axis=1)
    sequential = np.array([np.float32(sum(np.float32(v) for v in row)) / np.float32(256) for row in x], np.float32)
    want, got = norm(pairwise), norm(sequential)
    assert not np.array_equal(want, got)  # summation order moved some bits
    assert relative_error(got, want) <= 1e-4
    shifted = np.roll(want, 1, axis=1)  # a wrong index
    assert relative_error(shifted, want) > 1e-2
    off = want.copy()
    off[3, 5] += 0.01 * np.abs(want).max()  # one element wrong by 1% of the output's scale
    assert relative_error(off, want) > 1e-3


def test_layer_norm_plans_match_the_reference_on_the_cpu():
    """Legacy layer_norm's outputs near zero come out of a cancellation; the plans sum in
    another order than NumPy and must still count as matching."""
    result = invoke(SAMPLES / "gpu-legacy-rtx2080ti" / "layer_norm", "--device", "cpu", "--plan", "unfused",
                    "--plan", "xla", "--repeat", "1", "--json")
    assert result.exit_code == 0, result.output
    plans = json.loads(result.output)["plans"]
    assert [p["ok"] for p in plans] == [True, True]
    assert all(0 < p["max_rel_error"] <= 1e-4 for p in plans)


def test_unfuse_inlines_every_fusion_and_computes_the_same():
    fused = bench.load_source(str(SAMPLES / "gpu-legacy-rtx2080ti" / "layer_norm")).after
    unfused = bench.unfuse(fused)
    assert any(i.opcode == "fusion" for i in fused.entry.instructions)
    assert not [i for i in unfused.entry.instructions if i.opcode == "fusion" and i.fusion_kind != "kCustom"]
    args = random_inputs([(p.shape.dims, p.shape.element_type) for p in fused.entry.parameters], 3)
    assert relative_error(np.asarray(evaluate(unfused, args)), np.asarray(evaluate(fused, args))) == 0


def test_single_file_input_runs_unfused_against_its_inlined_twin(tmp_path):
    path = next((SAMPLES / "gpu-current-h100" / "elementwise_chain").glob("*after_optimizations.txt"))
    result = invoke(path, "--device", "cpu", "--repeat", "1", "--json")
    assert result.exit_code == 0, result.output
    plans = json.loads(result.output)["plans"]
    assert [p["kernels"] for p in plans] == [plans[0]["kernels"], 1] and plans[0]["kernels"] > 1


def test_no_cuda_device_suggests_the_cpu():
    if cuda.available():
        pytest.skip("a CUDA device is here")
    result = invoke(VECDONE, "--device", "cuda")
    assert result.exit_code == EXIT_BACKEND
    assert "--device cpu" in result.output


def test_op_the_generator_cannot_emit_is_named(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text("""
HloModule m
cmp { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT lt = pred[] compare(a, b), direction=LT }
fused { p = f32[8] parameter(0)  e = f32[8] exponential(p)  ROOT s = f32[8] sort(e), dimensions={0}, to_apply=cmp }
ENTRY e { p = f32[8] parameter(0)  ROOT f = f32[8] fusion(p), kind=kLoop, calls=fused }
""")
    result = invoke(hlo, "--device", "cpu", "--plan", "xla", "--repeat", "1", "--json")
    plan = json.loads(result.output)["plans"][0]
    assert plan["ok"] is False
    assert "sort" in plan["error"] and "e/f" in plan["error"]


def test_buffers_that_do_not_fit_are_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(CpuDevice, "free_memory", lambda self: 1 << 20)
    allocated = []
    monkeypatch.setattr(CpuDevice, "allocate", lambda self, shape: allocated.append(shape))
    source = bench.load_source(str(VECDONE))
    results = bench.run_plans(bench.make_plans(source, ["xla"]), CpuDevice(), repeat=1, warmup=0)
    assert "refusing to allocate" in results[0].error and not allocated


def test_loop_plan_that_does_not_apply_says_why():
    source = bench.load_source(str(SAMPLES / "gpu-current-h100" / "softmax"))
    plans = bench.make_plans(source, ["xla", "loop"])
    assert plans[1].module is None and "no while loop" in plans[1].skipped  # known before anything runs
    results = bench.run_plans(plans, CpuDevice(), repeat=1, warmup=0)
    assert results[0].ok and not results[0].failed
    assert "no while loop" in results[1].skipped and not results[1].failed and results[1].error is None


def test_inputs_from_a_file(tmp_path):
    module = bench.load_source(str(SAMPLES / "gpu-current-h100" / "softmax")).after
    arrays = random_inputs([(p.shape.dims, p.shape.element_type) for p in module.entry.parameters], 5)
    np.savez(tmp_path / "in.npz", *arrays)
    result = invoke(SAMPLES / "gpu-current-h100" / "softmax", "--device", "cpu", "--inputs", tmp_path / "in.npz",
                    "--repeat", "1", "--json")
    assert result.exit_code == 0, result.output
    assert all(p["ok"] for p in json.loads(result.output)["plans"])


@pytest.mark.gpu
def test_bench_on_a_gpu():
    if not cuda.available():
        pytest.skip("no CUDA device and CuPy")
    result = invoke(VECDONE, "--device", "cuda", "--plan", "unfused", "--plan", "xla", "--plan", "loop",
                    "--repeat", "3", "--json")
    assert result.exit_code == 0, result.output
    plans = json.loads(result.output)["plans"]
    assert all(p["ok"] for p in plans)
    assert plans[1]["median_s"] < plans[0]["median_s"]


# ------------------------------------------------------------------------------------------
# --compare-xla: XLA's own compiled program beside the plans
# ------------------------------------------------------------------------------------------

CPU_SOFTMAX = SAMPLES / "cpu" / "softmax"


def _jax_python() -> str | None:
    """A Python with JAX for the comparison: HLOFUSE_JAX_PYTHON, the samples' virtualenv, or
    this one when it has JAX (CI installs the jax extra)."""
    import importlib.util
    import os
    import sys

    here = sys.executable if importlib.util.find_spec("jax") is not None else None
    for candidate in (os.environ.get("HLOFUSE_JAX_PYTHON"), REPO / ".venv-samples-current" / "bin" / "python", here):
        if candidate and Path(candidate).exists():
            return str(candidate)
    return None


def test_compare_xla_degrades_to_one_line_without_jax(monkeypatch):
    import importlib.util

    if importlib.util.find_spec("jax") is not None:
        pytest.skip("JAX is importable here")
    monkeypatch.delenv("HLOFUSE_JAX_PYTHON", raising=False)
    result = invoke(CPU_SOFTMAX, "--device", "cpu", "--plan", "xla", "--repeat", "1", "--compare-xla")
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.output.splitlines() if "XLA's own run" in ln]
    assert len(lines) == 1 and "not compared: JAX is not importable here" in lines[0]
    assert "Traceback" not in result.output
    payload = json.loads(invoke(CPU_SOFTMAX, "--device", "cpu", "--plan", "xla", "--repeat", "1", "--compare-xla",
                                "--json").output)
    assert payload["xla"]["ran"] is False and "JAX is not importable" in payload["xla"]["why_not"]
    assert payload["plans"][0]["vs_xla"] is None


def test_compare_xla_with_a_python_that_has_no_jax(monkeypatch):
    import importlib.util
    import sys

    if importlib.util.find_spec("jax") is not None:
        pytest.skip("JAX is importable here")
    monkeypatch.setenv("HLOFUSE_JAX_PYTHON", sys.executable)
    payload = json.loads(invoke(CPU_SOFTMAX, "--device", "cpu", "--plan", "xla", "--repeat", "1", "--compare-xla",
                                "--json").output)
    assert payload["xla"]["ran"] is False
    assert payload["xla"]["why_not"].startswith("JAX does not import: ModuleNotFoundError")


def test_compare_xla_needs_the_program_before_optimizations(tmp_path):
    # XLA's final module alone, outside its dump: nothing XLA could be given to compile
    fused = tmp_path / "softmax.hlo"
    fused.write_text(next((SAMPLES / "cpu" / "softmax").glob("*after_optimizations.txt")).read_text())
    payload = json.loads(invoke(fused, "--device", "cpu", "--plan", "xla", "--repeat", "1", "--compare-xla",
                                "--json").output)
    assert payload["xla"]["ran"] is False and "no program before optimizations" in payload["xla"]["why_not"]


def test_compare_xla_runs_xlas_own_program_beside_the_plans(monkeypatch):
    python = _jax_python()
    if python is None:
        pytest.skip("no Python with JAX (set HLOFUSE_JAX_PYTHON)")
    monkeypatch.setenv("HLOFUSE_JAX_PYTHON", python)
    result = invoke(SAMPLES / "cpu" / "cartpole_c_separate", "--device", "cpu", "--plan", "xla", "--plan", "loop",
                    "--repeat", "3", "--compare-xla", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    xla = payload["xla"]
    assert xla["ran"] and xla["ok"] and xla["runs"] == 3 and xla["median_s"] > 0
    assert xla["program"].endswith("before_optimizations.txt")
    assert "--xla_cpu_multi_thread_eigen=false" in xla["xla_flags"] and xla["threads"] == "single"
    assert xla["max_rel_error"] < 1e-5  # XLA's f32 sine and cosine against the reference's
    for plan in payload["plans"]:
        assert plan["vs_xla"] == pytest.approx(plan["median_s"] / xla["median_s"])

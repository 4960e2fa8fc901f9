"""One input resolution for every command (hlofuse/inputs.py, hlofuse/backend.py): the same
module, stages, backend, pipeline and GPU whichever command asks, decided from the decisive
evidence first; options checked before any work (issue 17, items 11, 12 and 14)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import hlofuse
from hlofuse.cli import main
from hlofuse.errors import EXIT_BACKEND, EXIT_INPUT, EXIT_RULE, EXIT_USAGE

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_dumps"
DATA = Path(__file__).resolve().parent / "data"
ALL_PASSES = DATA / "jax-0.10.2-all-passes-h100" / "softmax"
TPU = DATA / "tpu" / "loop_with_collective2.hlo"
CARTPOLE = SAMPLES / "gpu-current-h100" / "cartpole_b_concat"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def run_json(*args):
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ------------------------------------------------------------------------------------------
# 11. Detection: decisive evidence first
# ------------------------------------------------------------------------------------------


def test_gpu_dump_of_every_pass_is_xla_gpu_whatever_passes_it_shares_with_cpu():
    # The XLA:GPU pipeline runs reshape-decomposer and fusion-wrapper too; the file name
    # sm_9.0a_gpu_after_optimizations decides.
    ex = run_json("explain", ALL_PASSES)
    assert (ex["backend"], ex["pipeline"], ex["gpu"]) == ("gpu", "priority", "h100_sxm")
    assert "from the file name module_0001.jit_softmax.sm_9.0a_gpu_after_optimizations.txt" in ex["detected"]
    fused = run_json("fuse", ALL_PASSES)
    assert (fused["backend"], fused["pipeline"], fused["gpu"]) == ("gpu", "priority", "h100_sxm")
    checked = run_json("check", ALL_PASSES)
    assert checked["backend"] == "gpu" and checked["reproduced"] == checked["xla_kernels"] > 0


def test_tpu_module_is_explained_by_structure_only():
    ex = run_json("explain", TPU)
    assert (ex["backend"], ex["pipeline"], ex["gpu"]) == ("tpu", None, None)
    assert "XLA:TPU (in loop_with_collective2.hlo:" in ex["detected"] and "T(8,128)" in ex["detected"]
    assert "not replayed" in ex["detected"]
    assert sum("not replayed" in n for n in ex["notes"]) == 1
    assert not any("no fusion pipeline" in n for n in ex["notes"])
    rules = {b["rule"] for b in ex["boundaries"]}
    # Structure (loop crossings, tuples) is explained; no GPU pipeline rule answers for XLA:TPU.
    assert {"BND-LOOP-CARRIED", "BND-TUPLE-CONSUMER"} <= rules
    assert rules <= {r for r in rules if r.startswith("BND-")} | {"unknown"}


@pytest.mark.parametrize("args", [("fuse", TPU), ("check", TPU, TPU)])
def test_tpu_module_is_not_replayed(args):
    result = run(*args)
    assert result.exit_code == EXIT_BACKEND
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "XLA:TPU" in lines[0] and "not replayed" in lines[0]


def test_tpu_dump_file_names(tmp_path):
    # XLA:TPU names its final module module_NNNN.NAME.cl_<N>.after_optimizations.txt and writes
    # NAME.tpu_comp_env.txt beside it (as public TPU dumps show); the text here has no tiles.
    text = "HloModule m\nENTRY e {\n  x = f32[8] parameter(0)\n  ROOT n = f32[8] negate(x)\n}\n"
    (tmp_path / "module_0007.jit_f.cl_612345678.after_optimizations.txt").write_text(text)
    (tmp_path / "module_0007.jit_f.before_optimizations.txt").write_text(text)
    (tmp_path / "module_0007.jit_f.tpu_comp_env.txt").write_text("xla_tpu_flag: 1\n")
    resolved = hlofuse.resolve(tmp_path)
    assert resolved.backend == "tpu" and resolved.main.file.stage == "after_optimizations"
    assert "module_0007.jit_f." in resolved.detected and resolved.pipeline is None


def test_detection_line_is_plain_words_naming_the_module_file():
    d = hlofuse.resolve(CARTPOLE).detection
    assert d.evidence[0] == ("XLA:GPU for sm_9.0a (from the file name "
                             "module_0001.jit_cartpole_b_concat.sm_9.0a_gpu_after_optimizations.txt)")
    assert d.evidence[1].startswith("pipeline priority (") and d.evidence[2].startswith("GPU h100_sxm (")


# ------------------------------------------------------------------------------------------
# 12. One resolution for every command
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["fuse", "check", "explain", "parse"])
def test_module_option_works_for_every_command(command):
    result = run(command, CARTPOLE, "--module", "jit_cartpole_b_concat", "--json")
    assert result.exit_code == 0, result.output
    assert "jit_cartpole_b_concat" in result.stdout


def test_every_command_picks_the_same_pipeline_for_one_module():
    # A legacy dump whose only fusion snapshot is named like priority fusion's: the metadata's
    # era decides, for every command alike.
    folder = SAMPLES / "gpu-legacy-h100" / "softmax"
    pipelines = {cmd: run_json(cmd, folder)["pipeline"] for cmd in ("fuse", "check", "explain")}
    assert set(pipelines.values()) == {"legacy"}, pipelines
    assert hlofuse.resolve(folder, need="replay").pipeline == "legacy"


def _two_modules_named_alike(tmp_path) -> Path:
    source = next(CARTPOLE.glob("*sm_9.0a_gpu_after_optimizations.txt"))
    for key in ("module_0001.jit_step", "module_0005.jit_step", "module_0007.jit_other"):
        shutil.copy(source, tmp_path / f"{key}.sm_9.0a_gpu_after_optimizations.txt")
    return tmp_path


@pytest.mark.parametrize("command", ["parse", "explain", "fuse", "check"])
def test_module_matching_several_modules_is_an_error_listing_them(tmp_path, command):
    folder = _two_modules_named_alike(tmp_path)
    result = run(command, folder, "--module", "jit_step")
    assert result.exit_code == EXIT_INPUT
    assert "module_0001.jit_step" in result.output and "module_0005.jit_step" in result.output
    assert "Traceback" not in result.output


def test_module_named_in_full_or_by_id_is_chosen(tmp_path):
    folder = _two_modules_named_alike(tmp_path)
    assert hlofuse.resolve(folder, module="module_0005.jit_step").main.file.key == "module_0005.jit_step"
    assert hlofuse.resolve(folder, module="module_0005").main.file.key == "module_0005.jit_step"
    resolved = hlofuse.resolve(folder)
    assert "the largest of 3 modules" in resolved.chosen[0]


def test_stage_names_are_the_same_everywhere():
    before = hlofuse.resolve(CARTPOLE, stage="before").main.file
    assert before == hlofuse.resolve(CARTPOLE, stage="before_fusion").main.file
    assert before == hlofuse.resolve(CARTPOLE, need="replay").main.file
    assert hlofuse.load(CARTPOLE, stage="before") == hlofuse.resolve(CARTPOLE, need="replay").module
    parsed = run_json("parse", CARTPOLE, "--stage", "before")
    assert parsed["path"] == str(before.path)


def test_options_that_contradict_are_refused_before_reading():
    result = run("fuse", CARTPOLE, "--backend", "cpu", "--pipeline", "legacy")
    assert result.exit_code == EXIT_USAGE and "XLA:GPU pipeline" in result.output


# ------------------------------------------------------------------------------------------
# 14. Validation before work
# ------------------------------------------------------------------------------------------


def test_explain_relax_on_a_fused_dump_replays_its_snapshot_before_fusion():
    folder = SAMPLES / "gpu-current-h100" / "cartpole_a_rng"
    plain = run_json("explain", folder)
    relaxed = run_json("explain", folder, "--relax", "concat")
    assert plain["stage"] == "fused" and relaxed["stage"] == "replayed"
    assert any("--relax: explaining the replay" in line for line in relaxed["evidence"])
    assert relaxed["summary"]["kernels"] < plain["summary"]["kernels"]


def test_explain_relax_on_a_fused_file_without_snapshot_is_an_error(tmp_path):
    fused = tmp_path / "fused.hlo"
    fused.write_text(next(CARTPOLE.glob("*after_optimizations.txt")).read_text())
    result = run("explain", fused, "--relax", "concat")
    assert result.exit_code == EXIT_USAGE
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--relax" in lines[0] and "already fused" in lines[0]


def test_fuse_unknown_pass_is_refused_before_the_replay(monkeypatch):
    from hlofuse import pipeline

    monkeypatch.setattr(pipeline, "replay", lambda *a, **k: pytest.fail("replayed before checking --passes"))
    result = run("fuse", CARTPOLE, "--passes", "priority-fusion,nosuch")
    assert result.exit_code == EXIT_USAGE and "nosuch" in result.output and "priority-fusion" in result.output


def test_bench_unknown_plan_is_refused_before_any_work(monkeypatch):
    from hlofuse import bench

    monkeypatch.setattr(bench, "load_source", lambda *a, **k: pytest.fail("read the input before checking plans"))
    result = run("bench", CARTPOLE, "--device", "cpu", "--plan", "xla", "--plan", "nosuch")
    assert result.exit_code == EXIT_USAGE
    assert "nosuch" in result.output and "relax:RULE" in result.output and "loop" in result.output
    result = run("bench", CARTPOLE, "--device", "cpu", "--plan", "relax:no-such-rule")
    assert result.exit_code == EXIT_RULE


def test_bench_loop_plan_without_a_loop_is_a_skipped_row_not_a_failure():
    softmax = SAMPLES / "gpu-current-h100" / "softmax"
    result = run("bench", softmax, "--device", "cpu", "--plan", "xla", "--plan", "loop", "--repeat", "1", "--json")
    assert result.exit_code == 0, result.output
    plans = {p["name"]: p for p in json.loads(result.stdout)["plans"]}
    assert plans["xla"]["ok"] and "no while loop" in plans["loop"]["skipped"]
    table = run("bench", softmax, "--device", "cpu", "--plan", "xla", "--plan", "loop", "--repeat", "1")
    assert table.exit_code == 0 and "not applicable (the module has no while loop)" in table.stdout


def test_bench_loop_plan_alone_without_a_loop_is_an_error():
    result = run("bench", SAMPLES / "gpu-current-h100" / "softmax", "--device", "cpu", "--plan", "loop")
    assert result.exit_code == EXIT_USAGE
    lines = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1 and "--plan loop does not apply" in lines[0]

"""The Python API of the commands (issue 19): `hlofuse.explain(...)` and `hlofuse.check(...)`
return reports whose `.to_dict()` is exactly what the command prints with `--json`, for a
path, a dump folder or a parsed module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import hlofuse
from hlofuse.cli import main

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_dumps"
DUMPS = [
    SAMPLES / "gpu-current-h100" / "cartpole_b_concat",  # priority fusion, with XLA's fusion log
    SAMPLES / "gpu-legacy-rtx2080ti" / "cartpole_a_rng_customcall",  # legacy pipeline, a library call
    SAMPLES / "cpu" / "cartpole_c_separate",
]


def cli_json(*args) -> dict:
    result = CliRunner().invoke(main, [str(a) for a in args] + ["--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def plain(payload: dict) -> dict:
    """As the command prints it: through JSON (tuples become lists)."""
    return json.loads(json.dumps(payload))


@pytest.mark.parametrize("dump", DUMPS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_explain_to_dict_is_the_commands_json(dump):
    report = hlofuse.explain(dump)
    assert plain(report.to_dict()) == cli_json("explain", dump)
    assert report.summary()["kernels"] == len(report.kernels) == report.counts[0].kernels
    assert report.to_dict()["launches_per_run"] == report.summary()["kernels_launched"]


def test_explain_options_are_the_commands():
    dump = DUMPS[1]
    report = hlofuse.explain(dump, stage="before_fusion", pipeline="legacy", relax=("concat",))
    assert report.explanation.stage == "replayed"
    assert plain(report.to_dict()) == cli_json("explain", dump, "--stage", "before_fusion", "--pipeline", "legacy",
                                              "--relax", "concat")


@pytest.mark.parametrize("dump", DUMPS[:2] + [SAMPLES / "cpu" / "cartpole_a_rng"],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_check_to_dict_is_the_commands_json(dump):
    report = hlofuse.check(dump)
    assert plain(report.to_dict()) == cli_json("check", dump)
    assert report.agreement == report.to_dict()["agreement"]


def test_check_of_two_files_and_of_two_parsed_modules():
    files = sorted((SAMPLES / "gpu-current-h100" / "cartpole_b_concat").glob("*.txt"))
    before = next(f for f in files if "before_variadic-op-splitter" in f.name)
    after = next(f for f in files if "after_multi_output_fusion" in f.name or "before_multi_output_fusion" in f.name)
    by_paths = hlofuse.check(before, after, gpu="h100_sxm")
    assert plain(by_paths.to_dict()) == cli_json("check", before, after, "--gpu", "h100_sxm")
    by_modules = hlofuse.check(hlofuse.load(before), hlofuse.load(after), gpu="h100_sxm")
    assert by_modules.result.reproduced == by_paths.result.reproduced == by_paths.result.xla_kernels


def test_explain_of_a_parsed_module_is_that_of_its_file_alone(tmp_path):
    final = next((SAMPLES / "cpu" / "cartpole_c_separate").glob("*cpu_after_optimizations.txt"))
    lone = tmp_path / "final.hlo"  # no dump around it, as a module in memory has none
    lone.write_text(final.read_text())
    from_file = hlofuse.explain(lone, backend="cpu")
    from_module = hlofuse.explain(hlofuse.load(lone), backend="cpu")
    assert from_module.explanation.backend == "cpu" and from_module.explanation.pipeline == "cpu"
    assert list(from_module.kernels["name"]) == list(from_file.kernels["name"])
    columns = ["producer", "consumer", "rule", "modelled_us"]
    assert from_module.boundaries[columns].equals(from_file.boundaries[columns])
    assert len(from_module.boundaries) > 10


def test_errors_of_the_api_are_the_commands():
    with pytest.raises(hlofuse.HlofuseError, match="no such file"):
        hlofuse.explain(SAMPLES / "no-such-dump")
    with pytest.raises(hlofuse.HlofuseError, match="--pipeline cpu is an XLA:CPU pipeline"):
        hlofuse.explain(DUMPS[0], backend="gpu", pipeline="cpu")
    with pytest.raises(TypeError, match="expected a path"):
        hlofuse.explain(42)


def test_the_api_names_survive_importing_the_modules_of_the_same_names():
    import hlofuse.check
    import hlofuse.explain
    from hlofuse.check import CheckResult  # the module is still there, by its full name
    from hlofuse.explain import Explanation

    assert callable(hlofuse.explain) and hlofuse.explain.__module__ == "hlofuse"
    assert callable(hlofuse.check) and hlofuse.check.__module__ == "hlofuse"
    assert CheckResult and Explanation
    assert {"explain", "check", "compile_jax"} <= set(hlofuse.__all__)

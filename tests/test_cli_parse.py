"""`hlofuse parse` and `hlofuse print` through click's CliRunner: files, `-` (stdin), dump
folders, the --json schema, and errors as one located line with a caret, never a traceback."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hlofuse.cli import main
from hlofuse.errors import EXIT_INPUT, EXIT_SYNTAX

MODULE = """\
HloModule jit_f, entry_computation_layout={(f32[8]{0})->f32[8]{0}}

%fused_computation (param_0: f32[8]) -> f32[8] {
  %param_0 = f32[8]{0} parameter(0)
  %exponential = f32[8]{0} exponential(%param_0)
  ROOT %add = f32[8]{0} add(%exponential, %param_0)
}

ENTRY %main.1 (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  ROOT %fusion = f32[8]{0} fusion(%x), kind=kLoop, calls=%fused_computation
}

"""

BROKEN = MODULE.replace("%exponential = f32[8]{0} exponential(%param_0)",
                        "%exponential = f32[8]{0} exponential(%param_0")


@pytest.fixture()
def runner():
    return CliRunner()


def _file(tmp_path, text, name="m.hlo", newline="\n"):
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode())
    return path


def test_parse_file_prints_a_summary(runner, tmp_path):
    result = runner.invoke(main, ["parse", str(_file(tmp_path, MODULE))])
    assert result.exit_code == 0, result.output
    assert "jit_f" in result.stdout and "2 computations, 5 instructions" in result.stdout


def test_parse_json_schema(runner, tmp_path):
    result = runner.invoke(main, ["parse", str(_file(tmp_path, MODULE)), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"module", "path", "entry", "computations", "instructions", "opcodes", "fusions", "kernels",
            "warnings"} <= set(data)
    assert (data["module"], data["entry"], data["computations"], data["instructions"]) == ("jit_f", "main.1", 2, 5)
    assert data["opcodes"] == {"parameter": 2, "exponential": 1, "add": 1, "fusion": 1}
    assert data["fusions"] == {"kLoop": 1}
    assert isinstance(data["kernels"]["total"], int)
    for row in data["kernels"]["per_computation"]:
        assert {"computation", "role", "kernels", "by_kind"} <= set(row)
    assert data["warnings"] == []


def test_parse_stdin(runner):
    result = runner.invoke(main, ["parse", "-", "--json"], input=MODULE)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["path"] == "<stdin>" and data["instructions"] == 5


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "cr-only"])
def test_parse_crlf_and_cr_only_files(runner, tmp_path, newline):
    result = runner.invoke(main, ["parse", str(_file(tmp_path, MODULE, newline=newline)), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["instructions"] == 5


def test_parse_and_print_a_dump_folder(runner, tmp_path):
    folder = tmp_path / "dump"
    folder.mkdir()
    _file(folder, MODULE, "module_0001.jit_f.before_optimizations.txt")
    _file(folder, MODULE.replace("kind=kLoop", "kind=kInput"), "module_0001.jit_f.sm_9.0a_gpu_after_optimizations.txt")
    _file(folder, "not hlo", "module_0001.jit_f.sm_9.0a_gpu_after_optimizations-buffer-assignment.txt")
    result = runner.invoke(main, ["parse", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["fusions"] == {"kInput": 1} and data["path"].endswith("sm_9.0a_gpu_after_optimizations.txt")
    result = runner.invoke(main, ["parse", str(folder), "--module", "jit_f", "--stage", "before_optimizations",
                                  "--json"])
    assert json.loads(result.stdout)["fusions"] == {"kLoop": 1}
    result = runner.invoke(main, ["print", str(folder), "--stage", "before_optimizations"])
    assert result.exit_code == 0 and result.stdout == MODULE


def test_print_round_trips_and_short_form(runner, tmp_path):
    path = _file(tmp_path, MODULE)
    result = runner.invoke(main, ["print", str(path)])
    assert result.exit_code == 0 and result.stdout == MODULE
    short = runner.invoke(main, ["print", str(path), "--short"]).stdout
    assert "%" not in short and "fusion(x), kind=kLoop, calls=fused_computation" in short
    out = tmp_path / "out.hlo"
    assert runner.invoke(main, ["print", str(path), "-o", str(out)]).exit_code == 0
    assert out.read_text() == MODULE


def test_syntax_error_is_one_located_line_with_a_caret(runner, tmp_path):
    path = _file(tmp_path, BROKEN)
    result = runner.invoke(main, ["parse", str(path)])
    assert result.exit_code == EXIT_SYNTAX
    lines = result.stderr.splitlines()
    # Like XLA, the operand list goes on over the line end, and the next line breaks it.
    assert lines[0] == f"{path}:6:3: error: found 'ROOT', expected one of: ',', ')'", lines
    assert lines[1] == "  ROOT %add = f32[8]{0} add(%exponential, %param_0)"
    assert lines[2] == "  ^" and len(lines) == 3
    assert "Traceback" not in result.output and result.stdout == ""


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "cr-only"])
def test_error_lines_are_right_in_crlf_and_cr_only_files(runner, tmp_path, newline):
    path = _file(tmp_path, BROKEN, newline=newline)
    result = runner.invoke(main, ["parse", str(path)])
    assert result.exit_code == EXIT_SYNTAX
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"{path}:6:3: error: found 'ROOT'"), lines
    assert lines[1:] == ["  ROOT %add = f32[8]{0} add(%exponential, %param_0)", "  ^"]


def test_syntax_error_as_json(runner, tmp_path):
    path = _file(tmp_path, BROKEN)
    result = runner.invoke(main, ["parse", str(path), "--json"])
    assert result.exit_code == EXIT_SYNTAX
    data = json.loads(result.stdout)
    assert (data["line"], data["column"], data["path"]) == (6, 3, str(path)) and "found 'ROOT'" in data["error"]
    assert "Traceback" not in result.output


def test_semantic_error_from_stdin(runner):
    result = runner.invoke(main, ["parse", "-"], input=MODULE.replace("fusion(%x)", "fusion(%y)"))
    assert result.exit_code == EXIT_SYNTAX
    assert result.stderr.startswith("<stdin>:11:3: error: instruction does not exist: y")
    assert "literal" not in result.stderr


def test_a_number_as_an_operand_is_pointed_to_constant(runner):
    result = runner.invoke(main, ["parse", "-"], input=MODULE.replace("fusion(%x)", "fusion(1)"))
    assert result.exit_code == EXIT_SYNTAX
    assert result.stderr.startswith("<stdin>:11:3: error: instruction does not exist: 1 (operand of ")
    assert "a literal operand is only valid in constant(...)" in result.stderr.splitlines()[0]


@pytest.mark.parametrize("args", [["parse", "missing.hlo"], ["print", "missing.hlo"],
                                  ["parse", "--module", "nope", "."]])
def test_input_errors_exit_non_zero_without_traceback(runner, tmp_path, args, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(main, args)
    assert result.exit_code == EXIT_INPUT, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "error" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("text", ["", "\x00\xff garbage {", "HloModule m\n\nENTRY e {\n"])
def test_garbage_never_shows_a_traceback(runner, text):
    result = runner.invoke(main, ["parse", "-"], input=text)
    assert result.exit_code == EXIT_SYNTAX, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output

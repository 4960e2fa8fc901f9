"""What hlofuse prints and writes is safe whatever the dump holds, and it never writes where it
should not: issue 17, items 3 (terminal escapes), 4 (CSV formulas) and 9 (output files)."""

from __future__ import annotations

import io
import os
import shutil
import stat
from types import SimpleNamespace

import pandas as pd
import pytest
from click.testing import CliRunner

from hlofuse import bench as bench_mod
from hlofuse.bench import PlanResult
from hlofuse.cli import main, write_atomically
from hlofuse.commands import render as render_cmd
from hlofuse.errors import EXIT_INPUT, HloSyntaxError, OutputError

from hlofuse.render import dot as dotmod
from hlofuse.render.csv import csv_text, neutralise
from hlofuse.terminal import markup, printable, safe_console

ESC = "\x1b"

#: A module whose strings carry terminal escapes (a colour, a window title through OSC),
#: rich markup and spreadsheet formulas: everything a hostile dump may hold.
HOSTILE = f"""HloModule hostile

ENTRY main {{
  a = f32[16,16] parameter(0)
  w = f32[16,16] parameter(1)
  s = f32[16,16] negate(a), metadata={{op_name="jit(f)/neg" source_file="{ESC}]0;owned\x07f[/x].py" source_line=3}}
  g = f32[16,16] custom-call(s, w), custom_call_target="evil{ESC}[31mRED{ESC}[0m"
  ROOT r = f32[16,16] abs(g), metadata={{op_name="=HYPERLINK(1)" source_file="=cmd|calc" source_line=4}}
}}
"""

SMALL = """HloModule small

ENTRY main {
  a = f32[8] parameter(0)
  e = f32[8] exponential(a)
  ROOT n = f32[8] negate(e)
}
"""


@pytest.fixture
def hostile(tmp_path):
    path = tmp_path / "hostile.hlo"
    path.write_text(HOSTILE)
    return path


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.hlo"
    path.write_text(SMALL)
    return path


def invoke(args, **kwargs):
    # color=True: click strips some escape sequences from output that is not a terminal, and
    # these tests are about what a terminal gets
    return CliRunner().invoke(main, [str(a) for a in args], color=True, **kwargs)


# ------------------------------------------------------------------------------------------
# Item 3: control characters from a dump never reach the terminal raw
# ------------------------------------------------------------------------------------------


def test_printable_escapes_c0_del_and_c1_but_keeps_tabs():
    assert printable("a\x1b[31mb") == "a\\x1b[31mb"
    assert printable("x\x07\x7f\x9b\x00y") == "x\\x07\\x7f\\x9b\\x00y"
    assert printable("tab\tkept") == "tab\tkept"
    assert printable("two\nlines") == "two\\x0alines"
    assert printable("two\nlines", keep_newlines=True) == "two\nlines"
    assert printable("naïve — ✓") == "naïve — ✓"  # printable non-ASCII stays


def test_markup_escapes_rich_markup_too():
    out = io.StringIO()
    console = safe_console(file=out, width=80)
    console.print(f"[bold]{markup('a[/b] c[red]d' + ESC)}[/]")
    assert out.getvalue() == "a[/b] c[red]d\\x1b\n"


def test_safe_console_escapes_strings_it_renders():
    from rich.table import Table

    out = io.StringIO()
    table = Table(title=f"t{ESC}[2J")
    table.add_column("c")
    table.add_row(f"x{ESC}]0;t\x07")
    safe_console(file=out, width=80).print(table)
    assert ESC not in out.getvalue() and "\\x1b" in out.getvalue()


def test_explain_table_shows_escapes_from_a_dump_as_text(hostile):
    ranked = invoke(["explain", hostile, "--backend", "gpu", "--pipeline", "priority"])
    assert ranked.exit_code == 0, ranked.output
    assert ESC not in ranked.output and "\x07" not in ranked.output
    assert "\\x1b]0;owned\\x07f[/x].py:3" in ranked.stdout  # the groups' source lines
    result = invoke(["explain", hostile, "--backend", "gpu", "--pipeline", "priority", "--all"])
    assert result.exit_code == 0, result.output
    assert ESC not in result.output and "\x07" not in result.output
    assert "evil\\x1b[31mRED\\x1b[0m" in result.stdout
    assert "\\x1b]0;owned\\x07f[/x].py:3" in result.stdout  # markup shown as text, not read


def test_fuse_and_parse_output_carry_no_raw_escapes(hostile):
    for args in (["fuse", hostile, "--backend", "gpu"], ["parse", hostile]):
        result = invoke(args)
        assert result.exit_code == 0, result.output
        assert ESC not in result.output


def test_syntax_error_lines_show_escapes_with_the_caret_in_place(tmp_path):
    bad = tmp_path / "bad.hlo"
    bad.write_text(f'HloModule m\nENTRY e {{\n  ROOT x = f32[] parameter(0), metadata={{op_name="{ESC}[2J" {ESC}[31m}}\n}}\n')
    result = invoke(["parse", bad])
    assert result.exit_code == 3
    assert ESC not in result.stderr
    line, caret = result.stderr.splitlines()[1:3]
    assert "\\x1b[2J" in line
    assert line[caret.index("^")] == "}"  # the character XLA's parser stopped at


def test_syntax_error_context_escapes_and_moves_the_caret():
    err = HloSyntaxError("m", line=1, column=4, source_line=f"{ESC}ab)")
    line, caret = err.context().split("\n")
    assert line == "\\x1bab)" and line[caret.index("^")] == ")"


def test_dot_labels_escape_quotes_backslashes_newlines_and_controls():
    assert dotmod._q('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert dotmod._q(f"x{ESC}y\x07") == '"x\\\\x1by\\\\x07"'


def test_html_report_escapes_what_the_dump_says(hostile):
    from hlofuse import loads
    from hlofuse.explain import explain
    from hlofuse.render.html import render_html

    text = HOSTILE.replace("=cmd|calc", "<script>alert(1)</script>")
    html = render_html(explain(loads(text), backend="gpu", pipeline="priority", fused=True))
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# ------------------------------------------------------------------------------------------
# Item 4: CSV cells are never formulas
# ------------------------------------------------------------------------------------------


def test_neutralise_prefixes_formula_starts_of_text_only():
    for cell in ("=1+2", "+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"):
        assert neutralise(cell) == "'" + cell
    for cell in ("name", "", "1-2", -5, 3.5, None, True):
        assert neutralise(cell) == cell


def test_csv_text_keeps_numeric_columns_numeric():
    frame = pd.DataFrame({"name": ["=evil()", "ok"], "bytes": [-3, 4], "ratio": [-0.5, None]})
    back = pd.read_csv(io.StringIO(csv_text(frame)))
    assert list(back["name"]) == ["'=evil()", "ok"]
    assert list(back["bytes"]) == [-3, 4] and back["ratio"][0] == -0.5


def test_explain_csv_neutralises_cells_from_the_dump(hostile, tmp_path):
    out = tmp_path / "boundaries.csv"
    result = invoke(["explain", hostile, "--backend", "gpu", "--pipeline", "priority", "--csv", out])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert "'=cmd|calc" in set(frame["source_file"]) and "'=HYPERLINK(1)" in set(frame["source_op_name"])
    assert frame["bytes"].dtype.kind == "i" and frame["source_line"].dtype.kind == "i"


def test_bench_csv_goes_through_the_same_writer(small, tmp_path, monkeypatch):
    class Device:
        name = "stub"

    monkeypatch.setattr(bench_mod, "choose_device", lambda device: Device())
    source = SimpleNamespace(name="m", backend="cpu", pipeline="cpu", notes=[], evidence=[])
    monkeypatch.setattr(bench_mod, "load_source", lambda *a: source)
    monkeypatch.setattr(bench_mod, "make_plans", lambda *a, **k: [SimpleNamespace(name="=1+1", skipped=None, module=None)])
    monkeypatch.setattr(bench_mod, "run_plans", lambda *a, **k: [
        PlanResult("=1+1", kernels=-1, ok=True, error="-2+3", origin="@x")])
    out = tmp_path / "bench.csv"
    result = invoke(["bench", small, "--json", "--csv", out])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert frame["name"][0] == "'=1+1" and frame["error"][0] == "'-2+3" and frame["origin"][0] == "'@x"
    assert frame["kernels"][0] == -1


# ------------------------------------------------------------------------------------------
# Item 9: outputs are checked before the work, and written without surprises
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["fuse", "--backend", "gpu", "-o"], ["print", "-o"],
                                     ["render", "--dot", "-o"], ["explain", "--csv"], ["explain", "--html"]])
def test_an_output_equal_to_the_input_is_refused(small, command):
    before = small.read_bytes()
    args = [command[0], small, *command[1:]]
    for spelling in (small, small.parent / ".." / small.parent.name / small.name):
        result = invoke([*args, spelling])
        assert result.exit_code == EXIT_INPUT, result.output
        assert "input" in result.stderr and "Traceback" not in result.output
        assert small.read_bytes() == before


def test_an_output_that_is_a_hard_link_to_the_input_is_refused(small, tmp_path):
    twin = tmp_path / "twin.hlo"
    os.link(small, twin)
    result = invoke(["print", small, "-o", twin])
    assert result.exit_code == EXIT_INPUT and small.read_text() == SMALL


def test_an_output_read_as_part_of_the_input_dump_folder_is_refused(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    module = dump / "module_0001.jit_f.before_optimizations.txt"
    module.write_text(SMALL)
    result = invoke(["explain", dump, "--backend", "cpu", "--csv", module])
    assert result.exit_code == EXIT_INPUT and module.read_text() == SMALL
    new_stage = dump / "module_0001.jit_f.sm_9.0_gpu_after_optimizations.txt"  # would join the dump
    result = invoke(["fuse", dump, "--backend", "cpu", "-o", new_stage])
    assert result.exit_code == EXIT_INPUT and not new_stage.exists()
    report = dump / "report.csv"  # not a name of XLA's: fine beside the dump
    assert invoke(["explain", dump, "--backend", "cpu", "--csv", report]).exit_code == 0 and report.exists()


def test_render_into_a_missing_folder_is_refused_before_any_work(small, tmp_path, monkeypatch):
    def no_work(*args, **kwargs):
        raise AssertionError("the drawing was made before the output was checked")

    monkeypatch.setattr(render_cmd, "build_explanation", no_work)
    missing = tmp_path / "missing" / "dir" / "x.svg"
    result = invoke(["render", small, "-o", missing])
    assert result.exit_code == EXIT_INPUT and "does not exist" in result.stderr
    assert not (tmp_path / "missing").exists()


def test_bench_csv_naming_a_folder_is_refused_before_any_work(small, tmp_path, monkeypatch):
    def no_work(*args, **kwargs):
        raise AssertionError("bench ran before the output was checked")

    monkeypatch.setattr(bench_mod, "choose_device", no_work)
    monkeypatch.setattr(bench_mod, "load_source", no_work)
    result = invoke(["bench", small, "--device", "cpu", "--csv", tmp_path])
    assert result.exit_code == EXIT_INPUT and "is a folder" in result.stderr


def test_csv_and_html_naming_one_file_are_refused(small, tmp_path):
    out = tmp_path / "report"
    result = invoke(["explain", small, "--backend", "cpu", "--csv", out, "--html", out])
    assert result.exit_code == EXIT_INPUT and "same file" in result.stderr and not out.exists()


def test_paths_with_brackets_are_printed_not_read_as_markup(small, tmp_path):
    (tmp_path / "out[").mkdir()
    out = tmp_path / "out[" / "b][red].csv"  # rich reads "[/b]" as a closing tag with none open
    result = invoke(["explain", small, "--backend", "cpu", "--csv", out])
    assert result.exit_code == 0, result.output
    assert out.exists() and f"wrote{out}" in "".join(result.stderr.split())  # (rich wraps long lines)


def test_an_existing_output_keeps_its_mode(tmp_path):
    out = tmp_path / "kept.txt"
    out.write_text("old")
    out.chmod(0o640)
    write_atomically(str(out), "new")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o640
    fresh = tmp_path / "fresh.txt"
    write_atomically(str(fresh), "x")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask


def test_an_output_that_is_a_link_is_refused_and_its_target_untouched(small, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "out.hlo"
    link.symlink_to(victim)
    with pytest.raises(OutputError, match="symbolic link"):
        write_atomically(str(link), "text")
    result = invoke(["print", small, "-o", link])
    assert result.exit_code == EXIT_INPUT and victim.read_text() == "precious" and link.is_symlink()


def test_write_atomically_refuses_a_missing_folder_and_leaves_no_temporary_file(tmp_path):
    with pytest.raises(OutputError, match="does not exist"):
        write_atomically(str(tmp_path / "no" / "such.txt"), "x")
    assert not (tmp_path / "no").exists()
    write_atomically(str(tmp_path / "done.txt"), b"bytes")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.txt"]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_render_writes_an_svg_without_control_characters(hostile, tmp_path):
    out = tmp_path / "x.svg"
    result = invoke(["render", hostile, "-o", out, "--backend", "gpu", "--pipeline", "priority"])
    assert result.exit_code == 0, result.output
    assert ESC not in out.read_text() and "\x07" not in out.read_text()

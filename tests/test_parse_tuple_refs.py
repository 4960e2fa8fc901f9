"""`%t#2` operands: XLA's printer (since 2026, jax 0.11) writes a tuple's element where a
get-tuple-element instruction used to be printed.  Parsing makes the instruction, printing
writes the reference back, and the fusion passes see ordinary get-tuple-elements."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlofuse.cli import main
from hlofuse.errors import HloSyntaxError
from hlofuse.parse import parse_text
from hlofuse.printer import print_module

DATA = Path(__file__).resolve().parent / "data" / "jax-0.11.2-h100"

LOOP = """HloModule m

%body (s: (s32[], f32[4], (f32[4], f32[]))) -> (s32[], f32[4], (f32[4], f32[])) {
  %s = (s32[], f32[4]{0}, (f32[4]{0}, f32[])) parameter(0)
  %one = s32[] constant(1)
  %next = s32[] add(%s#0, %one)
  %sum = f32[4]{0} add(%s#1, f32[4]{0} %s#2#0)
  %scaled = f32[4]{0} multiply(%sum, %s#2#0)
  ROOT %out = (s32[], f32[4]{0}, (f32[4]{0}, f32[])) tuple(%next, %scaled, %s#2)
}

%cond (s: (s32[], f32[4], (f32[4], f32[]))) -> pred[] {
  %s = (s32[], f32[4]{0}, (f32[4]{0}, f32[])) parameter(0)
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(%s#0, %n), direction=LT
}

ENTRY %main (p: (s32[], f32[4], (f32[4], f32[]))) -> f32[4] {
  %p = (s32[], f32[4]{0}, (f32[4]{0}, f32[])) parameter(0)
  %w = (s32[], f32[4]{0}, (f32[4]{0}, f32[])) while(%p), condition=%cond, body=%body
  ROOT %r = f32[4]{0} negate(%w#1)
}
"""


def test_each_reference_becomes_one_get_tuple_element_before_its_first_user():
    module = parse_text(LOOP)
    body = module["body"]
    names = [i.name for i in body.instructions]
    gtes = {i.name: i for i in body.instructions if i.opcode == "get-tuple-element"}
    assert set(gtes) == {"s#0", "s#1", "s#2", "s#2#0"}
    assert gtes["s#2#0"].operands == ("s#2",) and gtes["s#2#0"].attr("index") == "0"
    assert str(gtes["s#2#0"].shape) == str(body["s"].shape.tuple_shapes[2].tuple_shapes[0])
    assert gtes["s#2"].shape.is_tuple
    assert names.index("s#0") < names.index("next") and names.index("s#2") < names.index("s#2#0") < names.index("sum")
    assert body["sum"].operands == ("s#1", "s#2#0")
    assert module.entry["r"].operands == ("w#1",)


def test_printing_writes_the_references_back():
    module = parse_text(LOOP)
    text = print_module(module)
    assert "get-tuple-element" not in text
    assert "%s#1, f32[4]{0} %s#2#0)" in text and " %w#1)" in text  # operand shapes: the text had one
    assert parse_text(text) == module


@pytest.mark.parametrize("body, message", [
    ("%a = f32[4]{0} parameter(0)\n  ROOT %b = f32[4]{0} negate(%a#0)", "f32[4] is f32[4], not a tuple"),
    ("%a = (f32[4]{0}, s32[]) parameter(0)\n  ROOT %b = f32[4]{0} negate(%a#2)", "a tuple of 2 elements"),
])
def test_a_reference_past_the_tuple_is_a_one_line_error_at_its_user(body, message):
    with pytest.raises(HloSyntaxError) as info:
        parse_text(f"HloModule m\n\nENTRY %main {{\n  {body}\n}}\n")
    text = str(info.value).splitlines()[0]
    assert ":5:3:" in text and message.split(" is ")[-1] in text


def test_a_reference_to_nothing_says_the_operand_does_not_exist():
    with pytest.raises(HloSyntaxError, match="does not exist: nowhere#0"):
        parse_text("HloModule m\n\nENTRY %main {\n  ROOT %b = f32[4]{0} negate(%nowhere#0)\n}\n")


@pytest.mark.parametrize("path", sorted(DATA.glob("*/*.txt")), ids=lambda p: f"{p.parent.name}/{p.name[:40]}")
def test_real_dumps_parse_and_print_back(path):
    text = path.read_text()
    module = parse_text(text, str(path))
    made = [i for c in module.computations for i in c.instructions
            if i.opcode == "get-tuple-element" and "#" in i.name]
    assert made  # these files use the shorthand throughout
    for comp in module.computations:
        for instr in comp.instructions:
            if instr in made:
                tuple_shape = comp[instr.operands[0]].shape
                assert instr.shape == tuple_shape.tuple_shapes[int(instr.attr("index"))]
    assert parse_text(print_module(module)) == module


@pytest.mark.parametrize("program, kernels", [("rnn_scan", 8), ("argsort_rows", 2)])
def test_check_replays_a_jax_0_11_dump_and_reproduces_its_kernels(program, kernels):
    result = CliRunner().invoke(main, ["check", str(DATA / program), "--gpu", "h100_sxm", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    assert report["xla_kernels"] == kernels
    assert report["reproduced"] == kernels


def test_index_marks_before_references_are_kept():
    text = ("HloModule m, entry_computation_layout={((f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[]))->"
            "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[])}\n\n"
            "ENTRY %main (p: (f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[])) -> "
            "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[]) {\n"
            "  %p = (f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[]) parameter(0)\n"
            "  ROOT %t = (f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[]) "
            "tuple(%p#5, %p#4, %p#3, %p#2, %p#1, /*index=5*/%p#0)\n}\n\n")
    assert print_module(parse_text(text)) == text

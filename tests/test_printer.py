"""hlofuse.dumps / printer.print_module: XLA's long and short spellings, exactly as XLA prints."""

from __future__ import annotations

import hlofuse
from hlofuse import ir
from hlofuse.printer import LONG, SHORT, print_module, shape_text

LONG_TEXT = """\
HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %e (p: f32[2]) -> f32[2] {
  %p = f32[2]{0} parameter(0)
  %c = f32[] constant(0)
  %r = f32[] reduce(%p, %c), dimensions={0}, to_apply=%add
  ROOT %b = f32[2]{0} broadcast(%r), dimensions={}, control-predecessors={%c}
}

"""


def test_long_form_prints_back_exactly():
    assert hlofuse.dumps(hlofuse.loads(LONG_TEXT)) == LONG_TEXT


def test_short_form_respells_names_and_drops_signatures():
    short = print_module(hlofuse.loads(LONG_TEXT), SHORT)
    assert "%" not in short and "\nadd {\n" in short and "ENTRY e {" in short
    assert "to_apply=add" in short and "control-predecessors={c}" in short
    assert hlofuse.loads(short) == hlofuse.loads(LONG_TEXT)
    assert print_module(hlofuse.loads(short), LONG) == LONG_TEXT


def test_every_computation_ends_with_a_blank_line_like_xla():
    text = hlofuse.dumps(hlofuse.loads(LONG_TEXT))
    assert text.endswith("}\n\n") and "}\n\nENTRY" in text


def test_long_tuples_carry_index_marks():
    shape = ir.tuple_shape([ir.array_shape("f32", (2,))] * 7)
    assert shape_text(shape) == "(f32[2]{0}, f32[2]{0}, f32[2]{0}, f32[2]{0}, f32[2]{0}, /*index=5*/f32[2]{0}, f32[2]{0})"
    assert shape_text(shape, layout=False).count("{") == 0


def test_scalar_layouts_are_not_printed_but_tiles_are():
    assert shape_text(ir.Shape("f32", (), ir.Layout(()))) == "f32[]"
    assert shape_text(ir.Shape("bf16", (8, 128), ir.Layout((1, 0), "T(8,128)(2,1)"))) == "bf16[8,128]{1,0:T(8,128)(2,1)}"


def test_a_module_built_in_code_prints_in_the_long_form():
    p = ir.Instruction("p", "parameter", ir.array_shape("f32", (4,)), literal="0")
    neg = ir.Instruction("n", "negate", ir.array_shape("f32", (4,)), operands=("p",))
    comp = ir.Computation("main", (p, neg), "n", is_entry=True)
    module = ir.Module("built", (comp,), "main")
    text = hlofuse.dumps(module)
    assert text == ("HloModule built\n\nENTRY %main (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n"
                    "  ROOT %n = f32[4]{0} negate(%p)\n}\n\n")
    assert hlofuse.loads(text) == module


def test_closing_comments_and_stack_frames_survive():
    text = LONG_TEXT.replace("  ROOT %s = f32[] add(%a, %b)\n}", "  ROOT %s = f32[] add(%a, %b)\n} // add")
    assert hlofuse.dumps(hlofuse.loads(text)) == text

"""Metadata values are checked against the grammar's METADATA_VALUE for every instruction, with
the instruction's line and column on failure, without going through `_value_fits`'s memo:
metadata differs from instruction to instruction, and the memo would only hold it."""

from __future__ import annotations

import pytest

from hlofuse import validate
from hlofuse.errors import HloSyntaxError
from hlofuse.parse import parse_text


def _module(metadata: str, count: int = 1) -> str:
    body = "".join(f"  %n{k} = f32[2]{{0}} negate(%p), metadata={metadata.replace('K', str(k))}\n"
                   for k in range(count))
    return ("HloModule m\n\nENTRY %e (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n" + body
            + f"  ROOT %r = f32[2]{{0}} copy(%n{count - 1})\n}}\n")


@pytest.mark.parametrize("value", ['{op_name="a" bogus}', "{foo}", '"x"'])
def test_malformed_metadata_is_an_error_at_its_instruction(value):
    with pytest.raises(HloSyntaxError) as err:
        parse_text(_module(value), "m.hlo")
    assert str(err.value).startswith("m.hlo:5:31: error: malformed value of attribute metadata")


def test_metadata_values_are_not_memoised():
    validate._FITS.clear()
    module = parse_text(_module('{op_name="jit(f)/negate" source_line=K}', count=200), "m.hlo")
    assert len(module.computations[0].instructions) == 202
    assert sum(len(memo) for memo in validate._FITS.values()) == 0


def test_a_literal_checked_once_per_shape():
    """validate remembers literals that passed for a shape (scalars repeat): the same text is
    still checked for another shape, and a bad literal is reported where it is, every time."""
    text = "\n".join([
        "HloModule m",
        "ENTRY e {",
        "  a = f32[] constant(1.5)",
        "  b = f32[] constant(1.5)",
        "  c = s32[] constant(1.5)",
        "  ROOT d = f32[] add(a, b)",
        "}",
    ])
    for _ in range(2):
        with pytest.raises(HloSyntaxError) as err:
            parse_text(text)
        assert (err.value.line, err.value.column) == (5, 3)
        assert "expects an integer literal, sees 1.5" in str(err.value)
    assert parse_text(text.replace("s32[] constant(1.5)", "s32[] constant(1)"))["e"]["c"].literal == "1"

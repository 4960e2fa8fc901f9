"""Async ops as XLA's parser reads them (hlofuse/validate.py, check_async): `X-start`,
`X-update`, `X-done` for any opcode X without such opcodes of its own wrap X in an async op
(all-to-all-start, reduce-scatter-done, custom-call-update...); all-gather, all-reduce,
collective-permute and copy have start/done opcodes of their own, send and recv done ones.
tests/data/xla-async-forms holds a text of every form, the same text as XLA's printer writes
it, and texts XLA rejects with its message (generate.py makes them with jax 0.10.2)."""

from __future__ import annotations

import csv
import re

import pytest

import hlofuse
from hlofuse import HloSyntaxError

from conftest import REPO

DATA = REPO / "tests" / "data" / "xla-async-forms"


def _errors() -> list[tuple[str, str, str]]:
    with open(DATA / "errors.tsv", newline="") as fh:
        return [(name, text.replace("\\n", "\n"), expected) for name, text, expected in csv.reader(fh, delimiter="\t")]


def test_every_async_form_parses():
    module = hlofuse.loads((DATA / "written.hlo").read_text(), strict=True)
    opcodes = {i.opcode for i in module.entry.instructions}
    assert {"all-to-all-start", "all-to-all-done", "reduce-scatter-start", "reduce-scatter-done",
            "custom-call-update", "async-update", "all-gather-start", "send-done", "recv-done"} <= opcodes
    assert not module.warnings


def test_xla_printed_text_prints_back_byte_for_byte():
    text = (DATA / "printed_by_xla.hlo").read_text()
    module = hlofuse.loads(text, strict=True)
    assert hlofuse.dumps(module) == text
    start = module.entry["rs-start"]
    assert start.opcode == "reduce-scatter-start" and start.attr("to_apply") == "add"


@pytest.mark.parametrize("name, text, expected", _errors(), ids=[row[0] for row in _errors()])
def test_what_xla_rejects(name, text, expected):
    with pytest.raises(HloSyntaxError, match=re.escape(expected)):
        hlofuse.loads(text)


def test_the_start_of_a_generic_async_chain_wraps_its_callees_root():
    text = (DATA / "written.hlo").read_text().replace(
        "as-update = ((f32[4,8]), f32[4,8], s32[]) async-update(as-start)",
        "as-update = ((f32[4,8]), f32[4,8], s32[]) reduce-scatter-update(as-start)")
    with pytest.raises(HloSyntaxError, match="Expect async wrapped opcode to be all-to-all, but got reduce-scatter"):
        hlofuse.loads(text)


def test_sugar_of_an_opcode_xla_lacks_stays_an_unknown_opcode():
    text = ("HloModule m\n\nENTRY main {\n  p = f32[4] parameter(0)\n"
            "  s = ((f32[4]), f32[4], s32[]) frobnicate-start(p)\n  ROOT d = f32[4] frobnicate-done(s)\n}\n")
    module = hlofuse.loads(text)
    assert len(module.warnings) == 2 and "unknown opcode 'frobnicate-start'" in module.warnings[0]
    with pytest.raises(HloSyntaxError, match="unknown opcode: frobnicate-start"):
        hlofuse.loads(text, strict=True)

"""validate remembers the attribute pairs that passed (per opcode; long values and metadata
for the module being checked only): what it remembers never lets a wrong attribute through,
and it keeps no long value beyond the module."""

from __future__ import annotations

import pytest

from hlofuse import validate
from hlofuse.errors import HloSyntaxError
from hlofuse.parse import parse_text

CONFIG = '{"operation_queue_id":"0","wait_on_operation_queues":[],"force_earliest_schedule":false,' + \
    '"reification_cost":[],"device_type":"DEVICE_TYPE_INVALID","padding_for_a_long_value":"' + "x" * 120 + '"}'


def _module(*lines: str) -> str:
    body = "".join(f"  {line}\n" for line in lines)
    return ("HloModule m\n\nENTRY %e (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n" + body + "}\n")


def test_a_pair_that_passed_on_one_opcode_is_still_checked_on_another():
    """`padding=0_1` passed on pad; on add, which does not take it, it is XLA's error."""
    z = "%z = f32[] constant(0)"
    pad = "%q = f32[5]{0} pad(%p, %z), padding=0_1"
    good = _module(z, pad, "ROOT %a = f32[4]{0} add(%p, %p)")
    assert parse_text(good).entry["q"].attr("padding") == "0_1"
    bad = _module(z, pad, "ROOT %a = f32[4]{0} add(%p, %p), padding=0_1")
    with pytest.raises(HloSyntaxError) as err:
        parse_text(bad, "m.hlo")
    assert 'unexpected attribute "padding" for add' in str(err.value)
    assert (err.value.line, err.value.column) == (7, 36)


def test_long_values_are_remembered_for_the_module_only():
    lines = [f"%n{k} = f32[4]{{0}} negate(%p), backend_config={CONFIG}, metadata={{op_name=\"a\"}}" for k in range(3)]
    module = parse_text(_module(*lines, "ROOT %r = f32[4]{0} copy(%n2), sharding={replicated}"))
    assert module.entry["n2"].attr("backend_config") == CONFIG
    kept = [pair for facts in validate._FACTS.values() for pair in facts[4]]
    assert ("sharding", "{replicated}") in kept
    assert all(len(value) < 200 and key != "metadata" for key, value in kept)


def test_a_malformed_value_after_a_good_one_of_the_same_attribute_is_found():
    """The memo holds pairs, not attribute names: a later malformed metadata or long backend
    config is reported at its own instruction."""
    good = f"%a = f32[4]{{0}} negate(%p), backend_config={CONFIG}, metadata={{op_name=\"a\"}}"
    for bad, what in ((f"%b = f32[4]{{0}} negate(%a), backend_config={CONFIG}x", "backend_config"),
                      ('%b = f32[4]{0} negate(%a), metadata={op_name="a" x}', "metadata")):
        with pytest.raises(HloSyntaxError) as err:
            parse_text(_module(good, bad, "ROOT %r = f32[4]{0} copy(%b)"), "m.hlo")
        assert f"malformed value of attribute {what}" in str(err.value)
        assert err.value.line == 6

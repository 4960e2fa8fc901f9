"""GPU descriptions (`--gpu FILE`): a field the cost models divide by may not be 0, no count may
be negative, and a bad one is reported at its place in the file, never as a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hlofuse.cli import main
from hlofuse.device import SPEC_DIR, available, load_gpu, parse_spec
from hlofuse.errors import EXIT_INPUT, InputError

H100 = (SPEC_DIR / "h100_sxm.txtpb").read_text()
SAMPLE = Path(__file__).resolve().parent.parent / "sample_dumps" / "gpu-current-h100" / "attention"


def _with(field: str, value: str) -> str:
    text, count = re.subn(rf"^(\s*{field}:)\s*\S+", rf"\g<1> {value}", H100, flags=re.M)
    assert count == 1, field
    return text


def _place(text: str, field: str) -> str:
    """line:column of the field's value, counted as an editor does (from 1)."""
    at = re.search(rf"^\s*{field}:\s*(\S)", text, re.M).start(1)
    return f"{text.count(chr(10), 0, at) + 1}:{at - text.rfind(chr(10), 0, at)}"


def test_every_shipped_description_is_accepted():
    for name in available():
        assert load_gpu(name).memory_bandwidth > 0


@pytest.mark.parametrize("field", ["core_count", "memory_bandwidth", "clock_rate_ghz", "threads_per_warp",
                                   "threads_per_block_limit", "threads_per_core_limit", "fpus_per_core"])
def test_a_divisor_of_zero_is_refused_at_its_place(field):
    text = _with(field, "0")
    with pytest.raises(InputError, match=rf"^spec\.txtpb:{_place(text, field)}: .*{field} must be a finite positive"):
        parse_spec(text, "spec", "spec.txtpb")


@pytest.mark.parametrize("field, value", [("l2_cache_size", "-1"), ("shared_memory_per_block", "-49152"),
                                          ("clock_rate_ghz", "1e999")])
def test_negative_or_infinite_values_are_refused(field, value):
    with pytest.raises(InputError, match=f"{field} must be a finite"):
        parse_spec(_with(field, value), "spec")


def test_zero_where_xla_allows_it_is_kept():
    assert parse_spec(_with("l2_cache_size", "0"), "spec").l2_cache_size == 0


@pytest.mark.parametrize("pipeline", ["priority", "legacy"])
def test_the_cli_says_one_line_instead_of_dividing_by_zero(tmp_path, pipeline):
    spec = tmp_path / "slow.txtpb"
    text = _with("memory_bandwidth", "0")
    spec.write_text(text)
    result = CliRunner().invoke(main, ["fuse", str(SAMPLE), "--pipeline", pipeline, "--gpu", str(spec)])
    assert result.exit_code == EXIT_INPUT
    errors = [line for line in result.output.splitlines() if "error" in line]
    assert errors == [f"error: {spec}:{_place(text, 'memory_bandwidth')}: GPU description slow: memory_bandwidth must be a finite "
                      "positive number, got 0"]
    assert "Traceback" not in result.output and "ZeroDivisionError" not in result.output

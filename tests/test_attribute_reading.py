"""Attribute values hold user text of any length (an op_name can be megabytes): parsing and
reading them takes memory in proportion to the text, whatever it holds (the grammar's
possessive STRING, attributes.key_values and quoted_end, xla_log's strings).  tracemalloc
counts what the regular expression engine keeps as well, so the bounds below fail for a
pattern that keeps a backtracking entry per character or per escape."""

from __future__ import annotations

import sys
import tracemalloc

import pytest

import hlofuse
from hlofuse import attributes, xla_log
from hlofuse.attributes import key_values, quoted_end


def _peak(fn, *args):
    tracemalloc.start()
    try:
        result = fn(*args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("body", ["jit(f)/" + "a" * 2_000_000, "jit(f)/" + '\\"x' * 700_000],
                         ids=["plain", "escapes"])
def test_a_megabyte_op_name_is_read_in_memory_proportional_to_it(body):
    text = f'{{op_type="exp" op_name="{body}" source_file="f.py" source_line=3 stack_frame_id=2}}'
    meta, peak = _peak(attributes._metadata.__wrapped__, text)
    assert meta.op_type == "exp" and meta.source_file == "f.py" and meta.source_line == 3
    assert meta.stack_frame_id == 2 and len(meta.op_name) == len(body) - body.count("\\")
    assert peak < 4 * len(text), f"{peak / len(text):.1f}x the text"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="possessive quantifiers arrived in Python 3.11")
def test_the_parser_reads_a_string_of_many_escapes_in_memory_proportional_to_it():
    body = "jit(f)/" + '\\"x' * 300_000
    text = ("HloModule m\n\nENTRY main {\n  p = f32[4] parameter(0)\n  ROOT e = f32[4] exponential(p), "
            f'metadata={{op_type="exp" op_name="{body}"}}\n}}\n')
    hlofuse.loads("ENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n")  # the grammar built before measuring
    module, peak = _peak(hlofuse.loads, text)
    assert len(attributes.metadata(module.entry.root).op_name) == len(body) - body.count("\\")
    assert peak < 4 * len(text), f"{peak / len(text):.1f}x the text"  # 70x with a plain `*`


def test_frontend_attributes_too():
    value = "v" * 1_000_000
    fields, peak = _peak(key_values, f'{{_xla_stream_annotation="1", big="{value}",n=2}}')
    assert fields == {"_xla_stream_annotation": '"1"', "big": f'"{value}"', "n": "2"}
    assert peak < 3 * len(value)


def test_a_priority_fusion_log_with_a_whole_module_in_one_string():
    module = 'HloModule m\\n\\nENTRY e {\\n  ROOT p = f32[2]{0} parameter(0), metadata={op_name=\\"x\\"}\\n}\\n' * 20_000
    text = ('fusion_steps { producer_ineligible { producer_name: "a" reason: "r" } }\n'
            f'hlo_module_before_fusion: "{module}"\n')
    log, peak = _peak(xla_log.parse, text)
    assert log.module_before_fusion.count("ENTRY e {\n") == 20_000
    assert peak < 4 * len(text), f"{peak / len(text):.1f}x the text"


def test_key_values_reads_what_the_fields_say():
    text = '{op_type="add" op_name="jit(f)/a\\"b c=d" source_file="f.py" source_line=3}'
    assert key_values(text) == {"op_type": '"add"', "op_name": '"jit(f)/a\\"b c=d"', "source_file": '"f.py"',
                                "source_line": "3"}
    assert key_values("{}") == {}
    assert key_values('{a="not closed') == {"a": '"not closed'}
    assert key_values('"stray" k=1 {x') == {"k": "1"}


@pytest.mark.parametrize("text, end", [('"ab"', 4), ('"a\\"b"', 6), ('"a\\\\"b', 5), ('"ab', -1), ("'x'y", 3)])
def test_quoted_end(text, end):
    assert quoted_end(text, 0) == end

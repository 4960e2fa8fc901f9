"""Attributes XLA knows: which grammar terminal spells each value, which opcodes take it, and
typed readers for the values rules need (`dimensions(instr)`, `window(instr)`, ...).

Attribute values stay verbatim in the IR; these readers parse them on demand (memoised by
text, since dumps repeat the same values).  Attributes hlofuse does not know are kept as they
are and never rejected: XLA adds new ones often.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Mapping

from . import ir
from .opcodes import TRANSCENDENTAL


@dataclass(frozen=True, slots=True)
class AttrSpec:
    """A known attribute: the grammar terminal its value must match, and the opcodes that take
    it (None: any opcode)."""

    terminal: str
    opcodes: frozenset[str] | None = None


def _ops(*names: str) -> frozenset[str]:
    return frozenset(names)


_REDUCERS = _ops("reduce", "reduce-window", "map", "sort", "all-reduce", "all-reduce-start", "reduce-scatter",
                 "scatter", "call", "custom-call", "topk", "ragged-all-to-all", "all-reduce-done")
_INT_LIST = "INT_LIST_VALUE"

KNOWN: Mapping[str, AttrSpec] = {
    # shapes of data movement
    "dimensions": AttrSpec(_INT_LIST),
    "slice": AttrSpec("SLICE_VALUE"),
    "window": AttrSpec("WINDOW_VALUE"),
    "padding": AttrSpec("PADDING_VALUE", _ops("pad")),
    "dim_labels": AttrSpec("DIM_LABELS_VALUE", _ops("convolution", "custom-call")),
    "index": AttrSpec("INT_VALUE", _ops("get-tuple-element")),
    "slice_sizes": AttrSpec("INT_LISTS_VALUE"),
    "iota_dimension": AttrSpec("INT_VALUE", _ops("iota")),
    **{k: AttrSpec(_INT_LIST) for k in (
        "lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims",
        "lhs_ragged_dims", "rhs_group_dims", "offset_dims", "collapsed_slice_dims", "start_index_map",
        "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
        "operand_batching_dims", "start_indices_batching_dims", "input_batching_dims",
        "scatter_indices_batching_dims", "dynamic_slice_sizes", "fft_length")},
    **{k: AttrSpec("INT_VALUE") for k in (
        "index_vector_dim", "feature_group_count", "batch_group_count", "channel_id", "feature_index",
        "exponent_bits", "mantissa_bits", "k", "cross_program_prefetch_index", "replica_count",
        "num_partitions")},
    # called computations
    "calls": AttrSpec("COMPUTATION_REF_VALUE", _ops("fusion", "call", "async-start", "async-update", "async-done")),
    "to_apply": AttrSpec("COMPUTATION_REF_VALUE", _REDUCERS),
    "condition": AttrSpec("COMPUTATION_REF_VALUE", _ops("while")),
    "body": AttrSpec("COMPUTATION_REF_VALUE", _ops("while")),
    "branch_computations": AttrSpec("NAME_LIST_VALUE", _ops("conditional")),
    "true_computation": AttrSpec("COMPUTATION_REF_VALUE", _ops("conditional")),
    "false_computation": AttrSpec("COMPUTATION_REF_VALUE", _ops("conditional")),
    "called_computations": AttrSpec("NAME_LIST_VALUE", _ops("custom-call")),
    "select": AttrSpec("COMPUTATION_REF_VALUE", _ops("select-and-scatter")),
    "scatter": AttrSpec("COMPUTATION_REF_VALUE", _ops("select-and-scatter")),
    "control-predecessors": AttrSpec("NAME_LIST_VALUE"),
    # opcode options
    "kind": AttrSpec("ENUM_VALUE", _ops("fusion")),
    "direction": AttrSpec("ENUM_VALUE", _ops("compare")),
    "custom_call_target": AttrSpec("STRING_VALUE", _ops("custom-call")),
    "api_version": AttrSpec("ENUM_VALUE", _ops("custom-call")),
    "custom_call_schedule": AttrSpec("ENUM_VALUE", _ops("custom-call")),
    "operand_layout_constraints": AttrSpec("SHAPE_LIST_VALUE", _ops("custom-call")),
    "output_to_operand_aliasing": AttrSpec("ALIAS_VALUE"),
    "operand_precision": AttrSpec("ENUM_LIST_VALUE"),
    "fft_type": AttrSpec("ENUM_VALUE", _ops("fft")),
    "distribution": AttrSpec("ENUM_VALUE", _ops("rng")),
    "transpose_a": AttrSpec("ENUM_VALUE", _ops("triangular-solve")),
    "replica_groups": AttrSpec("REPLICA_GROUPS_VALUE"),
    "source_target_pairs": AttrSpec("PAIRS_VALUE"),
    "parameter_replication": AttrSpec("BOOL_LIST_VALUE", _ops("parameter")),
    **{k: AttrSpec("BOOL_VALUE") for k in (
        "custom_call_has_side_effect", "use_global_device_ids", "constrain_layout", "is_host_transfer",
        "indices_are_sorted", "unique_indices", "is_stable", "largest", "lower", "left_side",
        "unit_diagonal", "is_scheduled", "alias_passthrough_params", "is_cross_program_prefetch")},
    # annotations any instruction may carry
    "metadata": AttrSpec("METADATA_VALUE"),
    "sharding": AttrSpec("SHARDING_VALUE"),
    "backend_config": AttrSpec("BACKEND_CONFIG_VALUE"),
    "frontend_attributes": AttrSpec("STRING_MAP_VALUE"),
    "result_accuracy": AttrSpec("BACKEND_CONFIG_VALUE", TRANSCENDENTAL),
    # module header
    "entry_computation_layout": AttrSpec("PROGRAM_SHAPE_VALUE"),
    "input_output_alias": AttrSpec("ALIAS_VALUE"),
    "buffer_donor": AttrSpec("BUFFER_DONOR_VALUE"),
    "allow_spmd_sharding_propagation_to_parameters": AttrSpec("BOOL_LIST_VALUE"),
    "allow_spmd_sharding_propagation_to_output": AttrSpec("BOOL_LIST_VALUE"),
}

#: custom-call api_version values XLA accepts.
API_VERSIONS = frozenset({
    "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING", "API_VERSION_STATUS_RETURNING_UNIFIED",
    "API_VERSION_TYPED_FFI",
})


# ------------------------------------------------------------------------------------------
# Typed readers
# ------------------------------------------------------------------------------------------

_INT_RE = re.compile(r"-?\d+")


@functools.lru_cache(maxsize=4096)
def int_list(text: str | None) -> tuple[int, ...]:
    """`{1,0}` → (1, 0)."""
    if not text:
        return ()
    return tuple(int(x) for x in _INT_RE.findall(text))


def ints(instr: ir.Instruction, name: str) -> tuple[int, ...]:
    return int_list(instr.attr(name))


def dimensions(instr: ir.Instruction) -> tuple[int, ...]:
    return int_list(instr.attr("dimensions"))


def integer(instr: ir.Instruction, name: str, default: int | None = None) -> int | None:
    value = instr.attr(name)
    return int(value) if value is not None else default


@dataclass(frozen=True, slots=True)
class SliceDim:
    start: int
    limit: int
    stride: int = 1


@functools.lru_cache(maxsize=4096)
def _slice(text: str) -> tuple[SliceDim, ...]:
    dims = []
    for part in re.findall(r"\[([^\]]*)\]", text):
        nums = [int(x) for x in part.split(":")]
        dims.append(SliceDim(nums[0], nums[1], nums[2] if len(nums) > 2 else 1))
    return tuple(dims)


def slice_dims(instr: ir.Instruction) -> tuple[SliceDim, ...]:
    return _slice(instr.attr("slice") or "")


@dataclass(frozen=True, slots=True)
class WindowDim:
    size: int
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    lhs_dilation: int = 1
    rhs_dilation: int = 1
    reversal: bool = False


@functools.lru_cache(maxsize=4096)
def _window(text: str) -> tuple[WindowDim, ...]:
    fields: dict[str, list] = {}
    for key, value in re.findall(r"(\w+)=([^\s}]+)", text):
        fields[key] = value.split("x")
    rank = len(fields.get("size", ()))
    out = []
    for i in range(rank):
        pad = fields.get("pad", ["0_0"] * rank)[i].split("_")
        out.append(WindowDim(
            int(fields["size"][i]),
            int(fields.get("stride", ["1"] * rank)[i]),
            int(pad[0]), int(pad[1]),
            int(fields.get("lhs_dilate", ["1"] * rank)[i]),
            int(fields.get("rhs_dilate", ["1"] * rank)[i]),
            fields.get("rhs_reversal", ["0"] * rank)[i] == "1",
        ))
    return tuple(out)


def window(instr: ir.Instruction) -> tuple[WindowDim, ...]:
    return _window(instr.attr("window") or "")


@functools.lru_cache(maxsize=4096)
def _padding(text: str) -> tuple[tuple[int, int, int], ...]:
    out = []
    for part in text.split("x"):
        nums = [int(x) for x in re.findall(r"-?\d+", part)]
        out.append((nums[0], nums[1], nums[2] if len(nums) > 2 else 0))
    return tuple(out)


def padding(instr: ir.Instruction) -> tuple[tuple[int, int, int], ...]:
    """Per dimension (low, high, interior) of a `pad`."""
    return _padding(instr.attr("padding") or "")


def string(instr: ir.Instruction, name: str) -> str | None:
    value = instr.attr(name)
    if value is None:
        return None
    return unquote(value)


def unquote(value: str) -> str:
    value = value.strip()
    if value.startswith('"') and value.endswith('"'):
        try:
            return json.loads(value)
        except ValueError:
            return value[1:-1]
    return value


@functools.lru_cache(maxsize=8192)
def _backend_config(text: str) -> Mapping:
    text = text.strip()
    if text.startswith('"'):
        text = unquote(text)
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def backend_config(instr: ir.Instruction) -> Mapping:
    """The backend_config JSON (GPU's GpuBackendConfig, CPU's BackendConfig), {} if absent."""
    text = instr.attr("backend_config")
    return _backend_config(text) if text else {}


#: The largest trip count XLA can hold (WhileLoopBackendConfig.KnownTripCount.n is an int64).
MAX_TRIP_COUNT = 2**63 - 1


def known_trip_count(instr: ir.Instruction) -> int | None:
    """XLA's `known_trip_count` of a while loop (backend_config {"known_trip_count":{"n":"100"}}),
    None when absent or not a count: negative, fractional, above int64, or not a number.  XLA's
    runtime then runs the body exactly that often (WhileThunk)."""
    config = backend_config(instr)
    known = config.get("known_trip_count") if isinstance(config, Mapping) else None
    n = known.get("n") if isinstance(known, Mapping) else None
    if isinstance(n, bool):
        return None
    if isinstance(n, str) and n.strip().isascii() and n.strip().isdigit():
        n = int(n)
    if isinstance(n, int) and 0 <= n <= MAX_TRIP_COUNT:
        return n
    return None


@dataclass(frozen=True, slots=True)
class Metadata:
    op_type: str | None = None
    op_name: str | None = None
    source_file: str | None = None
    source_line: int | None = None
    stack_frame_id: int | None = None


@functools.lru_cache(maxsize=16384)
def _metadata(text: str) -> Metadata:
    fields = key_values(text)

    def s(key):
        return unquote(fields[key]) if key in fields else None

    def i(key):
        try:
            return int(fields[key]) if key in fields else None
        except ValueError:
            return None

    return Metadata(s("op_type"), s("op_name"), s("source_file"), i("source_line"), i("stack_frame_id"))


def metadata(instr: ir.Instruction) -> Metadata:
    text = instr.attr("metadata")
    return _metadata(text) if text else Metadata()


def source_location(module: ir.Module, instr: ir.Instruction) -> ir.SourceLocation | None:
    """Where the user's code made this instruction: metadata's source_file/source_line, or the
    module's stack-frame tables through stack_frame_id (current JAX dumps)."""
    meta = metadata(instr)
    if meta.source_file or meta.source_line:
        return ir.SourceLocation(meta.source_file, meta.source_line)
    if meta.stack_frame_id is not None and module.stack_frames:
        return module.stack_frames.location(meta.stack_frame_id)
    return None


def frontend_attributes(instr: ir.Instruction) -> Mapping[str, str]:
    text = instr.attr("frontend_attributes")
    if not text:
        return {}
    return {k: unquote(v) for k, v in key_values(text).items()}


# ------------------------------------------------------------------------------------------
# `key=value` fields, read in linear time
# ------------------------------------------------------------------------------------------
# Values hold user text (an op_name can be megabytes).  A regular expression that matches a
# quoted string as `"(?:[^"\\]|\\.)*"` keeps a backtracking entry per character, about 170
# bytes each: a 4 MB op_name took 700 MB.  Strings are found with str.find instead, and the
# patterns below only ever match runs of characters from one class.

_KEY_RE = re.compile(r"([\w.\-]+)[ \t]*=[ \t]*")
_BARE_VALUE_RE = re.compile(r'[^\s,{}"]*')
_SEPARATORS_RE = re.compile(r'[\s,{}]*')
_OTHER_RE = re.compile(r'[^\s,{}"]+')


def key_values(text: str) -> dict[str, str]:
    """The `key=value` fields of a braced attribute value (`metadata={op_type="add"
    op_name="f/add" source_line=3}`, `frontend_attributes={a="1",b="2"}`): values as written,
    strings with their quotes.  Text that is no field is skipped; a later field wins."""
    fields: dict[str, str] = {}
    pos, end = 0, len(text)
    while True:
        pos = _SEPARATORS_RE.match(text, pos).end()
        if pos >= end:
            return fields
        key = _KEY_RE.match(text, pos)
        if key is None:  # not a field: skip this word, or this string
            pos = _string_end(text, pos) if text[pos] == '"' else _OTHER_RE.match(text, pos).end()
            continue
        start = key.end()
        stop = _string_end(text, start) if text.startswith('"', start) else _BARE_VALUE_RE.match(text, start).end()
        fields[key.group(1)] = text[start:stop]
        pos = stop  # an empty value stops at a separator, which the next round skips


def _string_end(text: str, start: int) -> int:
    end = quoted_end(text, start)
    return len(text) if end < 0 else end  # not closed: the rest of the text


def quoted_end(text: str, start: int) -> int:
    """Where the string opened by the quote (`"` or `'`) at `start` ends (after its closing
    quote), -1 when it is not closed.  A backslash escapes the character after it."""
    run = _STRING_RUNS[text[start]]
    pos, end = start + 1, len(text)
    while True:
        pos = run.match(text, pos).end()
        if pos >= end or (text[pos] == "\\" and pos + 1 >= end):
            return -1
        if text[pos] != "\\":
            return pos + 1  # the closing quote
        # else 1024 escapes were read: the next run goes on from this backslash


# The body of a string, 1024 escapes at most per match: the engine keeps an entry per
# repetition of the group until the match ends, so the bound keeps that memory small.
_STRING_RUNS = {q: re.compile(r"[^Q\\]*(?:\\[\s\S][^Q\\]*){0,1024}".replace("Q", q)) for q in "\"'"}

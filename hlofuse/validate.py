"""Checks XLA's parser makes on each instruction while it reads — opcodes, operand counts,
attribute forms and placement, literals, layouts, async wrappers — run after the module is
assembled.  Each failure is an HloSyntaxError at the offending line and column.

Unknown opcodes and unknown attributes are kept (XLA adds both over time): unknown opcodes
produce a warning, or an error with `strict=True`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterator

from . import attributes, ir
from .attributes import API_VERSIONS, KNOWN as KNOWN_ATTRS
from .errors import HloSyntaxError
from .literals import LiteralError, check_literal
from .opcodes import ARITY, KNOWN as KNOWN_OPCODES
from .parse import terminal_regex
from .parse.reader import common_value_regex

_ASYNC_SUFFIXES = ("-start", "-update", "-done")

#: Attributes an opcode cannot do without.
REQUIRED: dict[str, tuple[str, ...]] = {
    "fusion": ("kind", "calls"),
    "get-tuple-element": ("index",),
    "while": ("condition", "body"),
    "compare": ("direction",),
    "reduce": ("dimensions", "to_apply"),
    "transpose": ("dimensions",),
    "concatenate": ("dimensions",),
    "slice": ("slice",),
    "custom-call": ("custom_call_target",),
    "iota": ("iota_dimension",),
    "map": ("to_apply",),
    "reduce-window": ("to_apply",),
    "pad": ("padding",),
    "call": ("to_apply",),
}


class _Checker:
    def __init__(self, module: ir.Module, text: str, strict: bool):
        self.module = module
        self.text = text
        self.strict = strict
        self.lines: list[str] | None = None
        self.warnings = list(module.warnings)
        #: (computation, instruction) of every async op, in text order, where check_instructions
        #: saw them all
        self.async_ops: list | None = None
        #: attributes with long values (backend configs) that passed, in this module: they
        #: repeat within a module, and are not kept beyond it
        self.long_passed: set = set()

    # -- errors at the right place --------------------------------------------------------
    def error(self, message: str, instr: ir.Instruction | None = None, attr: str | None = None,
              line: int | None = None, column: int | None = None) -> HloSyntaxError:
        if self.lines is None:
            self.lines = self.text.splitlines()
        if instr is not None and instr.span is not None:
            line, column = instr.span.line, instr.span.column
            if attr is not None:
                line, column = self._find_attr(line, column, attr)
        src = self.lines[line - 1] if line and 0 < line <= len(self.lines) else None
        return HloSyntaxError(message, line=line, column=column, source_line=src)

    def _find_attr(self, line: int, column: int, attr: str) -> tuple[int, int]:
        for offset in range(0, 40):
            idx = line - 1 + offset
            if idx >= len(self.lines):
                break
            text = self.lines[idx]
            start = column - 1 if offset == 0 else 0
            m = re.search(r"\b" + re.escape(attr) + r"\s*=", text[start:])
            if m:
                return idx + 1, start + m.start() + 1
        return line, column

    # -- module ---------------------------------------------------------------------------
    def run(self, instructions: bool = True, module_level: bool = True) -> ir.Module:
        if module_level:
            for key, value in self.module.attrs:
                self.check_attr_value(None, key, value)
        if instructions:
            if module_level:
                self.async_ops = []  # check_instructions collects them for check_async
            for comp in self.module.computations:
                self.check_instructions(comp)
        if module_level:
            self.check_async()
        if self.warnings != list(self.module.warnings):
            return dataclasses.replace(self.module, warnings=tuple(self.warnings))
        return self.module

    def check_attr_value(self, instr: ir.Instruction | None, key: str, value: str) -> None:
        spec = KNOWN_ATTRS.get(key)
        if spec is None:
            return
        common = common_value_regex(spec.terminal)
        if common is not None and common.fullmatch(value) is not None:
            return
        fits = _value_fits(spec.terminal, value) if len(value) < 200 and key not in _UNIQUE_VALUED else \
            terminal_regex(spec.terminal).fullmatch(value) is not None  # values that rarely repeat
        if not fits:
            if instr is None:
                line = next((i + 1 for i, l in enumerate(self.text.splitlines()[:50]) if key + "=" in l), 1)
                raise self.error(f"malformed value of attribute {key}: {_short(value)}", line=line, column=1)
            raise self.error(f"malformed value of attribute {key}: {_short(value)}", instr, key)

    # -- each instruction -----------------------------------------------------------------
    def check_instructions(self, comp: ir.Computation) -> None:
        """Each instruction of `comp` on its own (one call per computation: a module holds
        hundreds of thousands of instructions)."""
        facts_of, long_passed, async_ops, checked_shapes = _FACTS.get, self.long_passed, self.async_ops, _CHECKED_SHAPES
        for instr in comp.instructions:
            opcode = instr.opcode
            base, arity, required, checker, passed, async_kind = facts_of(opcode) or _opcode_facts(opcode)
            if async_kind is not None and async_ops is not None:
                async_ops.append((comp, instr))
            if base is None:
                if self.strict:
                    raise self.error(f"unknown opcode: {opcode}", instr)
                where = f"{instr.span.line}:{instr.span.column}" if instr.span else "?"
                self.warnings.append(f"{where}: unknown opcode {opcode!r} kept as an opaque instruction")
                continue
            if arity is not None and len(instr.operands) != arity:
                raise self.error(f"{opcode} expects {arity} operand(s), but has {len(instr.operands)}", instr)
            for pair in instr.attrs:
                if pair not in passed and pair not in long_passed:
                    self.check_attribute(instr, opcode, base, pair, passed)
            for key in required:
                for present, _ in instr.attrs:  # (instr.has_attr, without a generator per instruction)
                    if present == key:
                        break
                else:
                    raise self.error(f"{opcode} expects attribute {key}", instr)
            if instr.shape not in checked_shapes:
                self.check_layouts(instr)
            if checker is not None:
                checker(self, comp, instr, [comp[op].shape for op in instr.operands])

    def check_attribute(self, instr: ir.Instruction, opcode: str, base: str, pair: tuple, passed: set) -> None:
        """One attribute of an instruction (`base`: the opcode an async sugar wraps, else the
        opcode).  Once it passes, the pair is remembered: in `passed` (the opcode's pairs known
        good, kept across modules) where its value is short, else in `long_passed` (this module
        only: metadata and backend configs repeat within a module, the reader shares equal
        ones, and they are not kept beyond it)."""
        key, value = pair
        spec = KNOWN_ATTRS.get(key)
        if spec is not None:
            if spec.opcodes is not None and base not in spec.opcodes and opcode not in spec.opcodes:
                raise self.error(f'unexpected attribute "{key}" for {opcode}', instr, key)
            if key in _UNIQUE_VALUED or len(value) >= 200:
                fullmatch = _FULLMATCH.get(spec.terminal) or _fullmatch(spec.terminal)
                if fullmatch(value) is None:
                    self.check_attr_value(instr, key, value)
                if len(self.long_passed) < _LONG_PASSED_MAX:
                    self.long_passed.add(pair)
                return
            if not _value_fits(spec.terminal, value):
                self.check_attr_value(instr, key, value)
            if key == "result_accuracy":
                self.check_result_accuracy(instr)
                return  # (it reads the instruction's first result_accuracy, which may be another)
        if len(value) < 200:
            if len(passed) < _PASSED_MAX:
                passed.add(pair)
        elif len(self.long_passed) < _LONG_PASSED_MAX:
            self.long_passed.add(pair)  # (an attribute hlofuse does not know, with a long value)

    def check_layouts(self, instr: ir.Instruction) -> None:
        for leaf in instr.shape.leaves():
            layout = leaf.layout
            if layout is None:
                continue
            m2m = layout.minor_to_major
            if m2m and sorted(m2m) != list(range(leaf.rank)):
                raise self.error(f"layout {{{','.join(map(str, m2m))}}} is not a permutation of the "
                                 f"{leaf.rank} dimensions of {leaf.to_text(False)}", instr)
            if not layout.extra:
                continue
            levels = re.search(r"D\(([^)]*)\)", layout.extra)
            sparse = False
            if levels:
                for level in levels.group(1).split(","):
                    kind = level.strip().rstrip("+~")
                    if kind not in ("D", "C", "S", "H"):
                        raise self.error(f"expected a DimLevelType abbreviation (D, C, S or H), found {kind!r}", instr)
                    sparse = sparse or kind != "D"
            if re.search(r"(?<![A-Z])P\(", layout.extra) and not sparse:
                raise self.error("Layout has physical shape, but is not for a sparse array", instr)
        if len(_CHECKED_SHAPES) < 100_000:
            # a pure function of the shape (a Shape keeps its hash once computed)
            _CHECKED_SHAPES.add(instr.shape)

    # -- per-opcode checks (named op_<opcode>) ---------------------------------------------
    def op_constant(self, comp, instr, shapes) -> None:
        literal, shape = instr.literal or "", instr.shape
        key = (literal, shape)
        if key in _CHECKED_LITERALS:
            return
        try:
            check_literal(literal, shape)
        except LiteralError as err:
            raise self.error(str(err), instr) from None
        if len(literal) < 64 and len(_CHECKED_LITERALS) < 100_000:
            # Scalars repeat (`f32[] constant(0)`): a pure function of the text and the shape
            # (a Shape keeps its hash once computed, so the key hashes cheaply).
            _CHECKED_LITERALS[key] = None

    def op_broadcast(self, comp, instr, shapes) -> None:
        if not instr.has_attr("dimensions") and shapes and shapes[0].rank > 0:
            raise self.error("broadcast of a non-scalar expects attribute dimensions", instr)

    def op_convolution(self, comp, instr, shapes) -> None:
        labels = instr.attr("dim_labels")
        if labels:
            self._check_dim_labels(instr, labels)

    def _check_dim_labels(self, instr, labels: str) -> None:
        lhs, rest = labels.split("_", 1)
        rhs, out = rest.split("->")
        for part, allowed, name in ((lhs, "bf", "input"), (rhs, "io", "kernel"), (out, "bf", "output")):
            for ch in part:
                if not (ch.isdigit() or ch in allowed or ch == "?"):
                    raise self.error(f"dim_labels {name} part {part!r} expects [0-9{allowed}?], sees {ch!r}",
                                     instr, "dim_labels")
            if len(set(part)) != len(part):
                raise self.error(f"dim_labels {name} part {part!r} expects unique labels", instr, "dim_labels")
            digits = sorted(int(c) for c in part if c.isdigit())
            if digits != list(range(len(digits))):
                raise self.error(f"dim_labels {name} part {part!r} expects [0-{len(digits) - 1}] for its spatial "
                                 "dimensions", instr, "dim_labels")
        counts = {sum(c.isdigit() for c in p) for p in (lhs, rhs, out)}
        if len(counts) != 1:
            raise self.error("dim_labels input, kernel and output must have same number of spatial dimensions",
                             instr, "dim_labels")

    def op_custom_call(self, comp, instr, shapes) -> None:
        version = instr.attr("api_version")
        if version is not None and version not in API_VERSIONS:
            if version == "API_VERSION_UNSPECIFIED":
                raise self.error(f"Invalid API version: {version}", instr, "api_version")
            raise self.error(f"Unknown API version: {version}", instr, "api_version")
        constraints = instr.attr("operand_layout_constraints")
        if constraints is not None:
            from .parse import parse_shape, split_top_level

            items = [parse_shape(t) for t in split_top_level(constraints.strip()[1:-1]) if t]
            if len(items) != len(shapes):
                raise self.error(f"Expected {len(shapes)} operand layout constraints, {len(items)} given",
                                 instr, "operand_layout_constraints")
            for i, (want, have) in enumerate(zip(items, shapes)):
                if not want.compatible(have):
                    raise self.error(f"operand {i} is not compatible with operand shape {have}", instr,
                                     "operand_layout_constraints")
        if instr.attr("dim_labels"):
            self._check_dim_labels(instr, instr.attr("dim_labels"))

    def op_infeed(self, comp, instr, shapes) -> None:
        if not instr.shape.is_tuple or not instr.shape.tuple_shapes:
            raise self.error("infeed must have a non-empty tuple shape", instr)

    def op_conditional(self, comp, instr, shapes) -> None:
        selector = shapes[0] if shapes else None
        has_branches = instr.has_attr("branch_computations")
        has_pair = instr.has_attr("true_computation") or instr.has_attr("false_computation")
        if selector is None or not selector.is_scalar:
            raise self.error("The first operand must be a scalar", instr)
        if selector.element_type not in ("pred", "s32"):
            raise self.error("The first operand must be a scalar of PRED or S32", instr)
        if selector.element_type == "pred":
            if has_branches:
                raise self.error('unexpected attribute "branch_computations" for a conditional on a pred',
                                 instr, "branch_computations")
            if not (instr.has_attr("true_computation") and instr.has_attr("false_computation")):
                raise self.error("a conditional on a pred expects true_computation and false_computation", instr)
        elif has_pair:
            raise self.error("a conditional on an s32 index expects branch_computations", instr)

    def op_parameter(self, comp, instr, shapes) -> None:
        replication = instr.attr("parameter_replication")
        if replication is not None:
            count = len(attributes.int_list(None) or re.findall(r"true|false", replication))
            leaves = sum(1 for _ in instr.shape.leaves())
            if count != leaves:
                raise self.error(f"parameter has {leaves} leaf buffers, but parameter_replication has "
                                 f"{count} elements", instr, "parameter_replication")

    def check_result_accuracy(self, instr) -> None:
        value = instr.attr("result_accuracy")
        if value is None:
            return
        m = re.fullmatch(r"\{\s*mode\s*=\s*(\w+)\s*\}", value)
        if m:
            if m.group(1) not in ("default", "highest"):
                raise self.error(f"expects ResultAccuracy type but sees: {m.group(1)}", instr, "result_accuracy")
            return
        m = re.fullmatch(r"\{\s*tolerance\s*=\s*\{([^{}]*)\}\s*\}", value)
        if m:
            for key, _ in re.findall(r"(\w+)\s*=\s*([^,\s]+)", m.group(1)):
                if key not in ("atol", "rtol", "ulps"):
                    raise self.error(f"invalid attribute name: {key}", instr, "result_accuracy")
            return
        if re.fullmatch(r"\{\s*\w+\s*=.*\}", value, re.S):
            raise self.error("invalid attribute name in result_accuracy (expects mode or tolerance)", instr,
                             "result_accuracy")
        raise self.error("expects attribute name in result_accuracy", instr, "result_accuracy")

    # -- async wrappers (async-start / -update / -done and their `op-start` sugar) ----------
    def check_async(self) -> None:
        """XLA's parser on async ops (hlo_parser.cc, ParseOpcode and CreateInstruction's
        kAsyncStart/kAsyncUpdate/kAsyncDone case): `X-start`, `X-update`, `X-done` for an
        opcode X that has no such opcode of its own (all-to-all-start, reduce-scatter-done,
        custom-call-update...) is an async op wrapping X; the chain's later ops must name the
        X of its start, and follow a start or an update."""
        used: dict[str, str] = {}
        for comp, instr in self.async_ops if self.async_ops is not None else self._all_async_ops():
            opcode = instr.opcode
            kind = _async_kind(opcode)
            if kind in ("start", "update"):
                tuple_shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else ()
                if len(tuple_shapes) < 2 or not tuple_shapes[0].is_tuple:
                    raise self.error("AsyncStart and AsyncUpdate expect the op shape to be in the form of "
                                     "((async-operands), async-outputs, state).", instr)
            if kind == "start":
                callee = instr.attr("calls")
                if callee:
                    name = callee.lstrip("%")
                    if name in used and used[name] != instr.name:
                        raise self.error(f"Computation {name} is already referenced by another async op",
                                         instr, "calls")
                    used[name] = instr.name
                continue
            if not instr.operands or _async_kind(comp[instr.operands[0]].opcode) not in ("start", "update"):
                raise self.error("AsyncUpdate and AsyncDone expect their operand to be the previous async op.",
                                 instr)
            start = comp[instr.operands[0]]
            while _async_kind(start.opcode) == "update" and start.operands:
                start = comp[start.operands[0]]
            wrapped = _wrapped_opcode(opcode)
            if wrapped is not None:
                started = self._started_opcode(start)
                if started is not None and started != wrapped:
                    raise self.error(f"Expect async wrapped opcode to be {started}, but got {wrapped}", instr)
            mine, theirs = instr.attr("calls"), start.attr("calls")
            if mine and theirs and mine.lstrip("%") != theirs.lstrip("%"):
                raise self.error(f"Expect async_wrapped_computation to be {theirs.lstrip('%')}, but got "
                                 f"{mine.lstrip('%')}", instr, "calls")
            thread = instr.attr("async_execution_thread")
            expected = attributes.unquote(start.attr("async_execution_thread") or '"main"')
            if thread is not None and attributes.unquote(thread) != expected:
                raise self.error(f"Expect async_execution_thread to be {expected}, but got "
                                 f"{attributes.unquote(thread)}", instr, "async_execution_thread")

    def _all_async_ops(self) -> Iterator[tuple[ir.Computation, ir.Instruction]]:
        kinds = _ASYNC_KINDS
        for comp in self.module.computations:
            for instr in comp.instructions:
                opcode = instr.opcode
                kind = kinds.get(opcode, _UNSET)
                if kind is _UNSET:
                    kind = kinds[opcode] = _async_kind(opcode)
                if kind is not None:
                    yield comp, instr

    def _started_opcode(self, start: ir.Instruction) -> str | None:
        """The opcode an async chain wraps: X of `X-start`, or the root of async-start's `calls`."""
        wrapped = _wrapped_opcode(start.opcode)
        if wrapped is not None:
            return wrapped
        callee = self.module.by_name.get((start.attr("calls") or "").lstrip("%"))
        return callee.root.opcode if callee is not None else None


def attribute_allowed(opcode: str, key: str) -> bool:
    """Whether XLA accepts attribute `key` on `opcode` (unknown attributes and opcodes: yes)."""
    spec = KNOWN_ATTRS.get(key)
    if spec is None or spec.opcodes is None or opcode in spec.opcodes:
        return True
    if opcode in KNOWN_OPCODES:
        return False
    stem = next((opcode[: -len(s)] for s in _ASYNC_SUFFIXES if opcode.endswith(s)), None)
    if stem is not None and stem in KNOWN_OPCODES:
        return stem in spec.opcodes
    return True


#: What `check_instructions` needs to know of an opcode, filled on first use: (the opcode, or
#: the one its async sugar wraps, or None where XLA has no such opcode; its operand count or
#: None; the attributes it requires; its op_<opcode> checker or None; the attribute pairs that
#: passed `check_attribute` on it; its _async_kind).
_FACTS: dict[str, tuple] = {}
_UNSET = object()


def _opcode_facts(opcode: str) -> tuple:
    base: str | None = opcode
    if opcode not in KNOWN_OPCODES:
        stem = next((opcode[: -len(s)] for s in _ASYNC_SUFFIXES if opcode.endswith(s)), None)
        # `custom-call-start`: XLA's sugar for an async-wrapped custom-call
        base = stem if stem is not None and stem in KNOWN_OPCODES else None
    # a conditional takes branch_computations or true/false_computation (op_conditional)
    required = () if opcode == "conditional" else REQUIRED.get(opcode, ())
    checker = getattr(_Checker, "op_" + opcode.replace("-", "_"), None)
    facts = _FACTS[opcode] = (base, ARITY.get(opcode), required, checker, set(), _async_kind(opcode))
    return facts
#: _async_kind by opcode, filled on first use.
_ASYNC_KINDS: dict = {}
#: Shapes whose layouts passed check_layouts.
_CHECKED_SHAPES: set = set()
_CHECKED_LITERALS: dict = {}
#: The attribute pairs an opcode's facts keep (those with values under 200 characters that
#: passed `check_attribute` on it: dumps repeat them, and the reader shares the short ones, so
#: most lookups find the very object) stop growing at _PASSED_MAX.
_PASSED_MAX = 1 << 13
_LONG_PASSED_MAX = 2048
#: terminal name -> the bound fullmatch of its compiled pattern
_FULLMATCH: dict = {}


def _fullmatch(terminal: str):
    match = _FULLMATCH[terminal] = terminal_regex(terminal).fullmatch
    return match


#: Attributes whose values differ from instruction to instruction (metadata names the source
#: operation and its stack frame): matched directly, since in `_value_fits`'s memo they would
#: mostly miss, cost more than the match, and hold tens of thousands of entries.
_UNIQUE_VALUED = frozenset({"metadata"})


#: terminal name -> {value: whether it matches}: `_value_fits`'s memo.  A dict per terminal
#: keyed by the value alone holds an entry in a third of the memory of an lru_cache keyed by
#: (terminal, value), which adds a key tuple and a link node to each (bench/parse_speed.py's
#: 12 MB module: 7k entries, 1 MB that way).  Each stops growing at _FITS_MAX entries.
_FITS: dict[str, dict[str, bool]] = {}
_FITS_MAX = 1 << 14


def _value_fits(terminal: str, value: str) -> bool:
    """Whether an attribute value matches the grammar terminal of its attribute.  Memoised:
    dumps repeat most values (dimensions, backend configs, sharding, replica groups)."""
    memo = _FITS.get(terminal)
    if memo is None:
        memo = _FITS[terminal] = {}
    fits = memo.get(value)
    if fits is None:
        fits = terminal_regex(terminal).fullmatch(value) is not None
        if len(memo) < _FITS_MAX:
            memo[value] = fits
    return fits


def _async_kind(opcode: str) -> str | None:
    """start / update / done for async ops and their sugar (`custom-call-start`,
    `all-to-all-done`), else None.  Opcodes of their own (all-reduce-start, copy-done,
    send-done...) are not async wrappers, and neither is the sugar of an opcode XLA does not
    have (kept as an unknown opcode)."""
    for suffix in ("start", "update", "done"):
        if opcode.endswith("-" + suffix):
            if opcode.startswith("async-") or _wrapped_opcode(opcode) is not None:
                return suffix
    return None


def _wrapped_opcode(opcode: str) -> str | None:
    """X of the sugar `X-start` / `X-update` / `X-done` (X a known opcode, `X-start` not one)."""
    if opcode in KNOWN_OPCODES:
        return None
    for suffix in _ASYNC_SUFFIXES:
        if opcode.endswith(suffix):
            stem = opcode[: -len(suffix)]
            return stem if stem in KNOWN_OPCODES else None
    return None


def _short(value: str) -> str:
    return value if len(value) <= 60 else value[:57] + "..."


def check_module(module: ir.Module, text: str, *, strict: bool = False, instructions: bool = True,
                 module_level: bool = True) -> ir.Module:
    """Run the checks; `instructions` are those of each instruction on its own (a part of a
    module can be checked so), `module_level` those of the header and across computations."""
    return _Checker(module, text, strict).run(instructions, module_level)

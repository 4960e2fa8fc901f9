"""Assembly: raw records → `ir.Module`, with the structural checks XLA's parser makes — names
defined once, operands and control predecessors that exist, one ROOT, parameter numbers,
declared operand and result shapes, one ENTRY, called computations that exist.  Inline
computation bodies and nested instructions are hoisted here, with XLA's generated names."""

from __future__ import annotations

import dataclasses

import re

from .. import ir
from ..cycles import call_cycle, call_cycle_message, caller_of, instruction_cycle, instruction_cycle_message
from ..errors import HloSyntaxError
from .diagnostics import error_at, run_parser
from .records import REWRITTEN_ATTRS, AnonOperand, RawComputation, RawInstr, RawModule
from .sections import stack_frame_index
from .shapes import parse_shape, split_top_level

_NUMBER_RE = re.compile(r"[-+]?[0-9][0-9.eE+-]*\Z")

# An index mark before an operand (`/*index=5*/%v` or `/*index=5*/f32[] %v`), not inside a tuple shape.
_OPERAND_MARK_RE = re.compile(r"/\*index=\d+\*/(?:[^,()\s]+\s+)?%?[A-Za-z_][\w.\-]*(?:#\d+)*\s*[,)]")
_ANY_MARK_RE = re.compile(r"/\*index=\d+\*/")
# With a literal first (not `^`, which makes the search try every position), so it runs at memchr speed.
_CLOSING_COMMENT_RE = re.compile(r"\n\} // %?(\S+)")


def assemble(raw: RawModule, text: str, path: str | None) -> ir.Module:
    """The module the raw records describe (HloSyntaxError for what XLA would reject)."""
    return Assembler(text).module(raw, path)


class Assembler:
    """Builds the ir.Module from raw records, raising XLA's structural errors."""

    def __init__(self, text: str):
        self.text = text
        #: `%t#2` operands (tuple elements without a get-tuple-element) can only be where a # is
        self.tuple_refs_possible = "#" in text
        self.extra_computations: list[ir.Computation] = []
        self.warnings: list[str] = []
        self.built: dict[str, ir.Computation] = {}
        self.saw_operand_shapes = False
        self.inline_names: set[str] = set()

    def error(self, message: str, line: int | None, column: int | None) -> HloSyntaxError:
        return error_at(self.text, message, line, column)

    # -- module -------------------------------------------------------------------------
    def module(self, raw: RawModule, path: str | None) -> ir.Module:
        if raw.form == "instruction":
            comp = self.lone_computation(raw.lone)
            comps, entry, name = [comp], comp.name, "module"
            style = self.style(raw)
        else:
            if not raw.computations:
                raise self.error("expects at least one computation (an ENTRY computation)", raw.line, raw.column)
            seen: dict[str, RawComputation] = {}
            entries = []
            for rc in raw.computations:
                if rc.name in seen:
                    first = seen[rc.name]
                    raise self.error(
                        f"computation {rc.name!r} is already defined (at {first.line}:{first.column})",
                        rc.line, rc.column,
                    )
                seen[rc.name] = rc
                if rc.is_entry:
                    entries.append(rc)
            if len(entries) > 1:
                raise self.error("expects only one ENTRY computation", entries[1].line, entries[1].column)
            entry_raw = entries[0] if entries else raw.computations[-1]
            # (judged now: the records are let go below; style_of reads what building saw)
            percent = uses_percent(self.text, raw.computations[0])
            signatures = any(rc.params is not None for rc in raw.computations)
            comps = []
            for rc in raw.computations:
                comp = self.computation(rc, rc is entry_raw)
                self.built[comp.name] = comp
                comps.append(comp)
                # The raw records are not read again: let them go now, not with the whole raw
                # module, so a module's records and its ir objects are not all alive at once.
                rc.instrs = rc.params = None
            entry, name = entry_raw.name, raw.name
            style = self.style_of(percent, signatures)
        module = ir.Module(
            name=name,
            computations=tuple(self.extra_computations + comps),
            entry_name=entry,
            attrs=tuple((k, v) for k, v, _, _ in raw.attrs),
            stack_frames=stack_frame_index(raw.sections),
            form=raw.form,
            path=path,
            warnings=tuple(self.warnings),
            style=style,
        )
        position = {comp.name: k for k, comp in enumerate(module.computations)}
        callees_first = True
        for k, comp in enumerate(module.computations):
            for instr in comp.instructions:
                for callee in instr.called:
                    at = position.get(callee)
                    if at is None:
                        raise self.missing_callee(instr, callee)
                    if at >= k:
                        callees_first = False
        if not callees_first:  # else no computation can call itself, even through others
            self.check_calls(module)
        return module

    def check_calls(self, module: ir.Module) -> None:
        """No computation calls itself, directly or through others."""
        cycle = call_cycle(module)
        if cycle is not None:
            caller = caller_of(module[cycle[0]], cycle[1])
            raise self.error(call_cycle_message(cycle, caller), caller.span.line, caller.span.column)

    def missing_callee(self, instr: ir.Instruction, callee: str) -> HloSyntaxError:
        """A called computation that does not exist, or (as XLA reports it first) an attribute
        that this opcode does not take at all."""
        from ..validate import attribute_allowed

        for key, value in instr.attrs:
            if key in ir.COMPUTATION_ATTRS and callee in ir._names_in(value) and \
                    not attribute_allowed(instr.opcode, key):
                return self.error(f'unexpected attribute "{key}" for {instr.opcode}', instr.span.line,
                                  instr.span.column)
        return self.error(f"computation does not exist: {callee} (called by {instr.name})",
                          instr.span.line, instr.span.column)

    def style(self, raw: RawModule):
        """The spelling of the text: `%` before names, signatures, operand shapes."""
        percent = bool(raw.computations) and uses_percent(self.text, raw.computations[0])
        signatures = any(rc.params is not None for rc in raw.computations)
        return self.style_of(percent, signatures)

    def style_of(self, percent: bool, signatures: bool):
        from ..printer import Style
        operand_marks = _OPERAND_MARK_RE.search(self.text) is not None
        if not operand_marks and not _ANY_MARK_RE.search(self.text):
            operand_marks = percent  # nothing to go by: XLA's dumps mark operands in the long form
        closing = frozenset(_CLOSING_COMMENT_RE.findall(self.text))  # a closing brace never starts the text
        return Style(percent=percent, signatures=signatures, operand_shapes=self.saw_operand_shapes,
                     operand_index_marks=operand_marks, closing_comments=closing)

    # -- computations -------------------------------------------------------------------
    def computation(self, rc: RawComputation, is_entry: bool) -> ir.Computation:
        if rc.roots is None:  # read token by token: there may be nested instructions to hoist
            built = self.flatten(rc.instrs)
            if self.tuple_refs_possible:
                built = self.tuple_element_refs(built)
        else:
            self.declared = {}
            instruction, control = ir.Instruction, False
            instrs = []
            for item in rc.instrs:
                if item.__class__ is not instruction:  # computation names, operand shapes, ...
                    control = control or any(key == "control-predecessors" for key, _ in item.attrs)
                    item = self.instruction(item, item.operands)
                instrs.append(item)
            if self.tuple_refs_possible:
                made = self.tuple_element_refs([(instr, False) for instr in instrs])
                if len(made) != len(instrs):  # positions moved: the root is found by identity
                    root_instrs = {id(instrs[k]) for k in rc.roots}
                    instrs = [instr for instr, _ in made]
                    rc = dataclasses.replace(rc, roots=[k for k, instr in enumerate(instrs) if id(instr) in root_instrs])
            if not control and not self.declared:
                comp = self.checked_quickly(rc, instrs, is_entry)
                if comp is not None:
                    return comp
            roots = set(rc.roots)
            built = [(instr, k in roots) for k, instr in enumerate(instrs)]
        return self.finish(rc.name, built, is_entry, rc.attrs, rc.line, rc.column, rc.params, rc.result_shape)

    def tuple_element_refs(self, built: list[tuple[ir.Instruction, bool]]) -> list[tuple[ir.Instruction, bool]]:
        """XLA's printer (since 2026: jax 0.11) writes `%t#2` for element 2 of the tuple %t where
        a get-tuple-element instruction used to be printed; `%t#1#0` nests. Each distinct
        reference becomes that get-tuple-element, named as written (so it prints back the same
        way, see printer.py), placed right before its first user. A reference to something
        not defined is left for the usual "does not exist" error; one into a non-tuple or
        past its last element is an error here."""
        by_name = {instr.name: instr for instr, _ in built}
        out: list[tuple[ir.Instruction, bool]] = []
        for instr, is_root in built:
            for op in instr.operands:
                if "#" in op and op not in by_name:
                    self._make_tuple_ref(op, instr, by_name, out)
            out.append((instr, is_root))
        return out

    def _make_tuple_ref(self, ref: str, user: ir.Instruction, by_name: dict, out: list) -> None:
        base, _, index_text = ref.rpartition("#")
        if "#" in base and base not in by_name:
            self._make_tuple_ref(base, user, by_name, out)
        tuple_instr = by_name.get(base)
        if tuple_instr is None:
            return
        index = int(index_text)
        shape = tuple_instr.shape
        line, column = (user.span.line, user.span.column) if user.span else (None, None)
        if not shape.is_tuple or index >= len(shape.tuple_shapes):
            what = f"a tuple of {len(shape.tuple_shapes)} elements" if shape.is_tuple else "not a tuple"
            raise self.error(f"{ref}: {base} is {shape.to_text(False)}, {what}; expected an element index "
                             f"below {len(shape.tuple_shapes) if shape.is_tuple else 0} (operand of {user.name})",
                             line, column)
        gte = ir.Instruction(ref, "get-tuple-element", shape.tuple_shapes[index], (base,),
                             (("index", index_text),), span=user.span)
        by_name[ref] = gte
        out.append((gte, False))

    def checked_quickly(self, rc: RawComputation, instrs: list, is_entry: bool) -> ir.Computation | None:
        """The computation, when `finish` would find nothing wrong with it, checked with less
        work; None when something may be wrong (then `finish` finds what, and says it as XLA
        does).  For the common computation: no control predecessors, no operand shapes."""
        if len(rc.roots) > 1 or not instrs:
            return None
        # Every operand defined above its user, as XLA prints: then no operand is missing and
        # no instruction depends on itself (a name used before its definition goes to `finish`).
        by_name: dict[str, ir.Instruction] = {}
        for instr in instrs:
            for op in instr.operands:
                if op not in by_name:
                    return None
            by_name[instr.name] = instr
        if len(by_name) != len(instrs):
            return None
        numbers = [instr.literal for instr in instrs if instr.opcode == "parameter"]
        if numbers and not (all(n.isascii() and n.isdigit() for n in numbers)
                            and len({int(n) for n in numbers}) == len(numbers)):
            return None
        root = instrs[rc.roots[0]] if rc.roots else instrs[-1]
        if rc.result_shape is not None and not parse_shape(rc.result_shape).compatible(root.shape):
            return None
        comp = ir.Computation(name=rc.name, instructions=tuple(instrs), root_name=root.name, is_entry=is_entry,
                              attrs=tuple((k, v) for k, v, _, _ in rc.attrs), span=ir.Span(rc.line, rc.column))
        comp.__dict__["by_name"] = by_name  # functools.cached_property keeps its value there
        return comp

    def lone_computation(self, ri: RawInstr) -> ir.Computation:
        """A lone instruction: its operands that are not defined become parameters, with the
        shapes the text gives them (XLA requires those shapes)."""
        if ri.name is None:
            ri.name = f"{ri.opcode}.anon"
        ri.is_root = True
        built = self.flatten([ri], lone=True)
        defined = {instr.name for instr, _ in built}
        params: list[tuple[ir.Instruction, bool]] = []
        for instr, _ in built:
            declared = self.declared.get(instr.name)
            for idx, op in enumerate(instr.operands):
                if op in defined:
                    continue
                shape_text = declared[idx] if declared else None
                if shape_text is None:
                    raise self.error("Operand had no shape in HLO text; a lone instruction must give "
                                     "each operand's shape", instr.span.line, instr.span.column)
                number = len(params) + self.anon_params
                params.append((ir.Instruction(op, "parameter", parse_shape(shape_text), literal=str(number),
                                              span=instr.span), False))
                defined.add(op)
        top = built[-1][0]
        return self.finish(f"{top.name}.computation", params + built, True, [], ri.line, ri.column, None, None)

    def flatten(self, raws: list[RawInstr], lone: bool = False) -> list[tuple[ir.Instruction, bool]]:
        """Raw instructions → (ir.Instruction, is_root) in order.  Nested instructions and
        anonymous operands are hoisted before their user with generated names
        (`multiply.anon`, `parameter.anon.1`), as XLA names them."""
        self.declared: dict[str, list] = {}
        self.shapes: dict[str, ir.Shape] = {}
        self.anon_params = 0
        taken: set[str] = set()
        out: list[tuple[ir.Instruction, bool]] = []

        def fresh(base: str) -> str:
            if not taken:
                taken.update(r.name for r in raws if r.name)
            name, k = base, 0
            while name in taken:
                k += 1
                name = f"{base}.{k}"
            taken.add(name)
            return name

        def build(ri: RawInstr) -> ir.Instruction:
            if ri.plain:
                instr = ri.built or self.instruction(ri, ri.operands)
                self.shapes[instr.name] = instr.shape
                return instr
            names: list[str] = []
            for op in ri.operands:
                if isinstance(op, RawInstr):
                    op.name = fresh(f"{op.opcode}.anon")
                    child = build(op)
                    out.append((child, False))
                    names.append(child.name)
                elif isinstance(op, AnonOperand):
                    if not lone:
                        raise self.error("expects name: only a lone instruction may leave its operands "
                                         "unnamed", op.line, op.column)
                    pname = fresh("parameter.anon")
                    param = ir.Instruction(pname, "parameter", op.shape, literal=str(self.anon_params),
                                           span=ir.Span(op.line, op.column))
                    self.anon_params += 1
                    self.shapes[pname] = op.shape
                    out.append((param, False))
                    names.append(pname)
                else:
                    names.append(op)
            instr = self.instruction(ri, names)
            self.shapes[instr.name] = instr.shape
            return instr

        for ri in raws:
            if ri.shape is not None and ri.name:
                self.shapes[ri.name] = ri.shape
        for ri in raws:
            out.append((build(ri), ri.is_root))
        return out

    def instruction(self, ri: RawInstr, operand_names: list[str]) -> ir.Instruction:
        shape = ri.shape if ri.shape is not None else self.infer_shape(ri, operand_names)
        called: list[str] = []
        attrs = ri.attrs
        for key, _ in attrs:
            if key in REWRITTEN_ATTRS:
                attrs = []
                for key, value in ri.attrs:
                    if key in ir.COMPUTATION_ATTRS:
                        value = self.computation_refs(ri, key, value, ri.line, ri.column, called)
                    elif key == "control-predecessors":
                        value = "{" + ", ".join(ir._names_in(value)) + "}"
                    attrs.append((key, value))
                break
        if ri.operand_shapes is not None:
            self.declared[ri.name] = ri.operand_shapes
            self.saw_operand_shapes = True
        return ir.Instruction(ri.name, ri.opcode, shape, tuple(operand_names), tuple(attrs), ri.literal,
                              tuple(called), ir.Span(ri.line, ri.column))

    def infer_shape(self, ri: RawInstr, operand_names: list[str]) -> ir.Shape:
        """XLA infers a left-out shape; hlofuse does so for elementwise instructions whose
        operands' shapes are known (the nested-instruction syntax of XLA's tests)."""
        from ..shape_inference import infer

        known = [self.shapes.get(n) for n in operand_names]
        attrs = dict(ri.attrs)
        shape = None
        if all(s is not None for s in known):
            shape = infer(ri.opcode, known, attrs, self.built)
        if shape is None:
            raise self.error(f"expects instruction shape: hlofuse cannot infer the shape of "
                             f"{ri.name or ri.opcode!r} ({ri.opcode})", ri.line, ri.column)
        return shape

    def computation_refs(self, ri: RawInstr, key: str, value: str, line: int, col: int,
                         called: list[str]) -> str:
        """Names of called computations; an inline body becomes a computation of its own."""
        text = value.strip()
        # A list of names never holds '=' or '('; an inline body always does.
        inline = text.startswith("{") and ("=" in text or "(" in text or text[1:].lstrip().startswith("{"))
        if not inline:
            names = ir._names_in(text)
            called.extend(names)
            # Stored without `%`, so spellings compare equal; the printer adds it back.
            return "{" + ", ".join(names) + "}" if text.startswith("{") else (names[0] if names else value)
        bodies = split_top_level(text[1:-1]) if key == "branch_computations" else [text]
        names = []
        saved = (self.declared, self.shapes, self.anon_params)
        for k, body in enumerate(bodies):
            cname = f"{ri.name or ri.opcode}.{key}" + (f".{k}" if len(bodies) > 1 else "")
            base, n = cname, 0
            while cname in self.inline_names:
                n += 1
                cname = f"{base}.{n}"
            self.inline_names.add(cname)
            raw_instrs = _run_parser_with_offset(self.text, body)
            built = self.flatten(raw_instrs)
            self.extra_computations.append(self.finish(cname, built, False, [], line, col, None, None))
            names.append(cname)
        self.declared, self.shapes, self.anon_params = saved
        called.extend(names)
        return names[0] if key != "branch_computations" else "{" + ", ".join(names) + "}"

    def check_parameter_number(self, instr: ir.Instruction, numbers: set[int]) -> None:
        try:
            number = int(instr.literal)
        except (TypeError, ValueError):
            raise self.error("parameter number must be an integer", instr.span.line, instr.span.column) from None
        if number < 0:
            raise self.error("parameter number must be >= 0", instr.span.line, instr.span.column)
        if number in numbers:
            raise self.error(f"Duplicate parameter number {number}", instr.span.line, instr.span.column)
        numbers.add(number)

    def finish(self, name, built, is_entry, attrs, line, col, params, result_shape) -> ir.Computation:
        """Checks XLA makes per computation, then the ir.Computation."""
        if not built:
            raise self.error(f"computation {name!r} has no instructions", line, col)
        by_name: dict[str, ir.Instruction] = {}
        roots = []
        numbers: set[int] = set()
        # In text order, as XLA's parser meets them: a name defined twice, then the parameter number.
        for instr, is_root in built:
            if instr.name in by_name:
                raise self.error(f"instruction {instr.name!r} is defined twice in computation {name!r}",
                                 instr.span.line, instr.span.column)
            by_name[instr.name] = instr
            if is_root:
                roots.append(instr)
            if instr.opcode == "parameter":
                self.check_parameter_number(instr, numbers)
        if len(roots) > 1:
            raise self.error("one computation should have only one ROOT", roots[1].span.line, roots[1].span.column)
        root = roots[0] if roots else built[-1][0]
        for instr, _ in built:
            for op in instr.operands:
                if op not in by_name:
                    # (`add(1, p)`: the operand list reads a number as a name, `%1` being one)
                    hint = "; a literal operand is only valid in constant(...)" if _NUMBER_RE.match(op) else ""
                    raise self.error(f"instruction does not exist: {op} (operand of {instr.name}{hint})",
                                     instr.span.line, instr.span.column)
            control = instr.attr("control-predecessors")
            if control:
                for pred in ir._names_in(control):
                    if pred not in by_name:
                        raise self.error(f"'{pred}' is not defined (control predecessor of {instr.name})",
                                         instr.span.line, instr.span.column)
            declared = self.declared.get(instr.name)
            if declared is not None:
                for op, text in zip(instr.operands, declared):
                    if text is None:
                        continue
                    dshape, actual = parse_shape(text), by_name[op].shape
                    if not dshape.compatible(actual):
                        raise self.error(
                            f"The declared operand shape {dshape} is not compatible with the shape of the "
                            f"operand instruction {actual}", instr.span.line, instr.span.column)
        cycle = instruction_cycle([instr for instr, _ in built], by_name)
        if cycle is not None:
            at = by_name[cycle[0]].span
            raise self.error(instruction_cycle_message(cycle, name), at.line, at.column)
        if result_shape is not None:
            declared_result = parse_shape(result_shape)
            if not declared_result.compatible(root.shape):
                raise self.error(
                    f"Shape of computation {name}, {declared_result.to_text(False)}, is not compatible with "
                    f"that of its root instruction {root.name}, {root.shape.to_text(False)}", line, col)
        return ir.Computation(
            name=name,
            instructions=tuple(instr for instr, _ in built),
            root_name=root.name,
            is_entry=is_entry,
            attrs=tuple((k, v) for k, v, _, _ in attrs),
            span=ir.Span(line, col),
        )


def uses_percent(text: str, rc: RawComputation) -> bool:
    """Whether the text writes names with `%`, judged by the first instruction of `rc`."""
    if not rc.instrs:
        return False
    first = rc.instrs[0]
    line = first.span.line if first.__class__ is ir.Instruction else first.line
    return bool(line) and "%" in line_text(text, line).split("=", 1)[0]


def line_text(text: str, line: int) -> str:
    """Line `line` (1-based) of the text, without splitting all of it."""
    pos = 0
    for _ in range(line - 1):
        pos = text.find("\n", pos) + 1
        if pos == 0:
            return ""
    end = text.find("\n", pos)
    return text[pos:] if end < 0 else text[pos:end]


def _run_parser_with_offset(text: str, body: str):
    """Parse an inline computation body; padding keeps line numbers those of the whole text."""
    start = text.find(body)
    if start < 0:
        padded = body
    else:
        before = text[:start]
        padded = "\n" * before.count("\n") + " " * (start - (before.rfind("\n") + 1)) + body
    return run_parser(padded, "computation_body")

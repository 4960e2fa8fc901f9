"""ir.Module → HLO text in XLA's own layout, so that XLA and hlofuse both parse it back
(`loads(dumps(m)) == m`).

Two spellings, as XLA prints them: the long form of dumps (`%` before names, signatures on
computations) and the short form (`HloPrintOptions::ShortParsable`).  By default the printer
uses the spelling the module was read in (`Module.style`), which makes XLA's own text print
back character for character.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import ir


@dataclass(frozen=True)
class Style:
    """How to spell a module; the defaults are the long form of XLA's dumps."""

    percent: bool = True  # `%name`
    signatures: bool = True  # `%comp (p: f32[2]) -> f32[2] {`
    operand_shapes: bool = False  # `add(f32[2]{0} %a, ...)`
    operand_index_marks: bool = True  # `/*index=5*/` before every fifth operand
    #: Computations whose closing brace carries `// name` (XLA of 2024 printed that for some).
    closing_comments: frozenset = frozenset()


LONG = Style()
SHORT = Style(percent=False, signatures=False, operand_index_marks=False)


def print_module(module: ir.Module, style: Style | None = None) -> str:
    style = style or module_style(module)
    out: list[str] = []
    header = f"HloModule {module.name or 'module'}"
    for key, value in module.attrs:
        header += f", {key}={value}"
    out.append(header)
    out.append("")
    if module.stack_frames:
        out.append(module.stack_frames.text.rstrip("\n"))
        out.append("")
        out.append("")
    for comp in module.computations:
        out.append(print_computation(comp, style, module.entry_name == comp.name))
        out.append("")
    # XLA ends every computation with a blank line, the last one too (HloModule::ToString).
    return "\n".join(out).rstrip("\n") + "\n\n"


def module_style(module: ir.Module) -> Style:
    return getattr(module, "style", None) or LONG


def _name(name: str, style: Style) -> str:
    return "%" + name if style.percent else name


def print_computation(comp: ir.Computation, style: Style = LONG, is_entry: bool | None = None) -> str:
    entry = comp.is_entry if is_entry is None else is_entry
    head = ("ENTRY " if entry else "") + _name(comp.name, style)
    if style.signatures:
        params = ", ".join(f"{p.name}: {shape_text(p.shape, layout=False)}" for p in comp.parameters)
        head += f" ({params}) -> {shape_text(comp.root.shape, layout=False)}"
    lines = [head + " {"]
    by_name = comp.by_name
    for instr in comp.instructions:
        if is_tuple_element_ref(instr) and instr.name != comp.root_name:
            continue  # written `%t#2` where it is used, as the text it came from was
        lines.append("  " + print_instruction(instr, style, instr.name == comp.root_name, by_name))
    tail = "}"
    if comp.name in style.closing_comments:
        tail += f" // {comp.name}"
    for key, value in comp.attrs:
        tail += f", {key}={value}"
    lines.append(tail)
    return "\n".join(lines)


def is_tuple_element_ref(instr: ir.Instruction) -> bool:
    """A get-tuple-element named `t#2` after its tuple and index: one that parsing made of a
    `%t#2` operand (XLA's printer since 2026), printed back the same way."""
    return instr.opcode == "get-tuple-element" and len(instr.operands) == 1 and \
        instr.name == f"{instr.operands[0]}#{instr.attr('index')}"


def shape_text(shape: ir.Shape, layout: bool = True) -> str:
    """XLA's ShapeUtil::HumanStringWithLayout, with its /*index=N*/ marks in long tuples."""
    if not shape.is_tuple:
        return shape.to_text(layout)
    parts = []
    for i, sub in enumerate(shape.tuple_shapes):
        text = shape_text(sub, layout)
        if i and i % 5 == 0:
            text = f"/*index={i}*/" + text
        parts.append(text)
    return "(" + ", ".join(parts) + ")"


def print_instruction(instr: ir.Instruction, style: Style = LONG, is_root: bool = False,
                      by_name: dict | None = None) -> str:
    text = ("ROOT " if is_root else "") + f"{_name(instr.name, style)} = {shape_text(instr.shape)} {instr.opcode}("
    if instr.literal is not None:
        text += instr.literal
    else:
        ops = []
        for i, op in enumerate(instr.operands):
            piece = _name(op, style)
            if style.operand_shapes and by_name is not None and op in by_name:
                piece = f"{shape_text(by_name[op].shape)} {piece}"
            if i and i % 5 == 0 and style.operand_index_marks:
                piece = f"/*index={i}*/" + piece
            ops.append(piece)
        text += ", ".join(ops)
    text += ")"
    for key, value in instr.attrs:
        if (key in ir.COMPUTATION_ATTRS or key == "control-predecessors") and style.percent:
            value = _respell_refs(value, style)
        text += f", {key}={value}"
    return text


def _respell_refs(value: str, style: Style) -> str:
    """`to_apply=%add` ↔ `to_apply=add` when printing in the other spelling."""
    names = ir._names_in(value)
    if not names:
        return value
    spelled = [_name(n, style) for n in names]
    if value.strip().startswith("{"):
        return "{" + ", ".join(spelled) + "}"
    return spelled[0]


def print_back_error(module: ir.Module) -> str | None:
    """Why the text of `module` does not parse back to the same module, or None when it does
    (what `fuse -o` writes must be read by XLA and hlofuse alike)."""
    from .errors import HlofuseError
    from .parse import parse_text

    text = print_module(module)
    try:
        again = parse_text(text)
    except HlofuseError as err:
        return f"the printed module does not parse: {err}"
    if again != module:
        return "the printed module parses to a different module"
    return None

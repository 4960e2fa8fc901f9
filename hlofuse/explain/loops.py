"""Trip counts of while loops: XLA's `known_trip_count` (which its runtime uses to run only the
body), or a compare of an integer counter against a constant in the condition, with a
constant start and step.  Counts are exact integers from 0 to int64's largest (XLA's counters
are integers of at most 64 bits), or unknown (None); never negative, never a float."""

from __future__ import annotations

from .. import attributes, ir


def trip_count(module: ir.Module, comp: ir.Computation, loop: ir.Instruction) -> tuple[int | None, str | None]:
    """(trip count, where it came from): `backend_config` (XLA's `known_trip_count`, which the
    runtime uses to skip the condition), `condition` (a compare of a counter against a
    constant, with a constant start and step), or (None, None).  A known_trip_count that is
    no count (negative, fractional, beyond int64) is not used."""
    known = attributes.known_trip_count(loop)
    if known is not None:
        return known, "backend_config"
    found = _trip_count_from_condition(module, comp, loop)
    return (found, "condition") if found is not None else (None, None)


_DIRECTIONS = ("LT", "LE", "GT", "GE", "NE")


def _trip_count_from_condition(module: ir.Module, comp: ir.Computation, loop: ir.Instruction) -> int | None:
    cond = module.by_name.get((loop.attr("condition") or "").lstrip("%"))
    body = module.by_name.get((loop.attr("body") or "").lstrip("%"))
    if cond is None or body is None or not loop.operands:
        return None
    compare = _as_expression(module, cond, cond.root)
    if compare is None or compare[0] != "compare":
        return None
    _, direction, lhs, rhs = compare
    if lhs[0] == "const" and rhs[0] == "elem":
        lhs, rhs = rhs, lhs
        direction = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE"}.get(direction, direction)
    if lhs[0] != "elem" or rhs[0] != "const" or direction not in _DIRECTIONS:
        return None
    index, bound = lhs[1], rhs[1]
    init = _constant_element(module, comp, loop.operands[0], index)
    step = _body_update(module, body, index)
    if init is None or step is None:
        return None
    count = iterations(init, bound, step, direction)
    return count if count is not None and count <= attributes.MAX_TRIP_COUNT else None


def iterations(init: int, bound: int, step: int, direction: str) -> int | None:
    """How often `i = init; while (i <direction> bound) i += step;` runs its body, in integers
    (no float division: counts past 2**53 stay exact); None when the loop never ends (a step
    away from the bound, or a `NE` bound the steps jump over)."""
    if direction in ("LT", "LE"):
        limit = bound if direction == "LT" else bound + 1  # runs while i < limit
        if init >= limit:
            return 0
        return -((init - limit) // step) if step > 0 else None
    if direction in ("GT", "GE"):
        limit = bound if direction == "GT" else bound - 1  # runs while i > limit
        if init <= limit:
            return 0
        return -((limit - init) // -step) if step < 0 else None
    if init == bound:
        return 0
    if step == 0 or (bound - init) % step != 0:
        return None
    return (bound - init) // step if (bound - init) // step > 0 else None


def _as_expression(module: ir.Module, comp: ir.Computation, instr: ir.Instruction, depth: int = 0):
    """A tiny symbolic reading of a scalar: ('elem', k) for get-tuple-element k of the
    parameter, ('const', v), ('compare', dir, a, b), ('add', a, b); looks into fusions."""
    if depth > 12:
        return None
    op = instr.opcode
    if op == "get-tuple-element" and comp[instr.operands[0]].opcode == "parameter":
        return ("elem", attributes.integer(instr, "index", 0))
    if op == "constant" and instr.shape.is_scalar and instr.literal is not None:
        if instr.shape.element_type not in ir.INTEGRAL_TYPES:
            return None  # XLA counts trips of integer induction variables only
        try:
            return ("const", int(instr.literal))
        except ValueError:
            return None
    if op in ("copy", "bitcast", "convert", "reshape") and instr.operands:
        return _as_expression(module, comp, comp[instr.operands[0]], depth + 1)
    if op == "compare" and len(instr.operands) == 2:
        a = _as_expression(module, comp, comp[instr.operands[0]], depth + 1)
        b = _as_expression(module, comp, comp[instr.operands[1]], depth + 1)
        if a is None or b is None:
            return None
        return ("compare", instr.attr("direction", ""), a, b)
    if op == "add" and len(instr.operands) == 2:
        a = _as_expression(module, comp, comp[instr.operands[0]], depth + 1)
        b = _as_expression(module, comp, comp[instr.operands[1]], depth + 1)
        if a is None or b is None:
            return None
        return ("add", a, b)
    if op == "fusion":
        fused = module.by_name.get(instr.fused_computation or "")
        if fused is None:
            return None
        return _in_fusion(module, comp, instr, fused, fused.root, depth + 1)
    return None


def _in_fusion(module, comp, fusion, fused, instr, depth):
    if instr.opcode == "parameter":
        n = instr.parameter_number
        if n < len(fusion.operands):
            return _as_expression(module, comp, comp[fusion.operands[n]], depth + 1)
        return None
    if instr.opcode in ("compare", "add") and len(instr.operands) == 2:
        a = _in_fusion(module, comp, fusion, fused, fused[instr.operands[0]], depth + 1)
        b = _in_fusion(module, comp, fusion, fused, fused[instr.operands[1]], depth + 1)
        if a is None or b is None:
            return None
        return ("compare", instr.attr("direction", ""), a, b) if instr.opcode == "compare" else ("add", a, b)
    if instr.opcode in ("copy", "bitcast", "convert", "reshape") and instr.operands:
        return _in_fusion(module, comp, fusion, fused, fused[instr.operands[0]], depth + 1)
    if instr.opcode == "constant":
        return _as_expression(module, fused, instr, depth + 1)
    return None


def _constant_element(module: ir.Module, comp: ir.Computation, name: str, index: int) -> int | None:
    instr = comp[name]
    for _ in range(8):
        if instr.opcode == "tuple" and index < len(instr.operands):
            value = comp[instr.operands[index]]
            while value.opcode in ("copy", "bitcast") and value.operands:
                value = comp[value.operands[0]]
            expr = _as_expression(module, comp, value)
            return expr[1] if expr is not None and expr[0] == "const" else None
        if instr.opcode in ("copy", "bitcast") and instr.operands:
            instr = comp[instr.operands[0]]
            continue
        return None
    return None


def _body_update(module: ir.Module, body: ir.Computation, index: int) -> int | None:
    """The constant step by which the body changes loop element `index`."""
    root = body.root
    if root.opcode != "tuple" or index >= len(root.operands):
        return None
    expr = _as_expression(module, body, body[root.operands[index]])
    if expr is None or expr[0] != "add":
        return None
    _, a, b = expr
    if a == ("elem", index) and b[0] == "const":
        return b[1]
    if b == ("elem", index) and a[0] == "const":
        return a[1]
    return None

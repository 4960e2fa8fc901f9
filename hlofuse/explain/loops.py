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


# ------------------------------------------------------------------------------------------
# Launches: kernels per loop iteration and in total, and how often each computation runs
# ------------------------------------------------------------------------------------------


class LoopCounts:
    """The while loops of a module's executed computations, with their kernels per iteration
    and in total, and how often each computation runs per execution of the program."""

    def __init__(self, module: ir.Module, executed, source):
        from ..kernels import is_kernel

        self.m = module
        self._source = source  # (computation, instruction) -> SourceRef | None
        self.counts = {c.name: sum(1 for i in c.instructions if is_kernel(i)) for c in executed}
        self._runs: dict[str, int | None] = {}
        self.loops = self._summaries(executed, is_kernel)
        self.by_name = {lp.name: lp for lp in self.loops}
        self._by_comp: dict = {}
        for lp in self.loops:
            self._by_comp.setdefault(lp.body, lp)
            self._by_comp.setdefault(lp.condition, lp)

    def enclosing(self, comp: str):
        """The loop whose body or condition `comp` is."""
        return self._by_comp.get(comp)

    def _summaries(self, executed, is_kernel) -> list:
        from .records import LoopSummary

        out = []
        for comp in executed:
            for instr in comp.instructions:
                if instr.opcode != "while":
                    continue
                body = (instr.attr("body") or "").lstrip("%")
                cond = (instr.attr("condition") or "").lstrip("%")
                trip, from_ = trip_count(self.m, comp, instr)
                launched = from_ != "backend_config"
                out.append(LoopSummary(
                    name=instr.name, computation=comp.name, body=body, condition=cond, trip_count=trip,
                    trip_count_from=from_, body_kernels=self.counts.get(body, 0),
                    condition_kernels=self.counts.get(cond, 0), condition_launched=launched,
                    kernels_per_iteration=0, kernels_total=None, source=self._source(comp.name, instr.name),
                    max_kernel_bytes=max((i.shape.byte_size for i in self.m[body].instructions
                                          if is_kernel(i)), default=0) if body in self.m.by_name else 0))
        pending = {lp.name: lp for lp in out}
        done: dict = {}
        for lp in out:
            done[lp.name] = self._with_totals(lp, pending, done)
        return [done[lp.name] for lp in out]

    def _with_totals(self, lp, pending, done):
        """Launches per iteration include loops nested in the body (when their count is known)."""
        from dataclasses import replace

        nested = 0
        nested_known = True
        for comp_name in (lp.body,) + ((lp.condition,) if lp.condition_launched else ()):
            comp = self.m.by_name.get(comp_name)
            if comp is None:
                continue
            for instr in comp.instructions:
                if instr.opcode == "while" and instr.name in pending:
                    inner = done.get(instr.name) or self._with_totals(pending[instr.name], pending, done)
                    if inner.kernels_total is None:
                        nested_known = False
                    else:
                        nested += inner.kernels_total
        per_iteration = lp.body_kernels + (lp.condition_kernels if lp.condition_launched else 0) + nested
        total = None
        if lp.trip_count is not None and nested_known:
            total = lp.trip_count * per_iteration
            if lp.condition_launched:
                total += lp.condition_kernels  # the last test, which ends the loop
        return replace(lp, kernels_per_iteration=per_iteration, kernels_total=total)

    def runs(self, comp: str, visiting: frozenset = frozenset()) -> int | None:
        """How often `comp` runs per execution of the program (None: an unknown trip count)."""
        if comp in self._runs:
            return self._runs[comp]
        if comp == self.m.entry_name:
            return 1
        if comp in visiting:
            return None
        visiting = visiting | {comp}
        total = 0  # an exact integer: trip counts multiply past 2**53
        callers = self.m.callers.get(comp, ())
        if not callers:
            return None
        for caller_comp, caller_name, key in callers:
            caller = self.m[caller_comp][caller_name]
            runs = self.runs(caller_comp, visiting)
            if runs is None:
                self._runs[comp] = None
                return None
            if caller.opcode == "while":
                lp = self.by_name.get(caller_name)
                if lp is None or lp.trip_count is None:
                    self._runs[comp] = None
                    return None
                if key == "body":
                    total += runs * lp.trip_count
                elif lp.condition_launched:
                    total += runs * (lp.trip_count + 1)
            else:
                total += runs  # a branch runs at most this often; a call exactly
        self._runs[comp] = total
        return total

"""Tracing a value back to the kernel that produced it (through get-tuple-element, tuples,
bitcasts, and while / conditional / call boundaries), and small readers of instructions
inside kernels (which instruction computes an output, which reads an operand)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import attributes, ir
from ..kernels import executed_computations, is_kernel
from .records import LoopSummary

#: Instructions a value passes through unchanged (a view or an alias of operand 0).
_PASS_THROUGH = frozenset({"bitcast", "add-dependency", "domain", "opt-barrier"})


@dataclass(frozen=True)
class Source:
    comp: str
    name: str  # the producing kernel
    path: tuple[int, ...]  # which output of a tuple-shaped kernel
    crossing: tuple[str, ...]
    via: tuple[str, ...]
    loop: str | None


class Tracer:
    """Finds, for a value in a computation, the kernels that produced it."""

    def __init__(self, module: ir.Module):
        self.m = module
        self.executed = {c.name for c in executed_computations(module)}

    def sources(self, comp: str, name: str, *, local: bool = False) -> list[Source]:
        out: list[Source] = []
        seen: set = set()
        stack = [(comp, name, (), (), (), None)]
        while stack:
            comp, name, path, crossing, via, loop = stack.pop()
            key = (comp, name, path, crossing)
            if key in seen:
                continue
            seen.add(key)
            c = self.m.by_name.get(comp)
            if c is None or name not in c:
                continue
            instr = c[name]
            op = instr.opcode
            if op == "get-tuple-element":
                idx = attributes.integer(instr, "index", 0)
                if _indexes(c[instr.operands[0]].shape, (idx,) + path):  # (else no such element:
                    # a bitcast to a tuple type fed back through a loop would nest forever)
                    stack.append((comp, instr.operands[0], (idx,) + path, crossing, via + (name,), loop))
            elif op == "tuple":
                if path:
                    if path[0] < len(instr.operands):
                        stack.append((comp, instr.operands[path[0]], path[1:], crossing, via + (name,), loop))
                else:
                    for operand in dict.fromkeys(instr.operands):
                        stack.append((comp, operand, (), crossing, via + (name,), loop))
            elif op in _PASS_THROUGH:
                if instr.operands:
                    stack.append((comp, instr.operands[0], path, crossing, via + (name,), loop))
            elif op == "parameter":
                if not local:
                    stack.extend(self._through_parameter(c, instr, path, crossing, via, loop))
            elif op == "while":
                if not local:
                    body = instr.attr("body", "").lstrip("%")
                    if body in self.m.by_name:
                        stack.append((body, self.m[body].root_name, path, cross(crossing, "loop-output"),
                                      via + (name,), loop or name))
            elif op in ("conditional", "call", "async-done", "async-update"):
                if not local:
                    kind = {"conditional": "branch", "call": "call"}.get(op, "async")
                    for callee in self._callees_with_result(instr):
                        stack.append((callee, self.m[callee].root_name, path, cross(crossing, f"{kind}-output"),
                                      via + (name,), loop))
            elif is_kernel(instr):
                out.append(Source(comp, name, path, crossing, via, loop))
        return out

    def _callees_with_result(self, instr: ir.Instruction) -> list[str]:
        if instr.opcode == "conditional":
            return [c for c in instr.called if c in self.m.by_name]
        if instr.opcode == "call":
            return [c for c in instr.called[:1] if c in self.m.by_name]
        # async-done: the wrapped computation of its async-start
        comp_calls = [c for c in instr.called if c in self.m.by_name]
        return comp_calls[:1]

    def _through_parameter(self, comp: ir.Computation, param: ir.Instruction, path, crossing, via, loop):
        """Where a computation's parameter comes from: the caller's operand, and for a while
        body or condition also the body's root (the previous iteration)."""
        number = param.parameter_number
        via = via + (param.name,)
        for caller_comp, caller_name, key in self.m.callers.get(comp.name, ()):
            caller = self.m[caller_comp][caller_name]
            op = caller.opcode
            if op == "while":
                if caller.operands:
                    yield (caller_comp, caller.operands[0], path, cross(crossing, "loop-input"),
                           via + (caller_name,), loop or caller_name)
                body = caller.attr("body", "").lstrip("%")
                if body in self.m.by_name:
                    yield (body, self.m[body].root_name, path, cross(crossing, "loop-carried"),
                           via, loop or caller_name)
            elif op == "conditional":
                for branch_index, callee in enumerate(caller.called):
                    if callee == comp.name and branch_index + 1 < len(caller.operands):
                        yield (caller_comp, caller.operands[branch_index + 1], path, cross(crossing, "branch-input"),
                               via + (caller_name,), loop)
            elif op == "call" or op.startswith("async"):
                kind = "call" if op == "call" else "async"
                if number < len(caller.operands):
                    yield (caller_comp, caller.operands[number], path, cross(crossing, f"{kind}-input"),
                           via + (caller_name,), loop)


@dataclass
class Edge:
    source: Source
    consumer_comp: str
    consumer: str  # the consuming kernel, tuple or control-flow instruction
    operand_index: int


def _indexes(shape: ir.Shape, path: tuple[int, ...]) -> bool:
    """Whether `path` names an element of `shape` (each index inside a tuple)."""
    for i in path:
        if not shape.is_tuple or not 0 <= i < len(shape.tuple_shapes):
            return False
        shape = shape.tuple_shapes[i]
    return True


def cross(crossing: tuple[str, ...], kind: str) -> tuple[str, ...]:
    return crossing if kind in crossing else crossing + (kind,)


def subshape(shape: ir.Shape, path: tuple[int, ...]) -> ir.Shape:
    for i in path:
        if not shape.is_tuple or i >= len(shape.tuple_shapes):
            break
        shape = shape.tuple_shapes[i]
    return shape


# ------------------------------------------------------------------------------------------
# Instructions inside kernels
# ------------------------------------------------------------------------------------------


def kind_of(instr: ir.Instruction) -> str:
    if instr.opcode == "fusion":
        return instr.fusion_kind or "kLoop"
    if instr.opcode == "custom-call":
        return "library"
    return instr.opcode


def label_kind(instr: ir.Instruction) -> str:
    if instr.opcode == "fusion":
        return {"kLoop": "loop fusion", "kInput": "input fusion", "kOutput": "output fusion",
                "kCustom": "library fusion"}.get(instr.fusion_kind or "kLoop", "fusion")
    if instr.opcode == "custom-call":
        return "library call"
    return instr.opcode


def label_of(instr: ir.Instruction, lib) -> str:
    base = label_kind(instr)
    if lib is not None:
        return f"{base} ({lib[1]})"
    return base


def value_instruction(module: ir.Module, kernel: ir.Instruction, path: tuple[int, ...]) -> str:
    """The instruction inside a kernel that computes output `path` (a fusion's root, or the
    root tuple's operand for a multi-output fusion)."""
    if kernel.opcode != "fusion":
        return kernel.name
    body = module.by_name.get(kernel.fused_computation or "")
    if body is None:
        return kernel.name
    instr = body.root
    for i in path:
        if instr.opcode == "tuple" and i < len(instr.operands):
            instr = body[instr.operands[i]]
        else:
            break
    return instr.name


def reader(module: ir.Module, kernel: ir.Instruction, operand_index: int) -> str:
    """The instruction inside a consumer kernel that reads operand `operand_index` (through
    bitcasts); the kernel itself when it is not a fusion."""
    if kernel.opcode != "fusion":
        return kernel.name
    body = module.by_name.get(kernel.fused_computation or "")
    if body is None:
        return kernel.name
    params = body.parameters
    if operand_index >= len(params):
        return kernel.name
    name = params[operand_index].name
    for _ in range(16):
        users = body.users.get(name, ())
        if not users:
            return name
        user = body[users[0]]
        if user.opcode == "bitcast":
            name = user.name
            continue
        return user.name
    return name


def instruction_finder(module: ir.Module):
    """A lookup `(comp, name) -> (computation, instruction) | None`: the instruction named
    `name` in `comp` or, failing that, inside one of its fusions (the first fusion's body
    first, then what that body fuses).  Each computation's table of the names it holds is
    built once (a search per question walked every fusion: quadratic on large modules)."""
    tables: dict[str, dict[str, tuple]] = {}

    def table(comp: str) -> dict[str, tuple]:
        found = tables.get(comp)
        if found is None:
            found = {}
            c = module.by_name.get(comp)
            if c is not None:
                for instr in c.instructions:
                    found.setdefault(instr.name, (c, instr))
                for instr in c.instructions:
                    body = module.by_name.get(instr.fused_computation or "") if instr.opcode == "fusion" else None
                    if body is not None:
                        for inner in body.instructions:
                            found.setdefault(inner.name, (body, inner))
                        for inner_name, hit in table(body.name).items():
                            found.setdefault(inner_name, hit)
            tables[comp] = found
        return found

    return lambda comp, name: table(comp).get(name)


def opcode_in(module: ir.Module, kernel: ir.Instruction, name: str) -> str:
    if name == kernel.name:
        return kernel.opcode
    body = module.by_name.get(kernel.fused_computation or "")
    if body is not None and name in body:
        instr = body[name]
        while instr.opcode == "bitcast" and instr.operands and instr.operands[0] in body:
            instr = body[instr.operands[0]]
        return instr.opcode
    return kernel.opcode


def op_name_in(module: ir.Module, kernel: ir.Instruction, name: str) -> str:
    found = None
    if name == kernel.name:
        found = kernel
    else:
        body = module.by_name.get(kernel.fused_computation or "")
        if body is not None and name in body:
            found = body[name]
    meta = attributes.metadata(found or kernel)
    return meta.op_name or attributes.metadata(kernel).op_name or ""


def opcodes_of(module: ir.Module, kernel: ir.Instruction) -> frozenset[str]:
    if kernel.opcode != "fusion":
        return frozenset({kernel.opcode})
    out: set[str] = set()
    stack = [kernel.fused_computation]
    seen = set()
    while stack:
        name = stack.pop()
        if name in seen or name not in module.by_name:
            continue
        seen.add(name)
        for instr in module[name].instructions:
            out.add(instr.opcode)
            if instr.opcode == "fusion" and instr.fused_computation:
                stack.append(instr.fused_computation)
    return frozenset(out)


def display(instr: str, kernel: str, output: tuple[int, ...] = ()) -> str:
    if instr != kernel:
        return f"{instr} (in {kernel})"
    return f"{kernel} (output {'.'.join(map(str, output))})" if output else kernel


def loop_words(loop: LoopSummary) -> str:
    trip = f" ({loop.trip_count} iterations)" if loop.trip_count is not None else ""
    return f"while loop {loop.name}{trip}"


def concatenates_in(module: ir.Module, kernel: ir.Instruction) -> tuple[tuple[str, str], ...]:
    """(element type, op_name) of every concatenate a kernel computes (itself, or inside it)."""
    if kernel.opcode == "concatenate":
        found = [kernel]
    elif kernel.opcode == "fusion" and kernel.fused_computation in module.by_name:
        found = [i for i in module[kernel.fused_computation].instructions if i.opcode == "concatenate"]
    else:
        found = []
    return tuple((i.shape.element_type or "", attributes.metadata(i).op_name or "") for i in found)

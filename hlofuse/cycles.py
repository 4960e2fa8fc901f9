"""Cycles in a module: an instruction that depends on itself, a computation that calls itself.

XLA cannot build either.  Its parser resolves a name only once it has been defined, so a
cycle in HLO text fails there as an undefined name; a module built in memory with one fails
HloVerifier, whose post-order walk reports "A cycle is detected while visiting instruction"
(xla/hlo/ir/dfs_hlo_visitor.cc, PostOrderDFS; control predecessors count as operands there).
hlofuse accepts names in any order, so it looks for the cycles themselves: the replay, the
explainer and the evaluator all assume an acyclic graph and hang or overflow without one.

Both walks are iterative (computations hold 100k instructions, call chains run 1,000 deep) and
linear.  A computation whose every operand is defined above its user (the order XLA prints)
cannot hold a cycle, and a module whose every callee is printed above its caller cannot call
in a circle: both cost one pass, and the parser's assembly makes that pass anyway.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

from . import ir
from .errors import HloSyntaxError


def instruction_cycle(instructions: Sequence[ir.Instruction],
                      by_name: Mapping[str, ir.Instruction] | None = None) -> tuple[str, ...] | None:
    """Instruction names along a cycle of operands and control predecessors, each using the
    next, the first repeated at the end (`a, b, a`); None when there is none.  Names that
    are not in the computation are left to the "does not exist" errors."""
    defined: set[str] = set()
    for instr in instructions:
        if not all(pred in defined for pred in ir._predecessors(instr)):
            break
        defined.add(instr.name)
    else:
        return None
    if by_name is None:
        by_name = {instr.name: instr for instr in instructions}
    return find_cycle((instr.name for instr in instructions),
                      lambda name: [p for p in ir._predecessors(by_name[name]) if p in by_name])


def callees_in_order(module: ir.Module) -> bool:
    """Whether every computation a computation calls comes before it in the module."""
    position = {comp.name: k for k, comp in enumerate(module.computations)}
    for k, comp in enumerate(module.computations):
        for instr in comp.instructions:
            if instr.called and any(position.get(callee, -1) >= k for callee in instr.called):
                return False
    return True


def call_cycle(module: ir.Module) -> tuple[str, ...] | None:
    """Computation names along a cycle of calls (`calls=`, `to_apply=`, `body=`, `condition=`,
    `branch_computations=`, ...), each calling the next, the first repeated at the end."""
    if callees_in_order(module):
        return None
    names = module.by_name
    callees = {comp.name: [c for instr in comp.instructions for c in instr.called if c in names]
               for comp in module.computations}
    return find_cycle(callees, callees.__getitem__)


def find_cycle(nodes: Iterable[str], successors: Callable[[str], list[str]]) -> tuple[str, ...] | None:
    """A cycle of the graph `successors` describes, found by an iterative depth-first walk:
    the nodes along it, the first repeated at the end, or None."""
    state: dict[str, int] = {}  # 1 on the walk's path, 2 finished
    for start in nodes:
        if start in state:
            continue
        state[start] = 1
        path = [start]
        stack = [iter(successors(start))]
        while stack:
            for nxt in stack[-1]:
                seen = state.get(nxt)
                if seen is None:
                    state[nxt] = 1
                    path.append(nxt)
                    stack.append(iter(successors(nxt)))
                    break
                if seen == 1:
                    return tuple(path[path.index(nxt):]) + (nxt,)
            else:
                stack.pop()
                state[path.pop()] = 2
    return None


def instruction_cycle_message(cycle: tuple[str, ...], computation: str) -> str:
    return (f"A cycle is detected while visiting instruction {cycle[0]}: {_chain(cycle)} (in computation "
            f"{computation}; each instruction uses the next as an operand or control predecessor)")


def call_cycle_message(cycle: tuple[str, ...], caller: ir.Instruction) -> str:
    return (f"computation {cycle[0]} calls itself: {_chain(cycle)} (through {caller.name}; a computation "
            f"cannot call itself, directly or through others)")


def caller_of(comp: ir.Computation, callee: str) -> ir.Instruction:
    """The first instruction of `comp` that calls `callee` (where a call cycle is reported)."""
    return next(instr for instr in comp.instructions if callee in instr.called)


def cycle_error(module: ir.Module) -> HloSyntaxError | None:
    """The error for the first cycle of `module` (instructions first, then calls), at an
    instruction on it; None when there is none."""
    for comp in module.computations:
        cycle = instruction_cycle(comp.instructions, comp.by_name)
        if cycle is not None:
            return _error(instruction_cycle_message(cycle, comp.name), comp[cycle[0]].span, module.path)
    cycle = call_cycle(module)
    if cycle is not None:
        caller = caller_of(module[cycle[0]], cycle[1])
        return _error(call_cycle_message(cycle, caller), caller.span, module.path)
    return None


def require_acyclic(module: ir.Module) -> None:
    """Raise the HloSyntaxError of a cycle.  The parser rejects cycles; this is for modules
    built in memory, before a stage that would loop forever on one."""
    err = cycle_error(module)
    if err is not None:
        raise err


def _chain(names: tuple[str, ...]) -> str:
    if len(names) > 12:  # a long cycle: its ends say where it is
        names = names[:5] + ("...",) + names[-5:]
    return " → ".join(names)


def _error(message: str, span: ir.Span | None, path: str | None) -> HloSyntaxError:
    line, column = (span.line, span.column) if span is not None else (None, None)
    return HloSyntaxError(message, path=path, line=line, column=column)

"""Which instructions of a module launch work on the device (kernels), and where.

A kernel is a fusion, a library call (cuBLAS / cuDNN / Triton custom calls and library
fusions), a copy, or any other unfused instruction that computes.  Parameters, constants,
tuples, get-tuple-element, bitcasts and other views are buffers, not kernels; while,
conditional and call run their called computations, which are counted on their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import ir
from .opcodes import NON_KERNEL

#: Roles of computations whose instructions run as kernels of their own.
EXECUTED_ROLES = frozenset({"entry", "while_body", "while_condition", "branch", "call", "async"})
CONTROL = frozenset({"while", "conditional", "call", "async-start", "async-update", "async-done"})


def is_kernel(instr: ir.Instruction) -> bool:
    return instr.opcode not in NON_KERNEL and instr.opcode not in CONTROL


def executed_computations(module: ir.Module) -> list[ir.Computation]:
    """Computations whose instructions are launched: the entry, while bodies and conditions,
    conditional branches and called computations (not fused bodies, not reducers)."""
    reachable: list[ir.Computation] = []
    seen = set()
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        if comp.name in seen:
            continue
        seen.add(comp.name)
        reachable.append(comp)
        for instr in comp.instructions:
            if instr.opcode in CONTROL:
                for callee in instr.called:
                    if callee in module.by_name:
                        stack.append(module.by_name[callee])
    order = {c.name: i for i, c in enumerate(module.computations)}
    return sorted(reachable, key=lambda c: order[c.name])


@dataclass(frozen=True)
class KernelCount:
    computation: str
    role: str
    kernels: int
    by_kind: dict


def kernel_kind(instr: ir.Instruction) -> str:
    """A short label: loop / input / output / custom fusion, library call, copy, or the opcode."""
    if instr.opcode == "fusion":
        kind = instr.fusion_kind or "kLoop"
        return {"kLoop": "loop fusion", "kInput": "input fusion", "kOutput": "output fusion",
                "kCustom": "custom fusion"}.get(kind, kind)
    if instr.opcode == "custom-call":
        return "library call"
    return instr.opcode


def count_kernels(module: ir.Module) -> list[KernelCount]:
    out = []
    for comp in executed_computations(module):
        kinds: dict[str, int] = {}
        total = 0
        for instr in comp.instructions:
            if is_kernel(instr):
                total += 1
                k = kernel_kind(instr)
                kinds[k] = kinds.get(k, 0) + 1
        out.append(KernelCount(comp.name, module.role(comp.name), total, kinds))
    return out

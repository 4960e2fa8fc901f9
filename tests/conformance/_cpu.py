"""Runners for XLA:CPU's cases of the corpus (cpu_instruction_fusion_test.cc): the CPU fusion
pass on the generic driver, and the TransposeFolding cases that live in the same test file."""

from __future__ import annotations


def run_cpu_instruction_fusion(program, ctx, case: dict) -> bool:
    from hlofuse.passes.cpu import CpuPolicy
    from hlofuse.passes.instruction_fusion import InstructionFusion

    return InstructionFusion(CpuPolicy()).run(program, ctx)


def run_transpose_folding(program, ctx, case: dict) -> bool:
    from hlofuse.passes.cpu import transpose_folding

    return transpose_folding(program, ctx)


def register(register_pass) -> None:
    for name, fn in (("cpu_instruction_fusion", run_cpu_instruction_fusion),
                     ("transpose_folding", run_transpose_folding)):
        register_pass(name, fn, config=lambda case: None, pipeline="cpu", backend="cpu")

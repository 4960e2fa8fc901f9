"""Runners for the legacy passes built on shared drivers (kept apart from runner.py so that a
missing driver only disables its pass)."""

from __future__ import annotations


def run_gpu_instruction_fusion(program, ctx, case: dict) -> bool:
    from hlofuse.passes.gpu_instruction_fusion import run_once

    options = case["expect"].get("pass_options") or {}
    return run_once(program, ctx, may_duplicate=options.get("may_duplicate", True))


def run_horizontal_loop_fusion(program, ctx, case: dict) -> bool:
    """HorizontalLoopFusion as the test ran it: as of XLA 84d72608 ("N", the commit the corpus
    cases come from) with the test's `only_entry_computation`; once, or to a fixed point (with
    DCE) when the test used HloPassFix; a vertical pre-pass first when the test ran one."""
    from hlofuse.passes.cleanup import dce
    from hlofuse.passes.gpu_instruction_fusion import make_passes
    from hlofuse.passes.horizontal_fusion import run_loop

    expect = case["expect"]
    options = expect.get("pass_options") or {}
    only_entry = bool(options.get("only_entry_computation", False))  # N's constructor default
    if expect.get("pre_passes"):
        # The corpus names priority fusion as HorizontalLoopFusionAfterVerticalFusion's pre-pass;
        # the two GpuInstructionFusion passes the same test ran at XLA 76da7301 give the HLO its
        # assertions expect (docs/xla/legacy-gpu-pipeline.md §11.4).
        for instance in make_passes():
            instance.run(program, ctx)
    mode = expect.get("run_mode") or ""
    if "fixpoint" not in mode:
        return run_loop(program, ctx, only_entry=only_entry, xla="N")
    changed = False
    for _ in range(25):
        step = run_loop(program, ctx, only_entry=only_entry, xla="N")
        if "dce" in mode:
            step |= dce(program, ctx)
        if not step:
            break
        changed = True
    return changed

"""Runners for the legacy passes built on shared drivers (kept apart from runner.py so that a
missing driver only disables its pass)."""

from __future__ import annotations


def run_gpu_instruction_fusion(program, ctx, case: dict) -> bool:
    from hlofuse.passes.gpu_instruction_fusion import run_once

    options = case["expect"].get("pass_options") or {}
    return run_once(program, ctx, may_duplicate=options.get("may_duplicate", True))

"""Runner for PriorityFusion's cases of the corpus (priority_fusion_test.cc): the pass alone,
as XLA's test fixture runs it, on the A6000 unit-test device and the XLA of jaxlib 0.10.2."""

from __future__ import annotations


def priority_config(case: dict):
    from hlofuse.gpu import GpuConfig, test_device

    return GpuConfig(test_device(), era="2026")


def run_priority_fusion(program, ctx, case: dict) -> bool:
    from hlofuse.passes.priority_fusion import priority_fusion

    return priority_fusion(program, ctx)


def register(register_pass) -> None:
    register_pass("priority_fusion", run_priority_fusion, config=priority_config, pipeline="priority")

"""`xla_cpu_experimental_ynn_fusion_type` replayed (hlofuse/passes/cpu.py): the library fusions
of types the flag leaves out are taken back, reductions split as XLA's TreeReductionRewriter
splits them; checked against real XLA:CPU compiled both ways (tests/data/xla-cpu-ynn-fusion-type)."""

from __future__ import annotations

import pytest

import hlofuse
from hlofuse.errors import InputError
from hlofuse.hints import YNN_FLAG
from hlofuse.kernels import executed_computations, is_kernel
from hlofuse.passes.cpu import ynn_fusion_types
from hlofuse.pipeline import Options, replay

from conftest import REPO

DATA = REPO / "tests" / "data" / "xla-cpu-ynn-fusion-type"


def _kernel_opcodes(module):
    """Each kernel of a fused module as the sorted set of the opcodes it computes."""
    out = []
    for comp in executed_computations(module):
        for instr in comp.instructions:
            if is_kernel(instr):
                body = module.by_name.get(instr.fused_computation or "")
                ops = {i.opcode for i in body.instructions} - {"parameter"} if body else {instr.opcode}
                out.append(tuple(sorted(ops)))
    return sorted(out)


@pytest.mark.parametrize("program", ["layer_norm", "row_stats"])
def test_without_reduce_fusions_the_replay_makes_xlas_kernels(program):
    before = hlofuse.load(next((DATA / f"{program}_default").glob("*before_fusion.txt")))
    xla = hlofuse.load(next((DATA / f"{program}_noreduce").glob("*.0002.*after_fusion-wrapper*.txt")))
    result = replay(before, Options(backend="cpu", pipeline="cpu", xla_flags=(YNN_FLAG,)))
    assert _kernel_opcodes(result.module) == _kernel_opcodes(xla)
    assert any("TreeReductionRewriter" in n for n in result.notes)
    default = replay(before, Options(backend="cpu", pipeline="cpu"))
    assert len(default.kernels) < len(result.kernels)  # with YNNPACK: fewer kernels, as XLA made


def test_the_flag_hint_fires_on_a_ynnpack_reduction_and_predicts_xlas_kernel_count():
    ex = hlofuse.explain(DATA / "layer_norm_default", predict=True).explanation
    flagged = [g for g in ex.groups if g.hint_kind == "xla-flag"]
    assert flagged and all(YNN_FLAG in g.hint for g in flagged)
    change = flagged[0].hint_fix
    xla_default = len(hlofuse.explain(DATA / "layer_norm_default", predict=False).explanation.kernels)
    xla_noreduce = len(hlofuse.explain(DATA / "layer_norm_noreduce", predict=False).explanation.kernels)
    assert change.kernels_delta == xla_noreduce - xla_default == 1
    # compiled without REDUCE, nothing is left for the hint to say
    assert not any(g.hint_kind == "xla-flag" for g in hlofuse.explain(DATA / "layer_norm_noreduce",
                                                                      predict=False).explanation.groups)


def test_flag_values_as_xla_reads_them():
    assert ynn_fusion_types(()) is None
    assert ynn_fusion_types(("--xla_cpu_experimental_ynn_fusion_type=INDIVIDUAL_DOT,INDIVIDUAL_CONVOLUTION",)) == \
        {"INDIVIDUAL_DOT", "INDIVIDUAL_CONVOLUTION"}
    assert ynn_fusion_types(("--xla_cpu_experimental_ynn_fusion_type=-REDUCE",)) == \
        {"INDIVIDUAL_DOT", "INDIVIDUAL_CONVOLUTION"}
    assert ynn_fusion_types(("--xla_cpu_experimental_ynn_fusion_type=+ELTWISE",)) == \
        {"INDIVIDUAL_DOT", "INDIVIDUAL_CONVOLUTION", "REDUCE", "ELTWISE"}
    assert ynn_fusion_types(("--xla_cpu_experimental_ynn_fusion_type=",)) == frozenset()
    with pytest.raises(InputError, match="not a library fusion type"):
        ynn_fusion_types(("--xla_cpu_experimental_ynn_fusion_type=REDUCTIONS",))

"""Agreement with real XLA: the legacy pipeline replayed on every program of
sample_dumps/gpu-legacy-rtx2080ti and gpu-legacy-h100 (jax 0.4.35) from XLA's snapshot before
its fusion passes reproduces XLA's kernels after them, instructions and fusion kinds
(bench/legacy_agreement.py prints the table).  A regression fails here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "legacy_agreement.py"
spec = importlib.util.spec_from_file_location("legacy_agreement", BENCH)
agreement = importlib.util.module_from_spec(spec)
sys.modules.setdefault("legacy_agreement", agreement)
spec.loader.exec_module(agreement)

#: Reached on 2026-11-24: every kernel of the 25 RTX 2080 Ti programs (99) and of the 12 H100
#: programs (57), once the lists run once and at jax's emitter level (95 of 99 before).
AVERAGE_FLOOR = 1.0
PROGRAM_FLOOR = 1.0


@pytest.fixture(scope="module", params=["rtx2080ti", "h100"])
def rows(request):
    entries = agreement.programs(gpu=request.param)
    if len(entries) < 10:
        pytest.skip(f"fewer than 10 legacy sample programs with fusion snapshots for {request.param}")
    return [agreement.measure(e) for e in entries]


def test_every_program_replays(rows):
    errors = [(r.program, r.error) for r in rows if r.error]
    assert not errors


def test_average_agreement_floor(rows):
    mean = sum(r.agreement for r in rows) / len(rows)
    assert mean >= AVERAGE_FLOOR, agreement.table(rows)


def test_per_program_floor(rows):
    low = [(r.program, round(r.agreement, 3)) for r in rows if r.agreement < PROGRAM_FLOOR]
    assert not low, agreement.table(rows)


def test_the_papers_programs_agree_exactly(rows):
    by_name = {r.program: r for r in rows}
    for name in ("cartpole_b_concat", "cartpole_b_concat_vecdone", "cartpole_c_separate", "cartpole_a_rng_customcall"):
        if name in by_name:
            assert by_name[name].agreement == 1.0, (name, by_name[name].missing, by_name[name].extra)


EMITTER_LEVEL = Path(__file__).resolve().parent / "data" / "jax-0.4.35-emitter-level"


@pytest.mark.parametrize("level,kind", [(None, "kLoop"), (4, "kInput")])
def test_the_emitter_level_jax_runs_decides_a_transpose_fusion(level, kind, monkeypatch):
    """jax 0.4.35 compiles at xla_gpu_mlir_emitter_level 0, where a transpose keeping its minor
    dimension is no tiled transpose: XLA made a loop fusion of it (an input fusion when the
    same program was compiled with the level set to 4).  The replay matches both, kind included."""
    import hlofuse
    from hlofuse.check import check
    from hlofuse.gpu import config
    from hlofuse.pipeline import Options

    if level is not None:
        monkeypatch.setitem(config.JAX_MLIR_EMITTER_LEVEL, config.ERA_LEGACY, level)
    before = hlofuse.load(str(EMITTER_LEVEL / "before_fusion.txt"))
    after = hlofuse.load(str(EMITTER_LEVEL / f"after_fusion.level-{level or 'default'}.txt"))
    result = check(before, after, Options(backend="gpu", pipeline="legacy", gpu="rtx2080ti"))
    assert [(m.status, m.kinds) for m in result.matches] == [("exact", None)]
    assert [k.kind for k in result.replay.kernels] == [kind]


def test_check_tells_a_kernel_of_another_kind():
    """Same instructions, another fusion kind: not reproduced, status `kind` with both kinds."""
    import hlofuse
    from hlofuse.check import check
    from hlofuse.pipeline import Options

    before = hlofuse.load(str(EMITTER_LEVEL / "before_fusion.txt"))
    after = hlofuse.load(str(EMITTER_LEVEL / "after_fusion.level-4.txt"))
    result = check(before, after, Options(backend="gpu", pipeline="legacy", gpu="rtx2080ti"))
    assert result.reproduced == 0 and result.xla_kernels == 1
    assert [(m.status, m.kinds) for m in result.matches] == [("kind", ("kInput", "kLoop"))]
    assert result.to_dict()["kernels"][0]["kinds"] == {"xla": "kInput", "ours": "kLoop"}


def test_xla_flags_set_what_the_program_was_compiled_with():
    """`--xla-flags` (Options.xla_flags) replays a program compiled with other XLA flags: the
    level-4 compile of the same module is reproduced, kind included; flags hlofuse does not
    model are named in the notes, and a value XLA would not take is an input error."""
    import hlofuse
    from hlofuse.check import check
    from hlofuse.errors import InputError
    from hlofuse.pipeline import Options, replay

    before = hlofuse.load(str(EMITTER_LEVEL / "before_fusion.txt"))
    after = hlofuse.load(str(EMITTER_LEVEL / "after_fusion.level-4.txt"))
    flags = ("--xla_gpu_mlir_emitter_level=4 --xla_gpu_autotune_level=0",)
    options = Options(backend="gpu", pipeline="legacy", gpu="rtx2080ti", xla_flags=flags)
    result = check(before, after, options)
    assert result.reproduced == result.xla_kernels == 1
    assert any("xla_gpu_autotune_level" in n for n in result.replay.notes)
    with pytest.raises(InputError, match="xla_gpu_mlir_emitter_level=four"):
        replay(before, Options(backend="gpu", pipeline="legacy", xla_flags=("--xla_gpu_mlir_emitter_level=four",)))


def test_reduction_epilogue_fusion_flag_reaches_the_rules():
    """--xla_gpu_enable_reduction_epilogue_fusion=false: a reduction no longer takes its
    elementwise epilogue (XLA: "Reduction epilogue fusion is not enabled.")."""
    import hlofuse
    from hlofuse.pipeline import Options, replay

    text = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[512,1024]{1,0} parameter(0)
  z = f32[] constant(0)
  r = f32[512]{0} reduce(p, z), dimensions={1}, to_apply=add
  ROOT n = f32[512]{0} negate(r)
}"""
    module = hlofuse.loads(text)
    on = replay(module, Options(backend="gpu", pipeline="legacy", gpu="rtx2080ti"))
    off = replay(module, Options(backend="gpu", pipeline="legacy", gpu="rtx2080ti",
                                 xla_flags=("--xla_gpu_enable_reduction_epilogue_fusion=false",)))
    assert len(on.kernels) == 1
    assert len(off.kernels) == 2

"""hlofuse/passes/pipelines.py: each pipeline written out as XLA's passes, in XLA's order, and
exactly what `replay` runs."""

from __future__ import annotations

import sys

import pytest

import hlofuse
from hlofuse.errors import InputError
from hlofuse.passes.pipelines import PIPELINES
from hlofuse.pipeline import Options, PipelineSpec, get_pipeline, replay

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import replay_speed  # noqa: E402

#: What XLA runs, by dump-file pass name (docs/xla/legacy-gpu-pipeline.md §1.2,
#: docs/xla/priority-fusion.md §1, docs/xla/cpu-fusion.md §1.1).
XLA_ORDER = {
    ("gpu", "legacy"): ["variadic-op-splitter", "fusion", "fusion", "fusion_merger", "cse", "dce",
                        "multi_output_fusion", "cse", "dce",
                        "horizontal_loop_fusion", "horizontal_input_fusion", "cse", "dce"],
    ("gpu", "priority"): ["variadic-op-splitter", "sort-iota-fusion", "priority-fusion", "cse", "dce",
                          "multi_output_fusion", "cse", "dce"],
    ("cpu", "cpu"): ["dot-library-rewriter", "fusion", "fusion-wrapper"],
}


def _module(backend: str):
    return hlofuse.loads(replay_speed.generate_for("cpu" if backend == "cpu" else "priority", 300))


def test_the_lists_are_xlas_pass_order():
    assert sorted(PIPELINES) == sorted(XLA_ORDER)
    for key, spec in PIPELINES.items():
        assert (spec.backend, spec.name) == key
        assert [step.name for step in spec.steps] == XLA_ORDER[key]
        assert [name for name, _ in spec.passes] == XLA_ORDER[key]
        assert get_pipeline(*key) is spec
        assert spec.explain_boundary is not None and spec.description


def test_every_entry_says_why_and_which_xla_source():
    for spec in PIPELINES.values():
        for step in spec.steps:
            assert step.why and "\n" not in step.why, (spec.name, step.name)
            assert step.xla.startswith(("xla/", "HloCSE", "HloDCE")), (spec.name, step.name, step.xla)
            assert callable(step.run)


@pytest.mark.parametrize("backend, pipeline", sorted(XLA_ORDER))
def test_replay_runs_the_list(backend, pipeline):
    ran: list[str] = []
    result = replay(_module(backend), Options(backend=backend, pipeline=pipeline), progress=ran.append)
    assert ran == [step.name for step in get_pipeline(backend, pipeline).steps]
    assert result.passes == tuple(dict.fromkeys(ran))


@pytest.mark.parametrize("backend, pipeline, chosen, expected", [
    ("gpu", "legacy", ("fusion",), ["fusion", "fusion"]),
    ("gpu", "legacy", ("fusion_merger", "dce"), ["fusion_merger", "dce", "dce", "dce"]),
    ("gpu", "priority", ("priority-fusion", "multi_output_fusion"), ["priority-fusion", "multi_output_fusion"]),
    ("cpu", "cpu", ("fusion",), ["fusion"]),
])
def test_a_passes_subset_runs_those_entries_in_list_order(backend, pipeline, chosen, expected):
    ran: list[str] = []
    replay(_module(backend), Options(backend=backend, pipeline=pipeline, passes=chosen), progress=ran.append)
    assert ran == expected


def test_an_unknown_pipeline_or_pass_names_the_known_ones():
    with pytest.raises(InputError, match="--backend gpu --pipeline legacy"):
        get_pipeline("tpu", None)
    with pytest.raises(InputError, match="its passes: variadic-op-splitter, sort-iota-fusion"):
        replay(_module("gpu"), Options(pipeline="priority", passes=("horizontal_loop_fusion",)))


def test_the_table_is_read_only():
    with pytest.raises(TypeError):
        PIPELINES[("gpu", "mine")] = PipelineSpec("gpu", "mine", (), "")  # type: ignore[index]


#: The GPU pass modules and what only they import: the XLA:CPU replay needs none of them.
_GPU_ONLY = ("hlofuse.passes.legacy", "hlofuse.passes.priority_fusion", "hlofuse.passes.fusion_merger",
             "hlofuse.passes.multi_output_fusion", "hlofuse.passes.horizontal_fusion",
             "hlofuse.passes.gpu_instruction_fusion", "hlofuse.cost")

_CPU_REPLAY = f"""
import sys
sys.path.insert(0, {str(REPO / "bench")!r})
import hlofuse, replay_speed
from hlofuse.passes.pipelines import PIPELINES
from hlofuse.pipeline import Options, replay
listed = sorted(PIPELINES)
after_listing = sorted(m for m in {_GPU_ONLY!r} if m in sys.modules)
replay(hlofuse.loads(replay_speed.generate_for("cpu", 300)), Options(backend="cpu", pipeline="cpu"))
print(listed, after_listing, sorted(m for m in {_GPU_ONLY!r} if m in sys.modules))
"""


def test_the_cpu_replay_imports_no_gpu_pass_module():
    """Each pipeline's pass modules are imported when that pipeline is asked for: listing the
    pipelines imports none, and the XLA:CPU replay never loads the GPU passes or the cost model."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", _CPU_REPLAY], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"{sorted(XLA_ORDER)} [] []", out.stdout + out.stderr


def test_a_list_reached_by_name_is_the_one_the_pipeline_runs():
    from hlofuse.passes import pipelines

    def described(steps):
        return [(step.name, step.why, step.xla) for step in steps]

    listed = pipelines.LEGACY_FUSION.entries() + pipelines.LEGACY_HORIZONTAL.entries()
    assert described(get_pipeline("gpu", "legacy").steps) == described(listed)
    assert pipelines.LEGACY_FUSION is pipelines.LEGACY_FUSION
    assert pipelines.CPU is PIPELINES[("cpu", "cpu")] is get_pipeline("cpu", "cpu")
    with pytest.raises(AttributeError):
        pipelines.NOT_A_PIPELINE

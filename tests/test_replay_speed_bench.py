"""bench/replay_speed.py's generated modules: valid HLO of the requested size, on which every
pipeline replays with work in every layer (so the benchmark measures fusion, not parsing)."""

from __future__ import annotations

import sys

import pytest

import hlofuse
from hlofuse.pipeline import Options, replay

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import replay_speed  # noqa: E402


@pytest.mark.parametrize("pipeline", sorted(replay_speed.PIPELINES))
def test_generated_module_replays(pipeline):
    text = replay_speed.generate_for(pipeline, 600)
    module = hlofuse.loads(text)
    assert 500 <= module.instruction_count <= 700
    assert module.entry.root.opcode == "tuple"
    assert any(i.opcode == "while" for i in module.entry.instructions)
    result = replay(module, Options(**replay_speed.PIPELINES[pipeline]))
    fused = sum(1 for d in result.decisions if d.verdict == "fused")
    # every layer fuses several producers and leaves several kernels
    assert fused > 50 and len(result.kernels) > 40, (fused, len(result.kernels))


def test_explained_history_does_not_grow_with_the_model():
    """A boundary's history holds the refusals between its two kernels only.  Instructions
    duplicated into every kernel (broadcast constants) once tied every refusal of the model to
    every boundary: histories grew with the number of layers, and explain was quadratic."""
    from hlofuse.explain import explain_result

    longest = []
    for size in (600, 2000):
        module = hlofuse.loads(replay_speed.generate_for("legacy", size))
        explained = explain_result(replay(module, Options(**replay_speed.PIPELINES["legacy"])))
        histories = [len(b.facts.get("history", ())) for b in explained.boundaries if b.explained_by == "replay"]
        assert histories
        longest.append(max(histories))
    assert longest[0] == longest[1] and longest[0] < 30, longest

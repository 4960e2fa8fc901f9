"""What a replay leaves behind, and the program-wide caches that make a large replay fast:
no reference cycles (so the cyclic collector has nothing to find after it), an edit count that
moves with every change, answers remembered per program state and per config."""

from __future__ import annotations

import gc
import sys

import pytest

import hlofuse
from hlofuse.graph import Program, program_cache
from hlofuse.fusion_primitives import create_fusion, fuse_instruction
from hlofuse.pipeline import Options, replay

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import replay_speed  # noqa: E402

SMALL = """HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  e = f32[4] exponential(p0)
  ROOT n = f32[4] negate(e)
}
"""


@pytest.mark.parametrize("pipeline", sorted(replay_speed.PIPELINES))
def test_a_replay_leaves_no_reference_cycles(pipeline):
    """The replayed program is taken apart when the result is built, and no pass leaves a
    cycle per call (a recursive closure did): a 30k-instruction replay once left a million
    objects that only the cyclic collector could free, seconds of its time."""
    module = hlofuse.loads(replay_speed.generate_for(pipeline, 600))
    gc.collect()
    result = replay(module, Options(**replay_speed.PIPELINES[pipeline]))
    assert gc.collect() == 0
    assert result.kernels and result.decisions  # the result itself is intact


def test_dispose_takes_the_program_apart():
    """dispose cuts the edges that close cycles (users, a graph's hold on its nodes, its
    fusion and program) and no more: what is left is freed by reference counting alone."""
    program = Program.from_module(hlofuse.loads(SMALL))
    fusion = create_fusion(program.entry.get("n"), "kLoop")
    fuse_instruction(fusion, program.entry.get("e"))
    entry, body = program.entry, fusion.fused
    node = entry.get("p0")
    gc.collect()
    program.dispose()
    assert program.graphs == {} and program.entry is None
    assert node.users == [] and len(entry) == 0 and len(body) == 0
    assert body.fusion_owner is None and entry.program is None
    del program, fusion, entry, body, node
    assert gc.collect() == 0


def test_every_edit_moves_the_program_edit_count_and_its_answers():
    program = Program.from_module(hlofuse.loads(SMALL))
    before = program.edits
    order = program.graph_order()
    cache = program_cache(program)
    cache["question"] = "answer"
    assert program_cache(program)["question"] == "answer"  # nothing changed: remembered
    graph = program.entry
    fusion = create_fusion(graph.get("n"), "kLoop")  # adds a computation for the body
    assert program.edits > before
    assert "question" not in program_cache(program)
    assert len(program.graph_order()) == len(order) + 1
    edits = program.edits
    fuse_instruction(fusion, graph.get("e"))  # edits the entry and the body
    assert program.edits > edits


def test_equal_gpu_configs_share_a_cache_token():
    from hlofuse.device import load_gpu
    from hlofuse.gpu.config import GpuConfig

    a, b = GpuConfig(load_gpu("a6000")), GpuConfig(load_gpu("a6000"))
    assert a is not b and a.token == b.token
    assert a.replace(era="2026").token != a.token
    assert GpuConfig(load_gpu("rtx2080ti")).token != a.token


def test_rule_lists_are_read_as_they_are_when_asked():
    """Rule lists are compiled once; a list (not a tuple) edited between two questions is
    asked as it is now."""
    from hlofuse.rules import Candidate, evaluate
    from hlofuse.pipeline import make_context

    program = Program.from_module(hlofuse.loads(SMALL))
    node = program.entry.get("e")
    ctx = make_context(Options(backend="gpu", pipeline="legacy"))
    rules = ["GF-PRODUCER-MULTI-OUTPUT"]
    assert evaluate(rules, Candidate(program.entry.get("p0"), node, ctx), ctx.relaxed).allowed
    rules.append("GF-PRODUCER-NOT-LOOP-FUSIBLE")  # a parameter is not loop-fusible
    outcome = evaluate(rules, Candidate(program.entry.get("p0"), node, ctx), ctx.relaxed)
    assert outcome.blocked_by.id == "GF-PRODUCER-NOT-LOOP-FUSIBLE"

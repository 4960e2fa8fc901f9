"""The replay asks only the rules that can object to a pair, and walks post orders with an
iterator; neither may change a decision, a kernel or an order.  Each shortened rule list is
compared with the full list XLA's order gives, on the same inputs: the decisions must be the
same, Decision for Decision."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import hlofuse
from hlofuse.graph import Program
from hlofuse.pipeline import Options, replay
from hlofuse.rules.instruction_fusion import IN_PLACE_RULES

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from replay_speed import generate_for  # noqa: E402

from test_instruction_fusion import IN_PLACE_CASES  # noqa: E402

SAMPLES = ROOT / "sample_dumps"


def _decisions(result) -> list[dict]:
    return [d.to_dict() for d in result.decisions]


def _gpu_inputs() -> list:
    modules = [hlofuse.loads(generate_for("legacy", 1000))]
    modules += [hlofuse.loads(text) for text, _, _ in IN_PLACE_CASES.values()]
    return modules


def _cpu_inputs() -> list:
    modules = [hlofuse.loads(generate_for("cpu", 1000))]
    modules += [hlofuse.loads(text) for text, _, _ in IN_PLACE_CASES.values()]
    return modules


def test_cpu_in_place_rules_are_asked_only_of_consumers_that_update_in_place(monkeypatch):
    from hlofuse.rules import cpu as rc

    for text, producer, consumer in IN_PLACE_CASES.values():
        graph = Program.from_module(hlofuse.loads(text)).entry
        assert rc.should_fuse_after_output(graph[consumer]) == rc.CPU_SHOULD_FUSE_AFTER_OUTPUT
        plain = rc.should_fuse_after_output(graph[producer])  # none of the producers updates in place
        assert not set(IN_PLACE_RULES) & set(plain)
        assert [r for r in rc.CPU_SHOULD_FUSE_AFTER_OUTPUT if r not in IN_PLACE_RULES] == list(plain)
    options = Options(backend="cpu", pipeline="cpu")
    short = [_decisions(replay(m, options)) for m in _cpu_inputs()]
    monkeypatch.setattr(rc, "should_fuse_after_output", lambda consumer: rc.CPU_SHOULD_FUSE_AFTER_OUTPUT)
    full = [_decisions(replay(m, options)) for m in _cpu_inputs()]
    assert short == full
    assert any(d["rule"] in IN_PLACE_RULES for ds in full for d in ds)  # the in-place rules did decide

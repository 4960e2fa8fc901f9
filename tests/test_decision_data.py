"""Decision's hand-written constructor keeps what the dataclass made: fields, defaults,
equality, immutability, replace() and to_dict()."""

import dataclasses
import pickle

import pytest

from hlofuse.decision import Decision, Verdict


def test_defaults_and_keywords_match_the_fields():
    d = Decision("fusion", "a", "b", Verdict.FUSED)
    assert [f.name for f in dataclasses.fields(Decision)][:4] == ["pass_name", "producer", "consumer", "verdict"]
    assert (d.rule, d.reason, d.xla_reason, d.facts, d.relaxed, d.computation) == (None, "", None, {}, (), None)
    assert (d.producer_members, d.consumer_members, d.source) == ((), (), None)
    by_name = Decision(pass_name="fusion", producer="a", consumer="b", verdict=Verdict.BLOCKED, rule="R",
                       reason="why", facts={"n": 1}, relaxed=("X",), computation="main")
    assert by_name.facts == {"n": 1} and by_name.relaxed == ("X",) and by_name.computation == "main"
    assert type(by_name.facts) is dict


def test_default_facts_are_a_fresh_dict_each():
    first, second = Decision("p", "a", "b", Verdict.FUSED), Decision("p", "a", "b", Verdict.FUSED)
    assert type(first.facts) is dict and first.facts is not second.facts


def test_frozen_equal_and_replaceable():
    d = Decision("fusion", "a", "b", Verdict.BLOCKED, "R", "why", None, {"n": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.rule = "S"  # type: ignore[misc]
    assert d == Decision("fusion", "a", "b", Verdict.BLOCKED, "R", "why", None, {"n": 1})
    assert d != Decision("fusion", "a", "c", Verdict.BLOCKED, "R", "why", None, {"n": 1})
    changed = dataclasses.replace(d, reason="other")
    assert changed.reason == "other" and changed.facts == {"n": 1} and d.reason == "why"
    assert pickle.loads(pickle.dumps(d)) == d
    assert repr(d).startswith("Decision(pass_name='fusion', producer='a', consumer='b'")
    assert d.to_dict()["facts"] == {"n": 1} and d.to_dict()["verdict"] == "blocked"


@pytest.mark.python_modules  # instruments them (monkeypatching); see tests/test_native_core.py
def test_cpu_should_fuse_asks_both_rule_lists_one_candidate(monkeypatch):
    """XLA:CPU's ShouldFuse asks two rule lists about one pair with nothing changed between:
    they share one candidate (and what the first list's rules derived), and the replay's
    decisions are those of a candidate built per list."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "bench"))
    import replay_speed

    import hlofuse
    from hlofuse.passes import instruction_fusion
    from hlofuse.pipeline import Options, replay

    module = hlofuse.loads(replay_speed.generate_for("cpu", 1000))
    options = Options(**replay_speed.PIPELINES["cpu"])
    asked: list = []
    real = instruction_fusion.evaluate

    def recording(rule_ids, candidate, relaxed=frozenset()):
        asked.append(candidate)
        return real(rule_ids, candidate, relaxed)

    monkeypatch.setattr(instruction_fusion, "evaluate", recording)
    shared = replay(module, options)
    by_candidate: dict[int, int] = {}
    for candidate in asked:
        by_candidate[id(candidate)] = by_candidate.get(id(candidate), 0) + 1
    assert max(by_candidate.values()) == 2  # the two lists of one pair, no more

    built = instruction_fusion.FusionRun.candidate

    def fresh(run, consumer, operand_index):  # a candidate per list: what replay did before
        return built(run, consumer, operand_index)

    monkeypatch.setattr(instruction_fusion.FusionRun, "evaluate",
                        lambda run, ids, consumer, i, question=None: real(tuple(ids), fresh(run, consumer, i),
                                                                        run.ctx.relaxed))
    separate = replay(module, options)
    assert [d.to_dict() for d in shared.decisions] == [d.to_dict() for d in separate.decisions]
    assert [k.to_dict() for k in shared.kernels] == [k.to_dict() for k in separate.kernels]

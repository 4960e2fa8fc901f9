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

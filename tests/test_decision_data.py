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
def test_cpu_should_fuse_asks_its_rule_lists_as_one(monkeypatch):
    """XLA:CPU's ShouldFuse asks C0–C1, then (unless the kOutput shortcut takes the pair)
    C3–C15.  The replay asks both as one list, once per pair; its decisions are those of
    asking the two lists one after the other, relaxed rules among them."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "bench"))
    import replay_speed

    import hlofuse
    from hlofuse.passes import cpu, instruction_fusion
    from hlofuse.pipeline import Options, replay
    from hlofuse.rules import Outcome
    from hlofuse.rules import cpu as rc

    module = hlofuse.loads(replay_speed.generate_for("cpu", 1000))
    for relaxed in ((), ("CPU-CODE-DUPLICATION", "CPU-NON-SCALAR-CONSTANT", "IF-EXPENSIVE-DUPLICATION")):
        options = Options(**replay_speed.PIPELINES["cpu"], relax=relaxed)
        asked: list = []
        real = instruction_fusion.evaluate

        def recording(rule_ids, candidate, relaxed=frozenset()):
            asked.append(candidate)
            return real(rule_ids, candidate, relaxed)

        monkeypatch.setattr(instruction_fusion, "evaluate", recording)
        as_one = replay(module, options)
        assert len({id(c) for c in asked}) == len(asked)  # one question per pair asked
        monkeypatch.setattr(instruction_fusion, "evaluate", real)

        def two_lists(policy, run, consumer, operand_index):  # as XLA's ShouldFuse reads
            producer = consumer.operands[operand_index]
            first = run.evaluate(rc.should_fuse_before_output(producer), consumer, operand_index)
            if not first.allowed or rc.can_be_output_fused(producer, consumer):
                return first
            second = run.evaluate(rc.should_fuse_after_output(consumer, producer, run.may_duplicate), consumer,
                                  operand_index)
            return Outcome(second.blocked_by, second.facts, first.relaxed + second.relaxed)

        with monkeypatch.context() as patch:
            patch.setattr(cpu.CpuPolicy, "should_fuse", two_lists)
            separate = replay(module, options)
        assert [d.to_dict() for d in as_one.decisions] == [d.to_dict() for d in separate.decisions]
        if relaxed:
            assert any(d.relaxed for d in as_one.decisions)


def test_pickled_as_its_fields():
    """A Decision pickles as its constructor's arguments, whichever core made it: the result
    cache's key does not say which one wrote an entry (see the replay test below)."""
    d = Decision("fusion", "a", "b", Verdict.BLOCKED, "R", "why", "xla", {"n": 1}, ("X",), "main", ("a",), ("b", "c"))
    cls, args = d.__reduce__()
    assert cls is Decision and args == ("fusion", "a", "b", Verdict.BLOCKED, "R", "why", "xla", {"n": 1}, ("X",),
                                        "main", ("a",), ("b", "c"), None)
    assert pickle.loads(pickle.dumps(d, protocol=pickle.HIGHEST_PROTOCOL)) == d


def test_compiled_with_the_core_as_a_native_class():
    """With the compiled core in use a Decision is a native object (no instance dict): the
    passes build hundreds of thousands without the interpreter."""
    from hlofuse import native

    if native.why_not_compiled() is not None:
        pytest.skip(f"compiled core not in use: {native.why_not_compiled()}")
    import importlib.machinery

    import hlofuse.decision

    assert hlofuse.decision.__file__.endswith(importlib.machinery.EXTENSION_SUFFIXES[0])
    assert not hasattr(Decision("p", "a", "b", Verdict.FUSED), "__dict__")


_PICKLE_A_REPLAY = """
import sys, hlofuse
from hlofuse import native, result_cache
from hlofuse.pipeline import Options, replay
m = hlofuse.loads(open(sys.argv[1]).read())
result = replay(m, Options(backend=sys.argv[3], pipeline=sys.argv[4]))
open(sys.argv[2], "wb").write(result_cache.dumps(result))
print(native.active)
"""


@pytest.mark.parametrize("writer_pure", [True, False])
@pytest.mark.parametrize("backend, pipeline", [("cpu", "cpu"), ("gpu", "legacy")])
def test_a_cached_replay_loads_whichever_core_wrote_it(tmp_path, writer_pure, backend, pipeline):
    """A replay (its Decisions among it) pickled by the Python modules loads with the compiled
    core, and the other way round, with the decisions of the replay made here."""
    import os
    import subprocess
    import sys

    import hlofuse
    from hlofuse import native, result_cache
    from hlofuse.pipeline import Options, replay

    from conftest import REPO

    text = _MODULE
    path = tmp_path / "m.hlo"
    path.write_text(text)
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    if writer_pure:
        env[native.PURE_ENV] = "1"
    out = tmp_path / "replay.pickle"
    proc = subprocess.run([sys.executable, "-c", _PICKLE_A_REPLAY, str(path), str(out), backend, pipeline], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = pickle.loads(out.read_bytes())
    here = replay(hlofuse.loads(text), Options(backend=backend, pipeline=pipeline))
    assert loaded.decisions == here.decisions and len(here.decisions) > 3
    assert all(type(d) is Decision for d in loaded.decisions)
    assert [d.to_dict() for d in loaded.decisions] == [d.to_dict() for d in here.decisions]


_MODULE = """HloModule m

sum {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT a = f32[] add(p, q)
}

ENTRY e {
  a = f32[64,32]{1,0} parameter(0)
  b = f32[64,32]{1,0} parameter(1)
  n = f32[64,32]{1,0} negate(a)
  x = f32[64,32]{1,0} exponential(n)
  s = f32[64,32]{1,0} add(x, b)
  c = f32[] constant(0)
  r = f32[64]{0} reduce(s, c), dimensions={1}, to_apply=sum
  t = f32[32,64]{1,0} transpose(s), dimensions={1,0}
  ROOT o = (f32[64]{0}, f32[32,64]{1,0}, f32[64,32]{1,0}) tuple(r, t, x)
}
"""

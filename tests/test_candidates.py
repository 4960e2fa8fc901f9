"""hlofuse/rules/candidates.py: the facts a pass hands its rules are typed slots, not string
keys; a rule asked without a fact it needs fails loudly instead of reading a default."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import hlofuse
from hlofuse.gpu import GpuConfig
from hlofuse.gpu import test_device as a6000_test_device
from hlofuse.graph import Program
from hlofuse.pipeline import Options, make_context
from hlofuse.rules import REGISTRY, Candidate, candidates, evaluate, load_all

load_all()

ROOT = Path(hlofuse.__file__).parent

#: Each candidate class with the arguments its pass gives it (producer, consumer, ctx first).
MADE_AS = {
    candidates.Candidate: ((), {}),
    candidates.FusionCandidate: (("run", 0), {}),
    candidates.MergerCandidate: (([], "model"), {}),
    candidates.MofCandidate: ((), {"reachable": "reach", "model": "model"}),
    candidates.HorizontalCandidate: ((), {}),
    candidates.SpanCandidate: (("xla", False), {"left": "left", "max_batch": 32, "accum_outputs": 1,
                                                "accum_io": 2, "accum_cost": 3}),
    candidates.PriorityCandidate: (("pf",), {}),
    candidates.BoundaryCandidate: ((), {"crossing": (), "bytes": 0, "producer_name": "p", "consumer_name": "c",
                                        "loop": "the while loop", "tuple_role": "a tuple",
                                        "inserted_copies": frozenset(), "copy_reasons": {}, "pipeline": None}),
}


def _classes() -> list[type]:
    return [c for _, c in inspect.getmembers(candidates, inspect.isclass)
            if issubclass(c, Candidate) and c.__module__ == candidates.__name__]


def _all_slots(cls: type) -> set[str]:
    """The slots of a class and its bases, as listed for repr (a compiled class keeps no
    `__slots__`; test_the_listed_slots_are_the_classes_own checks the listing)."""
    return {name for klass in cls.__mro__ for name in candidates._SLOTS.get(klass.__name__, ())}


@pytest.mark.parametrize("cls", list(MADE_AS), ids=lambda c: c.__name__)
def test_the_listed_slots_are_the_classes_own(cls):
    args, kwargs = MADE_AS[cls]
    cand = cls("producer", "consumer", "ctx", *args, **kwargs)
    own = cls.__dict__.get("__slots__")
    if own is not None:  # the Python modules: the listing is the source's __slots__
        assert tuple(own) == candidates._SLOTS[cls.__name__]
    for name in candidates._SLOTS[cls.__name__]:
        assert hasattr(cand, name), name


def test_every_candidate_class_is_listed_here():
    assert {Candidate, *_classes()} == set(MADE_AS)


@pytest.mark.parametrize("cls", list(MADE_AS), ids=lambda c: c.__name__)
def test_a_candidate_has_typed_slots_and_no_extra_dict(cls):
    args, kwargs = MADE_AS[cls]
    cand = cls("producer", "consumer", "ctx", *args, **kwargs)
    assert not hasattr(cand, "extra") and not hasattr(cand, "__dict__")
    # the constructor sets every fact of its family: none is left to fail later
    missing = [name for name in _all_slots(cls) if not hasattr(cand, name)]
    assert not missing, missing
    with pytest.raises(AttributeError):
        cand.oprand_index = 1  # a misspelt fact is an error where it is written
    assert cls.__name__ in repr(cand)


def _graph():
    text = """HloModule t
ENTRY e {
  p = f32[2048]{0} parameter(0)
  a = f32[1024]{0} slice(p), slice={[0:1024]}
  b = f32[1024]{0} slice(p), slice={[1024:2048]}
  ROOT t = (f32[1024]{0}, f32[1024]{0}) tuple(a, b)
}"""
    return Program.from_module(hlofuse.loads(text)).entry


def _ctx():
    ctx = make_context(Options(backend="gpu", pipeline="legacy"))
    ctx.gpu_config = GpuConfig(a6000_test_device(), era="2024")
    return ctx


@pytest.mark.parametrize("rule_id, fact", [
    ("IF-DO-NOT-DUPLICATE", "run"),                   # InstructionFusion's FusionRun
    ("IF-GPU-EXPENSIVE-REUSE", "run"),
    ("MOF-CYCLE", "reachable"),
    ("MOF-SLICES-NON-OVERLAPPING", "parent"),         # was read with a silent default (None)
    ("MOF-TOO-LARGE-IR", "model"),
    ("FM-HUGE-IR", "model"),
    ("FM-UNCOALESCED-READ", "users"),
    ("HF-CONSUMER-NOT-ONLY-USER", "xla"),             # was read with a silent default (P)
    ("HF-BATCH-FULL", "accum_outputs"),
    ("PF-UNPROFITABLE", "times"),                     # was read with a silent default (no times)
    ("BND-TUPLE-CONSUMER", "producer_name"),          # was read with a silent default
])
def test_a_rule_asked_without_its_fact_fails_loudly(rule_id, fact):
    assert rule_id in REGISTRY
    g = _graph()
    with pytest.raises(AttributeError, match=f"'{fact}'"):
        evaluate((rule_id,), Candidate(g["a"], g["t"] if rule_id.startswith("BND") else g["b"], _ctx()))


def test_a_span_fact_is_not_on_a_horizontal_candidate():
    g = _graph()
    with pytest.raises(AttributeError, match="'left'"):
        evaluate(("HF-DIFFERENT-SHAPES",), candidates.HorizontalCandidate(g["a"], g["b"], _ctx()))


def test_the_same_rule_answers_with_its_facts():
    g = _graph()
    cand = candidates.MofCandidate(g["a"], g["b"], _ctx(), reachable=lambda a, b: False, model=None,
                                   parent=g["p"])
    outcome = evaluate(("MOF-SLICES-NON-OVERLAPPING", "MOF-SIBLINGS-CONNECTED"), cand)
    assert outcome.blocked_by.id == "MOF-SLICES-NON-OVERLAPPING" and outcome.facts["parent"] == "p"


def test_no_pass_or_rule_reads_string_keyed_facts():
    pattern = re.compile(r"\.extra\b|\bextra\[")
    offenders = [f"{path.relative_to(ROOT)}:{i}" for folder in ("rules", "passes", "explain")
                 for path in sorted((ROOT / folder).glob("*.py"))
                 for i, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not offenders, offenders


def test_loop_carried_boundaries_state_no_fact_nobody_supplies():
    """BND-LOOP-CARRIED's facts are what the edge tracer found (producer, consumer, loop,
    bytes): no fact is a placeholder that no caller fills in."""
    from conftest import REPO

    report = hlofuse.explain(REPO / "sample_dumps" / "cpu" / "cartpole_c_separate", predict=False).to_dict()
    carried = [b for b in report["boundaries"] if b["rule"] == "BND-LOOP-CARRIED"]
    assert carried
    for b in carried:
        assert set(b["facts"]) == {"producer", "consumer", "loop", "bytes"}
        assert all(value not in ("", None) for value in b["facts"].values())

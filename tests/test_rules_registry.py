"""The rule registry: every rule is documented, referenced and selectable, and relaxation
refuses rules that protect correctness."""

from __future__ import annotations

import pytest

from hlofuse.errors import NotRelaxable, UnknownRuleRef
from hlofuse.rules import HEADINGS, XLA_COMMITS, Candidate, XlaRef, evaluate, find, load_all, resolve_relax, rule

RULES = load_all()


def test_rule_ids_and_names_are_unique_and_well_formed():
    ids = [r.id for r in RULES.values()]
    names = [r.name for r in RULES.values()]
    assert len(ids) == len(set(ids))
    assert len(names) == len(set(names))


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_every_rule_is_documented_and_pinned(rule_id):
    r = RULES[rule_id]
    for heading in HEADINGS:
        assert heading in r.doc, f"{rule_id}: docstring lacks '{heading}'"
    assert r.summary and not r.summary.endswith(":")
    assert r.xla.file.startswith("xla/"), f"{rule_id}: XLA reference should name a file of xla/"
    assert r.xla.commit in XLA_COMMITS.values(), f"{rule_id}: XLA commit {r.xla.commit} is not a pinned one"
    assert r.pipelines and set(r.pipelines) <= {"legacy", "priority", "cpu", "any"}


def test_unknown_reference_names_close_matches():
    with pytest.raises(UnknownRuleRef, match="no rule matches"):
        find(["definitely-not-a-rule-xyz"])


def test_evaluate_stops_at_first_objection_and_records_relaxed_ones(monkeypatch):
    from hlofuse import rules as registry

    ref = XlaRef("xla/service/test.cc", "Test", "nope", XLA_COMMITS["legacy"])
    saved = dict(registry.REGISTRY)
    try:
        @rule(id="ZZ-TEST-FIRST", name="zz-test-first", passes=("t",), pipelines=("legacy",), tags=("zz",),
              relaxable=True, xla=ref, message="first {n}")
        def first(c):
            """First.

            What it checks: x. Why XLA does this: y. Example: z. Relaxing: w."""
            return {"n": 1}

        @rule(id="ZZ-TEST-SECOND", name="zz-test-second", passes=("t",), pipelines=("legacy",), tags=("zz-legal",),
              relaxable=False, xla=ref, message="second")
        def second(c):
            """Second.

            What it checks: x. Why XLA does this: y. Example: z. Relaxing: w."""
            return {}

        cand = Candidate(None, None, None)
        blocked = evaluate(["ZZ-TEST-FIRST", "ZZ-TEST-SECOND"], cand)
        assert blocked.blocked_by.id == "ZZ-TEST-FIRST" and blocked.blocked_by.reason(blocked.facts) == "first 1"
        relaxed = evaluate(["ZZ-TEST-FIRST", "ZZ-TEST-SECOND"], cand, resolve_relax(["zz"]))
        assert relaxed.blocked_by.id == "ZZ-TEST-SECOND" and relaxed.relaxed == ("ZZ-TEST-FIRST",)
        with pytest.raises(NotRelaxable):
            resolve_relax(["ZZ-TEST-SECOND"])
        with pytest.raises(NotRelaxable):
            resolve_relax(["zz-legal"])
    finally:
        registry.REGISTRY.clear()
        registry.REGISTRY.update(saved)


def test_a_rule_list_written_out_per_question_is_found_by_value():
    """A tuple built anew at every question (as a literal is in compiled code) is answered from
    the list compiled for its value: the lists remembered by identity do not grow with them."""
    from hlofuse.rules import evaluation

    def same(a, b):  # (a pair returned by compiled code is a new tuple of the same items)
        return a[0] is b[0] and a[1] is b[1]

    first = tuple(["IF-ROOT-PRODUCER", "CPU-CONSTANT-ALONE"])
    compiled = evaluation._compile(first)
    remembered = len(evaluation._compiled)
    for _ in range(5):
        again = tuple(["IF-ROOT-PRODUCER", "CPU-CONSTANT-ALONE"])
        assert again is not first and same(evaluation._compile(again), compiled)
    assert len(evaluation._compiled) == remembered
    assert same(evaluation._compiled[id(first)], compiled) and compiled[0] is first
    assert [rid for rid, _, _ in compiled[1]] == list(first)
    assert same(evaluation._compile(list(first)), compiled) and len(evaluation._compiled) == remembered


def test_a_rules_reason_fills_its_facts_and_falls_back_to_its_message():
    r = RULES["IF-ROOT-PRODUCER"]
    assert r.reason({"producer": "a", "computation": "c"}) == "a is the root of c: its value is the computation's result"
    assert r.reason({}) == r.message  # a fact missing: the message as written


@pytest.mark.parametrize("message", [
    "{a} of {b:.0%} and {c:.3f}, {{braces}} kept",
    "{a!r} converted", "{0} positional", "{a[0]} item", "{a:{b}} nested spec", "", "no fields",
    "{a:.3f} given a string",  # (a bad spec for the fact: the message as written)
    "{missing} absent",
])
def test_a_reason_is_strformats_sentence_for_every_kind_of_markup(message):
    from hlofuse.rules.evaluation import rule_reason

    facts = {"a": "x", "b": 0.256, "c": 1.23456}
    try:
        expected = message.format(**facts)
    except (KeyError, IndexError, ValueError):
        expected = message
    assert rule_reason(message, facts) == expected
    assert rule_reason(message, facts) == expected  # (again: from the parts remembered)


def test_every_rule_messages_sentence_is_strformats():
    from hlofuse.rules.evaluation import rule_reason

    for r in RULES.values():
        import string

        names = {f for _, f, _, _ in string.Formatter().parse(r.message) if f}
        facts = {name: 0.123456 for name in names}
        assert rule_reason(r.message, facts) == r.message.format(**facts)

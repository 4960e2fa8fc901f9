"""Large inputs are read in two processes (hlofuse/parse/parallel.py).  The result must be
the module -- and for broken text the error -- that one process gives."""

from __future__ import annotations

import os
import sys

import pytest

import hlofuse
from hlofuse.parse import parallel

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
from parse_speed import generate  # noqa: E402  (the benchmark's deterministic module generator)

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")


@pytest.fixture()
def small_threshold(monkeypatch):
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 10_000)
    monkeypatch.setenv("HLOFUSE_JOBS", "2")


@pytest.fixture(scope="module")
def text():
    return generate(400_000, seed=3)


def _serial(text, monkeypatch):
    monkeypatch.setenv("HLOFUSE_JOBS", "1")
    try:
        return hlofuse.loads(text)
    finally:
        monkeypatch.setenv("HLOFUSE_JOBS", "2")


def test_two_processes_give_the_same_module(text, small_threshold, monkeypatch):
    assert parallel.jobs(text) == 2
    calls = []
    real = parallel._merge
    monkeypatch.setattr(parallel, "_merge", lambda *a: calls.append(1) or real(*a))
    module = hlofuse.loads(text)
    assert calls, "the two-process path did not run"
    serial = _serial(text, monkeypatch)
    assert module == serial
    assert module.style == serial.style and module.warnings == serial.warnings
    assert hlofuse.dumps(module) == text == hlofuse.dumps(serial)
    assert [c.is_entry for c in module.computations] == [c.is_entry for c in serial.computations]
    assert [i.span for _, i in module.instructions()] == [i.span for _, i in serial.instructions()]


@pytest.mark.parametrize("where", [0.25, 0.75], ids=["first-half", "second-half"])
def test_errors_are_those_of_one_process(text, small_threshold, monkeypatch, where):
    lines = text.split("\n")
    k = int(len(lines) * where)
    k = next(i for i in range(k, len(lines)) if " multiply(" in lines[i] or " add(" in lines[i])
    lines[k] = lines[k].replace(" multiply(", " multiply(%nowhere, ").replace(" add(", " add(%nowhere, ")
    broken = "\n".join(lines)
    with pytest.raises(hlofuse.HloSyntaxError) as parallel:
        hlofuse.loads(broken)
    with pytest.raises(hlofuse.HloSyntaxError) as serial:
        _serial(broken, monkeypatch)
    assert str(parallel.value) == str(serial.value)
    assert parallel.value.line == k + 1


def test_duplicate_computation_across_the_halves(text, small_threshold, monkeypatch):
    first = text.index("\n%", len(text) // 10) + 1
    name = text[first:text.index(" ", first)]
    # a copy of an early computation near the end: only the merge of the halves sees it
    end = text.index("\n}\n", first) + 3
    duplicate = text[:-1] + "\n" + text[first:end] + "\n"
    with pytest.raises(hlofuse.HloSyntaxError, match=f"computation '{name[1:]}' is already defined"):
        hlofuse.loads(duplicate)


def test_a_call_cycle_across_the_halves(text, small_threshold, monkeypatch):
    # two computations calling each other, one in each half: only the merge sees the cycle
    first = text.index("\n\n%", len(text) // 10) + 2
    a = "%cyc_a (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  ROOT %c = f32[] call(%x), to_apply=%cyc_b\n}\n\n"
    b = "\n%cyc_b (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  ROOT %c = f32[] call(%x), to_apply=%cyc_a\n}\n"
    looped = text[:first] + a + text[first:] + b
    calls = []
    real = parallel._merge
    monkeypatch.setattr(parallel, "_merge", lambda *a: calls.append(1) or real(*a))
    with pytest.raises(hlofuse.HloSyntaxError, match="computation cyc_a calls itself: cyc_a → cyc_b → cyc_a") as two:
        hlofuse.loads(looped)
    assert calls, "the two-process path did not run"
    with pytest.raises(hlofuse.HloSyntaxError) as one:
        _serial(looped, monkeypatch)
    assert str(two.value) == str(one.value)
    assert two.value.line == looped[:first].count("\n") + 3

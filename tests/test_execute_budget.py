"""Declared sizes and trip counts are checked before anything is allocated or looped
(hlofuse/execute/budget.py), and trip counts are exact integers or unknown, never negative
(attributes.known_trip_count, explain/loops.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import hlofuse
from hlofuse.errors import ExecutionError
from hlofuse.attributes import known_trip_count
from hlofuse.execute import budget
from hlofuse.execute.budget import Limits
from hlofuse.execute.interp import Evaluator, evaluate
from hlofuse.explain import explain
from hlofuse.explain.loops import trip_count

from conftest import CHILD_PYTHONPATH, REPO

LOOP = """HloModule loop

body {
  p = (s64[], f32[8]) parameter(0)
  i = s64[] get-tuple-element(p), index=0
  x = f32[8] get-tuple-element(p), index=1
  one = s64[] constant(STEP)
  next = s64[] add(i, one)
  y = f32[8] exponential(x)
  ROOT t = (s64[], f32[8]) tuple(next, y)
}

cond {
  p = (s64[], f32[8]) parameter(0)
  i = s64[] get-tuple-element(p), index=0
  n = s64[] constant(BOUND)
  ROOT lt = pred[] compare(i, n), direction=DIRECTION
}

ENTRY main {
  a = f32[8] parameter(0)
  zero = s64[] constant(START)
  init = (s64[], f32[8]) tuple(zero, a)
  w = (s64[], f32[8]) while(init), condition=cond, body=body CONFIG
  ROOT r = f32[8] get-tuple-element(w), index=1
}
"""


def _loop(bound="10", start="0", step="1", direction="LT", config="") -> str:
    text = LOOP.replace("BOUND", bound).replace("START", start).replace("STEP", step)
    text = text.replace("DIRECTION", direction)
    return text.replace(" CONFIG", f", backend_config={config}" if config else "")


def _known(n) -> str:
    return json.dumps({"known_trip_count": {"n": n}})


# -- trip counts: exact, never negative -----------------------------------------------------------

@pytest.mark.parametrize("n, expected", [
    ("100", 100), (7, 7), ("1000000000000000000", 10**18), ("9223372036854775807", 2**63 - 1),
    ("-5", None), (-5, None), ("9223372036854775808", None), (1e308, None), ("1e308", None), ("7.5", None),
    (True, None), ("abc", None), (None, None),
])
def test_known_trip_count_is_a_count_or_nothing(n, expected):
    module = hlofuse.loads(_loop(config=_known(n)))
    assert known_trip_count(module.entry["w"]) == expected


def test_a_huge_known_trip_count_is_reported_exactly():
    module = hlofuse.loads(_loop(config=_known("1000000000000000000")))
    (lp,) = explain(module, backend="cpu", fused=True).loops
    assert (lp.trip_count, lp.trip_count_from) == (10**18, "backend_config")
    assert lp.kernels_total == 10**18 * lp.kernels_per_iteration and isinstance(lp.kernels_total, int)


def test_a_negative_known_trip_count_is_not_used():
    # the condition still says 10; nothing negative reaches the launch counts
    module = hlofuse.loads(_loop(config=_known("-5")))
    ex = explain(module, backend="cpu", fused=True)
    (lp,) = ex.loops
    assert (lp.trip_count, lp.trip_count_from) == (10, "condition")
    assert ex.summary()["kernels_launched"] == 10 * 3 + 1  # body (2) and condition (1), and the last test


@pytest.mark.parametrize("bound, start, step, direction, expected", [
    ("9223372036854775807", "0", "1", "LT", 2**63 - 1),  # float division would overflow or round
    ("9223372036854775807", "1", "3", "LT", (2**63 - 2 + 2) // 3),
    ("10", "20", "1", "LT", 0),  # never entered: zero, not negative
    ("0", "10", "-3", "GT", 4), ("0", "10", "-3", "GE", 4), ("10", "0", "5", "NE", 2),
    ("10", "0", "3", "NE", None), ("10", "0", "-1", "LT", None), ("10", "0", "0", "LT", None),
    ("-9223372036854775808", "9223372036854775807", "-1", "GT", 2**64 - 1),  # above int64: not a count
])
def test_trip_counts_from_the_condition_are_exact(bound, start, step, direction, expected):
    module = hlofuse.loads(_loop(bound, start, step, direction))
    found = trip_count(module, module.entry, module.entry["w"])[0]
    assert found == (expected if expected is None or expected < 2**63 else None)


def test_a_float_counter_is_not_read():
    text = _loop().replace("s64[]", "f32[]").replace("constant(10)", "constant(inf)")
    module = hlofuse.loads(text)
    assert trip_count(module, module.entry, module.entry["w"]) == (None, None)
    assert explain(module, backend="cpu", fused=True).summary()["kernels_launched"] is None


# -- memory and iterations, checked before anything runs -------------------------------------------

HUGE = "HloModule m\n\nENTRY main {\n  p = f32[1000000000000] parameter(0)\n  ROOT n = f32[1000000000000] negate(p)\n}\n"


def test_module_bytes_counts_declared_values():
    module = hlofuse.loads(HUGE)
    need, largest = budget.module_bytes(module)
    assert need == 2 * 4 * 10**12 and largest.name == "n"  # the input, and its negation


def test_the_evaluator_refuses_before_allocating(monkeypatch):
    monkeypatch.setenv(budget.MEMORY_ENV, "1G")
    with pytest.raises(ExecutionError, match=r"needs about 7\.3 TiB .* over the limit of 1\.0 GiB; the largest value "
                                             r"is n, f32\[1000000000000\]"):
        evaluate(hlofuse.loads(HUGE), [np.zeros(1, np.float32)])
    small = hlofuse.loads(_loop())
    with pytest.raises(ExecutionError, match="over the limit of 100 bytes"):
        Evaluator(small, max_bytes=100).run([np.zeros(8, np.float32)])


def test_the_evaluator_refuses_a_loop_it_cannot_finish():
    module = hlofuse.loads(_loop(config=_known("1000000000000000000")))
    with pytest.raises(ExecutionError, match=r"while loop w of the module runs its body 1,000,000,000,000,000,000 "
                                             r"times \(from its known_trip_count\), over the limit of 10,000,000"):
        Evaluator(module).run([np.ones(8, np.float32)])
    module = hlofuse.loads(_loop(bound="1000000000000"))
    with pytest.raises(ExecutionError, match="from its condition"):
        Evaluator(module, max_iterations=1000).run([np.ones(8, np.float32)])
    # under the limits it runs: three trips of exp from 0
    out = Evaluator(hlofuse.loads(_loop(bound="3")), max_iterations=3).run([np.zeros(8, np.float32)])
    assert np.allclose(out, np.exp(np.exp(1.0)))


def test_nested_loops_multiply():
    # the outer loop's body calls a computation that runs the inner loop
    inner = _loop(bound="1000").split("\n\n", 1)[1]  # without the header
    for name in ("body", "cond"):
        inner = inner.replace(f"{name} {{", f"inner_{name} {{")
    inner = inner.replace("condition=cond, body=body", "condition=inner_cond, body=inner_body")
    inner = inner.replace("ENTRY main {\n  a = f32[8] parameter(0)", "inner {\n  a = f32[8] parameter(0)")
    inner = inner.replace("  w = (s64[], f32[8]) while", "  iw = (s64[], f32[8]) while").replace("tuple-element(w)", "tuple-element(iw)")
    outer = _loop(bound="2000").replace("y = f32[8] exponential(x)", "y = f32[8] call(x), to_apply=inner")
    module = hlofuse.loads(outer + "\n" + inner)
    found = {loop.name: n for loop, n, _ in budget.loop_iterations(module)}
    assert found == {"w": 2000, "iw": 2000 * 1000}
    with pytest.raises(ExecutionError, match="while loop iw of the module runs its body 2,000,000 times"):
        budget.check(module, Limits(2**40, 1_000_000))


@pytest.mark.parametrize("text, size", [("1000", 1000), ("8G", 8 * 2**30), ("1.5k", 1536), ("2MiB", 2 * 2**20)])
def test_sizes(text, size):
    assert budget.parse_size(text) == size


def test_bench_refuses_in_one_line(tmp_path):
    path = tmp_path / "huge.hlo"
    path.write_text(HUGE)
    loop = tmp_path / "loop.hlo"
    loop.write_text(_loop(config=_known("1000000000000000000")))
    env = {"PYTHONPATH": CHILD_PYTHONPATH, "PATH": "/usr/bin:/bin", "HLOFUSE_CACHE": os.environ["HLOFUSE_CACHE"]}
    for args, words in [([str(path)], "needs about 7.3 TiB"),
                        ([str(loop), "--max-iterations", "500"], "runs its body 1,000,000,000,000,000,000 times"),
                        ([str(path), "--memory-limit", "100T"], None)]:
        run = subprocess.run([sys.executable, "-m", "hlofuse", "bench", *args, "--device", "cpu", "--plan", "unfused",
                              "--repeat", "1"], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
        errors = [line for line in run.stderr.splitlines() if "error" in line]
        if words is None:  # a limit above the need: refused by the free-memory check instead, still one line
            assert run.returncode != 0 and len(errors) <= 1, run.stderr
            continue
        assert run.returncode == 7 and len(errors) == 1 and words in errors[0], run.stderr


def _nested_loops(depth: int, trips: str) -> str:
    """`depth` while loops, each in the body of the one before, each running `trips` times."""
    parts = ["HloModule nested"]
    for k in range(depth):
        parts.append(f"cond{k} {{\n  p = (f32[8]) parameter(0)\n  ROOT c = pred[] constant(true)\n}}")
        parts.append(f"body{k} {{\n  p = (f32[8]) parameter(0)\n  x = f32[8] get-tuple-element(p), index=0\n"
                     f"  y = f32[8] call(x), to_apply=inner{k + 1}\n  ROOT t = (f32[8]) tuple(y)\n}}")
        parts.append(f"inner{k} {{\n  a = f32[8] parameter(0)\n  init = (f32[8]) tuple(a)\n"
                     f"  w{k} = (f32[8]) while(init), condition=cond{k}, body=body{k}, "
                     f"backend_config={_known(trips)}\n  ROOT r = f32[8] get-tuple-element(w{k}), index=0\n}}")
    parts.append(f"inner{depth} {{\n  a = f32[8] parameter(0)\n  ROOT e = f32[8] exponential(a)\n}}")
    parts.append("ENTRY main {\n  a = f32[8] parameter(0)\n  ROOT c = f32[8] call(a), to_apply=inner0\n}")
    return "\n\n".join(parts) + "\n"


def test_launch_counts_past_what_a_float_holds(tmp_path):
    # 17 loops of int64's largest count: 2**1071 launches, beyond any float; exact, and printed
    n = 2**63 - 1
    ex = explain(hlofuse.loads(_nested_loops(17, str(n))), backend="cpu", fused=True)
    summary = ex.summary()
    assert summary["kernels_launched"] == n**17 and json.loads(json.dumps(summary))["kernels_launched"] == n**17
    path = tmp_path / "nested.hlo"
    path.write_text(_nested_loops(17, str(n)))
    for extra in ([], ["--json"]):
        run = subprocess.run([sys.executable, "-m", "hlofuse", "explain", str(path), "--backend", "cpu", *extra],
                             capture_output=True, text=True, cwd=REPO, timeout=300,
                             env={"PYTHONPATH": CHILD_PYTHONPATH, "PATH": "/usr/bin:/bin", "COLUMNS": "200",
                                  "HLOFUSE_CACHE": os.environ["HLOFUSE_CACHE"]})
        assert run.returncode == 0, run.stderr
        if extra:
            # strict JSON: a time past what a float holds is null, never Infinity or NaN
            doc = json.loads(run.stdout, parse_constant=_no_constants)
            assert doc["summary"]["kernels_launched"] == n**17
            assert doc["summary"]["modelled"]["modelled_us_per_run"] is None
        else:
            assert "launches per run" in run.stdout and "nan" not in run.stdout.lower()


def _no_constants(name):
    raise AssertionError(f"JSON holds {name}")

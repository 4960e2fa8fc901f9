"""XLA's own fusion unit tests, replayed: every runnable case of shared/corpus/fusion must
reproduce what XLA's test asserts, or be listed with its reason in known_failures.tsv (then it
is an expected failure, strict: a listed case that starts passing fails until it is removed
from the list).  The pass rates are printed at the end of the run (conftest.py)."""

from __future__ import annotations

import pytest

from . import runner

try:
    CASES = [c for c in runner.load_manifest() if runner.runnable(c)]
except FileNotFoundError:  # the shared corpus is not available here
    CASES = []
KNOWN = runner.load_known_failures()
RESULTS: dict[str, runner.CaseResult] = {}


def _param(case):
    cid = runner.case_id(case)
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN[cid])] if cid in KNOWN else []
    return pytest.param(case, id=cid, marks=marks)


@pytest.mark.skipif(not CASES, reason="the XLA fusion corpus (shared/corpus/fusion) is not available")
@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case(case):
    result = runner.run_case(case)
    RESULTS[result.name] = result
    assert result.ok, result.error or "; ".join(result.problems)


@pytest.mark.skipif(not CASES, reason="the XLA fusion corpus (shared/corpus/fusion) is not available")
def test_known_failures_name_runnable_cases():
    """Every line of known_failures.tsv names a case the runner runs (no stale entries)."""
    runnable = {runner.case_id(c) for c in CASES}
    stale = sorted(set(KNOWN) - runnable)
    assert not stale, f"known_failures.tsv lists cases that are not run: {stale}"

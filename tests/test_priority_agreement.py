"""`--pipeline priority` against real XLA:GPU (jaxlib 0.10.2): every program of
sample_dumps/gpu-current-* replayed from XLA's before-fusion snapshot and compared with XLA's
after-fusion snapshot (bench/priority_agreement.py), and our refusal reasons against XLA's own
log.  The floors are what the replay reaches today; a regression fails.

The four cart-pole loop programs whose fusion queues run to thousands of steps (the RNG variant
and the 10-times unrolled scan, on both GPUs) take most of the bench's time and are left to
`python bench/priority_agreement.py`."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_HEAVY = ("cartpole_a_rng", "cartpole_d_unroll10")


def _bench():
    """bench/priority_agreement.py as a module (registered before it runs: it defines dataclasses)."""
    name = "hlofuse_bench_priority_agreement"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "priority_agreement.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _programs():
    manifest = REPO / "sample_dumps" / "MANIFEST.json"
    if not manifest.exists():
        return []
    if not any(p["folder"].startswith("gpu-current") for p in json.loads(manifest.read_text())["programs"]):
        return []
    return [p for p in _bench().sample_programs() if Path(p[0]).name not in _HEAVY]


PROGRAMS = _programs()


@pytest.mark.skipif(not PROGRAMS, reason="no gpu-current sample dumps")
def test_kernels_and_reasons_agree_with_real_xla():
    bench = _bench()
    results = [bench.run_one(*p) for p in PROGRAMS]
    errors = [r.name for r in results if r.error]
    assert not errors, errors
    assert len(results) >= 15
    mean = sum(r.agreement for r in results) / len(results)
    differing = {r.name: r.differences for r in results if r.agreement < 1}
    assert mean >= 0.98, differing
    assert sum(r.xla_kernels for r in results) >= 100
    compared = sum(r.reasons_compared for r in results)
    agreeing = sum(r.reasons_agreeing for r in results)
    assert compared >= 100
    assert agreeing / compared >= 0.95, [m for r in results for m in r.reason_mismatches]

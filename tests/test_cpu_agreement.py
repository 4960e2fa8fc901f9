"""Agreement with real XLA:CPU (jax 0.10.2): replaying `fusion` on XLA's before-fusion snapshot of
every sample program (with and without YNN library fusion) reproduces XLA's after-fusion
kernels.  Kernels are compared by structure (bench/cpu_agreement.py), never by name.

The floor is the level reached when this test was written (every kernel of every program);
`bench/cpu_agreement.py` prints the table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("cpu_agreement", REPO / "bench" / "cpu_agreement.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


BENCH = _bench()
PROGRAMS = BENCH.sample_programs()


@pytest.fixture(scope="module")
def results():
    if not PROGRAMS:
        pytest.skip("no XLA:CPU sample dumps (sample_dumps/cpu, sample_dumps/cpu-noynn)")
    return [BENCH.agreement(before, after, program, build) for build, program, before, after in PROGRAMS]


def test_enough_programs_of_both_modes():
    builds = {b for b, *_ in PROGRAMS}
    assert builds == {"cpu", "cpu-noynn"}
    assert sum(1 for b, *_ in PROGRAMS if b == "cpu") >= 15


def test_mean_agreement_floor(results):
    for build in ("cpu", "cpu-noynn"):
        mine = [r for r in results if r.build == build]
        mean = sum(r.fraction for r in mine) / len(mine)
        assert mean >= 0.99, [(r.program, r.fraction, r.missing) for r in mine if r.fraction < 1]


def test_fused_modules_print_back(results):
    from hlofuse.printer import print_back_error

    problems = [(r.build, r.program, print_back_error(r.result.module)) for r in results]
    assert not [p for p in problems if p[2]]


def test_every_program_floor(results):
    low = [(r.build, r.program, round(r.fraction, 3), r.missing, r.extra) for r in results if r.fraction < 0.9]
    assert not low


def test_comparison_is_not_trivial(results):
    """The structural comparison tells a different plan apart: relaxing rules changes kernels."""
    from hlofuse.parse import parse_text
    from hlofuse.pipeline import Options, replay

    build, program, before, after = next(p for p in PROGRAMS if p[1] == "cartpole_b_concat")
    relaxed = replay(parse_text(before.read_text()), Options(backend="cpu", passes=("fusion",),
                                                             relax=("concat", "IF-DO-NOT-DUPLICATE")))
    theirs = BENCH.kernel_table(parse_text(after.read_text()))
    ours = BENCH.kernel_table(relaxed.module)
    assert theirs != ours


def test_library_fusions_are_kept_as_kernels(results):
    ynn = [r for r in results if r.build == "cpu" and any(k.kind == "kCustom" for k in r.result.kernels)]
    assert ynn, "the YNN samples hold library fusions"
    for r in ynn:
        for d in r.result.decisions:
            if d.consumer.startswith("ynn_fusion") and d.verdict.value == "blocked":
                assert d.rule in ("CPU-CUSTOM-FUSION-CONSUMER", "IF-PRODUCER-NOT-FUSIBLE", "IF-DO-NOT-DUPLICATE")

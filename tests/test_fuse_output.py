"""`hlofuse fuse`'s human output: by default a summary and the decisions that formed kernel
boundaries; --all every kernel and every decision that kept ops apart; --json unchanged."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hlofuse.cli import main
from hlofuse.commands.fuse import boundary_decisions
from hlofuse.decision import Verdict

from conftest import REPO

SAMPLES = REPO / "sample_dumps"
CARTPOLE = SAMPLES / "gpu-legacy-rtx2080ti" / "cartpole_b_concat"


def _run(*args) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return result.stdout


def _replay(path, **options):
    from hlofuse.api import replay_options
    from hlofuse.inputs import REPLAY, resolve
    from hlofuse.pipeline import replay

    resolved = resolve(str(path), need=REPLAY, **options)
    return replay(resolved.module, replay_options(resolved, None))


def test_default_output_is_a_summary_and_the_boundaries():
    text = _run("fuse", CARTPOLE, "--pipeline", "legacy")
    payload = json.loads(_run("fuse", CARTPOLE, "--pipeline", "legacy", "--json"))
    blocked = [d for d in payload["decisions"] if d["verdict"] != "fused"]
    assert f"{len(payload['kernels'])} kernels: " in text
    assert f"{len(payload['decisions'])} decisions: {len(payload['decisions']) - len(blocked)} fused, " \
           f"{len(blocked)} blocked" in text
    assert "1 kernel boundary formed by: GF-NON-SCALAR-CONSTANT 1" in text
    assert "fusion  region_0.99: constant.105 → add.19  GF-NON-SCALAR-CONSTANT: " in text
    # refusals about what launches no kernel (a tuple) formed no boundary: only --all lists them
    assert "tuple.120" not in text
    everything = _run("fuse", CARTPOLE, "--pipeline", "legacy", "--all")
    assert "tuple.120" in everything and f"({len(blocked)} of {len(payload['decisions'])} considered)" in everything
    for d in blocked:
        assert f"{d['producer']} → {d['consumer']}" in everything


@pytest.mark.parametrize("path,options", [
    (CARTPOLE, {"pipeline": "legacy"}),
    (SAMPLES / "gpu-current-h100" / "attention", {}),
    (SAMPLES / "cpu" / "cartpole_d_unroll10", {}),
    (SAMPLES / "gpu-current-rtx2080ti" / "layer_norm", {}),
], ids=lambda v: getattr(v, "name", ""))
def test_boundary_decisions_are_refusals_between_two_kernels_one_per_pair(path, options):
    result = _replay(path, **options)
    kernel_of = {(k.computation, m): k.name for k in result.kernels for m in k.instructions}
    formed = boundary_decisions(result)
    pairs = set()
    for d in formed:
        assert d.verdict != Verdict.FUSED
        producer = {kernel_of.get((d.computation, m)) for m in d.producer_members}
        consumer = {kernel_of.get((d.computation, m)) for m in d.consumer_members}
        assert None not in producer | consumer and not producer & consumer
        pair = (d.computation, frozenset(producer), frozenset(consumer))
        assert pair not in pairs
        pairs.add(pair)
    # every pair of kernels some refusal kept apart is there, with the first refusal about it
    for d in result.decisions:
        if d.verdict == Verdict.FUSED:
            continue
        producer = {kernel_of.get((d.computation, m)) for m in d.producer_members}
        consumer = {kernel_of.get((d.computation, m)) for m in d.consumer_members}
        if None in producer | consumer or producer & consumer:
            continue
        pair = (d.computation, frozenset(producer), frozenset(consumer))
        assert pair in pairs
        first = next(f for f in formed if (f.computation, frozenset(kernel_of[(f.computation, m)] for m in
                                                                        f.producer_members),
                                           frozenset(kernel_of[(f.computation, m)] for m in f.consumer_members))
                     == pair)
        assert result.decisions.index(first) <= result.decisions.index(d)


def test_relaxed_decisions_that_formed_boundaries_say_so():
    text = _run("fuse", CARTPOLE, "--pipeline", "legacy", "--relax", "concat")
    assert "relaxed" in text
    formed = boundary_decisions(_replay(CARTPOLE, pipeline="legacy"))
    assert formed


def test_json_is_the_same_with_all():
    assert _run("fuse", CARTPOLE, "--pipeline", "legacy", "--json") == \
        _run("fuse", CARTPOLE, "--pipeline", "legacy", "--json", "--all")


def test_a_module_with_nothing_to_fuse_counts_without_a_dangling_colon(tmp_path):
    lone = tmp_path / "lone.hlo"
    lone.write_text("HloModule lone\n\nENTRY e {\n  ROOT p = f32[2]{0} parameter(0)\n}\n")
    lines = _run("fuse", lone, "--pipeline", "cpu").splitlines()
    assert "0 decisions" in lines and not any(line.startswith("0 decisions:") for line in lines)

"""The paper's cart-pole, as real XLA compiled it (sample_dumps/): hlofuse's replay launches
the same number of kernels per loop iteration as XLA's own fused module, in every variant,
era and backend whose dump has the snapshots right before and after fusion."""

from __future__ import annotations

import json

import pytest

import hlofuse
from conftest import REPO
from hlofuse import dumpdir
from hlofuse.explain import explain, explain_result
from hlofuse.pipeline import Options, replay

SAMPLES = REPO / "sample_dumps"
BUILDS = {  # folder → (backend, pipeline, gpu)
    "gpu-legacy-rtx2080ti": ("gpu", "legacy", "rtx2080ti"),
    "gpu-current-rtx2080ti": ("gpu", "priority", "rtx2080ti"),
    "gpu-current-h100": ("gpu", "priority", "h100_sxm"),
    "cpu": ("cpu", "cpu", None),
    "cpu-noynn": ("cpu", "cpu", None),
}


#: Known disagreements, each with its cause (kept visible: a fix turns them into passes).
KNOWN: dict[str, str] = {}


def _cases():
    manifest = SAMPLES / "MANIFEST.json"
    if not manifest.exists():
        return []
    cases = []
    for entry in json.loads(manifest.read_text())["programs"]:
        folder = entry["path"]
        build = folder.split("/")[0]
        if build in BUILDS and entry.get("program", folder).split("/")[-1].startswith("cartpole"):
            cases.append(folder)
    return [pytest.param(f, marks=pytest.mark.xfail(reason=KNOWN[f], strict=True)) if f in KNOWN else f
            for f in sorted(set(cases))]


def _loops(explanation):
    return sorted((lp.body_kernels, lp.trip_count) for lp in explanation.loops)


@pytest.mark.parametrize("folder", _cases())
def test_replay_launches_what_xla_launches_per_loop_iteration(folder):
    backend, pipeline, gpu = BUILDS[folder.split("/")[0]]
    files = dumpdir.scan(SAMPLES / folder)
    before = dumpdir.fusion_snapshot(files, "before_fusion", pipeline)
    after = dumpdir.fusion_snapshot(files, "after_fusion", pipeline)
    if before is None or after is None:
        pytest.skip(f"{folder}: the dump keeps no snapshot right before and after fusion")
    xla = explain(hlofuse.load(after.path), backend=backend, pipeline=pipeline, gpu=gpu, fused=True)
    ours = explain_result(replay(hlofuse.load(before.path), Options(backend=backend, pipeline=pipeline, gpu=gpu)))
    assert xla.loops, f"{folder}: XLA's module has no while loop"
    assert _loops(ours) == _loops(xla), (
        f"{folder}: kernels per iteration (body kernels, trip count): replay {_loops(ours)}, XLA {_loops(xla)}")


def test_the_paper_concat_baseline_is_two_simulation_kernels_and_the_counter():
    """The paper's account of its baseline (4 kernels per iteration, 2 of them the loop's own):
    on legacy XLA:GPU the done test on the packed state keeps the concatenate's two users apart."""
    folder = SAMPLES / "gpu-legacy-rtx2080ti" / "cartpole_b_concat_vecdone"
    if not folder.exists():
        pytest.skip("sample not present")
    ex = explain(hlofuse.load(folder), backend="gpu", pipeline="legacy", gpu="rtx2080ti")
    (loop,) = ex.loops
    body = [k for k in ex.kernels if k.computation == loop.body]
    assert loop.body_kernels == 3 and loop.condition_kernels == 1
    simulation = [k for k in body if len(k.instructions) > 3]  # the counter is one add
    assert len(simulation) == 2, [k.name for k in body]

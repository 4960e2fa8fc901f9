"""What `fuse -o` writes: the fused module of every replay prints back to text that parses to
the same module, and holds no computation the entry does not reach (XLA's HloDCE removes
them: fused computations of fusions merged away, computations nothing calls)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

import hlofuse
from hlofuse import ir
from hlofuse.pipeline import Options, replay
from hlofuse.printer import print_back_error

from conftest import REPO, shared_dir

PIPELINES = [("gpu", "legacy"), ("gpu", "priority"), ("cpu", "cpu")]


def unreachable(module: ir.Module) -> list[str]:
    """Computations no chain of calls from the entry reaches."""
    live, stack = {module.entry_name}, [module.entry]
    while stack:
        for instr in stack.pop().instructions:
            for name in instr.called:
                if name in module.by_name and name not in live:
                    live.add(name)
                    stack.append(module.by_name[name])
    return [c.name for c in module.computations if c.name not in live]


def _corpus():
    folder = shared_dir() / "corpus" / "fusion"
    return sorted(folder.glob("*.hlo")) if folder.is_dir() else []


@pytest.mark.skipif(not _corpus(), reason="the shared corpus is not here")
@pytest.mark.parametrize("backend, pipeline", PIPELINES)
def test_every_corpus_fusion_case_prints_back_without_dead_computations(backend, pipeline):
    problems = []
    for path in _corpus():
        result = replay(hlofuse.load(path), Options(backend=backend, pipeline=pipeline))
        problem = print_back_error(result.module)
        dead = unreachable(result.module)
        if problem or dead:
            problems.append((path.name, problem, dead))
    assert not problems


def _replay_speed():
    name = "hlofuse_bench_replay_speed"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "replay_speed.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.mark.parametrize("pipeline", ["legacy", "priority", "cpu"])
def test_a_larger_replay_leaves_no_dead_computation(pipeline):
    """bench/replay_speed.py's generated model (2,000 instructions): priority fusion merges
    hundreds of fusions into others, and their computations used to stay in the output."""
    bench = _replay_speed()
    module = hlofuse.loads(bench.generate_for(pipeline, 2000))
    result = replay(module, Options(**bench.PIPELINES[pipeline]))
    assert unreachable(result.module) == []
    assert print_back_error(result.module) is None
    called = {c for comp in result.module.computations for i in comp.instructions for c in i.called}
    assert len(result.module.computations) == len(called) + 1  # each computation called, or the entry

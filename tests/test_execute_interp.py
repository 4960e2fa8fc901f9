"""The reference evaluator against real XLA: the sample programs' outputs from JAX 0.10.2
(tests/data/execute/*.npz, made by make_references.py) must come out of their dumps, at
every stage and for every backend's custom calls; plus XLA's arithmetic where C and NumPy
differ, and clear errors for what cannot run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hlofuse
from hlofuse.dumpdir import choose_module, choose_stage, scan
from hlofuse.errors import ExecutionError
from hlofuse.execute import numeric
from hlofuse.execute.inputs import random_inputs, relative_error
from hlofuse.execute.interp import evaluate
from hlofuse.execute.threefry import threefry2x32

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "execute"
SAMPLES = REPO / "sample_dumps"
PROGRAMS = sorted(p.stem for p in DATA.glob("*.npz"))
#: jax 0.4.35 (the legacy dumps) draws different random numbers than jax 0.10.2
NEWER_JAX_RANDOM = {"cartpole_a_rng"}


def leaves(value) -> list[np.ndarray]:
    if isinstance(value, tuple):
        out = []
        for v in value:
            out += leaves(v)
        return out
    return [np.asarray(value)]


def run_sample(folder: str, program: str, stage: str | None, seed: int) -> list[np.ndarray]:
    path = SAMPLES / folder / program
    if not path.is_dir():
        pytest.skip(f"no {folder}/{program} sample")
    files = choose_module(scan(path), None, str(path))
    module = hlofuse.loads((choose_stage(files, stage)).path.read_text())
    sig = [(p.shape.dims, p.shape.element_type) for p in module.entry.parameters]
    return leaves(evaluate(module, random_inputs(sig, seed)))


def assert_matches_jax(outputs: list[np.ndarray], program: str) -> None:
    ref = np.load(DATA / f"{program}.npz")
    assert len(outputs) == int(ref["n_outputs"])
    for k, out in enumerate(outputs):
        assert tuple(out.shape) == tuple(ref[f"out{k}_shape"]), f"output {k}"
        sampled = out.reshape(-1)[ref[f"out{k}_index"]]
        # batch norm's variance cancels: relative errors near 2e-4 on tiny values are XLA's own
        assert relative_error(sampled, ref[f"out{k}_values"]) < 1e-3, f"output {k}"
        total = abs(float(out.astype(np.float64).sum()) - float(ref[f"out{k}_sum"]))
        assert total <= 1e-4 * max(1.0, float(ref[f"out{k}_abs"])), f"output {k} sum"


@pytest.mark.parametrize("program", PROGRAMS)
def test_cpu_dump_after_optimizations_matches_jax(program):
    assert_matches_jax(run_sample("cpu", program, "after_optimizations", 7), program)


@pytest.mark.parametrize("program", [p for p in PROGRAMS if p.startswith("cartpole") or p in ("softmax", "cumsum")])
def test_cpu_dump_before_fusion_matches_jax(program):
    assert_matches_jax(run_sample("cpu", program, "before_fusion", 7), program)


@pytest.mark.parametrize("program", PROGRAMS + ["cartpole_a_rng_customcall"])
def test_gpu_dump_after_optimizations_matches_jax(program):
    """XLA:GPU modules: cuBLAS/cuDNN custom calls, Triton gemm fusions, threefry custom calls, TopK."""
    reference = program.replace("_customcall", "")
    assert_matches_jax(run_sample("gpu-current-h100", program, "after_optimizations", 7), reference)


@pytest.mark.parametrize("program", [p for p in PROGRAMS if p not in NEWER_JAX_RANDOM])
def test_legacy_gpu_dump_matches_jax(program):
    assert_matches_jax(run_sample("gpu-legacy-rtx2080ti", program, "after_optimizations", 7), program)


def test_threefry_custom_call_and_its_hlo_expansion_agree():
    """The legacy RNG variants differ from today's JAX, but the custom call and the HLO
    expansion of the same program must draw the same numbers."""
    custom = run_sample("gpu-legacy-rtx2080ti", "cartpole_a_rng_customcall", "after_optimizations", 3)
    expanded = run_sample("gpu-legacy-rtx2080ti", "cartpole_a_rng", "after_optimizations", 3)
    assert relative_error(custom[0], expanded[0]) < 1e-5


def test_threefry_matches_jax():
    # jax.extend.random.threefry_2x32(key=[0x12345678, 0x9abcdef0], count=arange(4)) in jax 0.10.2
    a, b = threefry2x32(0x12345678, 0x9ABCDEF0, np.arange(2, dtype=np.uint32), np.arange(2, 4, dtype=np.uint32))
    assert [hex(v) for v in np.concatenate([a, b])] == ["0x612ee2fd", "0xf0bab799", "0xa86e0e45", "0x6fddca12"]


# ------------------------------------------------------------------------------------------
# XLA's arithmetic
# ------------------------------------------------------------------------------------------


def test_integer_division_follows_xla():
    a = np.array([7, -7, 5, -2147483648], np.int32)
    b = np.array([2, 2, 0, -1], np.int32)
    assert numeric.int_divide(a, b).tolist() == [3, -3, -1, -2147483648]
    assert numeric.int_remainder(a, b).tolist() == [1, -1, 5, 0]
    assert numeric.int_divide(np.array([5], np.uint32), np.array([0], np.uint32)).tolist() == [0xFFFFFFFF]


def test_shifts_past_the_width():
    x = np.array([-8, 8], np.int32)
    assert numeric.shift("shift-left", x, np.array([40, 1], np.int32)).tolist() == [0, 16]
    assert numeric.shift("shift-right-arithmetic", x, np.array([40, 1], np.int32)).tolist() == [-1, 4]
    assert numeric.shift("shift-right-logical", x, np.array([40, 1], np.int32)).tolist() == [0, 4]


def test_float_to_int_saturates_and_maps_nan_to_zero():
    x = np.array([np.nan, 3e9, -3e9, -1.7, 2.9], np.float32)
    assert numeric.convert(x, "s32").tolist() == [0, 2147483647, -2147483648, -1, 2]
    assert numeric.convert(x, "u8").tolist() == [0, 255, 0, 0, 2]


def test_total_order_compare():
    x = np.array([-0.0, np.nan, -np.inf], np.float32)
    y = np.array([0.0, np.inf, -1.0], np.float32)
    assert numeric.compare("LT", x, y, total_order=True).tolist() == [True, False, True]


def test_bitcast_follows_layouts():
    module = hlofuse.loads("""
HloModule m
ENTRY e {
  p = f32[2,3]{0,1} parameter(0)
  ROOT b = f32[6]{0} bitcast(p)
}""")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    # column-major storage: the bytes hold x[0,0], x[1,0], x[0,1], ...
    assert evaluate(module, [x]).tolist() == [0, 3, 1, 4, 2, 5]


# ------------------------------------------------------------------------------------------
# What it cannot run, it says
# ------------------------------------------------------------------------------------------


def test_unknown_custom_call_is_named():
    module = hlofuse.loads("""
HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(p), custom_call_target="my_kernel"
}""")
    with pytest.raises(ExecutionError, match="custom call 'my_kernel'"):
        evaluate(module, [np.ones(4, np.float32)])


def test_elided_constant_is_named():
    module = hlofuse.loads("""
HloModule m
ENTRY e {
  c = f32[100] constant({...})
  p = f32[100] parameter(0)
  ROOT a = f32[100] add(p, c)
}""")
    with pytest.raises(ExecutionError, match="constant c is elided"):
        evaluate(module, [np.ones(100, np.float32)])


@pytest.mark.parametrize("case", sorted(__import__("json").loads((DATA / "rng_bit_generator.json").read_text())))
def test_rng_bit_generator_matches_xla(case):
    """XLA:CPU's expansion of rng-bit-generator (Philox by default, ThreeFry), bit for bit."""
    import json

    data = json.loads((DATA / "rng_bit_generator.json").read_text())[case]
    module = hlofuse.loads(data["hlo"])
    state, bits = evaluate(module, [np.array(data["key"], np.uint32)])
    assert state.reshape(-1).tolist() == data["state"]
    assert bits.reshape(-1).tolist() == data["bits"]

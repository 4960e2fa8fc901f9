"""What the cost model remembers must never outlive what it was computed from: each test edits
the graph (or recycles an object) after a query and checks the next answer is the fresh one."""

from __future__ import annotations

import gc

import hlofuse
from hlofuse.cost.analysis import _shape_facts, shape_size
from hlofuse.cost.durations import f32
from hlofuse.cost.legacy import LegacyPerformanceModel
from hlofuse.gpu import GpuConfig
from hlofuse.gpu import test_device as a6000_test_device
from hlofuse.gpu.emitter import analyse
from hlofuse.gpu.shapes import elements, elements_recursive
from hlofuse.graph import Program
from hlofuse.fusion_primitives import merge_fusion
from hlofuse.ir import Shape

N = 262144  # ≥ 84 SMs × 1536 threads of the A6000: large enough for the loop emitter to unroll
SINES = (f"sines {{ a = f32[{N}]{{0}} parameter(0) n = f32[{N}]{{0}} negate(a) "
         f"ROOT s = f32[{N}]{{0}} sine(n) }}")
ADDS = (f"adds {{ a = f32[{N}]{{0}} parameter(0) b = f32[{N}]{{0}} parameter(1) "
        f"ROOT s = f32[{N}]{{0}} add(a, b) }}")


def program(entry: str, computations: str = "") -> Program:
    return Program.from_module(hlofuse.loads(f"HloModule t\n{computations}\nENTRY e {{\n{entry}\n}}"))


def sine_into_add() -> Program:
    return program(f"""
  x = f32[{N}]{{0}} parameter(0)
  p = f32[{N}]{{0}} fusion(x), kind=kLoop, calls=sines
  ROOT c = f32[{N}]{{0}} fusion(p, x), kind=kLoop, calls=adds""", f"{SINES}\n{ADDS}")


def config() -> GpuConfig:
    return GpuConfig(a6000_test_device())


def test_launch_grid_and_run_time_follow_a_merge_into_the_consumer():
    # The add kernel is unrolled 4 times; once the sine is merged in, MayPreventVectorization
    # holds and it is not: the remembered grid (and the emitter kind kept with it) must not
    # survive the edit.
    prog = sine_into_add()
    c, p = prog.entry["c"], prog.entry["p"]
    model = LegacyPerformanceModel(config())
    before = model.launch_of(c)
    before_time = model.run_time(c)
    merge_fusion(c, p)
    after = model.launch_of(c)
    fresh = LegacyPerformanceModel(config())
    assert after == fresh.launch_dimensions(analyse(c, config()))
    assert after.blocks == 4 * before.blocks
    assert model.run_time(c) == fresh.run_time(c) != before_time


def test_cost_properties_follow_a_merge_into_the_consumer():
    prog = sine_into_add()
    c, p = prog.entry["c"], prog.entry["p"]
    model = LegacyPerformanceModel(config())
    assert model.analysis.ir_size(c) == 3.0  # two parameters and the add
    flops_before = model.analysis.flop_count(c)
    merge_fusion(c, p)
    fresh = LegacyPerformanceModel(config()).analysis
    assert model.analysis.ir_size(c) == fresh.ir_size(c) == 4.0  # x (now shared), negate, sine, add
    assert model.analysis.flop_count(c) == fresh.flop_count(c) > flops_before


def test_shape_facts_are_never_those_of_a_recycled_shape():
    # Facts are looked up by the shape's value: a new shape that reuses a collected one's
    # memory is never handed its facts (shape_size's own cache is emptied so that it keeps no
    # shape alive).
    for n in range(1, 400):
        shape = Shape("f32", (n, 3))
        facts = _shape_facts(shape)[:3]
        shape_size.cache_clear()
        assert facts == (shape_size(shape), elements(shape), elements_recursive(shape))
        del shape
        shape_size.cache_clear()
        gc.collect()


def test_utilisation_rounding_is_kept_past_float32_integers():
    # XLA rounds `used * elements` to float32 before taking its ceiling: for 2**24 + 1 elements
    # read once, that gives (2**24) / (2**24 + 1), not 1; below 2**24 + 1 it is exactly 1.
    for count, expected in ((1 << 24, 1.0), ((1 << 24) + 1, f32((1 << 24) / ((1 << 24) + 1)))):
        prog = program(f"""
  x = f32[{count}]{{0}} parameter(0)
  ROOT r = f32[{count}]{{0}} fusion(x), kind=kLoop, calls=rev""",
                       f"rev {{ a = f32[{count}]{{0}} parameter(0) ROOT r = f32[{count}]{{0}} reverse(a), dimensions={{0}} }}")
        analysis = LegacyPerformanceModel(config()).analysis
        assert analysis.operand_utilization(prog.entry["r"], 0) == expected

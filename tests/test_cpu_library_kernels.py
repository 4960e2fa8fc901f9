"""The ops XLA:CPU hands to a library or runtime routine, generated as CPU loop nests
(execute/library_nests.py): convolutions and TopK match the reference evaluator, and stay
library calls where the CPU does not generate them (CUDA's lowering, unsupported forms)."""

from __future__ import annotations

import numpy as np
import pytest

import hlofuse
from hlofuse.execute.cpu import CpuDevice
from hlofuse.execute.inputs import random_inputs, relative_error
from hlofuse.execute.interp import evaluate
from hlofuse.execute.lower import lower
from hlofuse.execute.runtime import Runner


def _leaves(value):
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def _run(module, args):
    lowered = lower(module, generated_dots=True)
    runner = Runner(lowered, CpuDevice())
    runner.set_inputs(args)
    runner.count()  # one run
    return lowered, runner.outputs()


def _conv_module(x: str, w: str, out: str, attrs: str, dtype: str = "f32") -> hlofuse.ir.Module:
    return hlofuse.loads(f"""HloModule conv
ENTRY e {{
  x = {dtype}{x} parameter(0)  w = {dtype}{w} parameter(1)
  ROOT c = {dtype}{out} convolution(x, w), {attrs}
}}""")


CONVOLUTIONS = {
    # XLA:CPU's conv2d sample: NHWC x HWIO, same padding; 13 output columns (blocks of 8 and a rest)
    "nhwc_same": ("[2,9,13,5]", "[3,3,5,32]", "[2,9,13,32]", "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
    "strided_dilated": ("[2,11,12,3]", "[3,2,3,7]", "[2,4,6,7]",
                        "window={size=3x2 stride=2x2 pad=0_1x1_0 rhs_dilate=2x1}, dim_labels=b01f_01io->b01f"),
    "base_dilated_reversed": ("[1,5,6,2]", "[2,3,2,4]", "[1,10,11,4]",
                              "window={size=2x3 pad=1_1x1_1 lhs_dilate=2x2 rhs_reversal=0x1}, "
                              "dim_labels=b01f_01io->b01f"),
    "nchw_oihw": ("[2,4,7,6]", "[6,4,3,3]", "[2,6,5,4]", "window={size=3x3}, dim_labels=bf01_oi01->bf01"),
    "negative_padding_1d": ("[3,20,4]", "[5,4,300]", "[3,15,300]", "window={size=5 pad=-1_0}, dim_labels=b0f_0io->b0f"),
    "no_spatial": ("[6,9]", "[9,5]", "[6,5]", "dim_labels=bf_io->bf"),
    "three_d_f64": ("[1,4,5,3,2]", "[2,2,2,2,3]", "[1,3,4,2,3]", "window={size=2x2x2}, dim_labels=b012f_012io->b012f"),
}


@pytest.mark.parametrize("name", sorted(CONVOLUTIONS))
def test_convolutions_are_generated_and_match_the_reference(name):
    x, w, out, attrs = CONVOLUTIONS[name]
    module = _conv_module(x, w, out, attrs, "f64" if name.endswith("f64") else "f32")
    args = random_inputs([(p.shape.dims, p.shape.element_type) for p in module.entry.parameters], 3)
    lowered, got = _run(module, args)
    assert [k.generated for k in lowered.kernels] == [True]
    want = _leaves(evaluate(module, args))
    assert got[0].shape == want[0].shape
    # fused multiply-adds, summed in another order than NumPy's einsum: rounding only
    assert relative_error(got[0], want[0]) <= 1e-5


def test_convolution_padding_multiplies_zeros_as_the_reference_does():
    """A NaN or infinite weight turns padded outputs NaN in the reference (0 x inf): the
    generated kernel reads zeros there instead of skipping the tap."""
    module = _conv_module("[1,4,4,1]", "[3,3,1,2]", "[1,4,4,2]", "window={size=3x3 pad=1_1x1_1}, "
                          "dim_labels=b01f_01io->b01f")
    x = np.ones((1, 4, 4, 1), np.float32)
    w = np.ones((3, 3, 1, 2), np.float32)
    w[0, 0, 0, 0] = np.inf
    _, got = _run(module, [x, w])
    want = _leaves(evaluate(module, [x, w]))[0]
    assert np.isnan(want[0, 0, 0, 0]) and np.isinf(want[0, 3, 3, 0])
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want))
    np.testing.assert_array_equal(got[0], want)


def test_convolutions_stay_library_calls_off_the_cpu_and_when_grouped():
    x, w, out, attrs = CONVOLUTIONS["nhwc_same"]
    assert [k.kind for k in lower(_conv_module(x, w, out, attrs)).kernels] == ["library"]  # CUDA: cuDNN
    grouped = _conv_module("[1,5,5,4]", "[3,3,2,6]", "[1,3,3,6]",
                           "window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=2")
    lowered, got = _run(grouped, random_inputs([((1, 5, 5, 4), "f32"), ((3, 3, 2, 6), "f32")], 1))
    assert [k.generated for k in lowered.kernels] == [False]


TOTAL_ORDER_GT = """
gt {
  a = f32[] parameter(0)  b = f32[] parameter(1)  ia = s32[] parameter(2)  ib = s32[] parameter(3)
  zero = s32[] constant(0)  max = s32[] constant(2147483647)
  ba = s32[] bitcast-convert(a)  bb = s32[] bitcast-convert(b)
  xa = s32[] xor(max, ba)  xb = s32[] xor(max, bb)
  na = pred[] compare(ba, zero), direction=LT  nb = pred[] compare(bb, zero), direction=LT
  ka = s32[] select(na, xa, ba)  kb = s32[] select(nb, xb, bb)
  ROOT r = pred[] compare(ka, kb), direction=GT
}
plain_lt { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = pred[] compare(a, b), direction=LT }
"""


def _topk_module(comparator: str, dims: str, k: int, layout: str = "") -> hlofuse.ir.Module:
    rows = dims.strip("[]").split(",")[:-1]
    out = "[" + ",".join(rows + [str(k)]) + "]"
    return hlofuse.loads(f"""HloModule topk
{TOTAL_ORDER_GT}
ENTRY e {{
  x = f32{dims}{layout} parameter(0)
  ROOT t = (f32{out}, s32{out}) custom-call(x), custom_call_target="TopK", to_apply={comparator}
}}""")


def _ties(shape, seed, nan=True):
    """Few distinct values (ties everywhere), signed zeros, infinities, NaNs of both signs
    (`nan`: a comparator that is not a strict weak order with NaNs, as a plain `<`, leaves
    the order to the sorting algorithm, in XLA too)."""
    rng = np.random.default_rng(seed)
    pool = [0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, 1e-45] + ([np.nan, -np.nan] if nan else [])
    return rng.choice(np.array(pool, np.float32), size=shape).astype(np.float32)


@pytest.mark.parametrize("comparator, dims, k, layout", [
    ("gt", "[7,300]", 8, ""),
    ("gt", "[3,4,50]", 50, ""),  # k = the whole row: a full stable sort
    ("gt", "[5,40]", 3, "{0,1}"),  # rows strided in memory
    ("plain_lt", "[6,64]", 5, ""),  # two parameters, values only; NaN is unordered
    ("gt", "[33]", 1, ""),
])
def test_topk_is_generated_and_equals_the_reference_exactly(comparator, dims, k, layout):
    module = _topk_module(comparator, dims, k, layout)
    shape = module.entry.parameters[0].shape.dims
    for seed in (1, 2):
        args = [_ties(shape, seed, comparator == "gt")] if seed == 1 else random_inputs([(shape, "f32")], seed)
        lowered, got = _run(module, args)
        assert [kn.generated for kn in lowered.kernels] == [True]
        want = _leaves(evaluate(module, args))
        np.testing.assert_array_equal(got[1], want[1])  # indices: order and ties
        np.testing.assert_array_equal(got[0].view(np.int32), want[0].view(np.int32))  # -0.0, NaN signs
    assert [kn.kind for kn in lower(module).kernels] == ["library"]  # CUDA: XLA:GPU's TopK kernel


def test_topk_of_the_cpu_sample_matches_xla_ordering():
    """XLA's TopK orders by the float's total order (-NaN < -inf < ... < -0.0 < 0.0 < ... <
    NaN), ties by the lower index first (runtime_topk.cc's comparator)."""
    module = _topk_module("gt", "[1,12]", 12)
    x = np.array([[0.0, -0.0, np.nan, 1.0, -np.nan, np.inf, 1.0, -np.inf, -0.0, 0.0, 3.0, -1.0]], np.float32)
    x[0, 4] = -np.float32(np.nan)
    _, got = _run(module, [x])
    assert got[1].tolist() == [[2, 5, 10, 3, 6, 0, 9, 1, 8, 11, 7, 4]]


DOTS = {
    # rows and columns with remainders (8-row, 32-column tiles), rhs row-major
    "remainders": ("f32[37,50]", "f32[50,70]", "f32[37,70]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    # attention's scores: batch, both contracting dimensions minor (the rhs packed transposed)
    "batched_transposed": ("f32[3,20,16]", "f32[3,40,16]", "f32[3,20,40]",
                           "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}"),
    # the lhs contracting dimension major, batch dimensions not leading
    "strided_lhs": ("f32[9,4,11]", "f32[4,9,6]", "f32[4,11,6]",
                    "lhs_batch_dims={1}, lhs_contracting_dims={0}, rhs_batch_dims={0}, rhs_contracting_dims={1}"),
    "vector_f64": ("f64[300]", "f64[300,5]", "f64[5]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
    "inner_product": ("f32[33]", "f32[33]", "f32[]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
}


@pytest.mark.parametrize("name", sorted(DOTS))
def test_blocked_dots_match_the_reference(name):
    lhs, rhs, out, dims = DOTS[name]
    module = hlofuse.loads(f"""HloModule dot
fused {{ a = {lhs} parameter(0)  b = {rhs} parameter(1)  ROOT d = {out} dot(a, b), {dims} }}
ENTRY e {{ a = {lhs} parameter(0)  b = {rhs} parameter(1)  ROOT f = {out} fusion(a, b), kind=kCustom, calls=fused }}""")
    args = random_inputs([(p.shape.dims, p.shape.element_type) for p in module.entry.parameters], 5)
    lowered, got = _run(module, args)
    (kernel,) = lowered.kernels
    assert kernel.generated and any("_tile_" in f for f in kernel.body.functions)
    want = _leaves(evaluate(module, args))
    assert relative_error(got[0], want[0]) <= 1e-5


def test_a_library_fusion_with_a_dot_inside_runs_as_two_generated_kernels():
    """XLA:CPU's attention: a YNNPACK fusion of the scores' dot, the scale, the row max and
    the exp runs as the dot's kernel into a temporary, then the rest's kernel; the plan
    matches the reference; CUDA (no generated dots) keeps it one library call."""
    from pathlib import Path

    from hlofuse import bench

    source = bench.load_source(str(Path(__file__).resolve().parent.parent / "sample_dumps" / "cpu" / "attention"))
    plan = bench.make_plans(source, ["xla"])
    lowered = lower(plan[0].module, generated_dots=True)
    assert all(k.generated for k in lowered.kernels)
    labels = [k.label for k in lowered.kernels]
    assert "main.3/ynn_fusion.2 (dot)" in labels and "main.3/ynn_fusion.2" in labels
    assert labels.index("main.3/ynn_fusion.2 (dot)") + 1 == labels.index("main.3/ynn_fusion.2")
    assert not [k for k in lower(plan[0].module).kernels if k.label == "main.3/ynn_fusion.2"][0].generated
    (result,) = bench.run_plans(plan, CpuDevice(), repeat=1, warmup=0)
    assert result.ok and result.max_rel_error <= 1e-5


def test_cuda_refuses_a_cpu_only_loop_nest():
    from hlofuse.execute import cuda
    from hlofuse.execute.emit import EmitError

    x, w, out, attrs = CONVOLUTIONS["nhwc_same"]
    (kernel,) = lower(_conv_module(x, w, out, attrs), generated_dots=True).kernels
    assert kernel.body.groups[0].cpu_only
    with pytest.raises(EmitError, match="CPU-only"):
        cuda.render_kernel(kernel.body)

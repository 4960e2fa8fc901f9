"""The CPU kernels as fast code: single-precision math that vectorizes and keeps the
reference's accuracy (execute/vecmath.py), element loops the compiler vectorizes, the
compile flags, and the host program that runs a plan's steps from C."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import hlofuse
from hlofuse.execute import cpu, vecmath
from hlofuse.execute.cpu import CpuDevice
from hlofuse.execute.inputs import random_inputs, relative_error
from hlofuse.execute.interp import evaluate
from hlofuse.execute.lower import lower
from hlofuse.execute.prelude import prelude
from hlofuse.execute.runtime import Runner

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_dumps"

REFERENCE = {"exp": np.exp, "expm1": np.expm1, "logistic": lambda x: 1 / (1 + np.exp(-x)), "log": np.log,
             "log1p": np.log1p, "tanh": np.tanh, "sin": np.sin, "cos": np.cos}


def _math_library():
    loops = "\n".join(f"void t_{f}(const f32* restrict x, f32* restrict y, i64 n) "
                      f"{{ for (i64 i = 0; i < n; ++i) y[i] = hf_{f}_f32(x[i]); }}" for f in vecmath.FUNCTIONS)
    lib, _ = cpu.load_library(prelude("cpu") + loops)
    return lib


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    def ordered(a):
        i = a.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    d = np.abs(ordered(got) - ordered(want))
    d = np.where(np.isnan(got) & np.isnan(want), 0, d)
    return np.where(np.isnan(got) != np.isnan(want), 1 << 40, d)


def _arguments(name: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    n = 1 << 16
    parts = [rng.uniform(-10, 10, n), rng.uniform(-1e-3, 1e-3, n),
             np.exp(rng.uniform(-100, 88, n)) * rng.choice([-1, 1], n),
             [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.17e-38, 3.4e38, -3.4e38, 1, -1, 88.7, 88.8,
              -103.9, -104, 1e-30, 9.5, 20, -20, 1e7, 1e20, 1.5707964, 3.1415927, 2.0 ** 20, 2.0 ** 20 - 1, 2.0 ** 23,
              2.0 ** 24 + 2, -0.999, -1.0, -1.5]]
    if name in ("sin", "cos"):  # every exponent of the reduction's table, and its threshold
        parts.append(np.exp(rng.uniform(np.log(2.0 ** 19), 88, n)))
        parts.append(np.nextafter(np.float32(vecmath.LARGE_TRIG), 0) * rng.uniform(0.99, 1.01, n))
    return np.concatenate([np.asarray(p, np.float64).astype(np.float32) for p in parts])


@pytest.mark.parametrize("name", vecmath.FUNCTIONS)
def test_vector_math_is_within_one_ulp_of_double_precision_rounded(name):
    lib = _math_library()
    x = _arguments(name)
    y = np.empty_like(x)
    getattr(lib, f"t_{name}")(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_int64(x.size))
    with np.errstate(all="ignore"):
        want = REFERENCE[name](x.astype(np.float64)).astype(np.float32)
    ulps = _ulps(y, want)
    worst = int(np.argmax(ulps))
    budget = vecmath.SINGLE_PRECISION.get(name, 1)
    assert ulps.max() <= budget, f"{name}({x[worst]!r}) = {y[worst]!r}, want {want[worst]!r}"
    if name not in vecmath.SINGLE_PRECISION:  # evaluated in double: correctly rounded but a hair from a boundary
        assert np.mean(ulps > 0) < 1e-4
    special = ~np.isfinite(want) | ~np.isfinite(x) | (want == 0)
    assert np.array_equal(y[special], want[special], equal_nan=True)  # inf, NaN and signed zeros exactly


def test_the_reduction_table_holds_two_over_pi_mod_4():
    # row r is the f32 exponent 147 + r: 2^(147 + r - 127 - 23) * 2/pi mod 4
    for r, row in enumerate(vecmath.two_over_pi_table()[:3]):
        e = 147 + r - 150
        assert sum(row) == pytest.approx((2 ** e * 2 / np.pi) % 4, rel=1e-15)
        # each part has at most 24 significant bits, so mantissa * part is exact in double
        assert all(v == 0 or float.fromhex(v.hex()) == v and (v * 2 ** (23 - np.floor(np.log2(v)))).is_integer()
                   for v in row)
    assert len(vecmath.two_over_pi_table()) == 254 - 147 + 1


def _vectorized_lines(source: str) -> set[int]:
    cc = cpu.compiler()
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    if "Free Software Foundation" not in version:
        pytest.skip(f"the vectorization report is GCC's ({cc})")
    folder = Path(__import__("tempfile").mkdtemp(prefix="hlofuse-vec-"))
    try:
        (folder / "k.c").write_text(source)
        proc = subprocess.run([cc, *cpu.CFLAGS, "-fopt-info-vec-optimized", "-o", str(folder / "k.so"),
                               str(folder / "k.c"), "-lm"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {int(line.split(":")[1]) for line in proc.stderr.splitlines() if "loop vectorized" in line}


def test_the_cartpole_kernels_element_loops_are_vectorized():
    """sin, cos, select and dynamic-slice reads of XLA:CPU's cart-pole fusions in one vector
    loop each (the issue's -fopt-info-vec: 0 loops before)."""
    from hlofuse import bench

    source = bench.load_source(str(SAMPLES / "cpu" / "cartpole_c_separate"))
    lowered = lower(bench.make_plans(source, ["xla"])[0].module)
    bodies = [k.body for k in lowered.kernels if k.generated]
    text = cpu.render(bodies)
    lines = text.splitlines()
    vectorized = _vectorized_lines(text)
    fusions = [b for b in bodies if "fusion" in b.name and b.groups[0].elements > 1]
    assert len(fusions) >= 5
    for body in fusions:
        start = lines.index(f"void {body.name}(void** b) {{") + 1
        loop = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("for (")) + 1
        assert loop in vectorized, f"{body.name}'s element loop (line {loop}) is not vectorized"


def test_compile_flags_keep_nan_and_infinity_semantics():
    assert "-ffast-math" not in cpu.CFLAGS and "-ffinite-math-only" not in cpu.CFLAGS
    assert "-ffp-contract=off" in cpu.CFLAGS and "-O3" in cpu.CFLAGS


HOST = """HloModule host
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
cond { p = (s32[], f32[8,8]) parameter(0)  i = s32[] get-tuple-element(p), index=0  n = s32[] constant(5)
       ROOT lt = pred[] compare(i, n), direction=LT }
body { p = (s32[], f32[8,8]) parameter(0)  i = s32[] get-tuple-element(p), index=0  x = f32[8,8] get-tuple-element(p), index=1
       one = s32[] constant(1)  j = s32[] add(i, one)  d = f32[8,8] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
       t = f32[8,8] tanh(d)  ROOT r = (s32[], f32[8,8]) tuple(j, t) }
b0 { p = f32[8,8] parameter(0)  ROOT e = f32[8,8] exponential(p) }
b1 { p = f32[8,8] parameter(0)  ROOT n = f32[8,8] negate(p) }
b2 { p = f32[8,8] parameter(0)  ROOT s = f32[8,8] sine(p) }
ENTRY main {
  x = f32[8,8] parameter(0)  sel = s32[] parameter(1)  z = s32[] constant(0)
  init = (s32[], f32[8,8]) tuple(z, x)
  w = (s32[], f32[8,8]) while(init), condition=cond, body=body
  y = f32[8,8] get-tuple-element(w), index=1
  c = f32[8,8] conditional(sel, y, y, y), branch_computations={b0, b1, b2}
  zero = f32[] constant(0)
  ROOT r = f32[8] reduce(c, zero), dimensions={1}, to_apply=add
}
"""


@pytest.mark.parametrize("selector", [0, 2, 7])
def test_the_host_program_runs_the_steps_as_the_python_loop_does(selector):
    """A while loop without a known trip count (its condition's predicate read in C), a
    library call (the dot, called back into NumPy), a conditional on an s32 (out of range: the
    last branch), and a reduction: the C host program's result is the reference's."""
    module = hlofuse.loads(HOST)
    x = random_inputs([((8, 8), "f32")], 3)[0]
    args = [x, np.int32(selector)]
    want = np.asarray(evaluate(module, args))
    runner = Runner(lower(module), CpuDevice())
    assert runner.native
    runner.set_inputs(args)
    python_counts = runner.count()
    by_python = runner.outputs()[0]
    runner.run()
    assert relative_error(runner.outputs()[0], want) <= 1e-5
    assert np.array_equal(runner.outputs()[0], by_python)
    assert python_counts.launches > 5  # the count still walks the steps, kernel by kernel


def test_the_host_program_is_generated_from_the_steps():
    module = hlofuse.loads(HOST)
    from hlofuse.execute import host

    text = host.host_source(lower(module))
    assert text.startswith(f"void {host.HOST_FUNCTION}(")
    assert "for (;;) {" in text and "break;" in text  # the condition, no known trip count
    assert "lib[" in text  # the dot: a library call
    assert "sel == 0" in text and "sel == 1" in text


def _rendered(folder: str, plan: str):
    from hlofuse import bench

    source = bench.load_source(str(SAMPLES / folder))
    chosen = bench.make_plans(source, [plan])[0]
    lowered = lower(chosen.module, loop_kernels=chosen.loop, loop_tile=CpuDevice.loop_tile)
    bodies = [k.body for k in lowered.kernels if k.generated]
    return bodies, cpu.render(bodies)


def test_a_short_minor_dimension_is_unrolled_and_the_row_loop_vectorized():
    """The cart-pole's packed state f32[2048,4]: XLA's select after the concatenate, one
    iteration per environment computing its 4 values (the concatenate resolved per value,
    the sine and cosine shared), and that loop vectorized."""
    bodies, text = _rendered("cpu/cartpole_b_concat", "xla")
    body = next(b for b in bodies if b.name == "k_copy_select_fusion")
    assert body.groups[0].dims == (2048, 1)
    kernel = text[text.index("void k_copy_select_fusion("):]
    kernel = kernel[: kernel.index("\n}\n")]
    assert "if (" not in kernel and kernel.count("hf_sin_f32(") == 1
    lines = text.splitlines()
    start = lines.index("void k_copy_select_fusion(void** b) {")
    loop = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("for (")) + 1
    assert loop in _vectorized_lines(text)


def test_the_loop_kernels_lane_loop_is_vectorized():
    """The loop plan's step: a tile of environments' state in element-major local arrays,
    the lane loop of each step vectorized (selects as blends, no guard for full tiles)."""
    _, text = _rendered("cpu/cartpole_b_concat", "loop")
    lines = text.splitlines()
    forever = next(i for i, line in enumerate(lines) if line.strip() == "for (;;) {")
    step = next(i for i in range(forever, len(lines)) if "for (i64 lane" in lines[i]) + 1
    assert step in _vectorized_lines(text)


# ------------------------------------------------------------------------------------------
# Library fusions as generated kernels; a row's reductions once per row, vectorized
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder, generated, library", [
    ("cpu/softmax", {"ynn_fusion", "ynn_fusion.1"}, set()),  # XLA:CPU's YNNPACK reductions
    ("gpu-current-h100/softmax", {"triton_softmax.2"}, set()),  # XLA:GPU's Triton normalization
    ("gpu-current-h100/mlp", set(), {"gemm_fusion_dot", "gemm_fusion_dot.1", "gemm_fusion_dot_general.5"}),
])
def test_library_fusions_without_a_library_op_are_generated_kernels(folder, generated, library):
    from hlofuse import bench

    plan = bench.make_plans(bench.load_source(str(SAMPLES / folder)), ["xla"])[0]
    lowered = lower(plan.module)
    custom = {k.label.split("/")[-1]: k for k in lowered.kernels if k.kind == "kCustom"}
    assert {n for n, k in custom.items() if k.generated} == generated
    assert {n for n, k in custom.items() if not k.generated} == library


def test_a_rows_reduction_is_computed_once_per_row_and_vectorized():
    """XLA:CPU's softmax exp(x - max(x)) fusion, f32[128,1000]: the row maximum is hoisted
    out of the loop over the row (before: recomputed for each of the row's 1000 elements),
    as 16 partial maxima in a vectorized loop; the plan matches the reference."""
    from hlofuse import bench

    bodies, text = _rendered("cpu/softmax", "xla")
    body = next(b for b in bodies if b.name == "k_ynn_fusion_1")
    group = body.groups[0]
    assert group.hoisted and group.hoist_depth == 1 and group.rows == 128
    assert not any("hf_max_f32" in line for line in group.body)  # the maximum is not in the row loop
    lines = text.splitlines()
    start = lines.index("void k_ynn_fusion_1(void** b) {")
    chunk = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("for (i64 q"))
    partials = next(i for i in range(chunk + 1, len(lines)) if lines[i].lstrip().startswith("for (i64 l")) + 1
    assert lines[partials - 2].strip() == "#pragma GCC unroll 1"
    row = next(i for i in range(chunk, len(lines)) if lines[i].lstrip().startswith("for (i64 i0_1")) + 1
    vectorized = _vectorized_lines(text)
    assert partials in vectorized and row in vectorized
    source = bench.load_source(str(SAMPLES / "cpu" / "softmax"))
    result = bench.run_plans(bench.make_plans(source, ["unfused", "xla"]), CpuDevice(), repeat=1, warmup=0)
    assert all(r.ok for r in result) and result[1].max_rel_error < 1e-5


def test_vectorized_reductions_take_the_init_value_once():
    """sum(x) + 5 over 37 elements (two chunks of 16 and a tail): the partial sums start
    from the first chunk, the init value joins once."""
    module = hlofuse.loads("""HloModule init
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY main { x = f32[3,37] parameter(0)  five = f32[] constant(5)
  ROOT r = f32[3] reduce(x, five), dimensions={1}, to_apply=add }
""")
    x = np.ones((3, 37), np.float32)
    runner = Runner(lower(module), CpuDevice())
    runner.set_inputs([x])
    runner.run()
    assert np.array_equal(runner.outputs()[0], np.full(3, 42.0, np.float32))


def test_small_dots_are_generated_on_the_cpu_and_large_ones_go_to_blas():
    """XLA:CPU's rnn_scan: f32[16,128] x f32[128,128] in the loop body, a generated loop nest
    (a row of results, the contracting loop outside the vectorized row loop); the same dots
    stay library calls when the device asks for none (CUDA: cuBLAS), and a dot the CPU does
    not block above GENERATED_DOT_MACS goes to NumPy's BLAS without the evaluator."""
    from hlofuse import bench
    from hlofuse.execute import lower as lowering

    source = bench.load_source(str(SAMPLES / "cpu" / "rnn_scan"))
    module = bench.make_plans(source, ["xla"])[0].module
    generated = lower(module, generated_dots=True)
    dots = [k for k in generated.kernels if k.kind == "kCustom"]
    assert dots and all(k.generated and k.body.groups[0].cpu_body for k in dots)
    assert all(not k.generated for k in lower(module).kernels if k.kind == "kCustom")
    results = bench.run_plans(bench.make_plans(source, ["unfused", "xla"]), CpuDevice(), repeat=1, warmup=0)
    assert all(r.ok for r in results)
    # the mlp's dots (8.4M multiply-adds) are blocked for registers, as a library would
    mlp = bench.make_plans(bench.load_source(str(SAMPLES / "cpu" / "mlp")), ["xla"])[0].module
    assert all(k.generated for k in lower(mlp, generated_dots=True).kernels)
    # two contracting dimensions: not blocked, and past GENERATED_DOT_MACS: BLAS
    big = hlofuse.loads("""HloModule big
fused { a = f32[64,32,32] parameter(0)  b = f32[32,32,512] parameter(1)
        ROOT d = f32[64,512] dot(a, b), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1} }
ENTRY e { a = f32[64,32,32] parameter(0)  b = f32[32,32,512] parameter(1)
          ROOT f = f32[64,512] fusion(a, b), kind=kCustom, calls=fused }""")
    lowered = lower(big, generated_dots=True)
    library = [k for k in lowered.kernels if not k.generated]
    assert library and all(cpu.plain_dot(lowered, k) is not None for k in library)
    assert 64 * 512 * 1024 > lowering.GENERATED_DOT_MACS == 1 << 20
    # blockable but past BLOCKED_DOT_MACS (the operands outgrow the caches): BLAS too
    huge = hlofuse.loads("""HloModule huge
fused { a = f32[256,512] parameter(0)  b = f32[512,256] parameter(1)
        ROOT d = f32[256,256] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0} }
ENTRY e { a = f32[256,512] parameter(0)  b = f32[512,256] parameter(1)
          ROOT f = f32[256,256] fusion(a, b), kind=kCustom, calls=fused }""")
    assert 256 * 256 * 512 > lowering.BLOCKED_DOT_MACS
    assert [k.generated for k in lower(huge, generated_dots=True).kernels] == [False]


def test_an_element_loop_writing_over_its_inputs_is_still_vectorized():
    """The legacy XLA:GPU cart-pole's step writes the four state arrays in place (each read
    at its own index): no restrict, so an ivdep pragma, and the loop vectorized (GCC gave up
    on the alias checks of 14 pointers)."""
    bodies, text = _rendered("gpu-legacy-rtx2080ti/cartpole_c_separate", "xla")
    body = next(b for b in bodies if b.name == "k_loop_select_fusion")
    assert not body.distinct_args and body.groups[0].independent
    lines = text.splitlines()
    start = lines.index("void k_loop_select_fusion(void** b) {")
    loop = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("for ("))
    assert lines[loop - 1] == "#pragma GCC ivdep"
    assert loop + 1 in _vectorized_lines(text)


def test_elementwise_kernels_run_as_one_flat_loop_in_memory_order():
    """XLA:CPU's threefry rounds on u32[2048,5] (cartpole_a_rng): every array of the kernel
    has the output's dimensions and layout, or is a broadcast scalar, so one loop of 10240
    runs in memory order (GCC vectorizes it; rows of 5 it did not).  Column-major and size-1
    dimensions index the same buffers; a broadcast of a row keeps the nested loops."""
    from hlofuse import bench

    source = bench.load_source(str(SAMPLES / "cpu" / "cartpole_a_rng"))
    plan = bench.make_plans(source, ["xla"])
    lowered = lower(plan[0].module, generated_dots=True)
    rounds = [k for k in lowered.kernels if k.generated and k.body.groups[0].dims == (10240,)]
    assert len(rounds) >= 2
    text = """HloModule flat
fused {
  a = f32[3,1,5]{0,1,2} parameter(0)  b = f32[3,1,5]{0,1,2} parameter(1)  s = f32[] parameter(2)
  r = f32[5] parameter(3)
  bs = f32[3,1,5]{0,1,2} broadcast(s), dimensions={}  m = f32[3,1,5]{0,1,2} multiply(a, bs)
  x = f32[3,1,5]{0,1,2} add(m, b)  br = f32[3,1,5]{0,1,2} broadcast(r), dimensions={2}
  ROOT t = (f32[3,1,5]{0,1,2}, f32[3,1,5]{0,1,2}) tuple(x, br)
}
ENTRY e {
  a = f32[3,1,5]{0,1,2} parameter(0)  b = f32[3,1,5]{0,1,2} parameter(1)  s = f32[] parameter(2)
  r = f32[5] parameter(3)
  ROOT f = (f32[3,1,5]{0,1,2}, f32[3,1,5]{0,1,2}) fusion(a, b, s, r), kind=kLoop, calls=fused
}"""
    module = hlofuse.loads(text)
    only_x = hlofuse.loads(text.replace("tuple(x, br)", "tuple(x, x)"))
    assert lower(only_x).kernels[0].body.groups[0].dims == (15,)
    assert lower(module).kernels[0].body.groups[0].dims != (15,)  # the row broadcast is indexed
    for m in (module, only_x):
        args = random_inputs([(p.shape.dims, p.shape.element_type) for p in m.entry.parameters], 2)
        runner = Runner(lower(m), CpuDevice())
        runner.set_inputs(args)
        runner.count()
        want = evaluate(m, args)
        for got, w in zip(runner.outputs(), want):
            np.testing.assert_array_equal(got, np.asarray(w))


def test_rows_of_five_random_words_are_read_through_an_opaque_stride_and_vectorized():
    """cartpole_a_rng's step reads u32[2048,5] random words at 5*i + c: GCC 12 refuses the
    group of 5 (the loop stayed scalar); the stride read through hf_s5, which it cannot fold,
    it vectorizes element by element."""
    bodies, text = _rendered("cpu/cartpole_a_rng", "xla")
    kernel = text[text.index("void k_copy_select_fusion("):]
    kernel = kernel[: kernel.index("\n}\n")]
    assert "hf_s5*i0_0" in kernel and "5*i0_0" not in kernel.replace("hf_s5*i0_0", "")
    lines = text.splitlines()
    start = lines.index("void k_copy_select_fusion(void** b) {")
    loop = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("for (")) + 1
    assert loop in _vectorized_lines(text)
    assert cpu.opaque_strides(["x = a[15*i + 1] + a[5*i] + b[4*i] + c[5*j];"], "i") == \
        (["x = a[15*i + 1] + a[hf_s5*i] + b[4*i] + c[5*j];"], [5])


def test_cartpole_a_rng_plans_match_the_reference():
    from hlofuse import bench

    source = bench.load_source(str(SAMPLES / "cpu" / "cartpole_a_rng"))
    results = bench.run_plans(bench.make_plans(source, ["unfused", "xla"]), CpuDevice(), repeat=1, warmup=0)
    assert all(r.ok for r in results)

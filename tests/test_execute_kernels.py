"""Generated kernels against the reference evaluator: every op the generator supports, on
random inputs, compiled for the CPU (and to PTX with nvcc where it is installed); the
lowering's buffer reuse; the loop plan."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import hlofuse
from hlofuse.execute import cuda
from hlofuse.execute.cpu import CpuDevice
from hlofuse.execute.emit import EmitError
from hlofuse.execute.index import Idx, delinear, floordiv, linear, mod
from hlofuse.execute.inputs import random_inputs, relative_error
from hlofuse.execute.interp import evaluate
from hlofuse.execute.lower import lower
from hlofuse.execute.runtime import Runner

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_dumps"

REDUCERS = """
add_f32 { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
max_f32 { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
add_s32 { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT r = s32[] add(a, b) }
take_new { a = f32[] parameter(0)  ROOT b = f32[] parameter(1) }
argmax {
  av = f32[] parameter(0)  ai = s32[] parameter(1)  bv = f32[] parameter(2)  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eq = pred[] compare(av, bv), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(gt, tie)
  v = f32[] select(keep, av, bv)
  i = s32[] select(keep, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
"""

#: name → entry body (parameters first); every one runs as kernels and through the evaluator
OPS = {
    "unary_f32": """
  p = f32[33,7] parameter(0)
  e = f32[33,7] exponential(p)  l = f32[33,7] log(p)  s = f32[33,7] sine(p)  c = f32[33,7] cosine(p)
  t = f32[33,7] tanh(p)  q = f32[33,7] sqrt(p)  r = f32[33,7] rsqrt(p)  g = f32[33,7] logistic(p)
  m = f32[33,7] exponential-minus-one(p)  lp = f32[33,7] log-plus-one(p)  n = f32[33,7] negate(p)
  a = f32[33,7] abs(n)  fl = f32[33,7] floor(e)  ce = f32[33,7] ceil(e)  rn = f32[33,7] round-nearest-even(e)
  ra = f32[33,7] round-nearest-afz(e)  sg = f32[33,7] sign(n)  cb = f32[33,7] cbrt(p)  at = f32[33,7] atan(p)
  ROOT out = (f32[33,7], f32[33,7], f32[33,7], f32[33,7], f32[33,7], f32[33,7], f32[33,7], f32[33,7], f32[33,7],
              f32[33,7], f32[33,7], f32[33,7], f32[33,7], f32[33,7], f32[33,7], f32[33,7], f32[33,7], f32[33,7])
      tuple(e, l, s, c, t, q, r, g, m, lp, a, fl, ce, rn, ra, sg, cb, at)""",
    "binary_f32": """
  x = f32[16,5] parameter(0)  y = f32[16,5] parameter(1)
  a = f32[16,5] add(x, y)  s = f32[16,5] subtract(x, y)  m = f32[16,5] multiply(x, y)  d = f32[16,5] divide(x, y)
  r = f32[16,5] remainder(x, y)  mx = f32[16,5] maximum(x, y)  mn = f32[16,5] minimum(x, y)
  pw = f32[16,5] power(x, y)  at = f32[16,5] atan2(x, y)
  ROOT out = (f32[16,5], f32[16,5], f32[16,5], f32[16,5], f32[16,5], f32[16,5], f32[16,5], f32[16,5], f32[16,5])
      tuple(a, s, m, d, r, mx, mn, pw, at)""",
    "binary_s32": """
  x = s32[64] parameter(0)  y = s32[64] parameter(1)
  k = s32[] constant(-2147483648)  big = s32[64] broadcast(k), dimensions={}
  x2 = s32[64] add(x, big)  ny = s32[64] negate(y)
  d = s32[64] divide(x2, ny)  r = s32[64] remainder(x, y)  pw = s32[64] power(x, y)
  sl = s32[64] shift-left(x, y)  sr = s32[64] shift-right-arithmetic(x2, y)  su = s32[64] shift-right-logical(x2, y)
  m = s32[64] multiply(x2, x2)  a = s32[64] and(x, y)  o = s32[64] or(x, y)  xo = s32[64] xor(x, y)
  mx = s32[64] maximum(x, y)  ab = s32[64] abs(x2)  pc = s32[64] popcnt(x2)  cl = s32[64] count-leading-zeros(x)  no = s32[64] not(x)
  ROOT out = (s32[64], s32[64], s32[64], s32[64], s32[64], s32[64], s32[64], s32[64], s32[64], s32[64], s32[64],
              s32[64], s32[64], s32[64], s32[64]) tuple(d, r, pw, sl, sr, su, m, a, o, xo, mx, ab, pc, cl, no)""",
    "unsigned_u32": """
  x = u32[64] parameter(0)  y = u32[64] parameter(1)
  d = u32[64] divide(x, y)  r = u32[64] remainder(x, y)  m = u32[64] multiply(x, y)  s = u32[64] shift-right-logical(x, y)
  ROOT out = (u32[64], u32[64], u32[64], u32[64]) tuple(d, r, m, s)""",
    # shift amounts 0..79: below, at and past the bit width (XLA: 0 past it), the shifts
    # written without a branch so that lanes with a variable amount vectorize
    "unsigned_shifts": """
  x8 = u8[80] parameter(0)  x16 = u16[80] parameter(1)  x32 = u32[80] parameter(2)  x64 = u64[80] parameter(3)
  y8 = u8[80] iota(), iota_dimension=0  y16 = u16[80] iota(), iota_dimension=0
  y32 = u32[80] iota(), iota_dimension=0  y64 = u64[80] iota(), iota_dimension=0
  l8 = u8[80] shift-left(x8, y8)  r8 = u8[80] shift-right-logical(x8, y8)
  l16 = u16[80] shift-left(x16, y16)  r16 = u16[80] shift-right-logical(x16, y16)
  l32 = u32[80] shift-left(x32, y32)  r32 = u32[80] shift-right-logical(x32, y32)
  l64 = u64[80] shift-left(x64, y64)  r64 = u64[80] shift-right-logical(x64, y64)
  ROOT out = (u8[80], u8[80], u16[80], u16[80], u32[80], u32[80], u64[80], u64[80])
      tuple(l8, r8, l16, r16, l32, r32, l64, r64)""",
    "compare_select_clamp_convert": """
  x = f32[40] parameter(0)  y = f32[40] parameter(1)  i = s32[40] parameter(2)
  lt = pred[40] compare(x, y), direction=LT  to = pred[40] compare(x, y), direction=GE, type=TOTALORDER
  sel = f32[40] select(lt, x, y)  lo = f32[] constant(0.05)  hi = f32[] constant(0.15)
  cl = f32[40] clamp(lo, x, hi)  big = f32[] constant(1e10)  bb = f32[40] broadcast(big), dimensions={}
  scaled = f32[40] multiply(x, bb)  ci = s32[40] convert(scaled)  cf = f32[40] convert(i)  cp = pred[40] convert(i)
  cu = u8[40] convert(x)  bc = u32[40] bitcast-convert(x)  no = pred[40] not(lt)  fin = pred[40] is-finite(x)
  ROOT out = (pred[40], f32[40], f32[40], s32[40], f32[40], pred[40], u8[40], u32[40], pred[40], pred[40])
      tuple(to, sel, cl, ci, cf, cp, cu, bc, no, fin)""",
    "shapes": """
  p = f32[6,4,5]{2,1,0} parameter(0)  v = f32[5] parameter(1)
  t = f32[5,6,4]{2,1,0} transpose(p), dimensions={2,0,1}
  r = f32[30,4]{1,0} reshape(t)
  b = f32[4,6,5]{2,1,0} broadcast(v), dimensions={2}
  sl = f32[3,2,3]{2,1,0} slice(p), slice={[1:6:2], [0:4:2], [0:5:2]}
  rv = f32[6,4,5]{2,1,0} reverse(p), dimensions={0,2}
  io = s32[4,3]{1,0} iota(), iota_dimension=1
  bt = f32[20,6]{0,1} bitcast(p)
  cb = f32[20,6]{1,0} copy(bt)
  ROOT out = (f32[30,4], f32[4,6,5], f32[3,2,3], f32[6,4,5], s32[4,3], f32[20,6]) tuple(r, b, sl, rv, io, cb)""",
    "layouts": """
  p = f32[8,3]{0,1} parameter(0)
  c = f32[8,3]{1,0} copy(p)
  t = f32[3,8]{0,1} transpose(c), dimensions={1,0}
  ROOT a = f32[3,8]{1,0} add(t, t)""",
    "dynamic_slices": """
  p = f32[10,6] parameter(0)  u = f32[3,6] parameter(1)  i = s32[] parameter(2)  j = s32[] parameter(3)
  big = s32[] constant(100)  k = s32[] add(i, big)
  ds = f32[4,3] dynamic-slice(p, i, j), dynamic_slice_sizes={4,3}
  clamped = f32[4,3] dynamic-slice(p, k, k), dynamic_slice_sizes={4,3}
  dus = f32[10,6] dynamic-update-slice(p, u, i, j)
  ROOT out = (f32[4,3], f32[4,3], f32[10,6]) tuple(ds, clamped, dus)""",
    "concatenate_pad": """
  a = f32[5,2] parameter(0)  b = f32[5,3] parameter(1)
  c = f32[5,5] concatenate(a, b), dimensions={1}
  z = f32[] constant(-1)
  pd = f32[10,11] pad(c, z), padding=1_0_1x-1_3_1
  ROOT out = (f32[5,5], f32[10,11]) tuple(c, pd)""",
    "reductions": """
  p = f32[12,50] parameter(0)  q = s32[12,50] parameter(1)
  z = f32[] constant(0)  ninf = f32[] constant(-inf)  zi = s32[] constant(0)
  rs = f32[12] reduce(p, z), dimensions={1}, to_apply=add_f32
  rm = f32[50] reduce(p, ninf), dimensions={0}, to_apply=max_f32
  ri = s32[] reduce(q, zi), dimensions={0,1}, to_apply=add_s32
  io = s32[12,50] iota(), iota_dimension=1
  am = (f32[12], s32[12]) reduce(p, io, ninf, zi), dimensions={1}, to_apply=argmax
  av = f32[12] get-tuple-element(am), index=0  ai = s32[12] get-tuple-element(am), index=1
  shift = f32[] constant(1.5)
  rs1 = f32[12] reduce(p, shift), dimensions={1}, to_apply=add_f32
  ROOT out = (f32[12], f32[50], s32[], f32[12], s32[12], f32[12]) tuple(rs, rm, ri, av, ai, rs1)""",
    "reduce_window": """
  p = f32[8,20] parameter(0)  z = f32[] constant(0)  ninf = f32[] constant(-inf)
  cs = f32[8,20] reduce-window(p, z), window={size=1x6 pad=0_0x5_0}, to_apply=add_f32
  mp = f32[4,10] reduce-window(p, ninf), window={size=2x4 stride=2x2 pad=0_0x1_1}, to_apply=max_f32
  ROOT out = (f32[8,20], f32[4,10]) tuple(cs, mp)""",
    "dot": """
  a = f32[3,8,5] parameter(0)  b = f32[3,5,4] parameter(1)
  ROOT d = f32[3,8,4] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}""",
    "gather": """
  t = f32[50,8] parameter(0)  ids = s32[6,3] parameter(1)
  ROOT g = f32[6,3,8] gather(t, ids), offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, slice_sizes={1,8}""",
    "scatter_add": """
  o = f32[10,4] parameter(0)  ids = s32[30] parameter(1)  u = f32[30,4] parameter(2)
  ROOT s = f32[10,4] scatter(o, ids, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32""",
    "scatter_overwrite": """
  o = f32[10,4] parameter(0)  ids = s32[3] parameter(1)  u = f32[3,4] parameter(2)
  e = f32[3,4] exponential(u)
  ROOT s = f32[10,4] scatter(o, ids, e), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=true, to_apply=take_new""",
    "threefry": """
  k0 = u32[] parameter(0)  k1 = u32[] parameter(1)  x0 = u32[128] parameter(2)  x1 = u32[128] parameter(3)
  b0 = u32[128] broadcast(k0), dimensions={}  b1 = u32[128] broadcast(k1), dimensions={}
  ROOT t = (u32[128], u32[128]) custom-call(b0, b1, x0, x1), custom_call_target="cu_threefry2x32_ffi", api_version=API_VERSION_TYPED_FFI""",
    "map_and_constants": """
  p = f32[4,3] parameter(0)
  c = f32[4,3] constant({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, -inf}})
  m = f32[4,3] map(p, c), dimensions={0,1}, to_apply=max_f32
  ROOT a = f32[4,3] add(m, c)""",
    "while_dus_and_conditional": """
  buf = f32[16,8] parameter(0)  rows = f32[16,8] parameter(1)  sel = s32[] parameter(2)
  zero = s32[] constant(0)
  init = (s32[], f32[16,8], f32[16,8]) tuple(zero, buf, rows)
  w = (s32[], f32[16,8], f32[16,8]) while(init), condition=loop_cond, body=loop_body
  r = f32[16,8] get-tuple-element(w), index=1
  c = f32[16,8] conditional(sel, r, r), branch_computations={branch_tanh, branch_neg}
  ROOT out = (f32[16,8], f32[16,8]) tuple(r, c)""",
}

EXTRA_COMPUTATIONS = """
loop_cond {
  s = (s32[], f32[16,8], f32[16,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0  n = s32[] constant(16)
  ROOT lt = pred[] compare(i, n), direction=LT
}
loop_body {
  s = (s32[], f32[16,8], f32[16,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0  b = f32[16,8] get-tuple-element(s), index=1
  rows = f32[16,8] get-tuple-element(s), index=2  z = s32[] constant(0)
  row = f32[1,8] dynamic-slice(rows, i, z), dynamic_slice_sizes={1,8}
  t = f32[1,8] tanh(row)
  nb = f32[16,8] dynamic-update-slice(b, t, i, z)
  one = s32[] constant(1)  ni = s32[] add(i, one)
  ROOT r = (s32[], f32[16,8], f32[16,8]) tuple(ni, nb, rows)
}
branch_tanh { p = f32[16,8] parameter(0)  ROOT t = f32[16,8] tanh(p) }
branch_neg { p = f32[16,8] parameter(0)  ROOT n = f32[16,8] negate(p) }
"""


def module_for(name: str):
    return hlofuse.loads(f"HloModule {name}\n{REDUCERS}\n{EXTRA_COMPUTATIONS}\nENTRY main {{{OPS[name]}\n}}\n")


def leaves(value):
    if isinstance(value, tuple):
        out = []
        for v in value:
            out += leaves(v)
        return out
    return [np.asarray(value)]


def run_cpu(module, args):
    runner = Runner(lower(module), CpuDevice())
    runner.set_inputs(args)
    counts = runner.count()
    return runner.outputs(), counts


def inputs_for(module, seed=1):
    return random_inputs([(p.shape.dims, p.shape.element_type) for p in module.entry.parameters], seed)


@pytest.mark.parametrize("name", sorted(OPS))
def test_cpu_kernels_match_the_reference(name):
    module = module_for(name)
    args = inputs_for(module)
    want = leaves(evaluate(module, args))
    got, counts = run_cpu(module, args)
    assert counts.launches >= 1
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        # the CPU kernels compute as the evaluator does; only summation order differs
        assert relative_error(g, w) <= 1e-5, f"output {k}"


def test_unfused_and_fused_cartpole_kernels_agree():
    """Every plan computes each value with the same single-precision functions: they differ
    from the reference (double-precision sine and cosine, rounded) by the same rounding, a
    few 1e-7, whatever the fusion."""
    from hlofuse.bench import load_source, make_plans, run_plans

    source = load_source(str(SAMPLES / "gpu-current-h100" / "cartpole_b_concat"))
    results = run_plans(make_plans(source, ["unfused", "xla", "loop"]), CpuDevice(), repeat=1, warmup=0)
    errors = [r.max_rel_error for r in results]
    assert len(set(errors)) == 1 and errors[0] <= 1e-6
    unfused, xla, loop = results
    # 100 iterations: XLA's body is a concatenate fusion, the counter and a copy per step
    assert xla.launches == 302 and unfused.launches > 15 * xla.launches
    assert loop.launches == 3  # the entry's two copies into the loop state, then the loop kernel


def test_in_place_updates_and_state_written_directly():
    module = module_for("while_dus_and_conditional")
    lowered = lower(module)
    dus = [k for k in lowered.kernels if "nb" in k.label]
    assert dus and dus[0].body.in_place, "the row update writes into the loop state"
    runner = Runner(lowered, CpuDevice())
    runner.set_inputs(inputs_for(module))
    # 16 iterations x (slice+tanh+dus+counter kernels) + the conditional's kernel and copy; no
    # end-of-iteration copies, 2 copies into the loop state at entry
    assert runner.count().copies == 2 + 1


def test_generator_names_an_op_it_cannot_emit():
    module = hlofuse.loads("""
HloModule m
cmp { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT lt = pred[] compare(a, b), direction=LT }
fused { p = f32[8] parameter(0)  e = f32[8] exponential(p)  ROOT s = f32[8] sort(e), dimensions={0}, to_apply=cmp }
ENTRY e { p = f32[8] parameter(0)  ROOT f = f32[8] fusion(p), kind=kLoop, calls=fused }""")
    with pytest.raises(EmitError, match=r"kernel main/f|kernel e/f|sort \(s\)"):
        lower(module)


# ------------------------------------------------------------------------------------------
# The loop plan
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["cartpole_b_concat_vecdone", "cartpole_c_separate", "cartpole_d_unroll10"])
def test_loop_plan_runs_the_cartpole_loop_as_one_kernel(variant):
    from hlofuse.bench import load_source

    module = load_source(str(SAMPLES / "gpu-legacy-rtx2080ti" / variant)).after
    lowered = lower(module, loop_kernels=True)
    assert [k.kind for k in lowered.kernels].count("loop") == 1 and not lowered.notes
    args = inputs_for(module, 5)
    got, counts = run_cpu(module, args)
    runner = Runner(lowered, CpuDevice())
    runner.set_inputs(args)
    loop_counts = runner.count()
    assert all(relative_error(a, b) == 0 for a, b in zip(runner.outputs(), got))
    assert loop_counts.launches < counts.launches


def test_loop_plan_explains_why_not():
    from hlofuse.bench import load_source

    module = load_source(str(SAMPLES / "gpu-current-h100" / "rnn_scan")).after
    lowered = lower(module, loop_kernels=True)
    assert not any(k.kind == "loop" for k in lowered.kernels)
    assert any("stays a host loop" in n for n in lowered.notes)


RNG_LOOP = """HloModule rng_loop

add_u32 { a = u32[] parameter(0)  b = u32[] parameter(1)  ROOT r = u32[] add(a, b) }

key_cond {
  s = (s32[], u32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0  n = s32[] constant(2)
  ROOT lt = pred[] compare(i, n), direction=LT
}
key_body {
  s = (s32[], u32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0  k = u32[2] get-tuple-element(s), index=1
  a = u32[] constant(1664525)  ab = u32[2] broadcast(a), dimensions={}
  c = u32[] constant(1013904223)  cb = u32[2] broadcast(c), dimensions={}
  m = u32[2] multiply(k, ab)  mc = u32[2] add(m, cb)  rk = u32[2] reverse(k), dimensions={0}
  nk = u32[2] xor(mc, rk)
  one = s32[] constant(1)  ni = s32[] add(i, one)
  ROOT t = (s32[], u32[2]) tuple(ni, nk)
}
round_cond {
  s = (s32[], u32[20,3], u32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
round_body {
  s = (s32[], u32[20,3], u32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0  w = u32[20,3] get-tuple-element(s), index=1
  r = u32[4] get-tuple-element(s), index=2
  r0 = u32[1] slice(r), slice={[0:1]}  r0s = u32[] reshape(r0)  rb = u32[20,3] broadcast(r0s), dimensions={}
  k32 = u32[] constant(32)  inv = u32[] subtract(k32, r0s)  ib = u32[20,3] broadcast(inv), dimensions={}
  l = u32[20,3] shift-left(w, rb)  rr = u32[20,3] shift-right-logical(w, ib)  rot = u32[20,3] or(l, rr)
  io = u32[20,3] iota(), iota_dimension=1  ci = u32[] convert(i)  cib = u32[20,3] broadcast(ci), dimensions={}
  mix = u32[20,3] add(io, cib)  nw = u32[20,3] xor(rot, mix)
  r1 = u32[3] slice(r), slice={[1:4]}  nr = u32[4] concatenate(r1, r0), dimensions={0}
  one = s32[] constant(1)  ni = s32[] add(i, one)
  ROOT t = (s32[], u32[20,3], u32[4]) tuple(ni, nw, nr)
}
cond {
  s = (s32[], u32[2], u32[20,3], f32[20,2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0  n = s32[] constant(7)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], u32[2], u32[20,3], f32[20,2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0  key = u32[2] get-tuple-element(s), index=1
  w = u32[20,3] get-tuple-element(s), index=2  x = f32[20,2] get-tuple-element(s), index=3
  z = s32[] constant(0)
  kinit = (s32[], u32[2]) tuple(z, key)
  kw = (s32[], u32[2]) while(kinit), condition=key_cond, body=key_body
  split = u32[2] get-tuple-element(kw), index=1
  KEY_UPDATE
  k0 = u32[1] slice(nk), slice={[1:2]}  k0s = u32[] reshape(k0)  kb = u32[20,3] broadcast(k0s), dimensions={}
  wk = u32[20,3] add(w, kb)
  sched = u32[4] constant({13, 0, 40, 6})
  winit = (s32[], u32[20,3], u32[4]) tuple(z, wk, sched)
  ww = (s32[], u32[20,3], u32[4]) while(winit), condition=round_cond, body=round_body
  nw = u32[20,3] get-tuple-element(ww), index=1
  bits = u32[20,2] slice(nw), slice={[0:20], [1:3]}
  nine = u32[] constant(9)  nb = u32[20,2] broadcast(nine), dimensions={}
  sh = u32[20,2] shift-right-logical(bits, nb)
  onef = u32[] constant(1065353216)  ob = u32[20,2] broadcast(onef), dimensions={}
  fb = u32[20,2] or(sh, ob)  f = f32[20,2] bitcast-convert(fb)
  fo = f32[] constant(1)  fob = f32[20,2] broadcast(fo), dimensions={}
  u = f32[20,2] subtract(f, fob)  nx = f32[20,2] add(x, u)
  one = s32[] constant(1)  ni = s32[] add(i, one)
  ROOT t = (s32[], u32[2], u32[20,3], f32[20,2]) tuple(ni, nk, nw, nx)
}
ENTRY main {
  i0 = s32[] constant(0)  key = u32[2] parameter(0)  w = u32[20,3] parameter(1)  x = f32[20,2] parameter(2)
  init = (s32[], u32[2], u32[20,3], f32[20,2]) tuple(i0, key, w, x)
  l = (s32[], u32[2], u32[20,3], f32[20,2]) while(init), condition=cond, body=body
  a = u32[2] get-tuple-element(l), index=1  b = u32[20,3] get-tuple-element(l), index=2
  c = f32[20,2] get-tuple-element(l), index=3
  ROOT out = (u32[2], u32[20,3], f32[20,2]) tuple(a, b, c)
}
"""
#: the key for the next step: from the key alone (shared), or mixed with the words (per element)
SHARED_KEY = "nk = u32[2] add(split, key)"
KEY_FROM_WORDS = ("zu = u32[] constant(0)  sum = u32[] reduce(w, zu), dimensions={0,1}, to_apply=add_u32\n"
                  "  sb = u32[2] broadcast(sum), dimensions={}  nk = u32[2] add(split, sb)")


@pytest.mark.parametrize("tile", [1, 8, 64])
def test_loop_plan_keeps_shared_state_and_nested_loops_in_the_kernel(tile):
    """An RNG key (u32[2]) beside per-element words and floats, a loop over the key alone and
    a loop of rounds over the words with a shared schedule inside the step: one kernel whose
    every output, integer bits and floats, equals the reference evaluator's exactly, whether
    a CPU call takes one element, a partial tile (20 = 8 + 8 + 4) or all of them.  The rotation
    schedule holds 0 and 40: shifts by the bit width and past it (0, as XLA defines them)
    through the loop kernels' branch-free shifts."""
    module = hlofuse.loads(RNG_LOOP.replace("KEY_UPDATE", SHARED_KEY))
    lowered = lower(module, loop_kernels=True, loop_tile=tile)
    assert [k.kind for k in lowered.kernels].count("loop") == 1 and not lowered.notes
    assert not any(k.kind == "while" for k in lowered.kernels)
    args = inputs_for(module, 3)
    want = leaves(evaluate(module, args))
    runner = Runner(lowered, CpuDevice())
    runner.set_inputs(args)
    runner.run()
    got = runner.outputs()
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and np.array_equal(g, w), f"output {k}"
    assert not np.array_equal(got[0], args[0])  # the key moved on


def test_loop_plan_refuses_a_key_computed_from_per_element_state():
    module = hlofuse.loads(RNG_LOOP.replace("KEY_UPDATE", KEY_FROM_WORDS))
    lowered = lower(module, loop_kernels=True, loop_tile=8)
    # the step stays on the host; the rounds over the words inside it are a loop kernel
    assert [k.label for k in lowered.kernels if k.kind == "loop"] == ["body/ww (loop kernel)"]
    # the sum reads the words of every element: refused where it is first read, inside the
    # lanes (at another element's index) or outside them (from per-element state)
    assert any(n.startswith("l: stays a host loop") and "state element 2 (u32[20,3])" in n for n in lowered.notes)
    args = inputs_for(module, 3)
    got, _ = run_cpu(module, args)
    for g, w in zip(got, leaves(evaluate(module, args))):
        assert np.array_equal(g, w)


@pytest.mark.parametrize("folder", ["cpu/cartpole_a_rng", "gpu-current-h100/cartpole_a_rng_customcall",
                                    "gpu-legacy-rtx2080ti/cartpole_a_rng"])
def test_loop_plan_runs_the_rng_cartpole_as_one_kernel(folder):
    """The paper's cart-pole with JAX's RNG: the scan's key, the key split's threefry loop and
    the uniform draw's threefry rounds all inside the one loop kernel."""
    from hlofuse.bench import load_source

    module = load_source(str(SAMPLES / folder)).after
    lowered = lower(module, loop_kernels=True, loop_tile=64)
    assert [k.kind for k in lowered.kernels].count("loop") == 1 and not lowered.notes
    args = inputs_for(module, 5)
    got, counts = run_cpu(module, args)
    runner = Runner(lowered, CpuDevice())
    runner.set_inputs(args)
    assert runner.count().launches < counts.launches
    want = leaves(evaluate(module, args))
    for g, w, x in zip(runner.outputs(), got, want):
        assert relative_error(g, w) == 0  # the same single-precision code as the xla plan
        assert relative_error(g, x) <= 1e-4


def test_loop_plan_carries_the_rng_cartpole_key_exactly():
    """The scan's key after 100 steps (each a threefry split inside the kernel), made an
    output of XLA:CPU's module: every bit equals the reference's."""
    text = next((SAMPLES / "cpu" / "cartpole_a_rng").glob("*cpu_after_optimizations.txt")).read_text()
    root = "  ROOT %while.52 = f32[2048,4]{1,0} get-tuple-element(%while.50), index=1"
    text = text.replace(root, root.replace("ROOT ", "") + "\n  %key.out = u32[2]{0} get-tuple-element(%while.50), "
                        "index=2\n  ROOT %out = (f32[2048,4]{1,0}, u32[2]{0}) tuple(%while.52, %key.out)")
    text = text.replace("key.1: u32[2]) -> f32[2048,4] {", "key.1: u32[2]) -> (f32[2048,4], u32[2]) {")
    text = text.replace("->f32[2048,4]{1,0}}", "->(f32[2048,4]{1,0}, u32[2]{0})}")
    module = hlofuse.loads(text)
    lowered = lower(module, loop_kernels=True, loop_tile=64)
    assert [k.kind for k in lowered.kernels].count("loop") == 1 and not lowered.notes
    args = inputs_for(module, 5)
    want = leaves(evaluate(module, args))
    runner = Runner(lowered, CpuDevice())
    runner.set_inputs(args)
    runner.run()
    state, key = runner.outputs()
    assert key.dtype == np.uint32 and np.array_equal(key, want[1]) and not np.array_equal(key, args[1])
    assert relative_error(state, want[0]) <= 1e-4

# ------------------------------------------------------------------------------------------
# CUDA: every generated kernel compiles (nvcc, no GPU needed)
# ------------------------------------------------------------------------------------------

needs_nvcc = pytest.mark.skipif(cuda.nvcc() is None, reason="nvcc is not installed: CUDA kernels not compiled")


@needs_nvcc
def test_every_op_kernel_compiles_to_ptx():
    bodies = []
    for name in sorted(OPS):
        bodies += [k.body for k in lower(module_for(name)).kernels if k.generated]
    _rename_apart(bodies)
    ptx = cuda.compile_ptx(cuda.render(bodies))
    for body in bodies:
        for kernel in cuda.kernel_names(body):
            assert f".entry {kernel}(" in ptx


@needs_nvcc
@pytest.mark.parametrize("folder", ["gpu-current-h100/cartpole_a_rng_customcall",
                                    "gpu-legacy-rtx2080ti/cartpole_b_concat_vecdone", "cpu/segment_sum",
                                    "gpu-current-h100/layer_norm"])
def test_sample_plans_compile_to_ptx(folder):
    from hlofuse.bench import load_source, make_plans

    bodies = []
    for plan in make_plans(load_source(str(SAMPLES / folder)), ["unfused", "xla", "loop"]):
        if plan.skipped:  # `loop` where no loop runs as one kernel
            assert plan.name == "loop" and plan.module is None
            continue
        lowered = lower(plan.module, loop_kernels=plan.loop)
        bodies += [k.body for k in lowered.kernels if k.generated]
    _rename_apart(bodies)
    assert ".entry" in cuda.compile_ptx(cuda.render(bodies))


def test_long_reductions_are_split_across_lanes_and_the_cpu_runs_them_as_one_lane():
    """A reduction of at least 32 elements gives each output a warp on CUDA (partial sums
    exchanged by shuffles, the init value entering once, in lane 0); the CPU runs the same
    code as one lane and still matches the reference."""
    module = module_for("reductions")
    lowered = lower(module)
    split = [g for k in lowered.kernels if k.generated for g in k.body.groups if g.lanes > 1]
    assert split and all(g.lanes == 32 for g in split)
    text = "\n".join(line for g in split for line in g.body)
    assert "+= hf_lanes" in text and "HF_SHFL_XOR" in text and "HF_SYNC_LANES();" in text
    source = cuda.render([k.body for k in lowered.kernels if k.generated])
    assert "const i64 e = t / 32; const i64 hf_lane = t % 32;" in source
    args = inputs_for(module)
    want = leaves(evaluate(module, args))
    runner = Runner(lowered, CpuDevice())
    runner.set_inputs(args)
    runner.count()
    for g, w in zip(runner.outputs(), want):
        assert relative_error(g, w) <= 1e-5


def _rename_apart(bodies):
    """Plans of one module share kernel names; one file needs them apart."""
    for i, body in enumerate(bodies):
        old, new = body.name, f"{body.name}_{i}"
        body.functions = [f.replace(old, new) for f in body.functions]
        for group in body.groups:
            group.body = [line.replace(old + "_combine", new + "_combine") for line in group.body]
        body.name = new


def test_cuda_device_degrades_cleanly_without_cupy():
    if cuda.available():
        pytest.skip("a CUDA device is here")
    from hlofuse.errors import BackendUnavailable

    with pytest.raises(BackendUnavailable, match="--device cpu"):
        cuda.CudaDevice()


# ------------------------------------------------------------------------------------------
# Library kernels on a GPU: the reference evaluator bound to another array library
# ------------------------------------------------------------------------------------------


def test_bound_evaluator_imports_its_own_copies():
    from hlofuse.execute import device_eval, interp

    bound = device_eval.bind(np)
    assert bound is not interp and bound.HANDLERS is not interp.HANDLERS
    assert bound.arrays.__name__ == "hlofuse.execute.arrays@numpy"
    assert bound.numeric.__name__ == "hlofuse.execute.numeric@numpy"
    assert bound.threefry2x32.__module__ == "hlofuse.execute.threefry@numpy"
    assert device_eval.bind(np) is bound  # built once per library
    # the copies' `np` is the namespace, answering with the library first
    assert isinstance(bound.np, device_eval.ArrayNamespace) and bound.np.add(2, 3) == 5


def test_device_ufunc_falls_back_where_the_library_lacks_a_method():
    from hlofuse.execute import device_eval

    class Partial:  # CuPy's maximum: callable, without reduce, accumulate or at
        __name__ = "cupy_maximum"

        def __call__(self, *args, **kwargs):
            return np.maximum(*args, **kwargs)

        def reduce(self, *args, **kwargs):
            raise NotImplementedError("`cupy_maximum.reduce` is not supported yet")

        accumulate = at = reduce

    ufunc = device_eval.DeviceUfunc(np, Partial(), np.maximum)
    x = np.random.default_rng(0).normal(size=(5, 7)).astype(np.float32)
    assert np.array_equal(ufunc(x, 0.5), np.maximum(x, 0.5))
    reduced = ufunc.reduce(x, axis=1, dtype=np.float32)
    assert reduced.dtype == np.float32 and np.array_equal(reduced, np.maximum.reduce(x, axis=1))
    assert np.array_equal(ufunc.accumulate(x, axis=1), np.maximum.accumulate(x, axis=1))
    target = np.zeros(4)
    ufunc.at(target, np.array([1, 1, 3]), np.array([2.0, 5.0, -1.0]))
    assert target.tolist() == [0.0, 5.0, 0.0, 0.0]


@pytest.mark.parametrize("folder", ["gpu-current-h100/mlp", "gpu-current-h100/attention",
                                    "gpu-current-h100/rnn_scan", "gpu-current-h100/argsort_rows",
                                    "gpu-legacy-rtx2080ti/conv2d_bias_relu", "gpu-legacy-rtx2080ti/top_k"])
def test_library_kernels_through_the_bound_evaluator_equal_the_host_path(folder):
    """The GPU's library path (execute/device_eval.py) bound to NumPy must give the host path's
    bits exactly: the same evaluator code, another array namespace."""
    from hlofuse.bench import load_source, make_plans, signature
    from hlofuse.execute import device_eval

    class BoundLibraryDevice(CpuDevice):
        def library(self, lowered, kernel, handles):
            return device_eval.library_call(np, lowered, kernel, handles)

    plan = make_plans(load_source(str(SAMPLES / folder)), ["xla"])[0]
    lowered = lower(plan.module)
    assert any(not k.generated for k in lowered.kernels)
    args = random_inputs(signature(plan.module), 3)
    outputs = []
    for device in (CpuDevice(), BoundLibraryDevice()):
        runner = Runner(lowered, device)
        runner.set_inputs(args)
        runner.count()
        outputs.append(runner.outputs())
    assert len(outputs[0]) == len(outputs[1]) > 0
    for host, bound in zip(*outputs):
        assert np.array_equal(host, bound, equal_nan=True)


@pytest.mark.gpu
@pytest.mark.parametrize("folder", ["gpu-current-h100/mlp", "gpu-current-h100/attention", "gpu-current-h100/softmax",
                                    "gpu-current-h100/layer_norm", "gpu-current-h100/rnn_scan",
                                    "gpu-current-h100/argsort_rows", "gpu-current-h100/top_k",
                                    "gpu-legacy-rtx2080ti/conv2d_bias_relu"])
def test_library_kernels_run_on_the_gpu(folder):
    if not cuda.available():
        pytest.skip("no CUDA device and CuPy")
    from hlofuse.bench import load_source, make_plans, run_plans

    plans = make_plans(load_source(str(SAMPLES / folder)), ["unfused", "xla"])
    results = run_plans(plans, cuda.CudaDevice(), repeat=1)
    for result in results:
        assert result.ok, (result.name, result.error, result.max_rel_error)
        assert not [n for n in result.notes if "ran on the host" in n], result.notes


@pytest.mark.gpu
def test_cuda_kernels_match_the_reference_on_a_gpu():
    if not cuda.available():
        pytest.skip("no CUDA device and CuPy")
    device = cuda.CudaDevice()
    for name in sorted(OPS):
        module = module_for(name)
        args = inputs_for(module)
        want = leaves(evaluate(module, args))
        runner = Runner(lower(module), device)
        runner.set_inputs(args)
        runner.count()
        for g, w in zip(runner.outputs(), want):
            assert relative_error(g, w) <= 1e-4, name


# ------------------------------------------------------------------------------------------
# Index algebra
# ------------------------------------------------------------------------------------------


def test_index_algebra_folds_what_the_ranges_allow():
    ranges = {"i": (0, 2047), "j": (0, 3)}
    made = []

    def bind(expr, lo, hi):
        made.append(expr)
        ranges[f"t{len(made)}"] = (lo, hi)
        return f"t{len(made)}"

    x = Idx.of("i") * 4 + Idx.of("j")
    assert floordiv(x, 4, ranges, bind).is_var("i")
    assert mod(x, 4, ranges, bind).is_var("j")
    assert not made
    assert delinear(linear([Idx.of("i"), Idx.of("j")], (2048, 4), (1, 0)), (2048, 4), (1, 0), ranges, bind) == \
        [Idx.of("i"), Idx.of("j")]
    y = Idx.of("i") + 1  # not provably inside one block of 4
    assert floordiv(y, 4, ranges, bind).is_var("t1") and ranges["t1"] == (0, 512)


@needs_nvcc
@pytest.mark.parametrize("folder", ["gpu-current-h100/softmax", "gpu-current-h100/cross_entropy",
                                    "gpu-current-h100/layer_norm"])
def test_triton_normalization_fusions_are_one_kernel_a_warp_per_row_and_compile_to_ptx(folder):
    """XLA:GPU's Triton softmax fusions run as one generated kernel (not op by op through the
    evaluator): its rows' reductions hoisted and shared by a warp's lanes, the lanes then
    taking the row's elements; the kernel compiles to PTX, and on the CPU the plan matches
    the reference."""
    from hlofuse.bench import load_source, make_plans, run_plans

    source = load_source(str(SAMPLES / folder))
    plan = make_plans(source, ["xla"])[0]
    lowered = lower(plan.module)
    rows = [k for k in lowered.kernels if k.generated and any(g.hoisted for g in k.body.groups)]
    assert rows, "a kernel with per-row reductions"
    text = cuda.render([k.body for k in lowered.kernels if k.generated])
    assert "for (i64 hf_j = hf_lane;" in text and "HF_SHFL_XOR" in text
    ptx = cuda.compile_ptx(text)
    assert all(f".entry {k.name}(" in ptx for k in rows)
    for k in rows:
        group = next(g for g in k.body.groups if g.hoisted)
        assert cuda.grid(k.body, 0) * cuda.BLOCK >= group.rows * 32
    results = run_plans(make_plans(source, ["unfused", "xla"]), CpuDevice(), repeat=1, warmup=0)
    assert all(r.ok for r in results)


@needs_nvcc
def test_column_reductions_are_tiled_on_cuda_and_swept_in_order_on_the_cpu():
    """Batch norm's means over [16,16,16] of f32[16,16,16,64] (XLA:GPU's input fusions): on
    CUDA a block takes 32 adjacent outputs by 8 slices of the 4096 rows, the slices meeting in
    shared memory (2 blocks of 256 threads, where a thread per output made 64 threads); on
    the CPU one sweep of the input into 64 partial sums; both compile, the CPU's matches."""
    from hlofuse.bench import load_source, make_plans, run_plans
    from hlofuse.execute.kernel import COLUMN_SLICES, COLUMN_TILE

    source = load_source(str(SAMPLES / "gpu-current-h100" / "batch_norm"))
    lowered = lower(make_plans(source, ["xla"])[0].module)
    columns = [k for k in lowered.kernels if k.generated and k.body.groups[0].cuda_body is not None]
    assert len(columns) == 2
    for kernel in columns:
        group = kernel.body.groups[0]
        assert group.elements == 64 and group.cpu_body is not None
        assert cuda.grid(kernel.body, 0) == 2 and COLUMN_TILE * COLUMN_SLICES == cuda.BLOCK
    text = cuda.render([k.body for k in lowered.kernels if k.generated])
    assert "__syncthreads();" in text and "__shared__ f32" in text
    ptx = cuda.compile_ptx(text)
    assert all(f".entry {k.name}(" in ptx for k in columns)
    assert all(r.ok for r in run_plans(make_plans(source, ["unfused", "xla"]), CpuDevice(), repeat=1, warmup=0))


needs_cxx = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                               reason="no C++ compiler: the CUDA emulation compiles the kernels as C++")


@needs_cxx
@pytest.mark.parametrize("folder, plans", [
    ("gpu-current-h100/cartpole_c_separate", ["unfused", "xla", "loop"]),
    ("gpu-legacy-rtx2080ti/cartpole_b_concat_vecdone", ["unfused", "xla", "loop"]),
    ("gpu-legacy-rtx2080ti/cartpole_a_rng_customcall", ["xla"]),
    ("gpu-current-h100/batch_norm", ["xla"]),  # the column reductions' tiles in shared memory
    ("gpu-current-h100/dus_fori_loop", ["xla"]),
    ("gpu-current-h100/cumsum", ["xla"]),
    # lanes exchanging partial results by shuffles: a warp per row (Triton's normalization
    # fusions as one kernel), a warp per output (row reductions)
    ("gpu-current-h100/softmax", ["xla"]),
    ("gpu-current-h100/layer_norm", ["xla"]),
    ("gpu-current-h100/cross_entropy", ["xla"]),
    ("gpu-current-h100/segment_sum", ["xla"]),
])
def test_the_cuda_kernels_text_runs_on_the_cpu_and_matches_the_reference(folder, plans):
    """Without a GPU: the CUDA source execute/cuda.py renders (thread mapping, CUDA-only
    variants, CUDA's single-precision functions) compiled as C++ against an emulation of
    CUDA's names (a warp's lanes as host threads meeting at each shuffle, or the grid's
    threads one after another), every plan checked against the reference."""
    from hlofuse.bench import load_source, make_plans, run_plans
    from hlofuse.execute.cuda_emulate import EmulatedCudaDevice

    results = run_plans(make_plans(load_source(str(SAMPLES / folder)), plans), EmulatedCudaDevice(), repeat=1,
                        warmup=0)
    for r in results:
        assert r.ok, f"{r.name}: {r.error} (error {r.max_rel_error})"

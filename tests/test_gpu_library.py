"""The GPU's library calls without a GPU: GEMM fusions cut into generated prologues and
epilogues around one library dot (execute/lower.py), the library-call mapping
(execute/gpu_library.py) run with NumPy standing in for CuPy and counted
(execute/array_census.py), the generated parts compiled with nvcc and run in the CUDA
emulation, every plan checked against the reference evaluator."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from hlofuse.bench import load_source, make_plans, run_plans
from hlofuse.execute import cuda
from hlofuse.execute.array_census import Census
from hlofuse.execute.lower import lower

SAMPLES = Path(__file__).resolve().parent.parent / "sample_dumps"
needs_cxx = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                               reason="no C++ compiler: the CUDA emulation compiles the kernels as C++")


def xla_plan(folder: str):
    return make_plans(load_source(str(SAMPLES / folder)), ["xla"])[0].module


def test_gemm_fusions_are_cut_around_one_library_dot(monkeypatch):
    from hlofuse.execute import lower as lowering

    monkeypatch.setattr(lowering, "SMALL_DOT_MACS", 0)  # every dot a library call
    lowered = lower(xla_plan("gpu-current-h100/mlp"), split_gemm_fusions=True)
    kernels = {k.label: k for k in lowered.kernels}
    # gemm_fusion_dot: a dot of two (bitcast) parameters, its result the fusion's
    assert kernels["main.3/gemm_fusion_dot (dot)"].instr.opcode == "dot"
    assert not [label for label in kernels if label.startswith("main.3/gemm_fusion_dot (")
                and label != "main.3/gemm_fusion_dot (dot)"]
    # gemm_fusion_dot.1: bias and ReLU on the lhs before the dot: one prologue, no epilogue
    assert kernels["main.3/gemm_fusion_dot.1 (prologue 0)"].generated
    assert "main.3/gemm_fusion_dot.1 (prologue 1)" not in kernels
    # gemm_fusion_dot_general.5: a prologue, the dot, and the bias added after it
    order = [k.label for k in lowered.kernels if "gemm_fusion_dot_general.5" in k.label]
    assert order == ["main.3/gemm_fusion_dot_general.5 (prologue 0)", "main.3/gemm_fusion_dot_general.5 (dot)",
                     "main.3/gemm_fusion_dot_general.5"]
    assert kernels["main.3/gemm_fusion_dot_general.5"].generated
    # without the flag (the CPU's lowering) the fusion stays one library kernel
    plain = lower(xla_plan("gpu-current-h100/mlp"))
    assert [k.label for k in plain.kernels if not k.generated] == [
        "main.3/gemm_fusion_dot", "main.3/gemm_fusion_dot.1", "main.3/gemm_fusion_dot_general.5"]


def test_a_dot_whose_result_is_bitcast_writes_the_fusion_buffer(monkeypatch):
    """rnn_scan's GEMM fusions end in a bitcast of the dot (f32[128,16]{0,1} → f32[16,128]):
    the same bytes, so the dot writes the fusion's buffer and no epilogue runs."""
    from hlofuse.execute import lower as lowering

    monkeypatch.setattr(lowering, "SMALL_DOT_MACS", 0)
    lowered = lower(xla_plan("gpu-current-h100/rnn_scan"), split_gemm_fusions=True)
    gemm = [k for k in lowered.kernels if "gemm_fusion" in k.label]
    assert [k.label for k in gemm] == ["region_0.4/gemm_fusion_dot_general.0 (dot)",
                                       "region_0.4/gemm_fusion_dot_general.1 (dot)"]
    assert all(k.shapes[2].minor_to_major == (0, 1) for k in gemm)


@pytest.mark.skipif(cuda.nvcc() is None, reason="nvcc is not installed: CUDA kernels not compiled")
def test_gemm_prologues_and_epilogues_compile_with_nvcc():
    for folder in ("gpu-current-h100/mlp", "gpu-current-h100/attention"):
        lowered = lower(xla_plan(folder), split_gemm_fusions=True)
        bodies = [k.body for k in lowered.kernels if k.generated and ("prologue" in k.label or "gemm" in k.label)]
        assert bodies, folder
        ptx = cuda.compile_ptx(cuda.render(bodies))
        assert all(f".entry {b.name}(" in ptx for b in bodies)


def test_small_dots_are_generated_as_row_reductions(monkeypatch):
    """Dots of at most SMALL_DOT_MACS multiply-adds (rnn_scan's 16x64·64x128 in its loop, the
    mlp's 64x256·256x10 with its bias and ReLU around it) are one generated kernel each:
    the GEMM fusion's whole body, its dot a sum of products along the contracting dims;
    larger ones stay cuBLAS calls."""
    from hlofuse.execute import lower as lowering

    assert not [k for k in lower(xla_plan("gpu-current-h100/mlp"), split_gemm_fusions=True).kernels
                if not k.generated]  # every mlp dot is at most 8.4M multiply-adds
    monkeypatch.setattr(lowering, "SMALL_DOT_MACS", 1 << 19)
    rnn = lower(xla_plan("gpu-current-h100/rnn_scan"), split_gemm_fusions=True)
    gemm = [k for k in rnn.kernels if "gemm_fusion" in k.label]
    assert [k.label for k in gemm] == ["region_0.4/gemm_fusion_dot_general.0", "region_0.4/gemm_fusion_dot_general.1"]
    assert all(k.generated for k in gemm) and all(k.kind == "kCustom" for k in gemm)
    mlp = lower(xla_plan("gpu-current-h100/mlp"), split_gemm_fusions=True)
    last = [k for k in mlp.kernels if "gemm_fusion_dot_general.5" in k.label]
    assert [k.generated for k in last] == [True]
    big = [k for k in mlp.kernels if k.label == "main.3/gemm_fusion_dot (dot)"]  # 4x64x64·64x512: cuBLAS
    assert big and not big[0].generated
    text = cuda.render([k.body for k in gemm + last])
    assert "__shfl_xor_sync" in text or "HF_SHFL_XOR" in text  # the sum split across a warp's lanes
    if cuda.nvcc() is not None:
        ptx = cuda.compile_ptx(text)
        assert all(f".entry {k.body.name}(" in ptx for k in gemm + last)


@needs_cxx
@pytest.mark.parametrize("folder", ["gpu-current-h100/mlp"])  # rnn_scan's 64 launches of warps take minutes
def test_small_dots_run_in_the_cuda_emulation_and_match_the_reference(folder, monkeypatch):
    from hlofuse.execute import lower as lowering
    from hlofuse.execute.cuda_emulate import EmulatedCudaDevice

    monkeypatch.setattr(lowering, "SMALL_DOT_MACS", 1 << 19)  # the emulated warps of larger dots take minutes

    results = run_plans(make_plans(load_source(str(SAMPLES / folder)), ["unfused", "xla"]), EmulatedCudaDevice(),
                        repeat=1, warmup=0)
    assert all(r.ok for r in results), [(r.name, r.error, r.max_rel_error) for r in results]


@needs_cxx
@pytest.mark.parametrize("folder", ["gpu-current-h100/mlp", "gpu-current-h100/attention",
                                    "gpu-current-h100/rnn_scan", "gpu-legacy-rtx2080ti/mlp",
                                    "gpu-legacy-rtx2080ti/rnn_scan"])
def test_each_dot_is_one_library_call_and_no_host_synchronisation(folder, monkeypatch):
    """The emulated GPU runs the CUDA text of the generated kernels and the GPU's library
    mapping with NumPy as its array library: every dot (a Triton GEMM fusion's, or a cuBLAS
    custom call without epilogue) is one matmul and never waits for the device."""
    from hlofuse.execute import lower as lowering
    from hlofuse.execute.cuda_emulate import EmulatedCudaDevice

    monkeypatch.setattr(lowering, "SMALL_DOT_MACS", 0)  # every dot a library call

    device = EmulatedCudaDevice()
    results = run_plans(make_plans(load_source(str(SAMPLES / folder)), ["xla"]), device, repeat=1, warmup=0)
    assert all(r.ok for r in results), [(r.error, r.max_rel_error) for r in results]
    dots = {label: counts for label, counts in device.census_by_kernel.items()
            if label.endswith("(dot)") or "custom-call" in label}
    assert dots
    assert all(counts == (1, 0) for counts in dots.values()), dots


def test_the_census_counts_what_a_gpu_would_launch_and_wait_for():
    census = Census()
    np_ = census.lib
    a = census.device(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = np_.maximum(a, 1)  # a ufunc: one call
    c = b.T.reshape(3, 2)  # views and a reshape: no call
    total = np_.sum(c)  # a function on a device array: one call, a 0-d device array back
    assert isinstance(total, census.ndarray)
    assert float(total) == 16.0 and bool(np_.any(a > 4))
    assert census.calls["maximum"] == 1 and census.calls["sum"] == 1
    assert census.syncs == {"float": 1, "bool": 1}


def test_a_scatter_add_is_one_atomic_instruction_on_the_gpu():
    """segment_sum's scatter-add (4096 rows into 4 segments on bench's inputs: a thousand
    updates per element) as atomicAdd, as XLA's scatter emitter does, rather than a
    compare-and-swap loop that retries once per competing update."""
    lowered = lower(xla_plan("gpu-current-h100/segment_sum"))
    scatter = next(k for k in lowered.kernels if "scatter" in k.label)
    text = cuda.render([scatter.body])
    assert "HF_ATOMIC_ADD(f32, &" in text and "HF_COMBINE_4(" not in text.split("*/", 1)[-1].split(
        'extern "C"', 1)[-1]
    if cuda.nvcc() is not None:
        assert "red.global.add.f32" in cuda.compile_ptx(text) or "atom.global.add.f32" in cuda.compile_ptx(text)


def _comparator(folder: str, called_by: str):
    module = xla_plan(folder)
    instr = next(i for c in module.computations for i in c.instructions if i.opcode == called_by)
    return module[instr.called[0]]


def test_keyed_comparators_are_read_from_the_hlo():
    from hlofuse.execute.keyed_sort import comparator_keys

    # JAX's argsort: the value's total-order key, ties broken by the carried iota
    keys = comparator_keys(_comparator("gpu-current-h100/argsort_rows", "sort"))
    assert [(k.operand, k.descending) for k in keys] == [(0, False), (2, False)]
    assert keys[0].key.root.shape.element_type == "s32" and keys[1].key.root.opcode == "parameter"
    # TopK: the total-order key, greatest first
    keys = comparator_keys(_comparator("gpu-current-h100/top_k", "custom-call"))
    assert [(k.operand, k.descending) for k in keys] == [(0, True)]


def test_comparators_that_are_not_keyed_are_left_to_the_evaluator():
    from hlofuse.parse import parse_text
    from hlofuse.execute.keyed_sort import comparator_keys

    module = parse_text("""HloModule m
%mixed (a: f32[], b: f32[], c: s32[], d: s32[]) -> pred[] {
  %a = f32[] parameter(0)
  %d = f32[] parameter(1)
  ROOT %lt = pred[] compare(%a, %d), direction=LT
}
%crossed (a: s32[], b: s32[], c: s32[], d: s32[]) -> pred[] {
  %a = s32[] parameter(0)
  %d = s32[] parameter(3)
  ROOT %lt = pred[] compare(%a, %d), direction=LT
}
ENTRY %e (p: f32[4]) -> f32[4] {
  ROOT %p = f32[4] parameter(0)
}
""")
    assert comparator_keys(module["mixed"]) is None  # float keys compared as floats: NaN, -0
    assert comparator_keys(module["crossed"]) is None  # lhs of one operand against rhs of another


@needs_cxx
@pytest.mark.parametrize("folder", ["gpu-current-h100/argsort_rows", "gpu-current-h100/top_k",
                                    "gpu-legacy-rtx2080ti/argsort_rows", "gpu-legacy-rtx2080ti/top_k"])
def test_sorts_and_topk_by_keys_never_wait_for_the_device(folder):
    from hlofuse.execute.cuda_emulate import EmulatedCudaDevice

    device = EmulatedCudaDevice()
    results = run_plans(make_plans(load_source(str(SAMPLES / folder)), ["unfused", "xla"]), device, repeat=1,
                        warmup=0)
    assert all(r.ok for r in results), [(r.error, r.max_rel_error) for r in results]
    assert device.census_by_kernel and all(syncs == 0 for _, syncs in device.census_by_kernel.values())


@pytest.mark.parametrize("groups", [1, 2])
def test_the_evaluators_convolution_is_the_plain_sum_over_windows(groups):
    """The reference convolution (one contraction over channels and kernel offsets, a matrix
    product on a GPU; per offset when grouped) against the definition written as loops:
    strides, padding and kernel dilation on an NCHW input."""
    from hlofuse.attributes import WindowDim
    from hlofuse.execute import arrays

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((6, 4 // groups, 3, 2)).astype(np.float32)
    window = (WindowDim(3, stride=2, pad_low=1, pad_high=2, rhs_dilation=1), WindowDim(2, stride=1, pad_low=0,
                                                                                        pad_high=1, rhs_dilation=2))
    got = arrays.convolution(x, w, window, "bf01_oi01->bf01", groups, 1, np.dtype(np.float32))
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (1, 2), (0, 1)])
    oh = (padded.shape[2] - 3) // 2 + 1
    ow = padded.shape[3] - (2 - 1) * 2 - 1 + 1
    want = np.zeros((2, 6, oh, ow))
    per = 6 // groups
    for n in range(2):
        for o in range(6):
            g = o // per
            for i in range(oh):
                for j in range(ow):
                    for c in range(4 // groups):
                        for ki in range(3):
                            for kj in range(2):
                                want[n, o, i, j] += padded[n, g * (4 // groups) + c, i * 2 + ki, j + kj * 2] \
                                    * w[o, c, ki, kj]
    assert got.shape == want.shape
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)


class _FakeCuda:
    """Just enough of cupy.cuda for graph_run: streams that capture (or refuse to), graphs
    that count their launches."""

    def __init__(self, refuse: bool):
        fake = self
        self.launches = 0

        class Stream:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def synchronize(self):
                pass

            def begin_capture(self):
                if refuse:
                    raise RuntimeError("operation not permitted when stream is capturing")

            def end_capture(self):
                class Graph:
                    def launch(self, stream):
                        fake.launches += 1
                return Graph()

        class MemoryPool:
            malloc = None

        class _Using:
            def __init__(self, allocator):
                pass

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        self.cuda = type("cuda", (), {"Stream": Stream, "MemoryPool": MemoryPool, "using_allocator": _Using})


@pytest.mark.parametrize("refuse", [False, True])
def test_steps_replay_as_one_graph_or_fall_back_to_launches(refuse):
    lowered = lower(xla_plan("gpu-current-h100/rnn_scan"), split_gemm_fusions=True)
    assert not cuda.reads_the_host(lowered.steps)  # a loop of known trip count: capturable
    cp = _FakeCuda(refuse)
    ran = []
    run = cuda.graph_run(cp, lowered, [lambda: ran.append(1)])
    run()
    run()
    if refuse:
        assert cp.launches == 0 and len(ran) == 3  # the warm-up before the capture, then each run
        assert any("not as a CUDA graph" in n for n in lowered.notes)
    else:
        assert cp.launches == 2 and len(ran) == 2  # warm-up and capture; then only replays
        assert not lowered.notes


def test_steps_that_read_the_device_on_the_host_are_not_graphed():
    from hlofuse.parse import parse_text

    module = parse_text("""HloModule w
%cond (s: s32[]) -> pred[] {
  %s = s32[] parameter(0)
  ROOT %lt = pred[] compare(%s, %s), direction=LT
}
%body (s: s32[]) -> s32[] {
  %s = s32[] parameter(0)
  ROOT %n = s32[] negate(%s)
}
ENTRY %e (p: s32[]) -> s32[] {
  %p = s32[] parameter(0)
  ROOT %w = s32[] while(%p), condition=%cond, body=%body
}
""")
    lowered = lower(module)
    assert cuda.reads_the_host(lowered.steps)
    assert cuda.graph_run(_FakeCuda(False), lowered, []) is None


@pytest.mark.parametrize("policy, loop_graphed, straight_graphed",
                         [("straight", False, True), ("loops", True, True), ("off", False, False)])
def test_the_graph_policy_keeps_loops_launching_kernel_by_kernel_by_default(policy, loop_graphed, straight_graphed):
    """By default a program with a while loop launches its kernels iteration by iteration (as
    XLA's WhileThunk does: the launches per iteration are what the plans' ratios measure);
    a program without loops replays as one graph (XLA's command buffers)."""
    device = cuda.CudaDevice.__new__(cuda.CudaDevice)  # no CuPy here: the policy alone
    device.cp, device.graphs = _FakeCuda(False), policy
    loop = lower(xla_plan("gpu-current-h100/rnn_scan"), split_gemm_fusions=True)
    straight = lower(xla_plan("gpu-current-h100/top_k"), split_gemm_fusions=True)
    assert cuda.has_loops(loop.steps) and not cuda.has_loops(straight.steps)
    assert (device.graph(loop, []) is not None) == loop_graphed
    assert (device.graph(straight, []) is not None) == straight_graphed
    import inspect

    assert inspect.signature(cuda.CudaDevice).parameters["graphs"].default == "straight"
    with pytest.raises(ValueError, match="graphs="):
        cuda.CudaDevice(graphs="always")


@pytest.mark.gpu
@pytest.mark.parametrize("folder", ["gpu-current-h100/rnn_scan", "gpu-current-h100/cartpole_c_separate",
                                    "gpu-current-h100/top_k", "gpu-current-h100/mlp",
                                    "gpu-current-h100/conv2d_bias_relu"])
def test_programs_replay_as_cuda_graphs_on_a_gpu(folder):
    """With loops unrolled into the graph (graphs="loops"), every program whose steps read nothing on the host replays as one CUDA graph, except
    where a library call the capture cannot hold (the convolution through the evaluator: a
    host-to-device copy, a cuBLAS call) makes CuPy refuse it: then its steps run one by one,
    noted, and still match the reference."""
    if not cuda.available():
        pytest.skip("no CUDA device and CuPy")
    results = run_plans(make_plans(load_source(str(SAMPLES / folder)), ["unfused", "xla"]),
                        cuda.CudaDevice(graphs="loops"), repeat=2)
    for r in results:
        assert r.ok, (r.name, r.error, r.max_rel_error)
        refused = [n for n in r.notes if "CUDA graph" in n]
        if folder.endswith("conv2d_bias_relu"):
            assert refused, r.notes
        else:
            assert not refused, r.notes


@pytest.mark.parametrize("folder", ["gpu-current-h100/rnn_scan", "gpu-current-h100/mlp",
                                    "gpu-current-h100/attention", "gpu-legacy-rtx2080ti/rnn_scan"])
def test_dots_written_as_reductions_compute_the_dot(folder):
    """The GPU's lowering (small dots as reductions, GEMM fusions cut around cuBLAS) run by
    the CPU's kernels, against the reference evaluator: the rewrite computes the dot
    (rnn_scan's dot of transposed operands into a {0,1} layout included)."""
    from hlofuse.bench import signature
    from hlofuse.execute.cpu import CpuDevice, value_leaves
    from hlofuse.execute.inputs import random_inputs, relative_error
    from hlofuse.execute.interp import evaluate
    from hlofuse.execute.runtime import Runner

    module = xla_plan(folder)
    args = random_inputs(signature(module), 1)
    want = [np.asarray(v) for v in value_leaves(evaluate(module, args))]
    runner = Runner(lower(module, split_gemm_fusions=True), CpuDevice())
    runner.set_inputs(args)
    runner.count()
    got = runner.outputs()
    assert len(got) == len(want)
    assert all(relative_error(g, w) <= 1e-5 for g, w in zip(got, want))

"""Generic Triton fusions in PriorityFusion (XLA 5a9e73cb, jaxlib 0.10.2): what Triton can emit
(hlofuse/gpu/triton_support.py), how XLA tiles a Triton fusion and prices a tiling
(hlofuse/cost/tiling.py, tiled.py), and the replay against real XLA on the dumps of
tests/data/jax-0.10.2-triton (normalisations growing through LayerNorm forward and backward,
into concatenates, and staying out of them when the tiling is slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

import hlofuse
from hlofuse import xla_log
from hlofuse.attributes import backend_config
from hlofuse.check import check
from hlofuse.cost import GpuPerformanceModel, tiled, tiling
from hlofuse.device import load_gpu
from hlofuse.dumpdir import choose_module, fusion_snapshot, priority_fusion_log, scan
from hlofuse.gpu.triton_support import instruction_support
from hlofuse.graph import Program
from hlofuse.pipeline import Options
from hlofuse.rules.priority_fusion import is_fusible_bitcast, is_generic_triton_fusion

DATA = Path(__file__).resolve().parent / "data" / "jax-0.10.2-triton"
DUMPS = sorted(p.name for p in DATA.iterdir() if p.is_dir())


def _gpu(folder: str) -> str:
    return "a100_sxm_80" if folder.endswith("a100") else "h100_sxm"


def _files(folder: str):
    path = DATA / folder
    files = choose_module(scan(path), None, str(path))
    return (fusion_snapshot(files, "before_fusion", "priority").path,
            fusion_snapshot(files, "after_fusion", "priority").path, priority_fusion_log(files).path)


def _node(program: Program, name: str):
    return next(g.get(name) for g in program.graphs.values() if g.get(name) is not None)


# ------------------------------------------------------------------------------------------
# The replay against XLA
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder", DUMPS)
def test_replay_reproduces_xla_kernels_and_tiles(folder):
    """`check` reproduces every kernel XLA made, and each Triton fusion gets XLA's tile."""
    before, after, _ = _files(folder)
    after_module = hlofuse.load(str(after))
    result = check(hlofuse.load(str(before)), after_module, Options(backend="gpu", pipeline="priority",
                                                                    gpu=_gpu(folder)))
    assert result.reproduced == result.xla_kernels, [(m.status, m.xla_kernel, m.ours) for m in result.matches]

    def tiles(module):
        out = {}
        for computation in module.computations:
            for instr in computation.instructions:
                fusion = backend_config(instr).get("fusion_backend_config") or {}
                if instr.opcode == "fusion" and fusion.get("kind") == "__triton":
                    block = fusion["block_level_fusion_config"]
                    out[instr.name] = (block["output_tiles"][0]["sizes"], block["num_warps"])
        return out

    xla, ours = tiles(after_module), tiles(result.replay.module)
    compared = [(xla[m.xla_kernel], ours.get(m.ours)) for m in result.matches if m.xla_kernel in xla]
    assert compared and all(x == o for x, o in compared), compared


def test_softmax_joins_the_concatenate_reading_it():
    """XLA fuses the softmax into the concatenate of its rows with other columns: a Triton
    fusion rooted at the concatenate, tiled 2x256 (256 divides the softmax's 768 columns)."""
    before, after, _ = _files("softmax_concat_h100")
    result = hlofuse.pipeline.replay(hlofuse.load(str(before)), Options(backend="gpu", pipeline="priority",
                                                                        gpu="h100_sxm"))
    [kernel] = [k for k in result.kernels if k.computation.startswith("main")]
    assert kernel.kind == "kCustom" and kernel.root.startswith("concatenate")
    fused = next(d for d in result.decisions if d.consumer_members and "concatenate.1.0" in d.consumer_members
                 and "div.3" in d.producer_members)
    assert fused.verdict.value == "fused"


def test_narrow_softmax_stays_out_of_the_concatenate_as_xla_prices_it():
    """With 1000 columns only tiles up to 8 divide the softmax's part of the concatenate: the
    fused kernel would recompute each row's reductions per 8 columns (and the concatenate, not
    32-aligned, is priced 400 flops an element), and XLA (and the replay) find it slower than
    two kernels."""
    before, _, log_path = _files("softmax_concat_narrow_h100")
    result = hlofuse.pipeline.replay(hlofuse.load(str(before)), Options(backend="gpu", pipeline="priority",
                                                                        gpu="h100_sxm"))
    refused = [d for d in result.decisions if d.consumer == "concatenate.1.0" and d.verdict.value == "blocked"]
    assert [d.rule for d in refused] == ["PF-CONCAT-PENALTY"]
    log = xla_log.load(log_path)
    last = [s for s in log.priorities if s.producer == "triton_softmax.2" and s.consumers == ("concatenate.1.0",)][-1]
    assert last.us_fused > last.us_unfused


def _first_priorities(log):
    first_fusion = next((s.index for s in log.fusions), 10**9)
    seen = {}
    for s in log.priorities:
        if s.index < first_fusion and s.producer not in seen:
            seen[s.producer] = s
    return seen


@pytest.mark.parametrize("folder", DUMPS)
def test_first_round_triton_priorities_equal_xla_log(folder):
    """Every first-round priority XLA logged for a pair with a Triton fusion on either side,
    to a tick or two — the tiling search, the tile cost and the analytical price of bitcast
    users.  Left out: a producer read twice by one user (x*x), whose tiling XLA shares with a
    structurally equal user (FusionDeduplicationCache) chosen by an order the dump does not
    record."""
    _, _, log_path = _files(folder)
    log = xla_log.load(log_path)
    program = Program.from_module(hlofuse.loads(log.module_before_fusion))
    model = GpuPerformanceModel(load_gpu(_gpu(folder)))
    compared = shared = 0
    for name, step in _first_priorities(log).items():
        node = _node(program, name)
        involved = [u for u in node.users if is_generic_triton_fusion(node) or is_generic_triton_fusion(u)]
        if not involved:
            continue
        if any(sum(op is node for op in u.operands) > 1 for u in node.users):
            shared += 1
            continue
        for user in involved:
            if not is_fusible_bitcast(user):
                model.triton_tiling(node, user)  # what CanFuse asks before the priority
        times = model.run_times(node, node.users)
        assert abs(times.fused_us - step.us_fused) < 0.001, (name, times.fused_us, step.us_fused)
        assert abs(times.unfused_us - step.us_unfused) < 0.001, (name, times.unfused_us, step.us_unfused)
        compared += 1
    assert compared + shared


# ------------------------------------------------------------------------------------------
# Triton's support check
# ------------------------------------------------------------------------------------------


def _instruction(text: str, name: str):
    program = Program.from_module(hlofuse.loads(text))
    return _node(program, name)


_SUPPORT = """
ENTRY e {
  a = f32[8,16] parameter(0)
  b = f32[8,4] parameter(1)
  i = s32[8,1] parameter(2)
  t = f32[64,16] parameter(3)
  concat = f32[8,20] concatenate(a, b), dimensions={1}
  copy = f32[8,16] copy(a)
  z = f32[] constant(0)
  high = f32[8,20] pad(a, z), padding=0_0x0_4
  low = f32[8,20] pad(a, z), padding=0_0x4_0
  none = f32[8,16] pad(a, z), padding=0_0x0_0
  rev = f32[8,16] reverse(a), dimensions={1}
  g = f32[8,16] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}
  ds = f32[1,16] dynamic-slice(a, z2, z2), dynamic_slice_sizes={1,16}
  z2 = s32[] constant(0)
  u = u32[8,16] convert(a)
  k = f32[16] constant({0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15})
  ROOT tuple = (f32[8,20]) tuple(concat)
}
"""


@pytest.mark.parametrize("name, reason", [
    ("concat", None),
    ("copy", None),
    ("high", None),
    ("low", "Only high padding is supported."),
    ("none", "No-op pad ops are not allowed."),
    ("rev", "Unsupported instruction opcode reverse"),
    ("g", "Unsupported opcode gather"),
    ("ds", "dynamic slice is supported but not enabled yet"),
    ("u", "Unsupported output type for conversion: u32"),
    ("k", "Only scalar constants are supported in Triton."),
])
def test_triton_support_at_5a9e73cb(name, reason):
    """IsTritonSupportedInstruction's answer and words: concatenates, copies and high pads are
    supported; the rest refused with XLA's own reason."""
    node = _instruction(_SUPPORT, name)
    assert instruction_support(node) == reason


# ------------------------------------------------------------------------------------------
# Tiling
# ------------------------------------------------------------------------------------------


def test_candidate_tiles_are_xlas_tiling_space():
    """Powers of two below each dimension and the dimension itself: 2 x 7 x 9 = 126 tilings for
    f32[2,64,256], the count XLA's TryFindTopKBestTilingsForFusion logs for such a fusion."""
    tiles = tiling.candidate_tiles((2, 64, 256))
    assert len(tiles) == 126 and tiles[0] == (1, 1, 1) and tiles[-1] == (2, 64, 256)
    assert tiling.candidate_tiles((37, 1000))[:2] == [(1, 1), (1, 2)] and (37, 1000) in tiling.candidate_tiles((37, 1000))


@pytest.mark.parametrize("out_dims, tile, in_dims, expected", [
    ((128, 256), (128, 2), (2, 64, 256), (2, 64, 2)),   # whole leading rows split into 2x64
    ((128, 256), (2, 2), (2, 64, 256), (1, 2, 2)),
    ((128, 256), (96, 2), (2, 64, 256), None),           # 96 rows are not a whole number of 64
    ((2, 64, 256), (2, 4, 256), (128, 256), None),       # two runs of 4 rows: not contiguous
    ((2, 64, 256), (1, 4, 256), (128, 256), (4, 256)),
    ((37, 1), (2, 1), (37,), (2,)),                      # unit dimensions: the tile carries over
    ((37,), (2,), (37, 1), (2, 1)),
])
def test_a_tile_crosses_a_reshape_as_one_contiguous_run(out_dims, tile, in_dims, expected):
    assert tiling.reshape_tile(out_dims, tile, in_dims) == expected


_CONCAT = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
softmax_concat {
  x = f32[256,{cols}] parameter(0)
  y = f32[256,64] parameter(1)
  z = f32[] constant(0)
  r = f32[256] reduce(x, z), dimensions={1}, to_apply=add
  b = f32[256,{cols}] broadcast(r), dimensions={0}
  d = f32[256,{cols}] divide(x, b)
  ROOT c = f32[256,{total}] concatenate(d, y), dimensions={1}
}
ENTRY e {
  x = f32[256,{cols}] parameter(0)
  y = f32[256,64] parameter(1)
  ROOT f = f32[256,{total}] fusion(x, y), kind=kLoop, calls=softmax_concat
}
"""


def _concat(cols: int) -> str:
    return _CONCAT.replace("{cols}", str(cols)).replace("{total}", str(cols + 64))


@pytest.mark.parametrize("cols, widest", [(768, 256), (1000, 8)])
def test_a_concatenate_tile_divides_every_operand_but_the_last(cols, widest):
    """Each output tile of a concatenate comes from one operand: the tile along the
    concatenated dimension must divide the operands before the last (768: up to 256; 1000: up
    to 8); the last one's tail is masked (64 need not be divisible by 256)."""
    program = Program.from_module(hlofuse.loads(_concat(cols)))
    fusion = program.entry.get("f")
    valid = [t for t in tiling.candidate_tiles(fusion.shape.dims)
             if tiling.satisfies_constraints(tiling.tile_fusion(fusion, t))]
    assert max(t[1] for t in valid) == widest


def test_each_distinct_tile_of_an_operand_is_read():
    """A row normalisation tiled narrower than its rows reads each row whole for the reduction
    and once more tile by tile for the division (two tiles of x); tiled whole, x is read once."""
    program = Program.from_module(hlofuse.loads("""
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
norm {
  x = f32[256,768] parameter(0)
  z = f32[] constant(0)
  r = f32[256] reduce(x, z), dimensions={1}, to_apply=add
  b = f32[256,768] broadcast(r), dimensions={0}
  ROOT d = f32[256,768] divide(x, b)
}
ENTRY e {
  x = f32[256,768] parameter(0)
  ROOT f = f32[256,768] fusion(x), kind=kLoop, calls=norm
}"""))
    fusion, x = program.entry.get("f"), program.entry.get("x")

    def x_tiles(tile):
        return sorted(t.sizes for t in tiling.tile_fusion(fusion, tile).instructions if t.node is x)

    assert x_tiles((2, 256)) == [(2, 256), (2, 768)]
    assert x_tiles((2, 768)) == [(2, 768)]


def test_tiles_too_large_for_the_registers_leave_no_valid_tiling():
    """A row normalisation feeding a column reduction needs whole columns of whole rows: every
    tiling spills, and XLA refuses the pair with "No valid tilings found."."""
    program = Program.from_module(hlofuse.loads("""
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
norm_then_column_sum {
  x = f32[256,768] parameter(0)
  z = f32[] constant(0)
  r = f32[256] reduce(x, z), dimensions={1}, to_apply=add
  b = f32[256,768] broadcast(r), dimensions={0}
  d = f32[256,768] divide(x, b)
  ROOT s = f32[768] reduce(d, z), dimensions={0}, to_apply=add
}
ENTRY e {
  x = f32[256,768] parameter(0)
  ROOT f = f32[768] fusion(x), kind=kInput, calls=norm_then_column_sum
}"""))
    best = tiled.best_tiled(GpuPerformanceModel(load_gpu("h100_sxm")), program.entry.get("f"))
    assert not best.found and best.reason == "No valid tilings found."


def test_reduce_flops_count_the_reduced_elements_unpadded():
    """At 5a9e73cb a reduction of n elements costs n-1 applications of its reducer (later XLA
    pads n to a power of two); 1000 columns: 999 adds of 7 flops."""
    program = Program.from_module(hlofuse.loads(_concat(1000)))
    reduce = program.graphs["softmax_concat"].get("r")
    assert tiled.flops_per_element(GpuPerformanceModel(load_gpu("h100_sxm")), reduce, program) == 999 * 7


def test_bitcast_users_are_priced_without_a_tiling():
    """PriorityFusion never asks CanFuse about a bitcast user, so no tiling is stored for that
    pair: its fused time comes from the analytical formulas on the Triton launch grid.  The
    LayerNorm's first Triton fusion is read by a multiply and by a bitcast (into a matmul);
    XLA logged 2.6763 µs fused, 3.1963 µs unfused."""
    _, _, log_path = _files("layer_norm_matmul_h100")
    log = xla_log.load(log_path)
    step = _first_priorities(log)["triton_softmax.2"]
    assert set(step.consumers) == {"mul.16.0", "bitcast.5.0"}
    program = Program.from_module(hlofuse.loads(log.module_before_fusion))
    model = GpuPerformanceModel(load_gpu("h100_sxm"))
    producer = _node(program, "triton_softmax.2")
    multiply, bitcast = _node(program, "mul.16.0"), _node(program, "bitcast.5.0")
    model.triton_tiling(producer, multiply)
    fused = model.fused_runtime(producer, bitcast)
    assert (producer.uid, bitcast.uid) not in model._triton
    assert fused.launch.emitter == "triton"
    times = model.run_times(producer, producer.users)
    assert abs(times.fused_us - step.us_fused) < 0.001 and abs(times.unfused_us - step.us_unfused) < 0.001


@pytest.mark.parametrize("folder", ["layer_norm_grad_h100", "layer_norm_matmul_h100", "softmax_concat_h100"])
def test_the_search_tiles_as_tile_fusion_does(folder):
    """The search propagates tiles once, with symbols for the output tile's sizes: for every
    candidate of every Triton pair of these programs it finds the instructions, tiles, blocks
    and validity `tile_fusion` finds one candidate at a time."""
    from hlofuse.rules.priority_fusion import is_pf_fusible

    _, _, log_path = _files(folder)
    program = Program.from_module(hlofuse.loads(xla_log.load(log_path).module_before_fusion))
    model = GpuPerformanceModel(load_gpu(_gpu(folder)))
    compared = 0
    for graph in program.graphs.values():
        for producer in graph.nodes():
            for consumer in producer.users:
                if not (is_pf_fusible(producer) and is_pf_fusible(consumer)):
                    continue
                analysis = model.pair_analysis(producer, consumer)
                if analysis.backend_kind != "__triton" or tiling.untileable_reason(analysis.node):
                    continue
                fusion = analysis.node
                symbolic = tiling.SymbolicTiling(fusion)
                for sizes in tiling.candidate_tiles(fusion.fused.root.shape.dims):
                    one, other = tiling.tile_fusion(fusion, sizes), symbolic.tiling(sizes)
                    assert one.propagated == other.propagated
                    if one.propagated:
                        assert one.root == other.root
                        assert sorted((t.node.uid, t.sizes, t.offsets, t.blocks, t.inside) for t in one.instructions) \
                            == sorted((t.node.uid, t.sizes, t.offsets, t.blocks, t.inside) for t in other.instructions)
                    compared += 1
    assert compared > 100

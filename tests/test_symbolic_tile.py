"""SymbolicTileAnalysis's "Failed to compute symbolic tile" refusals (XLA 5a9e73cb, jaxlib
0.10.2; hlofuse/cost/symbolic_tile.py): an instruction whose index, from the fusion's root,
is a floordiv or mod of a reduced dimension has no symbolic tile.  Small fusions for the rule,
and real XLA on the dumps of tests/data/jax-0.10.2-symbolic-tile (a LayerNorm summed over a
merged dimension is refused; summed over one dimension, or over a split one, it is fused; a
class token concatenated before a matmul's rows keeps the concatenate out of a LayerNorm)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import hlofuse
from hlofuse import xla_log
from hlofuse.check import check
from hlofuse.cost import GpuPerformanceModel, tiled, tiling
from hlofuse.cost.symbolic_tile import Domain, add, constant, expression_text, scale, size_and_stride, variable
from hlofuse.device import load_gpu
from hlofuse.dumpdir import choose_module, fusion_snapshot, priority_fusion_log, scan
from hlofuse.graph import Program
from hlofuse.pipeline import Options

DATA = Path(__file__).resolve().parent / "data" / "jax-0.10.2-symbolic-tile"
DUMPS = sorted(p.name for p in DATA.iterdir() if p.is_dir())


def _fusion(body: str, params: str, root_shape: str):
    """A fusion computing `body` (its parameters: `params`, one per line as `name = shape`)."""
    pairs = [[part.strip() for part in line.split("=")] for line in params.strip().splitlines()]
    decls = "\n".join(f"  {name} = {shape} parameter({i})" for i, (name, shape) in enumerate(pairs))
    args = ", ".join(name for name, _ in pairs)
    program = Program.from_module(hlofuse.loads(f"""
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
body {{
{decls}
{body}
}}
ENTRY e {{
{decls}
  ROOT f = {root_shape} fusion({args}), kind=kCustom, calls=body
}}"""))
    return program.entry.get("f")


def test_a_reduce_over_a_merged_dimension_has_no_symbolic_tile():
    """XLA's words for the LayerNorm gradient of decoder_block_train: the reduce reads
    f32[128,64] merged from f32[4,32,64]; the multiply's index is (s0 / 32, s0 mod 32, d0)."""
    fusion = _fusion("""
  m = f32[4,32,64] multiply(x, y)
  c = f32[128,64] bitcast(m)
  z = f32[] constant(0)
  ROOT r = f32[64] reduce(c, z), dimensions={0}, to_apply=add""", "x = f32[4,32,64]\ny = f32[4,32,64]", "f32[64]")
    reason = ("Failed to compute symbolic tile for (d0)[s0] -> (s0 / 32, s0 mod 32, d0), domain: "
              "d0 in [0, 63], s0 in [0, 127] for HLO %m")
    assert tiling.untileable_reason(fusion) == reason
    best = tiled.best_tiled(GpuPerformanceModel(load_gpu("h100_sxm")), fusion)
    assert not best.found and best.reason == reason


def test_a_fusion_operand_read_through_the_merge_is_named():
    """With nothing between the bitcast and the fusion's parameter, XLA names the operand
    outside the fusion (as it names %cls.1 in vit_patch_embed)."""
    fusion = _fusion("""
  c = f32[128,64] bitcast(x)
  z = f32[] constant(0)
  ROOT r = f32[64] reduce(c, z), dimensions={0}, to_apply=add""", "x = f32[4,32,64]", "f32[64]")
    assert tiling.untileable_reason(fusion).endswith("for HLO %x")


def test_the_split_on_a_kept_dimension_is_tiled():
    """The same bitcast with the 64 reduced: the 128 is a dimension d0 of the output, and
    d0 / 32, d0 mod 32 have symbolic tiles."""
    fusion = _fusion("""
  m = f32[4,32,64] multiply(x, y)
  c = f32[128,64] bitcast(m)
  z = f32[] constant(0)
  ROOT r = f32[128] reduce(c, z), dimensions={1}, to_apply=add""", "x = f32[4,32,64]\ny = f32[4,32,64]", "f32[128]")
    assert tiling.untileable_reason(fusion) is None


def test_a_reshape_splitting_the_reduced_dimension_is_tiled():
    """f32[128,64] seen as f32[4,32,64] and reduced over the 4: the index s0 * 32 + d0 is a
    sum whose strides grow by the sizes (32 = 32 * 1)."""
    fusion = _fusion("""
  m = f32[128,64] multiply(x, y)
  c = f32[4,32,64] bitcast(m)
  z = f32[] constant(0)
  ROOT r = f32[32,64] reduce(c, z), dimensions={0}, to_apply=add""", "x = f32[128,64]\ny = f32[128,64]",
                     "f32[32,64]")
    assert tiling.untileable_reason(fusion) is None


def test_a_concatenate_part_not_starting_at_zero_has_no_symbolic_tile_in_a_sum():
    """vit_patch_embed's class token: a matmul's f32[256,64] read as f32[4,64,64] is the second
    part of a concatenate along dimension 1 (d1 in [1, 64]); through the reduce its index is
    d0 * 64 + d1 - 1, a sum with a dimension not starting at 0.  XLA takes the reduce's side
    first (the last operand created is taken next), so the map holds s0, not d2."""
    fusion = _fusion("""
  t = f32[4,1,64] broadcast(c), dimensions={2}
  m = f32[4,64,64] bitcast(y)
  cat = f32[4,65,64] concatenate(t, m), dimensions={1}
  z = f32[] constant(0)
  r = f32[4,65] reduce(cat, z), dimensions={2}, to_apply=add
  rb = f32[4,65,64] broadcast(r), dimensions={0,1}
  ROOT s = f32[4,65,64] subtract(cat, rb)""", "c = f32[64]\ny = f32[256,64]", "f32[4,65,64]")
    assert tiling.untileable_reason(fusion) == (
        "Failed to compute symbolic tile for (d0, d1, d2)[s0] -> (d0 * 64 + d1 - 1, s0), domain: "
        "d0 in [0, 3], d1 in [1, 64], d2 in [0, 63], s0 in [0, 63] for HLO %y")


def test_size_and_stride_rules():
    """ExtractSizeAndStride: floordiv and mod only of a dimension; sums only when the strides
    grow exactly by the sizes."""
    domain = Domain((128, 32))
    domain.symbols.append(128)
    d0, d1, s0 = variable("d", 0), variable("d", 1), variable("s", 0)
    assert size_and_stride(domain.floordiv(d0, 32), domain)
    assert size_and_stride(domain.mod(d0, 32), domain)
    assert not size_and_stride(domain.floordiv(s0, 32), domain)
    assert not size_and_stride(domain.mod(s0, 32), domain)
    merged = add(scale(d0, 32), d1)
    assert size_and_stride(merged, domain)  # d0 * 32 + d1: 32 = 32 (d1's size) * 1
    gap = add(scale(d0, 64), d1)
    assert not size_and_stride(gap, domain)  # d0 * 64 + d1: 64 != 32 * 1
    # the simplifier undoes a split followed by a merge: (d0 * 32 + d1) / 32 = d0
    assert domain.floordiv(merged, 32) == d0 and domain.mod(merged, 32) == d1
    assert expression_text(domain.floordiv(s0, 32), {s0.terms[0][0]: "s0"}) == "s0 / 32"
    assert size_and_stride(constant(3), domain)


# ------------------------------------------------------------------------------------------
# Real XLA
# ------------------------------------------------------------------------------------------


def _files(folder: str):
    path = DATA / folder
    files = choose_module(scan(path), None, str(path))
    return (fusion_snapshot(files, "before_fusion", "priority").path,
            fusion_snapshot(files, "after_fusion", "priority").path, priority_fusion_log(files).path)


def _unsuffixed(reason: str) -> str:
    """XLA's reason up to the instruction's name, without its clone counter."""
    head = reason.split(" = ")[0]
    return re.sub(r"(%[\w\-]+?\.\d+)(\.\d+)*$", r"\1", head)


@pytest.mark.parametrize("folder", DUMPS)
def test_replay_reproduces_xla_kernels(folder):
    """`check` reproduces every kernel XLA made: the LayerNorm kept apart from the reduce over
    the merged dimension, fused with the others."""
    before, after, _ = _files(folder)
    result = check(hlofuse.load(str(before)), hlofuse.load(str(after)),
                   Options(backend="gpu", pipeline="priority", gpu="h100_sxm"))
    assert result.reproduced == result.xla_kernels, [(m.status, m.xla_kernel, m.ours) for m in result.matches]


@pytest.mark.parametrize("folder", DUMPS)
def test_replay_refuses_with_xlas_words(folder):
    """Where XLA's log refuses a pair as untileable, the replay refuses it with the same map
    and instruction; where it does not, neither does the replay."""
    before, after, log_path = _files(folder)
    log = xla_log.load(log_path)
    xla = {_unsuffixed(s.reason) for s in log.steps
           if getattr(s, "reason", None) and "Failed to compute symbolic tile" in s.reason}
    result = check(hlofuse.load(str(before)), hlofuse.load(str(after)),
                   Options(backend="gpu", pipeline="priority", gpu="h100_sxm"))
    ours = {_unsuffixed(d.xla_reason) for d in result.replay.decisions
            if d.rule == "PF-TRITON-NOT-TILEABLE" and d.xla_reason}
    # XLA also refuses cls_token_norm's last pair for the class token with (s0 / 64, s0 / 64, s0),
    # a map its simplifier leaves unsimplified and ours reduces to (0, 0, s0): not modelled
    assert ours <= xla and bool(ours) == bool(xla)
    assert bool(xla) == (folder in ("ln_sum_merged", "cls_token_norm"))


def test_explain_agrees_with_xla_whatever_the_clone_counter():
    """XLA's reason names its clone `%mul.197.3`, the replay's `%mul.197.2`: the same
    instruction, so the reasons agree; another instruction's name does not."""
    from types import SimpleNamespace

    from hlofuse.explain.xlalog import _same_verdict
    from hlofuse.rules import REGISTRY

    rule = REGISTRY["PF-TRITON-NOT-TILEABLE"]
    head = ("Fusion can not be tiled with SymbolicTileAnalysis: Failed to compute symbolic tile for "
            "(d0)[s0] -> (s0 / 32, s0 mod 32, d0), domain: d0 in [0, 63], s0 in [0, 127] for HLO ")
    verdict = SimpleNamespace(status="ineligible", reason=head + "%mul.197.3 = f32[4,32,64]{2,1,0} multiply(%a, %b)")
    assert _same_verdict(rule, head + "%mul.197.2", verdict)
    assert not _same_verdict(rule, head + "%mul.198.2", verdict)


def test_a_mod_keeps_an_offset_index_within_the_modulus():
    """(d1 - 1) mod 64 with d1 in [1, 64] is d1 - 1 (a concatenate's second part read through
    a reshape), not a mod."""
    domain = Domain([(0, 3), (1, 64)])
    shifted = add(variable("d", 1), constant(-1))
    assert domain.mod(shifted, 64) == shifted
    assert domain.mod(add(variable("d", 0), constant(-64)), 64) == variable("d", 0)

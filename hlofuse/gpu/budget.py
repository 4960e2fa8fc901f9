"""FusionFitsInBudget (gpu_fusible.cc): the resource limits a fused kernel must respect —
shared memory per block, at most 8 unnested reductions, and at most 96 operands plus output
buffers (a kernel-parameter limit XLA works around).  Each check returns None when it fits,
or facts describing the excess."""

from __future__ import annotations

from typing import Final

from ..graph import Node, graph_cache
from .config import GpuConfig
from .reductions import is_contiguous_reduction, reduction_dimensions
from .shapes import byte_width, subshape_count
from .transposes import tiled_transpose

#: kMaxUnnestedReductionOutputsPerFusion.
MAX_UNNESTED_REDUCTIONS = 8
#: MaxOperandsAndOutputsPerFusion() at both eras (64 in older XLA).
MAX_OPERANDS_AND_OUTPUTS = 96


#: The only instructions whose shared memory shared_memory_usage counts (a fused body's others
#: are skipped without asking: most of a body is elementwise), and unnested_reductions' likewise.
_MAY_USE_SHARED_MEMORY: Final = frozenset({"fusion", "reduce", "transpose"})
_MAY_HOLD_REDUCTIONS: Final = frozenset({"fusion", "reduce"})


def shared_memory_usage(node: Node, cfg: GpuConfig) -> int:
    """SharedMemoryUsage estimate in bytes: summed over a fusion's instructions; a contiguous
    row reduction needs 32 elements per output (2024: of operand 0's type; 2026: of all inputs),
    a column reduction a 4x32x33 tile (2026: 32x129), a tiled transpose a 32x33 tile."""
    if node.opcode == "fusion" and node.fused is not None:
        # remembered per version of the body: asked for every pair a growing fusion is part of
        cache = graph_cache(node.fused)
        key = ("shared memory", cfg.token)
        found = cache.get(key)
        if found is None:
            found = cache[key] = sum(shared_memory_usage(n, cfg) for n in node.fused.nodes()
                                     if n.opcode in _MAY_USE_SHARED_MEMORY)
        return found
    if node.opcode == "reduce" and is_contiguous_reduction(node, cfg):
        dims = reduction_dimensions(node)
        if cfg.legacy:
            size = byte_width(node.operands[0].shape.element_type)
            variadic = len(node.shape.tuple_shapes) if node.shape.is_tuple else 1
            return (32 if dims.is_row else 4 * 32 * 33) * size * variadic
        inputs = node.operands[: len(node.operands) // 2]
        size = sum(byte_width(o.shape.element_type) for o in inputs)
        return (32 if dims.is_row else 32 * (4 * 32 + 1)) * size
    desc = tiled_transpose(node, cfg)
    if desc is not None:
        if not cfg.legacy:
            return desc.shmem_usage
        required = 32 * 33 * byte_width(node.shape.element_type)
        if desc.permutation[-1] == len(desc.permutation) - 1:
            required *= desc.dimensions[-1]
        return required
    return 0


def unnested_reductions(node: Node, cfg: GpuConfig) -> int:
    """NumUnnestedReductions: contiguous reduces, counted inside fusions."""
    if node.opcode == "reduce" and is_contiguous_reduction(node, cfg):
        return 1
    if node.opcode == "fusion" and node.fused is not None:
        cache = graph_cache(node.fused)
        key = ("unnested reductions", cfg.token)
        found = cache.get(key)
        if found is None:
            found = cache[key] = sum(unnested_reductions(n, cfg) for n in node.fused.nodes()
                                     if n.opcode in _MAY_HOLD_REDUCTIONS)
        return found
    return 0


def over_shared_memory(instr1: Node, instr2: Node, cfg: GpuConfig) -> dict | None:
    used = shared_memory_usage(instr1, cfg) + shared_memory_usage(instr2, cfg)
    budget = cfg.device.shared_memory_per_block
    if used > budget:
        return {"bytes": used, "budget": budget}
    return None


def over_unnested_reductions(instr1: Node, instr2: Node, cfg: GpuConfig) -> dict | None:
    count = unnested_reductions(instr1, cfg) + unnested_reductions(instr2, cfg)
    if count > MAX_UNNESTED_REDUCTIONS:
        return {"reductions": count, "limit": MAX_UNNESTED_REDUCTIONS}
    return None


def over_operand_budget(instr1: Node, instr2: Node, is_consumer_producer: bool) -> dict | None:
    """FusionFitsInParameterLimit: `instr1` is the consumer when `is_consumer_producer`."""
    outputs = subshape_count(instr1.shape) + subshape_count(instr2.shape)
    if len(instr1.operands) + len(instr2.operands) - 1 + outputs <= MAX_OPERANDS_AND_OUTPUTS:
        return None
    operands = {op.uid: op for op in list(instr1.operands) + list(instr2.operands)}
    operands.pop(instr1.uid, None)
    operands.pop(instr2.uid, None)
    if is_consumer_producer and len(operands) <= len(instr1.operands):
        return None
    if len(operands) + outputs > MAX_OPERANDS_AND_OUTPUTS:
        return {"operands": len(operands), "outputs": outputs, "limit": MAX_OPERANDS_AND_OUTPUTS}
    return None

"""In-place operations with their shape indices: which operand buffer (and which part of
it) an instruction overwrites (HloDataflowAnalysis::GetInPlaceInputOutputPairs), as
multi-output fusion needs it.  Whether fusing into an in-place consumer is safe
(InstructionFusion::ShouldFuseInPlaceOp) is rules/instruction_facts.in_place_refusal."""

from __future__ import annotations

from ..graph import Node
from ..rules.instruction_facts import follow_tuple_indirection, leaf_indices, output_to_operand_aliasing

ShapeIndex = tuple[int, ...]


def in_place_pairs(node: Node) -> list[tuple[int, ShapeIndex, ShapeIndex]]:
    """GetInPlaceInputOutputPairs: (operand number, operand shape index, output shape index)
    for every operand buffer the instruction writes in place."""
    op = node.opcode
    if op == "dynamic-update-slice":
        return [(0, (), ())]
    if op == "scatter":
        n = (len(node.operands) - 1) // 2  # n inputs, the indices, n updates
        if n > 1:
            return [(i, (), (i,)) for i in range(n)]
        return [(0, (), ())]
    if op in ("collective-permute", "collective-permute-start") and len(node.operands) == 4:
        base = () if op == "collective-permute" else (1,)
        pairs = [(1, (), base)]
        if node.operands[1].shape.is_tuple:
            pairs += [(1, (i,), base + (i,)) for i in range(len(node.operands[1].shape.tuple_shapes))]
        return pairs
    if op == "custom-call":
        return [(operand, operand_index, output) for output, operand, operand_index in output_to_operand_aliasing(node)]
    if op == "all-reduce-start":
        if len(node.operands) == 1:
            return [(0, (), ())]
        return [(i, (), (i,)) for i in range(len(node.operands))]
    if op == "fusion" and node.fused is not None:
        pairs = _fusion_pairs(node)
        pairs += [(operand, operand_index, output) for output, operand, operand_index in output_to_operand_aliasing(node)]
        return pairs
    if op == "set-dimension-size":
        return [(0, (), ())]
    return []


def _fusion_pairs(fusion: Node) -> list[tuple[int, ShapeIndex, ShapeIndex]]:
    pairs = []
    for index in leaf_indices(fusion.shape):
        source, source_index = follow_tuple_indirection(fusion.fused.root, index)
        input_source, input_index = None, ()
        for operand, operand_index, output in in_place_pairs(source):
            if output != source_index:
                continue
            input_source, input_index = follow_tuple_indirection(source.operands[operand], operand_index)
            if input_source.opcode == "fusion":
                for n_operand, n_operand_index, n_output in in_place_pairs(input_source):
                    if n_output == input_index:
                        input_source, input_index = follow_tuple_indirection(
                            input_source.operands[n_operand], n_operand_index)
        if input_source is not None and input_source.opcode == "bitcast":
            input_source = input_source.operands[0]
        if input_source is not None and input_source.opcode == "parameter":
            pairs.append((input_source.parameter_number, input_index, index))
    return pairs

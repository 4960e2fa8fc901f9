"""In-place operations: which operand an instruction overwrites
(HloDataflowAnalysis::GetInPlaceInputOutputPairs), and whether fusing a producer into an
in-place consumer keeps that safe (InstructionFusion::ShouldFuseInPlaceOp).

`in_place_refusal` returns None when the fusion is safe, else (XLA's reason, facts)."""

from __future__ import annotations

from ..attributes import slice_dims
from ..graph import Node
from .properties import is_elementwise

ShapeIndex = tuple[int, ...]


def follow_tuple_indirection(node: Node, index: ShapeIndex) -> tuple[Node, ShapeIndex]:
    """Through tuples (down their operands) and get-tuple-elements (up to their operand)."""
    while True:
        if node.opcode == "tuple" and index:
            node, index = node.operands[index[0]], index[1:]
        elif node.opcode == "get-tuple-element":
            index = (int(node.attr("index") or 0),) + index
            node = node.operands[0]
        else:
            return node, index


def _leaf_indices(shape, prefix: ShapeIndex = ()) -> list[ShapeIndex]:
    if shape.is_tuple:
        out: list[ShapeIndex] = []
        for i, s in enumerate(shape.tuple_shapes):
            out.extend(_leaf_indices(s, prefix + (i,)))
        return out
    return [prefix]


def _aliasing(node: Node) -> list[tuple[ShapeIndex, int, ShapeIndex]]:
    """`output_to_operand_aliasing={{out}: (operand, {index}), ...}` as triples."""
    import re

    text = node.attr("output_to_operand_aliasing")
    if not text:
        return []
    out = []
    for m in re.finditer(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*\)", text):
        output = tuple(int(x) for x in m.group(1).split(",") if x.strip())
        operand_index = tuple(int(x) for x in m.group(3).split(",") if x.strip())
        out.append((output, int(m.group(2)), operand_index))
    return out


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
        return [(operand, operand_index, output) for output, operand, operand_index in _aliasing(node)]
    if op == "all-reduce-start":
        if len(node.operands) == 1:
            return [(0, (), ())]
        return [(i, (), (i,)) for i in range(len(node.operands))]
    if op == "fusion" and node.fused is not None:
        pairs = _fusion_pairs(node)
        pairs += [(operand, operand_index, output) for output, operand, operand_index in _aliasing(node)]
        return pairs
    if op == "set-dimension-size":
        return [(0, (), ())]
    return []


def _fusion_pairs(fusion: Node) -> list[tuple[int, ShapeIndex, ShapeIndex]]:
    pairs = []
    for index in _leaf_indices(fusion.shape):
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


def _non_elementwise(node: Node) -> bool:
    return node.opcode not in ("fusion", "bitcast", "parameter") and not is_elementwise(node)


def _extract(node: Node, predicate) -> list[Node]:
    """ExtractInstructions: the instruction if it matches, else the matching instructions of a fusion."""
    if predicate(node):
        return [node]
    if node.opcode != "fusion":
        return []
    return [n for n in node.fused.nodes() if predicate(n)]


def _real_operand(owner: Node, operand: Node) -> Node:
    if owner.opcode == "fusion" and operand.opcode == "parameter":
        return owner.operands[operand.parameter_number]
    return operand


def _first_integer(node: Node) -> int | None:
    if node.opcode != "constant" or node.literal is None:
        return None
    import re

    m = re.search(r"-?\d+", node.literal.replace("true", "1").replace("false", "0"))
    return int(m.group()) if m else None


def _reaches(start: Node, targets: set[int]) -> bool:
    seen = {start.uid}
    stack = [start]
    while stack:
        node = stack.pop()
        if node.uid in targets:
            return True
        for user in node.users:
            if user.uid not in seen:
                seen.add(user.uid)
                stack.append(user)
    return False


def _safe_to_fuse_slice_into_dus_fusion(producer: Node, consumer: Node, dus: Node) -> bool:
    """IsSafeToFuseSliceIntoDusFusion: no other non-elementwise op reads the producer."""
    memo: dict[int, bool] = {}

    def has_nonelementwise_use(node: Node) -> bool:
        if node.uid in memo:
            return memo[node.uid]
        if node is not dus and not is_elementwise(node) and node.opcode != "parameter":
            memo[node.uid] = True
            return True
        memo[node.uid] = False
        result = any(has_nonelementwise_use(u) for u in node.users)
        memo[node.uid] = result
        return result

    for i, op in enumerate(consumer.operands):
        if op is producer and has_nonelementwise_use(consumer.fused_parameter(i)):
            return False
    return True


def in_place_refusal(producer: Node, consumer: Node) -> tuple[str, dict] | None:
    """ShouldFuseInPlaceOp: None when fusing keeps the consumer's in-place update safe."""
    for k, _, output_index in in_place_pairs(consumer):
        buffer = consumer.operands[k]
        for i, op in enumerate(consumer.operands):
            if i != k and op is buffer:
                return ("The consumer is an in-place operation that has an additional operand that has the same "
                        "value as the in-place buffer", {"operand": k, "duplicate": i})
        if not (buffer is producer or any(op is buffer for op in producer.operands)):
            continue
        producer_ops = _extract(producer, _non_elementwise)
        if len(producer_ops) > 1:
            return ("Producer fusion has multiple non-elementwise ops, bailing.",
                    {"ops": [n.name for n in producer_ops]})
        if not producer_ops:
            if consumer.opcode != "fusion":
                return None
            in_place_root, _ = follow_tuple_indirection(consumer.fused.root, output_index)
            others = {n.uid for n in _extract(consumer, lambda n: _non_elementwise(n) and n is not in_place_root)}
            param = consumer.fused_parameter(consumer.operand_index(producer))
            if others and _reaches(param, others):
                return ("Non-elementwise ops in consumer lead to inplace conflict after fusion.", {})
            return None
        dus_ops = _extract(consumer, lambda n: n.opcode == "dynamic-update-slice")
        if not dus_ops:
            return None
        if len(dus_ops) > 1:
            return ("multiple dus ops, bailing.", {"dus": [n.name for n in dus_ops]})
        dus, slicing = dus_ops[0], producer_ops[0]
        from .shapes import equal

        if slicing.opcode == "slice":
            if not equal(slicing.shape, dus.operands[1].shape):
                return ("Slice op has a different shape than the update shape of the dus op, bailing.",
                        {"slice": slicing.name, "dus": dus.name})
            starts = slice_dims(slicing)
            for d in range(dus.shape.rank):
                value = _first_integer(_real_operand(consumer, dus.operands[2 + d]))
                if value is None or d >= len(starts) or value != starts[d].start or starts[d].stride != 1:
                    return ("DUS and slice index mismatch", {"dimension": d})
            if consumer.opcode == "fusion" and not _safe_to_fuse_slice_into_dus_fusion(producer, consumer, dus):
                return ("Fusing slice into DUS will also fuse another non-elementwise op with shared operand as DUS.",
                        {})
            return None
        if slicing.opcode == "dynamic-slice":
            if not equal(slicing.shape, dus.operands[1].shape):
                return ("Dynamic slice op has a different shape than the update shape of the dus op, bailing.",
                        {"dynamic_slice": slicing.name, "dus": dus.name})
            for d in range(dus.shape.rank):
                ds_index = _real_operand(producer, slicing.operands[1 + d])
                dus_index = _real_operand(consumer, dus.operands[2 + d])
                a, b = _first_integer(ds_index), _first_integer(dus_index)
                if a != b or (a is None and ds_index is not dus_index):
                    return ("DUS and DS index mismatch", {"dimension": d})
            if consumer.opcode == "fusion" and not _safe_to_fuse_slice_into_dus_fusion(producer, consumer, dus):
                return ("Fusing DS into DUS will also fuse another non-elementwise op with shared operand as DUS.", {})
            return None
        return ("unrecognized inplace update non-elementwise output pair", {"op": slicing.name})
    return None

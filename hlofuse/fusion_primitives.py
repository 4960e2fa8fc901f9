"""XLA's fusion mutations on a `graph.Graph`: creating a fusion from a consumer, fusing a
producer into it (duplicating it when it keeps other users), merging a fusion into another,
multi-output fusion.  These follow XLA's HloFusionInstruction code closely, because the order of
instructions, operands and parameters decides what later passes see (docs/xla/legacy-gpu-pipeline.md
§2.3, §2.6 and §2.10 describe the behaviour reproduced here)."""

from __future__ import annotations

import bisect
from typing import Final

from . import ir
from .graph import (Graph, Node, _index_of, _parameter_number, absorb_control_dependencies, add_operand,
                    clone_node, remove_operand_at, replace_operand, set_operand)


def create_fusion(consumer: Node, kind: str, name: str = "fusion",
                  computation_name: str = "fused_computation") -> Node:
    """Wrap `consumer` in a new fusion instruction (XLA's CreateFusion + ReplaceInstruction):
    the fused computation holds a clone of the consumer as root, one parameter per distinct
    operand (`param_<k>`), and the fusion replaces the consumer in its graph."""
    graph = consumer.graph
    program = graph.program
    body = program.add_graph(Graph(program, computation_name))
    fusion = Node(name, "fusion", consumer.shape, attrs=[("kind", kind)] + _carried_attrs(consumer),
                  origin=(), span=consumer.span)
    graph.add(fusion)
    fusion.fused = body
    body.fusion_owner = fusion
    root = clone_node(consumer, body)
    operands = fusion.operands
    for op in consumer.operands:
        # (membership first: a search that fails raises inside list.index, and most do here)
        add_operand(root, body.parameters[operands.index(op)] if op in operands else _new_parameter(fusion, op))
    body.root = root
    graph.replace_instruction(consumer, fusion)
    return fusion


def _carried_attrs(consumer: Node) -> list[tuple[str, str]]:
    return [(k, v) for k, v in consumer.attrs if k in ("metadata", "frontend_attributes")]


def _new_parameter(fusion: Node, operand: Node) -> Node:
    """Append `operand` to the fusion's operands with a new fused parameter for it."""
    number = len(fusion.fused.parameters)
    name, literal = _parameter_texts(number)
    param = Node(name, "parameter", operand.shape, literal=literal)
    fusion.fused.add(param)
    add_operand(fusion, operand)
    return param


#: (`param_<n>`, `<n>`) by n: the name and literal of each fused parameter number, made once
#: (every fusion step adds and renumbers parameters; a name made once also hashes once).
_PARAMETER_TEXTS: Final[list[tuple[str, str]]] = []


def _parameter_texts(number: int) -> tuple[str, str]:
    texts = _PARAMETER_TEXTS
    while len(texts) <= number:
        k = len(texts)
        texts.append((f"param_{k}", str(k)))
    return texts[number]


def _remove_parameter(fusion: Node, index: int) -> None:
    """Remove fused parameter `index` (it must be unused) and fusion operand `index`; later
    parameters are renumbered and renamed `param_<n>` (XLA re-creates them)."""
    body = fusion.fused
    param = body.parameters[index]
    body.remove(param)
    remove_operand_at(fusion, index)
    # XLA re-creates each later parameter as `param_<n-1>`; renumbering in place gives the
    # same numbers and names without rebuilding every parameter on every removal.  The list
    # is sorted by number (Graph.add keeps it so): the later parameters are a suffix, and
    # lowering each of them by one keeps it sorted.
    params = body.parameters
    later = bisect.bisect_right(params, index, key=_parameter_number)
    if later == len(params):  # (the last parameter: nothing moves)
        return
    names = body.program.instruction_names
    for p in params[later:]:
        name, literal = _parameter_texts(int(p.literal) - 1)
        p.literal = literal
        body.rename(p, names.get(name))


def remove_unused_parameters(fusion: Node) -> bool:
    """Remove the fused parameters nothing inside reads, with the fusion's operands for them
    (XLA's RemoveUnusedParametersFromFusedComputation, as HloDCE calls it)."""
    body = fusion.fused
    removed = False
    for index in range(len(body.parameters) - 1, -1, -1):
        param = body.parameters[index]
        if not param.users and body.root is not param:
            _remove_parameter(fusion, index)
            removed = True
    return removed


def fuse_instruction(fusion: Node, producer: Node) -> Node:
    """Fuse `producer` (an operand of `fusion`) into it; returns the clone inside.  The producer
    stays outside when it has other users (duplication); the caller deletes it otherwise.
    A fusion producer is merged (its body is inlined)."""
    if producer.opcode == "fusion":
        return merge_fusion(fusion, producer)
    absorb_control_dependencies(fusion, producer)
    _bind_once(fusion, producer)
    body = fusion.fused
    clone = clone_node(producer, body)
    index = fusion.operand_index(producer)
    param = body.parameters[index]
    body.replace_all_uses(param, clone)
    _remove_parameter(fusion, index)
    operands = fusion.operands
    if len(producer.operands) <= _FEW_OPERANDS:
        # the first position of each operand, searched at C speed in the live list (a new
        # parameter's operand is found where it was appended)
        for op in producer.operands:
            add_operand(clone, body.parameters[operands.index(op)] if op in operands else _new_parameter(fusion, op))
        return clone
    first_index: dict[int, int] = {}
    for i, o in enumerate(operands):
        first_index.setdefault(o.uid, i)
    for op in producer.operands:
        existing = first_index.get(op.uid)
        if existing is not None:
            add_operand(clone, body.parameters[existing])
        else:
            first_index[op.uid] = len(operands)
            add_operand(clone, _new_parameter(fusion, op))
    return clone


#: Up to this many producer operands, fuse_instruction searches the fusion's operands once
#: per operand instead of indexing them all.
_FEW_OPERANDS: Final = 8


def merge_fusion(consumer: Node, producer: Node) -> Node:
    """Inline fusion `producer` into fusion `consumer` (XLA's MergeFusionInstruction); returns
    the clone of the producer's root.

    XLA fuses the producer's instructions one by one, root first; the net effect, built here
    in one pass, is the same computation: the consumer's parameter for the producer is
    replaced by a copy of the producer's body, and the producer's operands the consumer does
    not read yet become new parameters, appended in the order that one-by-one fusion appends
    them (the producer's instructions in reverse post order, operands in order)."""
    absorb_control_dependencies(consumer, producer)
    _bind_once(consumer, producer)
    body = consumer.fused
    inner = producer.fused
    if body is None or inner is None:  # (and, compiled, both are Graphs below: read directly)
        raise ValueError(f"merging {producer.name} into {consumer.name}: both must be fusions")
    index = consumer.operand_index(producer)
    target = body.parameters[index]
    operands = consumer.operands
    first_index: dict[int, int] | None = None
    if len(producer.operands) > _FEW_OPERANDS:  # (otherwise searched at C speed, as in fuse_instruction)
        first_index = {}
        for i, o in enumerate(operands):
            first_index.setdefault(o.uid, i)
    order = inner.post_order()
    mapping: dict[int, Node] = {}

    def parameter_for(param: Node) -> Node:
        outer = producer.operands[param.parameter_number]
        if first_index is None:
            return body.parameters[operands.index(outer)] if outer in operands else _new_parameter(consumer, outer)
        i = first_index.get(outer.uid)
        if i is None:
            first_index[outer.uid] = len(operands)
            return _new_parameter(consumer, outer)
        return body.parameters[i]

    for node in order[::-1]:  # (a list, not reversed(): compiled, its items are read as Nodes)
        if node.opcode == "parameter":
            continue
        for op in node.operands:
            if op.opcode == "parameter" and op.uid not in mapping:
                mapping[op.uid] = parameter_for(op)
    if inner.root.opcode == "parameter" and inner.root.uid not in mapping:
        mapping[inner.root.uid] = parameter_for(inner.root)
    for node in order:
        if node.opcode == "parameter":
            continue
        clone = clone_node(node, body)
        for op in node.operands:
            add_operand(clone, mapping[op.uid])
        mapping[node.uid] = clone
    new_root = mapping[inner.root.uid]
    body.replace_all_uses(target, new_root)
    _remove_parameter(consumer, index)
    return new_root


def _unfuse_into(fusion: Node, graph: Graph) -> list[Node]:
    """Copies of a fusion's body instructions (parameters replaced by the fusion's operands),
    added to `graph` in post order; used to merge the fusion elsewhere."""
    mapping: dict[int, Node] = {}
    temps: list[Node] = []
    for node in fusion.fused.post_order():
        if node.opcode == "parameter":
            mapping[node.uid] = fusion.operands[node.parameter_number]
            continue
        copy = clone_node(node, graph)
        for op in node.operands:
            add_operand(copy, mapping[op.uid])
        mapping[node.uid] = copy
        temps.append(copy)
    return temps


def _dedupe_operands(fusion: Node) -> None:
    """A fusion binds each distinct operand to one parameter: merge duplicates."""
    i = 0
    while i < len(fusion.operands):
        op = fusion.operands[i]
        first = fusion.operands.index(op)  # identity (Node has no __eq__)
        if first != i:
            fusion.fused.replace_all_uses(fusion.fused.parameters[i], fusion.fused.parameters[first])
            _remove_parameter(fusion, i)
            continue
        i += 1


def _bind_once(fusion: Node, operand: Node) -> None:
    """A fusion that reads `operand` through several parameters (written so in the text; XLA's
    passes never make one) reads it through one, so fusing it replaces every read."""
    if fusion.operands.count(operand) > 1:  # identity (Node has no __eq__)
        _dedupe_operands(fusion)


def fuse_into_multi_output(fusion: Node, producer: Node) -> Node:
    """Fuse `producer` into `fusion` as an extra output (XLA's FuseInstructionIntoMultiOutput):
    the fused root becomes a tuple (existing outputs first, then the producer's), the fusion's
    shape a tuple, and every outside user reads its value through get-tuple-element."""
    graph = fusion.graph
    body = fusion.fused
    absorb_control_dependencies(fusion, producer)
    was_tuple = body.root.opcode == "tuple"
    # A multi-output producer is read through get-tuple-elements; a fusion whose root is a
    # variadic reduce is tuple-shaped too, but its users read the whole value.
    producer_is_mof = producer.opcode == "fusion" and producer.fused is not None and \
        producer.fused.root.opcode == "tuple"
    inner: list[Node] | Node  # the producer's outputs inside the fusion
    if producer.opcode == "fusion":
        outputs_before = list(body.root.operands) if was_tuple else [body.root]
        inner = merge_fusion_outputs(fusion, producer)
    else:
        if producer in fusion.operands:  # (identity, at C speed: Node has no __eq__)
            inner = fuse_instruction(fusion, producer)
        else:
            inner = clone_node(producer, body)
            for op in producer.operands:
                existing = _index_of(fusion.operands, op, 0)
                add_operand(inner, body.parameters[existing] if existing >= 0 else _new_parameter(fusion, op))
        outputs_before = list(body.root.operands) if was_tuple else [body.root]
    new_outputs = inner if isinstance(inner, list) else [inner]
    outputs = outputs_before + new_outputs
    tuple_node = Node("tuple", "tuple", ir.tuple_shape([o.shape for o in outputs]))
    body.add(tuple_node)
    for o in outputs:
        add_operand(tuple_node, o)
    old_root = body.root
    body.root = tuple_node
    if was_tuple and not old_root.users:
        body.remove(old_root)
    old_users = [u for u in fusion.users]
    fusion.shape = tuple_node.shape
    if not was_tuple:
        gte = make_gte(fusion, 0)
        for user in old_users:
            replace_operand(user, fusion, gte)
        if graph.root is fusion:
            graph.root = gte
    base = len(outputs_before)
    producers = [producer]
    for k, _ in enumerate(new_outputs):
        source = producers[0]
        if producer_is_mof:
            for user in list(source.users):
                if user.opcode == "get-tuple-element":
                    idx = int(user.attr("index"))
                    if idx == k:
                        gte = make_gte(fusion, base + k)
                        graph.replace_all_uses(user, gte)
                        if not user.users:
                            graph.remove(user)
            continue
        gte = make_gte(fusion, base + k)
        graph.replace_all_uses(source, gte)
    return fusion


def merge_fusion_outputs(fusion: Node, producer: Node) -> list[Node]:
    """Inline fusion `producer` into `fusion` keeping its outputs; returns the nodes inside
    `fusion` that compute the producer's outputs."""
    graph = fusion.graph
    temps = _unfuse_into(producer, graph)
    body_root = producer.fused.root
    if body_root.opcode == "parameter":  # the producer computes nothing: its value is its operand
        outputs = [producer.operands[body_root.parameter_number]]
    else:
        root_temp = temps[-1]
        outputs = list(root_temp.operands) if root_temp.opcode == "tuple" else [root_temp]
        if root_temp.opcode == "tuple":
            # the tuple itself is not fused; its operands become the outputs
            temps = temps[:-1]
            graph.remove(root_temp)
    if producer in fusion.operands:
        idx = fusion.operand_index(producer)
        if producer.shape.is_tuple:
            raise NotImplementedError("consumer reads a multi-output producer directly")
        set_operand(fusion, idx, outputs[0])
        _bind_once(fusion, outputs[0])
    inner: dict[int, Node] = {}
    for temp in reversed(temps):
        if temp in fusion.operands:
            inner[temp.uid] = fuse_instruction(fusion, temp)
        else:
            clone = clone_node(temp, fusion.fused)
            for op in temp.operands:
                if op.uid in inner:
                    add_operand(clone, inner[op.uid])
                else:
                    existing = _index_of(fusion.operands, op, 0)
                    add_operand(clone, fusion.fused.parameters[existing] if existing >= 0
                                else _new_parameter(fusion, op))
            inner[temp.uid] = clone
    result = []
    for o in outputs:  # computed inside, or (an output passed straight through) read from outside
        if o.uid not in inner:
            at = _index_of(fusion.operands, o, 0)
            inner[o.uid] = fusion.fused.parameters[at] if at >= 0 else _new_parameter(fusion, o)
        result.append(inner[o.uid])
    for temp in reversed(temps):
        if not temp.users and temp in graph:
            graph.remove(temp)
    return result


def make_gte(tuple_node: Node, index: int) -> Node:
    graph = tuple_node.graph
    gte = Node("get-tuple-element", "get-tuple-element", tuple_node.shape.tuple_shapes[index],
               attrs=[("index", str(index))])
    graph.add(gte)
    add_operand(gte, tuple_node)
    return gte

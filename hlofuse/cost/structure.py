"""Keys that name an instruction, or a producer-consumer pair, by structure alone.

The GPU cost model's answers (an instruction's run time, a pair's fused run time) are functions
of what the kernel computes: opcodes, shapes, attributes, fused bodies, which operands are the
same value, and how a producer feeds its consumer.  They do not depend on names, metadata or on
where in the module the instruction sits.  A model of many layers asks the same questions once
per layer, so the model remembers answers by these keys (GpuPerformanceModel).

A key may hold a name where structure would be costly to spell out (a computation called by
`calls=`, `body=` …, other than reducers): equal names then merely fail to share, never share
wrongly.  Keys of fused bodies are kept per version of the body (graph_cache), so a fusion that
grows is keyed anew.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..graph import graph_cache

if TYPE_CHECKING:
    from ..graph import Node, Program

#: Attributes that never change what a kernel costs (and differ from layer to layer).
_IGNORED = frozenset({"metadata"})


def node_key(node: "Node", known: dict | None = None) -> tuple | int:
    """`node` as a kernel by itself: its opcode, shape, attributes (a reducer by its
    instructions, a fusion by its body), literal, and each operand's opcode and shape with the
    position where that operand first appears (a value read twice is read once).

    `known`: keys already made, by uid, kept with what they were made from (the node's edit
    count, which counts operand changes, its body's version and its attributes).  With it, a
    key is a small number standing for the tuple (equal tuples, equal numbers, within one
    `known`): callers look keys up again and again, and a nested tuple of shapes is hashed
    anew on every lookup."""
    if known is None:
        return _node_key(node)
    body = node.fused
    version = body.version if body is not None else -1
    found = known.get(node.uid)
    # (compared field by field: asked hundreds of thousands of times, mostly answered here)
    if found is not None and found[0] == node.edits and found[1] is body and found[2] == version \
            and found[3] == node.attrs:
        return found[4]
    numbers = known.get(_NUMBERS)
    if numbers is None:
        numbers = known[_NUMBERS] = {}
    key = numbers.setdefault(_node_key(node), len(numbers))
    known[node.uid] = (node.edits, body, version, list(node.attrs), key)  # (a copy: attrs are edited in place)
    return key


#: Where a `known` dict keeps its numbers for key tuples (node_key).
_NUMBERS = "numbers"


def _node_key(node: "Node") -> tuple:
    operands = node.operands
    first: dict[int, int] = {}
    outside = tuple((op.opcode, op.shape, first.setdefault(op.uid, i)) for i, op in enumerate(operands))
    body = node.fused
    body_key = _body_key(body) if node.opcode == "fusion" and body is not None else None
    return (node.opcode, node.shape, _attrs_key(node, body_key is not None), node.literal, body_key, outside)


def pair_key(producer: "Node", consumer: "Node", known: dict | None = None) -> tuple | int:
    """`producer` and `consumer` as a pair: both node keys and how they are wired: for each of
    the consumer's operands, whether it is the producer (or which of its outputs, through a
    get-tuple-element) or the first of the producer's operands that is the same value.

    `known`: as for node_key; pair keys are kept there too (under ("pair", uids)), valid while
    neither node's operands changed (their edit counts) and both node keys hold."""
    if known is None:
        return _pair_key(producer, consumer, node_key(producer), node_key(consumer))
    p_key = node_key(producer, known)
    c_key = node_key(consumer, known)
    slot = ("pair", producer.uid, consumer.uid)
    found = known.get(slot)
    if found is not None and found[0] == producer.edits and found[1] == consumer.edits \
            and found[2] == p_key and found[3] == c_key:
        return found[4]
    key = _pair_key(producer, consumer, p_key, c_key)
    known[slot] = (producer.edits, consumer.edits, p_key, c_key, key)
    return key


def _pair_key(producer: "Node", consumer: "Node", p_key: tuple | int, c_key: tuple | int) -> tuple:
    in_producer: dict[int, int] = {}
    for i, op in enumerate(producer.operands):
        in_producer.setdefault(op.uid, i)
    wiring = []
    for op in consumer.operands:
        if op is producer:
            wiring.append("P")
        elif op.opcode == "get-tuple-element" and op.operands and op.operands[0] is producer:
            wiring.append(("G", op.attr("index")))
        else:
            wiring.append(in_producer.get(op.uid, -1))
    return p_key, c_key, tuple(wiring)


def _attrs_key(node: "Node", fused: bool) -> tuple:
    attrs = node.attrs
    if not attrs:
        return ()
    out = []
    value: object  # a reducer's name, or its structure
    for name, value in attrs:
        if name in _IGNORED or (fused and name == "calls"):
            continue
        if name == "to_apply":
            value = _reducer_key(node, value)
        out.append((name, value))
    return tuple(out)


def body_key(body) -> tuple:
    """A fused body by structure: every instruction (opcode, shape, attributes, a reducer by
    its instructions, literal, operands by post-order position), the root's position and the
    parameter count; a small number within a program.  Kept per version of the body; a body
    PriorityFusion grew is keyed by how it grew instead (grown_body_key)."""
    return _body_key(body)


def _body_key(body) -> tuple:
    cache = graph_cache(body)
    found = cache.get("structure")
    if found is None:
        found = spelled_out_body_key(body)
        program = body.program
        if program is not None:  # a number instead (hashing a long tuple on every lookup costs)
            found = (program.memo, program.memo.structures.setdefault(found, len(program.memo.structures)))
        cache["structure"] = found
    return found


def spelled_out_body_key(body) -> tuple:
    """body_key's tuple, made from the body's instructions (nothing remembered)."""
    position: dict[int, int] = {}
    parts = []
    for inner in body.post_order():
        position[inner.uid] = len(parts)
        if inner.opcode == "parameter":
            parts.append(("parameter", inner.parameter_number, inner.shape))
            continue
        parts.append((inner.opcode, inner.shape, tuple(position[op.uid] for op in inner.operands),
                      _attrs_key(inner, False), inner.literal))
    return (tuple(parts), position[body.root.uid], len(body.parameters))


def grown_body_key(producer: "Node", consumer: "Node") -> tuple | None:
    """The key of the body that fusing `producer` into `consumer` makes, asked before fusing
    (None outside a program): a number standing for both node keys and the wiring (_pair_key).
    Fusing is deterministic, so that pair fixes the new body exactly, as its full key would,
    without walking a body that grows by one instruction per step (set it with
    set_body_key once the fusion is made).  A body spelled out instance by instance and the
    same body grown step by step get different numbers: they merely fail to share."""
    graph = consumer.graph
    program: "Program | None" = graph.program if graph is not None else None
    if program is None:
        return None
    memo = program.memo
    grown = ("grown", _pair_key(producer, consumer, _node_key(producer), _node_key(consumer)))
    structures = memo.structures
    return (memo, structures.setdefault(grown, len(structures)))


def set_body_key(body, key: tuple) -> None:
    """Give `body`, as it is now, the key grown_body_key made for it (kept per version)."""
    graph_cache(body)["structure"] = key


def _reducer_key(node: "Node", name: str):
    """A called reducer by its instructions (XLA clones reducers: equal ones have many names),
    or its name when it cannot be found from `node`."""
    graph = node.graph
    program: "Program | None" = graph.program if graph is not None else None
    reducer = program.graphs.get(name.strip().lstrip("%")) if program is not None else None
    if reducer is None:
        return name
    cache = graph_cache(reducer)
    found = cache.get("reducer structure")
    if found is None:
        position: dict[int, int] = {}
        parts = []
        for inner in reducer.post_order():
            position[inner.uid] = len(parts)
            if inner.called or inner.fused is not None:
                found = cache["reducer structure"] = name  # (calls further: named, not spelled out)
                return found
            parts.append((inner.opcode, inner.shape, tuple(position[op.uid] for op in inner.operands),
                          inner.literal, inner.parameter_number if inner.opcode == "parameter" else None,
                          tuple(a for a in inner.attrs if a[0] not in _IGNORED)))
        found = cache["reducer structure"] = (tuple(parts), position[reducer.root.uid])
    return found

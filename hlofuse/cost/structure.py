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
    from ..graph import Graph, Node, Program

#: Attributes that never change what a kernel costs (and differ from layer to layer).
_IGNORED = frozenset({"metadata"})


class KeyMemo:
    """Keys made for nodes and pairs (node_key, pair_key), each kept with what it was made
    from: asked hundreds of thousands of times, they are mostly answered from here."""

    def __init__(self) -> None:
        #: node uid → its key and the state it was made from
        self.nodes: dict[int, KeptNodeKey] = {}
        #: producer uid << 32 | consumer uid → the pair's key and the node keys it was made
        #: from (one int, not a tuple of uids: nothing to build or hash per question)
        self.pairs: dict[int, KeptPairKey] = {}


class KeptNodeKey:
    """A node's key and what it was made from: its operands, its body and the body's version,
    and its attributes (the operands a copy: that list is edited in place; the attributes a
    tuple, replaced when they change).  `edits`, the node's edit
    count when last checked, answers most questions at once; the count also moves when only
    the node's users change, and then the operands, compared one by one, show the key holds
    (the record stays: pair keys made from it hold too)."""

    def __init__(self, edits: int, operands: list, body: "Graph | None", version: int, attrs: tuple,
                 key: object) -> None:
        self.edits = edits
        self.operands = operands
        self.body = body
        self.version = version
        self.attrs = attrs
        self.key = key


class KeptPairKey:
    """A pair's key and the records of the two node keys it was made from (while both hold,
    so do the wiring and the key)."""

    def __init__(self, producer: KeptNodeKey, consumer: KeptNodeKey, key: object) -> None:
        self.producer = producer
        self.consumer = consumer
        self.key = key


def node_key(node: "Node", known: KeyMemo | None = None) -> object:
    """`node` as a kernel by itself: its opcode, shape, attributes (a reducer by its
    instructions, a fusion by its body), literal, and each operand's opcode and shape with the
    position where that operand first appears (a value read twice is read once).

    `known`: keys already made (KeyMemo).  With it, a key is a small number standing for the
    tuple within the node's program (equal tuples, equal numbers; outside a program, the tuple
    itself): callers look keys up again and again, and a nested tuple of shapes is hashed anew
    on every lookup."""
    if known is None:
        return _node_key(node)
    return _kept(node, known).key


def _kept(node: "Node", known: KeyMemo) -> KeptNodeKey:
    """The record of `node`'s key in `known`, made anew if what it was made from changed."""
    body = node.fused
    version = body.version if body is not None else -1
    found = known.nodes.get(node.uid)
    if found is not None and found.body is body and found.version == version and found.attrs == node.attrs:
        if found.edits == node.edits:
            return found
        if found.operands == node.operands:  # (identity: a Node has no __eq__)
            found.edits = node.edits
            return found
    graph = node.graph
    program: "Program | None" = graph.program if graph is not None else None
    if program is None:
        key: object = _node_key(node)
    else:
        structures = program.memo.structures
        key = structures.setdefault(_node_key(node, True), len(structures))
    kept = known.nodes[node.uid] = KeptNodeKey(node.edits, list(node.operands), body, version, node.attrs, key)
    return kept


def _numbered(node: "Node", key: tuple) -> object:
    """The number standing for `key` in the program of `node` (the key itself outside one)."""
    graph = node.graph
    program: "Program | None" = graph.program if graph is not None else None
    if program is None:
        return key
    structures = program.memo.structures
    return structures.setdefault(key, len(structures))


def _node_key(node: "Node", numbering: bool = False) -> tuple:
    """The key tuple; `numbering`: it is to be numbered in its program's memo, so a body is
    named by its number alone (its (memo, number) pair would make the memo hold itself: a
    reference cycle that outlives the replay)."""
    operands = node.operands
    first: dict[int, int] = {}
    outside = tuple((op.opcode, op.shape, first.setdefault(op.uid, i)) for i, op in enumerate(operands))
    body = node.fused
    body_key: object = None
    if node.opcode == "fusion" and body is not None:
        found = _body_key(body)
        body_key = found[1] if numbering and body.program is not None else found  # (the node's program)
    return (node.opcode, node.shape, _attrs_key(node, body_key is not None), node.literal, body_key, outside)


def pair_key(producer: "Node", consumer: "Node", known: KeyMemo | None = None) -> object:
    """`producer` and `consumer` as a pair: both node keys and how they are wired: for each of
    the consumer's operands, whether it is the producer (or which of its outputs, through a
    get-tuple-element) or the first of the producer's operands that is the same value.

    `known`: as for node_key (a number within the program); a pair's key is kept there too,
    valid while both node keys hold as kept (their records: neither node's operands changed)."""
    if known is None:
        return _pair_key(producer, consumer, node_key(producer), node_key(consumer))
    p_kept = _kept(producer, known)
    c_kept = _kept(consumer, known)
    slot = producer.uid << 32 | consumer.uid
    found = known.pairs.get(slot)
    if found is not None and found.producer is p_kept and found.consumer is c_kept:
        return found.key
    key = _numbered(consumer, _pair_key(producer, consumer, p_kept.key, c_kept.key))
    known.pairs[slot] = KeptPairKey(p_kept, c_kept, key)
    return key


def _pair_key(producer: "Node", consumer: "Node", p_key: object, c_key: object) -> tuple:
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


def body_key(body: "Graph") -> tuple:
    """A fused body by structure: every instruction (opcode, shape, attributes, a reducer by
    its instructions, literal, operands by post-order position), the root's position and the
    parameter count; a small number within a program.  Kept per version of the body; a body
    PriorityFusion grew is keyed by how it grew instead (grown_body_key)."""
    return _body_key(body)


def _body_key(body: "Graph") -> tuple:
    cache = graph_cache(body)
    found = cache.get("structure")
    if found is None:
        found = spelled_out_body_key(body)
        program = body.program
        if program is not None:  # a number instead (hashing a long tuple on every lookup costs)
            found = (program.memo, program.memo.structures.setdefault(found, len(program.memo.structures)))
        cache["structure"] = found
    return found


def spelled_out_body_key(body: "Graph") -> tuple:
    """body_key's tuple, made from the body's instructions (nothing remembered)."""
    position: dict[int, int] = {}
    parts: list[tuple] = []
    for inner in body.post_order():
        position[inner.uid] = len(parts)
        if inner.opcode == "parameter":
            parts.append(("parameter", inner.parameter_number, inner.shape))
            continue
        parts.append((inner.opcode, inner.shape, tuple(position[op.uid] for op in inner.operands),
                      _attrs_key(inner, False), inner.literal))
    return (tuple(parts), position[body.root.uid], len(body.parameters))


def grown_body_key(producer: "Node", consumer: "Node", known: KeyMemo) -> tuple | None:
    """The key of the body that fusing `producer` into `consumer` makes, asked before fusing
    (None outside a program): a number standing for the pair's key (pair_key: both node keys
    and the wiring).  Fusing is deterministic, so that pair fixes the new body exactly, as its
    full key would, without walking a body that grows by one instruction per step (set it
    with set_body_key once the fusion is made).  A body spelled out instance by instance and
    the same body grown step by step get different numbers: they merely fail to share."""
    graph = consumer.graph
    program: "Program | None" = graph.program if graph is not None else None
    if program is None:
        return None
    memo = program.memo
    grown = ("grown", pair_key(producer, consumer, known))
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

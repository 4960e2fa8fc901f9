"""The small passes XLA:GPU's fusion pipelines run between the fusion passes: HloCSE (inside
fusion computations only, layout sensitive), HloDCE, and VariadicOpSplitter (concatenates of
more than 128 operands).  Both the legacy and the priority pipeline use them.

They make no fusion decisions, so they record none; they change what later passes see (user
counts after CSE decide tiled-transpose heroes, XLA's comment says).
"""

from __future__ import annotations

from ..graph import CONTROL, Graph, Node, Program, add_operand
from ..fusion_primitives import remove_unused_parameters
from ..ir import tuple_shape
from ..pipeline import Context

#: VariadicOpSplitter's kMaxParameters.
MAX_CONCAT_OPERANDS = 128

_IGNORED_FOR_CSE = frozenset({"metadata", "frontend_attributes", "sharding", "statistics", "origin"})
_SIDE_EFFECT = frozenset({
    "rng", "rng-get-and-update-state", "infeed", "outfeed", "send", "send-done", "recv", "recv-done",
    "custom-call", "all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start",
    "all-gather-done", "collective-permute", "collective-permute-start", "collective-permute-done",
    "all-to-all", "reduce-scatter", "collective-broadcast", "after-all", "add-dependency", "opt-barrier",
    "parameter", "while", "conditional", "call",
})


def remove_instruction(graph: Graph, node: Node) -> None:
    """Delete a user-less instruction, and its fused computation if it is a fusion."""
    graph.remove(node)
    if node.fused is not None:
        graph.program.remove_graph(node.fused)
        for inner in node.fused.nodes():
            if inner.fused is not None:
                graph.program.remove_graph(inner.fused)


# ------------------------------------------------------------------------------------------
# HloCSE(is_layout_sensitive=true, only_fusion_computations=true)
# ------------------------------------------------------------------------------------------


#: Shape → its layout-sensitive text.  Shapes are frozen values and `to_text` depends only on
#: the fields they compare equal by, so equal shapes share one text.
_SHAPE_TEXT: dict = {}


def _shape_text(shape) -> str:
    text = _SHAPE_TEXT.get(shape)
    if text is None:
        if len(_SHAPE_TEXT) > 65536:
            _SHAPE_TEXT.clear()
        text = _SHAPE_TEXT[shape] = shape.to_text(layout=True)
    return text


def _cse_key(node: Node) -> tuple:
    attrs = tuple((k, v) for k, v in node.attrs if k not in _IGNORED_FOR_CSE) if node.attrs else ()
    return (node.opcode, _shape_text(node.shape), tuple(op.uid for op in node.operands), attrs,
            node.literal, tuple(node.called), node.fused.name if node.fused is not None else None)


def cse_fusion_computations(program: Program, ctx: Context | None = None) -> bool:
    """Merge identical instructions (same opcode, layout-sensitive shape, operands and
    attributes) inside every fusion computation."""
    changed = False
    clean = program.cse_clean
    for graph in list(program.graphs.values()):
        if graph.is_fusion_body and clean.get(graph.name) != (graph, graph.version):
            changed |= cse_graph(graph)
            clean[graph.name] = (graph, graph.version)  # nothing left to merge at this version
    return changed


def cse_graph(graph: Graph) -> bool:
    if not _has_duplicates(graph):
        return False
    seen: dict[tuple, Node] = {}
    changed = False
    for node in graph.post_order():
        if node.opcode in _SIDE_EFFECT or node not in graph:
            continue
        key = _cse_key(node)
        first = seen.get(key)
        if first is None:
            seen[key] = node
            continue
        graph.replace_all_uses(node, first)
        if not node.users and graph.root is not node:
            remove_instruction(graph, node)
        changed = True
    return changed


def _has_duplicates(graph: Graph) -> bool:
    """Whether two instructions cse_graph may merge have the same key.  Without such a pair its
    walk merges nothing (keys change only when something is merged), so the post order it
    walks in need not be computed."""
    # Equal keys mean equal operand lists: two instructions with operands share the first,
    # and are both among its users; two without operands are both leaves.  So keys are made
    # only for the users of an instruction read first by several, and for the leaves (most
    # fused instructions have one user: most computations need no key at all).
    leaves: list[Node] = []
    for node in graph.nodes():
        users = node.users
        if len(users) > 1 and _duplicate_among(node, users):
            return True
        if not node.operands and node.opcode not in _SIDE_EFFECT:
            leaves.append(node)
    if len(leaves) < 2:
        return False
    seen: set[tuple] = set()
    for node in leaves:
        key = _cse_key(node)
        if key in seen:
            return True
        seen.add(key)
    return False


def _duplicate_among(first: Node, users: list[Node]) -> bool:
    """Whether two of `users` that read `first` as their first operand have the same key."""
    seen: set[tuple] | None = None
    candidate: Node | None = None
    for user in users:
        if user.operands[0] is not first or user.opcode in _SIDE_EFFECT:
            continue
        if candidate is None:
            candidate = user  # (a key is made only once a second one is found)
            continue
        if seen is None:
            seen = {_cse_key(candidate)}
        key = _cse_key(user)
        if key in seen:
            return True
        seen.add(key)
    return False


# ------------------------------------------------------------------------------------------
# HloDCE
# ------------------------------------------------------------------------------------------

_DCE_KEEP = _SIDE_EFFECT - {"rng", "custom-call", "while", "conditional", "call"}


def _removable(node: Node) -> bool:
    from ..gpu.properties import has_side_effect

    if node.opcode in ("parameter",) or node.opcode in _DCE_KEEP:
        return False
    return not has_side_effect(node)


def dce(program: Program, ctx: Context | None = None) -> bool:
    """XLA's HloDCE: computations callers first, so that a multi-output fusion's unread
    get-tuple-elements are gone before its computation drops the outputs nobody reads; in each,
    instructions no one uses (not roots, not parameters, no side effects); then computations
    the entry no longer reaches (fused computations of fusions merged away)."""
    changed = False
    clean = program.dce_clean
    again = True
    while again:  # a fusion that drops outputs may drop operands, and their producers die
        again = False
        for graph in reversed(program.graph_order()):
            if graph.name not in program.graphs:
                continue
            if graph.is_fusion_body and remove_unused_outputs(graph):
                changed = again = True
            if clean.get(graph.name) == (graph, graph.version):
                continue
            changed |= dce_graph(graph)
            clean[graph.name] = (graph, graph.version)  # nothing dead left at this version
    return program.remove_dead_graphs() or changed


def remove_unused_outputs(body: Graph) -> bool:
    """HloDCE's RemoveMultiOutputFusionsUnusedOutputs (hlo_dce.cc, at both pinned commits):
    a multi-output fusion whose users are all get-tuple-elements keeps only the outputs they
    read (one left: the fusion is that output, its get-tuple-elements replaced by it); then
    what computed the others, and the parameters only they read, go.  Not for fusions with
    control edges, output aliasing or a library (kCustom) kind, as in XLA."""
    fusion, root = body.fusion_owner, body.root
    if fusion is None or root is None or root.opcode != "tuple" or fusion.graph is None:
        return False
    if root.attr("sharding") or fusion.attr("output_to_operand_aliasing") or fusion.fusion_kind == "kCustom":
        return False
    graph = fusion.graph
    if not fusion.users or fusion.is_root or fusion.attr(CONTROL) or graph.control_successors(fusion):
        return False
    if any(user.opcode != "get-tuple-element" for user in fusion.users):
        return False
    used = sorted({int(user.attr("index")) for user in fusion.users})
    if len(used) == len(root.operands):
        return False
    outputs = [root.operands[i] for i in used]
    if len(outputs) > 1:
        renumber = {old: new for new, old in enumerate(used)}
        for user in list(fusion.users):
            user.set_attr("index", str(renumber[int(user.attr("index"))]))
        new_root = Node("tuple", "tuple", tuple_shape([o.shape for o in outputs]))
        body.add(new_root)
        for output in outputs:
            add_operand(new_root, output)
        body.root = new_root
        fusion.shape = new_root.shape
    else:
        body.root = outputs[0]
        fusion.shape = outputs[0].shape
        for user in list(fusion.users):
            graph.replace_instruction(user, fusion)
    graph.bump()
    body.remove(root)
    dce_graph(body)
    remove_unused_parameters(fusion)
    return True


def dce_graph(graph: Graph) -> bool:
    root = graph.root
    if all(node.users or node is root for node in graph):
        return False  # nothing dead (removing only makes dead what a dead node used)
    changed = False
    control = graph.program is not None and graph.program.has_control
    for node in reversed(graph.post_order()):
        if node not in graph or node.users or graph.root is node or not _removable(node):
            continue
        if control and (node.attr(CONTROL) or graph.control_successors(node)):
            continue  # XLA's IsSafelyRemovable: an instruction with control edges stays
        remove_instruction(graph, node)
        changed = True
    return changed


# ------------------------------------------------------------------------------------------
# VariadicOpSplitter
# ------------------------------------------------------------------------------------------


def split_variadic_ops(program: Program, ctx: Context | None = None) -> bool:
    """Rebuild every concatenate of more than 128 operands (outside fusion computations) as a
    tree of concatenates of at most 128 operands (batches in operand order)."""
    changed = False
    for graph in program.non_fusion_graphs():
        for node in graph.post_order():
            if node.opcode == "concatenate" and len(node.operands) > MAX_CONCAT_OPERANDS:
                _split(graph, node)
                changed = True
    return changed


def _split(graph: Graph, concat: Node) -> None:
    from ..attributes import dimensions
    from ..ir import Shape

    dim = dimensions(concat)[0]
    operands = list(concat.operands)
    while len(operands) > MAX_CONCAT_OPERANDS:
        merged: list[Node] = []
        for start in range(0, len(operands), MAX_CONCAT_OPERANDS):
            batch = operands[start:start + MAX_CONCAT_OPERANDS]
            if start > 0 and len(batch) < MAX_CONCAT_OPERANDS:
                merged.extend(batch)  # a trailing partial batch waits for the next round
                continue
            dims = list(batch[0].shape.dims)
            dims[dim] = sum(op.shape.dims[dim] for op in batch)
            shape = Shape(concat.shape.element_type, tuple(dims), concat.shape.layout)
            part = Node("concatenate", "concatenate", shape, attrs=[("dimensions", "{%d}" % dim)])
            graph.add(part)
            for op in batch:
                add_operand(part, op)
            merged.append(part)
        operands = merged
    for op in set(concat.operands):
        op.users = [u for u in op.users if u is not concat]
        op.edits += 1
    concat.operands = []
    graph.bump()
    for op in operands:
        add_operand(concat, op)

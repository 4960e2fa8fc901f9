"""XLA:CPU's library fusion pass `dot-library-rewriter` with YNNPACK (LibraryRewriter and
YnnMatcher at the XLA of jaxlib 0.10.2; docs/xla/cpu-fusion.md §5).

XLA:CPU runs it before `fusion`, so XLA's before-fusion snapshot already holds its
`kind=kCustom` fusions and the normal replay never needs it.  It is replayed only when asked
(`Options(library_fusion=True)`) on a module that holds no library fusion yet, e.g. a module
from before XLA's optimizations.  What it does, in XLA's order:

  1. per non-fusion computation (not reducer bodies): starters in reverse post order: dots,
     convolutions, reduces and reduce-windows (by `xla_cpu_experimental_ynn_fusion_type`,
     default INDIVIDUAL_DOT, INDIVIDUAL_CONVOLUTION, REDUCE);
  2. a starter YNNPACK supports and prefers (dots and convolutions always, other ops when an
     array of theirs has at least 4096 elements) becomes a one-instruction `ynn_fusion`;
  3. fusions started by a reduce grow: breadth first over neighbours, up into producers all
     of whose users are already inside, down into a single user, merging other YNN fusions it
     meets, up to 100 instructions, until nothing changes.

Differences from XLA, on purpose: YNN_MAX_TENSOR_RANK (a YNNPACK constant) is taken as 6;
the `convert` XLA inserts after a library op whose output type the library cannot produce
only concerns bf16 dots, which YNNPACK does not take, so it is not modelled.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from .. import attributes, graph as g
from .. import fusion_primitives as fp
from ..rules import instruction_fusion as rif

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Graph, Node, Program
    from ..pipeline import Context

YNN_KIND = "__ynn_fusion"
YNN_BACKEND_CONFIG = '{"outer_dimension_partitions":[],"fusion_config":{"kind":"__ynn_fusion"}}'
#: LibraryRewriter's kMaxInstructionsInFusion (parameters count).
MAX_INSTRUCTIONS = 100
#: IsInstructionPreferredByYnn: an array of at least this many elements.
PREFERRED_ELEMENTS = 4096
YNN_MAX_TENSOR_RANK = 6  # assumption: the YNNPACK header was not read
#: xla_cpu_experimental_ynn_fusion_type's default.
DEFAULT_TYPES = frozenset({"INDIVIDUAL_DOT", "INDIVIDUAL_CONVOLUTION", "REDUCE"})

_YNN_TYPES = frozenset({"s4", "u4", "s8", "u8", "bf16", "f16", "f32", "f64", "s32"})
_UNARY = frozenset({"abs", "ceil", "convert", "erf", "exponential", "exponential-minus-one", "floor", "log",
                    "log-plus-one", "logistic", "negate", "round-nearest-even", "rsqrt", "sign", "sqrt", "tanh"})
_BINARY = frozenset({"add", "divide", "maximum", "minimum", "multiply", "power", "subtract"})
_ELEMENTWISE_TYPES = frozenset({"f64", "f32", "bf16", "s8", "u8"})
_DOT_TYPES = frozenset({("f64", "f64", "f64"), ("f32", "f32", "f32"), ("bf16", "bf16", "f32"),
                        ("s8", "s8", "s32"), ("u8", "s8", "s32")})
_SUM_TYPES = frozenset({("f64", "f64"), ("f32", "f32"), ("f16", "f32"), ("bf16", "f32"), ("s8", "s32"), ("u8", "s32")})
_MINMAX_TYPES = frozenset({"u8", "s8", "bf16", "f16", "f32", "f64"})


# ------------------------------------------------------------------------------------------
# YnnMatcher (xla/backends/cpu/ynn_support.cc)
# ------------------------------------------------------------------------------------------


def _layout_ok(shape) -> bool:
    if not shape.is_array:
        return False
    if not shape.dims:
        return True
    if shape.rank > YNN_MAX_TENSOR_RANK:
        return False
    return shape.layout is None or shape.minor_to_major == tuple(range(shape.rank - 1, -1, -1))


def preferred(node: "Node") -> bool:
    """IsInstructionPreferredByYnn: dots and convolutions, or ops touching a large array."""
    if node.opcode in ("dot", "convolution"):
        return True
    return any(s.is_array and s.elements >= PREFERRED_ELEMENTS
               for s in [node.shape] + [op.shape for op in node.operands])


def _same_type_view(node: "Node") -> bool:
    if len(node.operands) != 1 or node.shape.element_type not in _YNN_TYPES:
        return False
    src = node.operands[0]
    return (node.shape.element_type == src.shape.element_type
            and _layout_ok(node.shape) and _layout_ok(src.shape))


def is_supported(node: "Node") -> bool:
    """YnnMatcher::IsOpSupported."""
    op, shape = node.opcode, node.shape
    if op == "constant":
        return shape.is_array and shape.element_type in _YNN_TYPES
    if op == "iota":
        return shape.element_type in ("f32", "s32") and _layout_ok(shape)
    if op == "reshape":
        return _same_type_view(node) and _reshape_is_bitcast(node)
    if op in ("bitcast", "transpose"):
        return _same_type_view(node)
    if op == "broadcast":
        if len(node.operands) != 1 or shape.element_type not in _YNN_TYPES:
            return False
        dims = attributes.int_list(node.attr("dimensions"))
        return (_layout_ok(shape) and _layout_ok(node.operands[0].shape)
                and all(dims[i] > dims[i - 1] for i in range(1, len(dims))))
    if op == "pad":
        return _pad_supported(node)
    if not preferred(node):
        return False
    if op == "dot":
        return _dot_supported(node)
    if op in ("reduce", "reduce-window"):
        return _reduce_supported(node)
    if op == "convolution":
        return _convolution_supported(node)
    if rif.is_elementwise(node):
        if shape.element_type not in _ELEMENTWISE_TYPES or any(
                o.shape.element_type not in _ELEMENTWISE_TYPES for o in node.operands):
            return False
        return (len(node.operands) == 1 and op in _UNARY) or (len(node.operands) == 2 and op in _BINARY)
    return False


def _reshape_is_bitcast(node: "Node") -> bool:
    """Descending layouts on both sides: a reshape is then a bitcast."""
    src = node.operands[0].shape
    return src.elements == node.shape.elements


def _pad_supported(node: "Node") -> bool:
    if len(node.operands) != 2:
        return False
    t = node.shape.element_type
    src, value = node.operands
    if t not in _YNN_TYPES or t != src.shape.element_type or t != value.shape.element_type:
        return False
    if not (_layout_ok(node.shape) and _layout_ok(src.shape)):
        return False
    for d, (low, high, interior) in enumerate(attributes._padding(node.attr("padding") or "")):
        if d < src.shape.rank and src.shape.dims[d] == 1 and (low or high):
            return False
        if interior:
            return False
    return True


def _dot_supported(node: "Node") -> bool:
    if len(node.operands) != 2:
        return False
    lhs, rhs = (op.shape for op in node.operands)
    out = node.shape
    if (lhs.element_type, rhs.element_type, out.element_type) not in _DOT_TYPES:
        return False
    if not (_layout_ok(lhs) and _layout_ok(rhs) and _layout_ok(out)):
        return False
    lb = attributes.int_list(node.attr("lhs_batch_dims"))
    rb = attributes.int_list(node.attr("rhs_batch_dims"))
    lc = attributes.int_list(node.attr("lhs_contracting_dims"))
    rc = attributes.int_list(node.attr("rhs_contracting_dims"))
    nb = len(lb)
    if lb != tuple(range(nb)) or rb != tuple(range(nb)) or len(lc) != 1 or len(rc) != 1:
        return False
    lm = [d for i, d in enumerate(lhs.dims) if i >= nb]
    rm = [d for i, d in enumerate(rhs.dims) if i >= nb]
    if len(lm) > 2 or len(rm) > 2 or out.rank - nb > 2:
        return False
    lci, rci = lc[0] - nb, rc[0] - nb
    m = 1 if len(lm) <= 1 else lm[1 - lci]
    k = lm[lci]
    n = 1 if len(rm) <= 1 else rm[1 - rci]
    if m == 1 or n == 1 or max(m, k, n) < 8:
        return False
    # descending layouts are never column major; the lhs must contract its last dimension
    return len(lm) <= 1 or lci == 1


def _reducer_root(node: "Node"):
    program = node.graph.program
    names = [c for c in node.called if c in program.graphs]
    return program.graphs[names[0]].root if names else None


def _reduce_supported(node: "Node") -> bool:
    if len(node.operands) != 2:
        return False
    src, init = node.operands
    out_type = node.shape.element_type if node.shape.is_array else None
    if out_type not in _YNN_TYPES or not (_layout_ok(node.shape) and _layout_ok(src.shape)):
        return False
    if node.opcode == "reduce":
        if not attributes.int_list(node.attr("dimensions")):
            return False
    else:
        axes = 0
        for w in attributes._window(node.attr("window") or ""):
            if w.size > 1 or w.stride > 1:
                if w.size > 1 and w.stride != w.size:
                    return False
                if w.lhs_dilation != 1 or w.rhs_dilation != 1 or w.reversal:
                    return False
                axes += 1
        if axes == 0 or node.shape.rank + axes > YNN_MAX_TENSOR_RANK:
            return False
    if init.shape.element_type != out_type:
        return False
    root = _reducer_root(node)
    if root is None or len(root.operands) != 2 or sorted(
            op.parameter_number for op in root.operands if op.opcode == "parameter") != [0, 1]:
        return False
    pair = (src.shape.element_type, out_type)
    if root.opcode == "add":
        return pair in _SUM_TYPES
    if root.opcode in ("maximum", "minimum"):
        return pair[0] == pair[1] and out_type in _MINMAX_TYPES
    return False


def _convolution_supported(node: "Node") -> bool:
    """2-D NHWC/HWIO convolutions of f32/f64 or int8 with more than 16 features."""
    if len(node.operands) != 2:
        return False
    labels = (node.attr("dim_labels") or "").strip()
    if labels != "b01f_01io->b01f":
        return False
    if (attributes.integer(node, "batch_group_count", 1) or 1) != 1:
        return False
    lhs, rhs = (op.shape for op in node.operands)
    types = (lhs.element_type, rhs.element_type, node.shape.element_type)
    if types not in (("f32", "f32", "f32"), ("f64", "f64", "f64"), ("s8", "s8", "s32")):
        return False
    if max(rhs.dims[2], rhs.dims[3]) <= 16:
        return False
    for w in attributes._window(node.attr("window") or ""):
        if w.lhs_dilation != 1 or w.reversal:
            return False
    return True


def should_create(node: "Node", types: frozenset[str]) -> bool:
    if not preferred(node):
        return False
    if node.opcode == "dot":
        return bool({"DOT", "INDIVIDUAL_DOT"} & types)
    if node.opcode == "convolution":
        return "INDIVIDUAL_CONVOLUTION" in types
    if node.opcode in ("reduce", "reduce-window"):
        return "REDUCE" in types
    return "ELTWISE" in types and rif.is_elementwise(node)


def should_grow(node: "Node", types: frozenset[str]) -> bool:
    if node.opcode == "dot":
        return "DOT" in types and "INDIVIDUAL_DOT" not in types
    if node.opcode == "convolution":
        return "INDIVIDUAL_CONVOLUTION" not in types
    return True


def _is_ynn_fusion(node: "Node") -> bool:
    if node.opcode != "fusion" or node.fusion_kind != "kCustom":
        return False
    config = attributes.backend_config(node).get("fusion_config") or {}
    return isinstance(config, dict) and config.get("kind") == YNN_KIND


# ------------------------------------------------------------------------------------------
# LibraryRewriter (xla/backends/cpu/transforms/library_rewriter.cc)
# ------------------------------------------------------------------------------------------


def dot_library_rewriter(program: "Program", ctx: "Context | None" = None,
                         types: frozenset[str] = DEFAULT_TYPES) -> bool:
    """Build YNNPACK library fusions as XLA:CPU does before `fusion`."""
    callers = program.callers()
    changed = False
    for graph in program.non_fusion_graphs():
        if any(node.opcode != "call" and node.attr("to_apply") for node in callers.get(graph.name, ())):
            continue  # reducer, comparator and scatter bodies
        changed |= _process(graph, types)
    return changed


def _process(graph: "Graph", types: frozenset[str]) -> bool:
    starters, eltwise = [], []
    for node in reversed(graph.post_order()):
        if node.opcode == "dot" and {"DOT", "INDIVIDUAL_DOT"} & types:
            starters.append(node)
        elif node.opcode == "convolution" and "INDIVIDUAL_CONVOLUTION" in types:
            starters.append(node)
        elif node.opcode in ("reduce", "reduce-window") and "REDUCE" in types:
            starters.append(node)
        elif "ELTWISE" in types and rif.is_elementwise(node) and node.opcode != "constant":
            eltwise.append(node)
    fused: set[int] = set()
    for centroid in starters + eltwise:
        if centroid.uid in fused or centroid not in graph:
            continue
        if not (is_supported(centroid) and should_create(centroid, types)):
            continue
        fused.add(centroid.uid)
        grow = should_grow(centroid, types)
        fusion = fp.create_fusion(centroid, "kCustom", name="ynn_fusion")
        fusion.set_attr("backend_config", YNN_BACKEND_CONFIG)
        if grow:
            while True:
                fusion, more = _fuse_neighbors(fusion, fused)
                if not more:
                    break
    return bool(fused)


def _candidates(fusion: "Node", node: "Node", direction: str, frontier: deque, visited: set[int],
                fused: set[int]) -> None:
    if direction in ("up", "both"):
        for op in node.operands:
            if op.uid in fused or op.uid in visited:
                continue
            if all(u is fusion or u is node or u.uid in fused for u in op.users):
                frontier.append((op, "up"))
                visited.add(op.uid)
    if len(node.users) != 1:
        return
    user = node.users[0]
    if direction in ("down", "both") and user.uid not in fused and user.uid not in visited:
        frontier.append((user, "down"))
        visited.add(user.uid)


def _fuse_neighbors(fusion: "Node", fused: set[int]) -> tuple["Node", bool]:
    frontier: deque = deque()
    visited = {fusion.uid}
    _candidates(fusion, fusion, "both", frontier, visited, fused)
    changed = False
    while frontier and len(fusion.fused) < MAX_INSTRUCTIONS:
        node, direction = frontier.popleft()
        if node.graph is None or node not in node.graph:
            continue
        if _is_ynn_fusion(node):
            graph = fusion.graph
            if direction == "up":
                fp.merge_fusion(fusion, node)
                if not node.users:
                    graph.remove(node)
            else:
                fp.merge_fusion(node, fusion)
                if not fusion.users:
                    graph.remove(fusion)
                fusion = node
            changed = True
            continue
        if not is_supported(node):
            continue
        fused.add(node.uid)
        _candidates(fusion, node, direction, frontier, visited, fused)
        if direction == "up":
            fp.fuse_instruction(fusion, node)
            if not node.users:
                node.graph.remove(node)
        else:
            _fuse_consumer(fusion, node)
        changed = True
    return fusion, changed


def _fuse_consumer(fusion: "Node", consumer: "Node") -> None:
    """FuseConsumerInstruction: `consumer` (the fusion's only user) becomes the new fused root."""
    body = fusion.fused
    old_root = body.root
    new_operands = []
    for op in consumer.operands:
        if op is fusion:
            new_operands.append(old_root)
            continue
        index = next((i for i, o in enumerate(fusion.operands) if o is op), None)
        if index is not None:
            new_operands.append(body.parameters[index])
        else:
            new_operands.append(fp._new_parameter(fusion, op))
    root = g.clone_node(consumer, body)
    for op in new_operands:
        g.add_operand(root, op)
    body.root = root
    fusion.shape = root.shape
    graph = consumer.graph
    graph.replace_all_uses(consumer, fusion)
    graph.remove(consumer)

"""Which instructions XLA:GPU can put into a loop (kLoop) or input (kInput) fusion, as a
producer or as a consumer (gpu_fusible.cc), and which computations its passes fuse in."""

from __future__ import annotations

from ..graph import Graph, Node, Program, program_cache
from .config import GpuConfig
from .heroes import body_opcodes, find_non_trivial_hero, graph_cache, is_intermediate
from .properties import fusion_roots, is_custom_fusion, is_elementwise, is_fusible, is_loop_fusion
from .reductions import is_contiguous_reduction, is_real_reduction_hero
from .shapes import bit_width
from .transposes import tiled_transpose

_UNIVERSALLY_LOOP_FUSIBLE = frozenset({
    "bitcast", "broadcast", "concatenate", "dynamic-slice", "dynamic-update-slice", "gather", "pad",
    "reduce-window", "reshape", "reverse", "slice", "transpose",
})


def is_universally_loop_fusible(node: Node, cfg: GpuConfig) -> bool:
    """IsUniversallyLoopFusible: fusible into a kLoop fusion as producer or consumer —
    elementwise ops with operands, copies (never tiled transposes at either era), kLoop
    fusions and the data-movement ops the loop emitter indexes through.  2026: only bitcasts
    that keep the bit width."""
    if is_elementwise(node) and node.operands and node.opcode != "copy":
        return True
    op = node.opcode
    if op == "copy":
        return tiled_transpose(node, cfg) is None
    if op == "fusion":
        return node.fusion_kind == "kLoop"
    if op == "bitcast" and not cfg.legacy:
        return all(bit_width(o.shape.element_type) == bit_width(node.shape.element_type) for o in node.operands)
    return op in _UNIVERSALLY_LOOP_FUSIBLE


def is_loop_fusible_as_consumer(node: Node, cfg: GpuConfig) -> bool:
    """IsLoopFusibleAsConsumer: never a bitcast (it would only add indexing as a fusion root);
    any reduce; an input fusion that is no longer input-fusible; else universally loop fusible."""
    if not is_fusible(node):
        return False
    if node.opcode == "bitcast":
        return False
    if node.opcode == "reduce":
        return True
    if node.opcode == "fusion" and node.fusion_kind == "kInput" and not is_input_fusible(node, cfg):
        return True
    return is_universally_loop_fusible(node, cfg)


def is_loop_fusible_as_producer(node: Node, cfg: GpuConfig) -> bool:
    """IsLoopFusibleAsProducer: iota, constant, a non-variadic reduce, or universally loop fusible."""
    if not is_fusible(node):
        return False
    if node.opcode in ("iota", "constant"):
        return True
    if node.opcode == "reduce":
        return not node.shape.is_tuple
    return is_universally_loop_fusible(node, cfg)


def is_reduce_input_fusion(node: Node, cfg: GpuConfig) -> bool:
    """IsReduceInputFusion: a fusion (of any kind) with a root whose hero is a real reduction hero."""
    if node.opcode != "fusion" or node.fused is None:
        return False
    if "reduce" not in body_opcodes(node.fused):  # a real reduction hero is a reduce of the body
        return False
    cache = graph_cache(node.fused)
    key = ("reduce-input-fusion", cfg.token)
    found = cache.get(key)
    if found is None:
        found = cache[key] = any(is_real_reduction_hero(root, find_non_trivial_hero(root, cfg), cfg)
                                 for root in fusion_roots(node.fused))
    return found


def is_input_fusible_reduction(node: Node, cfg: GpuConfig) -> bool:
    """IsInputFusibleReduction: a reduce fusion, or a contiguous (unnested) reduce.  (Asked
    for most candidate pairs: only the question that can be true for the opcode is asked.)"""
    op = node.opcode
    if op == "fusion":
        return is_reduce_input_fusion(node, cfg)
    return op == "reduce" and is_contiguous_reduction(node, cfg)


def is_input_fusible_scatter(node: Node) -> bool:
    """IsInputFusibleScatter: a scatter, or a kInput fusion rooted at one."""
    return node.opcode == "scatter" or (
        node.opcode == "fusion" and node.fusion_kind == "kInput" and node.fused.root.opcode == "scatter")


def is_input_fusible_transpose(node: Node, cfg: GpuConfig) -> bool:
    """IsInputFusibleTranspose: a tiled transpose, or a (non-custom) fusion with a root whose
    hero is one; never a bitcast."""
    if node.opcode == "bitcast" or is_custom_fusion(node):
        return False
    if node.opcode == "fusion":
        if "transpose" not in body_opcodes(node.fused):  # a tiled transpose hero is a transpose of the body
            return False
        cache = graph_cache(node.fused)
        key = ("input-fusible-transpose", cfg.token)
        if key not in cache:
            cache[key] = any(tiled_transpose(find_non_trivial_hero(r, cfg), cfg) is not None
                             for r in fusion_roots(node.fused))
        return cache[key]
    return tiled_transpose(node, cfg) is not None


def is_input_fusible(node: Node, cfg: GpuConfig) -> bool:
    """IsInputFusible: fusible and a reduction, scatter or tiled transpose kernel."""
    return is_fusible(node) and (is_input_fusible_reduction(node, cfg) or is_input_fusible_scatter(node)
                                 or is_input_fusible_transpose(node, cfg))


def is_nestable_variadic_reduction(node: Node, cfg: GpuConfig) -> bool:
    """IsNestableVariadicReduction: a variadic reduce the loop emitter handles (not contiguous),
    or a kLoop fusion rooted at a reduce, tuple-shaped."""
    return node.shape.is_tuple and (
        (node.opcode == "reduce" and not is_contiguous_reduction(node, cfg))
        or (node.opcode == "fusion" and node.fusion_kind == "kLoop" and node.fused.root.opcode == "reduce"))


def is_nestable_variadic_reduce_window(node: Node) -> bool:
    """IsNestableVariadicReduceWindow (XLA 84d72608 and later; absent at 76da7301): a
    tuple-shaped reduce-window, or a kLoop fusion rooted at one."""
    return node.shape.is_tuple and (
        node.opcode == "reduce-window"
        or (node.opcode == "fusion" and node.fusion_kind == "kLoop" and node.fused.root.opcode == "reduce-window"))


def is_fusible_as_multi_output_fusion_root(node: Node, cfg: GpuConfig) -> bool:
    """IsFusibleAsMultiOutputFusionRoot: fusible, not a custom fusion, and a reduction or
    transpose kernel, a kLoop fusion or an elementwise op (scatter never)."""
    return is_fusible(node) and not is_custom_fusion(node) and (
        is_input_fusible_reduction(node, cfg) or is_input_fusible_transpose(node, cfg)
        or is_loop_fusion(node) or is_elementwise(node))


def choose_fusion_kind(producer: Node, consumer: Node, cfg: GpuConfig) -> str:
    """ChooseFusionKind: kInput when either side is input-fusible, else kLoop."""
    return "kInput" if is_input_fusible(consumer, cfg) or is_input_fusible(producer, cfg) else "kLoop"


def all_satisfy(node: Node, predicate) -> bool:
    """AllSatisfy: the instruction, or every non-parameter instruction of a fusion."""
    if node.opcode != "fusion":
        return predicate(node)
    return all(n.opcode == "parameter" or predicate(n) for n in node.fused.nodes())


def epilogue_is_intermediate(consumer: Node) -> bool:
    """What a reduction epilogue may contain: only single-operand intermediate ops."""
    return all_satisfy(consumer, lambda n: is_intermediate(n, 1))


def scatter_in_place_operand(consumer: Node) -> Node | None:
    """The operand a (fused) scatter updates in place; None when the fusion computes that
    buffer itself (XLA CHECKs it is a parameter: its passes never fuse into it, but a kLoop
    scatter fusion written by hand may have had it fused in)."""
    if consumer.opcode == "fusion":
        buffer = consumer.fused.root.operands[0]
        return consumer.operands[buffer.parameter_number] if buffer.opcode == "parameter" else None
    return consumer.operands[0]


def is_consumer_the_only_non_root_user(node: Node, consumer: Node, cfg: GpuConfig,
                                       through_bitcast: bool | None = None) -> bool:
    """IsConsumerTheOnlyNonRootUser: every user is the consumer or the computation root,
    looking through get-tuple-element (2026, and already XLA 84d72608 of 2025-01: and bitcast).
    `through_bitcast` overrides the era's answer (horizontal loop fusion's N variant)."""
    if through_bitcast is None:
        through_bitcast = not cfg.legacy
    through = ("get-tuple-element", "bitcast") if through_bitcast else ("get-tuple-element",)
    for user in node.users:
        if user.opcode in through:
            if not is_consumer_the_only_non_root_user(user, consumer, cfg, through_bitcast):
                return False
        elif not (user is consumer or user.graph.root is user):
            return False
    return True


# ------------------------------------------------------------------------------------------
# Computations
# ------------------------------------------------------------------------------------------

#: HloInstruction::MightHaveCalledComputations at XLA 76da7301.
_MIGHT_CALL = frozenset({
    "while", "conditional", "fusion", "async-start", "async-update", "async-done", "all-reduce",
    "all-reduce-start", "call", "map", "reduce", "reduce-scatter", "reduce-window", "scatter",
    "select-and-scatter", "sort", "topk", "custom-call",
})


def fusible_computations(program: Program, cfg: GpuConfig) -> list[Graph]:
    """GetFusibleComputations: computations in post order (callees first) without fusion
    bodies and without anything called by an instruction other than while, conditional and
    fusion (reducers, comparators, call bodies, custom-call bodies).  2026 also fuses inside
    calls that carry the `_xla_stream_annotation` frontend attribute.  Remembered until the program
    changes (every pass run asks, and the answer reads every instruction)."""
    cache = program_cache(program)
    key = ("fusible-computations", cfg.token)
    found = cache.get(key)
    if found is None:
        found = cache[key] = _fusible_computations(program, cfg)
    return list(found)


def _fusible_computations(program: Program, cfg: GpuConfig) -> list[Graph]:
    everything = program.graph_order()
    order = [g for g in everything if not g.is_fusion_body]
    not_to_fuse: set[str] = set()
    # XLA looks at the instructions of every computation, fused ones included: a reducer called
    # only from inside a fusion is not fused either (corpus DoNotFuseInsideReducer).
    for graph in everything:
        not_to_fuse.update(_called_apart(graph, cfg))
    return [g for g in order if g.name not in not_to_fuse]


def _called_apart(graph: Graph, cfg: GpuConfig) -> tuple[str, ...]:
    """The computations instructions of `graph` call other than as a while, conditional or
    fusion does; remembered until the graph changes (the passes between two questions change
    a few computations of the thousands a fused module holds)."""
    cache = graph_cache(graph)
    key = ("called apart", cfg.legacy)
    found = cache.get(key)
    if found is None:
        names: list[str] = []
        for node in graph:
            if node.opcode in _MIGHT_CALL and node.opcode not in ("while", "conditional", "fusion"):
                if (not cfg.legacy and node.opcode == "call"
                        and "_xla_stream_annotation" in (node.attr("frontend_attributes") or "")):
                    continue
                names.extend(node.called)
        found = cache[key] = tuple(names)
    return found

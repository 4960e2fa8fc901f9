"""HloFusionAnalysis: which emitter compiles a kernel, and the launch grid it gets.

XLA:GPU decides how to emit a fusion from its roots and their *heroes* (the reduction,
tiled transpose or concatenate that shapes the kernel, found through elementwise epilogues):
a reduction emitter, a tiled transpose emitter, a concatenate emitter, scatter, sort,
library (Triton / cuDNN / custom) or the plain loop emitter (hlo_fusion_analysis.cc
GetEmitterFusionKind at 5a9e73cb; docs/xla/priority-fusion.md §2.6).  The cost model asks
the emitter for its launch dimensions (§5.6), and PriorityFusion asks for the kind of a
producer+consumer pair before fusing them (refusing reduce→loop, choosing kLoop/kInput/kCustom).

An analysis is made for an instruction (analysed as a one-instruction fusion), a fusion, or a
producer+consumer pair.  XLA analyses a pair through a fusion adaptor without building it; here
most pairs are analysed the same way (a plain loop pair, or heroes found across the boundary by
gpu.heroes.merged_heroes), and the rest are built as a fusion in a scratch program
(`hlofuse.graph` primitives), so the hero predicates of `hlofuse.gpu` apply to it unchanged.

Simplifications (expected effect): reduction outputs are one group (XLA splits disjoint
reductions of a multi-output fusion into several block rows: a slightly lower block count for
such fusions); packed sub-32-bit transposes use the plain transpose tiling; scatter uses the
loop formula over its updates; Blackwell's wider unrolling is not modelled.  For generic Triton
fusions the grid comes from their `block_level_fusion_config` (as XLA's Triton launch config).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from .. import attributes
from ..graph import Graph, Node, Program, add_operand
from ..gpu.config import GpuConfig
from ..gpu.heroes import find_non_trivial_hero, merged_heroes
from ..gpu.properties import fusion_roots
from ..gpu.reductions import ReductionDimensions, is_real_reduction_hero, reduction_dimensions, \
    reductions_mof_compatible
from ..gpu.shapes import bit_width, elements, elements_recursive, is_reshape_or_transpose_bitcast
from ..gpu.transposes import TransposeDescription, tiled_transpose

# Emitter kinds at 5a9e73cb (HloFusionAnalysis::EmitterFusionKind).
LOOP, CUSTOM, TRITON, REDUCTION, TRANSPOSE, CONCATENATE, SCATTER, CUDNN, SORT = (
    "kLoop", "kCustomFusion", "kTriton", "kReduction", "kTranspose", "kConcatenate", "kScatter",
    "kCuDnn", "kSort")

TRITON_BACKEND_KINDS = frozenset({"__triton", "__triton_gemm", "__triton_nested_gemm_fusion",
                                  "__triton_collective_fusion"})

#: What PriorityFusion makes of an emitter kind (PriorityFusion::ChooseKind).
FUSION_KIND_OF_EMITTER = {
    LOOP: "kLoop", TRITON: "kCustom", CUSTOM: "kCustom", CUDNN: "kCustom", SORT: "kCustom",
    CONCATENATE: "kInput", REDUCTION: "kInput", TRANSPOSE: "kInput", SCATTER: "kInput",
}

_INT_MAX = 2**31 - 1
#: Loop emitter: threads per block = warp size x 4 warp schedulers.
_WARP_SCHEDULERS = 4
_MAX_UNROLL = 4
_MAX_CONCAT_OPERANDS_FOR_UNROLLING = 10
_TRANSPOSE_THREADS = 128
_TRANSPOSE_MAX_VECTORIZED_BYTES = 4


@dataclass
class FusionAnalysis:
    """The emitter view of one kernel."""

    kind: str
    roots: list[Node]
    heroes: list[Node]
    transpose: TransposeDescription | None
    backend_kind: str
    #: Smallest element width over the kernel's inputs / outputs (pred counts 8); INT_MAX if none.
    smallest_input_bits: int
    smallest_output_bits: int
    #: The analysed node: the instruction itself, its fusion, or a scratch fusion of a pair.
    node: Node
    #: The instructions computed inside the kernel (no parameters).
    nodes: list[Node]
    config: GpuConfig
    backend_config: dict

    @property
    def fusion_kind(self) -> str:
        """The kind PriorityFusion gives a fusion with this emitter."""
        return FUSION_KIND_OF_EMITTER[self.kind]

    def hero_reduction(self) -> Node | None:
        """FindHeroReduction: the first real reduction hero of a reduction kernel."""
        if self.kind != REDUCTION:
            return None
        for root, hero in zip(self.roots, self.heroes):
            if is_real_reduction_hero(root, hero, self.config):
                return hero
        return None


# ------------------------------------------------------------------------------------------
# Building analyses
# ------------------------------------------------------------------------------------------


def _backend_kind(config: dict) -> str:
    fusion = config.get("fusion_backend_config") if isinstance(config, dict) else None
    return (fusion or {}).get("kind", "") if isinstance(fusion, dict) else ""


def _gpu_backend_config(node: Node) -> dict | None:
    """`backend_config<GpuBackendConfig>()`: the parsed config, or None when the node has none
    or it does not parse at 5a9e73cb (the 2025 `output_tile_sizes` field was removed; XLA's
    JSON parser rejects unknown fields, pitfall P9)."""
    if node.attr("backend_config") is None:
        return None
    config = dict(attributes.backend_config(node))
    block = (config.get("fusion_backend_config") or {}).get("block_level_fusion_config") or {}
    if isinstance(block, dict) and "output_tile_sizes" in block:
        return None
    return config


def _smallest_bits(nodes) -> int:
    bits = _INT_MAX
    for n in nodes:
        shape = n.shape
        if not shape.is_array:
            continue
        bits = min(bits, bit_width(shape.element_type))
    return bits


def _leaf_outputs(roots: list[Node]):
    return roots


def analyse(node: Node, cfg: GpuConfig) -> FusionAnalysis:
    """The analysis of an instruction (a fusion, or any instruction as a fusion of one)."""
    config = _gpu_backend_config(node) or {}
    if node.opcode == "fusion" and node.fused is not None:
        roots = fusion_roots(node.fused)
        heroes = [find_non_trivial_hero(r, cfg) for r in roots]
        nodes = [n for n in node.fused.nodes() if n.opcode != "parameter"]
        params = list(node.operands)
    else:
        roots = [node]
        heroes = [node]
        nodes = [node]
        params = list(node.operands)
    return _finish(node, roots, heroes, nodes, params, config, cfg)


def analyse_producer_consumer(producer: Node, consumer: Node, cfg: GpuConfig) -> FusionAnalysis:
    """The analysis of `producer` fused into `consumer` (HloFusionAnalysis::Create(producer,
    consumer)): built as a scratch fusion; the backend config is the consumer's if it has one,
    else the producer's."""
    config = _gpu_backend_config(consumer)
    if config is None:
        config = _gpu_backend_config(producer) or {}
    quick = _plain_loop_pair(producer, consumer, config, cfg)
    if quick is not None:
        return quick
    merged = _merged_pair(producer, consumer, config, cfg)
    if merged is not None:
        return merged
    fusion = materialise(producer, consumer)
    roots = fusion_roots(fusion.fused)
    heroes = [find_non_trivial_hero(r, cfg) for r in roots]
    nodes = [n for n in fusion.fused.nodes() if n.opcode != "parameter"]
    params = list(fusion.operands)
    return _finish(fusion, roots, heroes, nodes, params, config, cfg)


#: Opcodes that can make a kernel anything but a plain loop (a hero, or a special root).
_SHAPING = frozenset({"reduce", "transpose", "concatenate", "scatter", "sort", "dynamic-update-slice"})


def _inner(node: Node) -> list[Node]:
    if node.opcode == "fusion" and node.fused is not None:
        return [n for n in node.fused.nodes() if n.opcode != "parameter"]
    return [node]


def _plain_loop_pair(producer: Node, consumer: Node, config: dict, cfg: GpuConfig) -> FusionAnalysis | None:
    """The analysis of a pair without building it, when nothing in either side can be a hero
    or a special root: then XLA's emitter is the loop emitter over the consumer's roots."""
    if _backend_kind(config):
        return None
    p_nodes, c_nodes = _inner(producer), _inner(consumer)
    if any(n.opcode in _SHAPING for n in p_nodes) or any(n.opcode in _SHAPING for n in c_nodes):
        return None
    roots = fusion_roots(consumer.fused) if consumer.opcode == "fusion" and consumer.fused is not None else [consumer]
    if any(r.opcode in ("parameter", "get-tuple-element", "tuple") for r in roots):
        return None
    params = [op for op in consumer.operands if op is not producer] + list(producer.operands)
    return FusionAnalysis(kind=LOOP, roots=list(roots), heroes=list(roots), transpose=None, backend_kind="",
                          smallest_input_bits=_smallest_bits(params), smallest_output_bits=_smallest_bits(roots),
                          node=consumer, nodes=p_nodes + c_nodes, config=cfg, backend_config=config)


def _merged_pair(producer: Node, consumer: Node, config: dict, cfg: GpuConfig) -> FusionAnalysis | None:
    """The analysis of a pair without building it, its heroes found across the boundary as
    XLA's producer-consumer fusion adaptor finds them (gpu.heroes.merged_heroes, from the
    hero tables each side already has).  The analysis then names the pair's own instructions
    (its `node` is the consumer), which is what every reader of a pair analysis sees the same:
    names, opcodes, shapes and identities among them.  None, and the pair is built, where the
    built pair could read differently: a library backend config (Triton tiles the built
    fusion), a dynamic-update-slice (the in-place grid asks which instructions are inside), a
    consumer root that is a parameter or a tuple element, a multi-output producer."""
    if _backend_kind(config):
        return None
    p_nodes, c_nodes = _inner(producer), _inner(consumer)
    for n in p_nodes:
        if n.opcode == "dynamic-update-slice":
            return None
    for n in c_nodes:
        if n.opcode == "dynamic-update-slice":
            return None
    c_roots = fusion_roots(consumer.fused) if consumer.opcode == "fusion" and consumer.fused is not None else [consumer]
    if any(r.opcode in ("parameter", "get-tuple-element", "tuple") for r in c_roots):
        return None
    pairs = merged_heroes(producer, consumer, cfg)
    if pairs is None:
        return None
    params = [op for op in consumer.operands if op is not producer] + list(producer.operands)
    return _finish(consumer, [r for r, _ in pairs], [h for _, h in pairs], p_nodes + c_nodes, params, config, cfg)


def _finish(node, roots, heroes, nodes, params, config, cfg) -> FusionAnalysis:
    transpose = _consistent_transpose_hero(roots, heroes, cfg)
    backend_kind = _backend_kind(config)
    analysis = FusionAnalysis(
        kind=LOOP, roots=list(roots), heroes=list(heroes), transpose=transpose,
        backend_kind=backend_kind, smallest_input_bits=_smallest_bits(params),
        smallest_output_bits=_smallest_bits(roots), node=node, nodes=nodes, config=cfg,
        backend_config=config)
    analysis.kind = _emitter_kind(analysis)
    if analysis.kind == LOOP:
        analysis.heroes = list(roots)
        analysis.transpose = None
    return analysis


def _consistent_transpose_hero(roots, heroes, cfg) -> TransposeDescription | None:
    """FindConsistentTransposeHero: all tiled-transpose heroes equivalent, and every other
    root a reshape/transpose bitcast of the transpose's input."""
    found: TransposeDescription | None = None
    found_hero: Node | None = None
    others = []
    for root, hero in zip(roots, heroes):
        desc = tiled_transpose(hero, cfg)
        if desc is not None:
            if found is None:
                found, found_hero = desc, hero
            elif not found.is_equivalent(desc, era_2026=not cfg.legacy):
                return None
        else:
            others.append(root)
    if found is None:
        return None
    input_shape = found_hero.operands[0].shape
    for root in others:
        if not is_reshape_or_transpose_bitcast(root.shape, input_shape, ignore_element_type=True):
            return None
    return found


def _emitter_kind(a: FusionAnalysis) -> str:
    """GetEmitterFusionKind at 5a9e73cb."""
    kind = a.backend_kind
    if kind == "__custom":
        return CUSTOM
    if kind in TRITON_BACKEND_KINDS:
        return TRITON
    if kind == "__cudnn$fusion":
        return CUDNN
    cfg = a.config
    first_reduce = None
    for root, hero in zip(a.roots, a.heroes):
        if is_real_reduction_hero(root, hero, cfg):
            first_reduce = hero
            break
    if first_reduce is not None:
        operand_elements = elements(first_reduce.operands[0].shape)
        valid = True
        for root, hero in zip(a.roots, a.heroes):
            if root is first_reduce:
                continue
            if not is_real_reduction_hero(root, hero, cfg):
                if elements(root.shape) != operand_elements:
                    valid = False
                    break
            elif not reductions_mof_compatible(hero, first_reduce):
                valid = False
                break
        if valid:
            return REDUCTION
    if a.transpose is not None:
        return TRANSPOSE
    if len(a.roots) > 1:
        return LOOP
    root = a.roots[0]
    if root.opcode == "scatter":
        return SCATTER
    if root.opcode == "sort":
        return SORT
    if (len(a.heroes) == 1 and a.heroes[0].opcode == "concatenate" and not root.shape.is_tuple
            and len(a.heroes[0].operands) <= 4):
        return CONCATENATE
    return LOOP


# ------------------------------------------------------------------------------------------
# A producer+consumer pair as a fusion (scratch)
# ------------------------------------------------------------------------------------------


class _ScratchGraph(Graph):
    """A throwaway computation: no name bookkeeping (nothing looks names up in it)."""

    def add(self, node: Node, *, unique_name: bool = True) -> Node:
        node.graph = self
        node.uid = self.program.next_uid()
        self._nodes[node.uid] = node
        if node.opcode == "parameter":
            self.parameters.append(node)
        return node


def materialise(producer: Node, consumer: Node) -> Node:
    """`producer` fused into `consumer`, built in a throwaway program: a fusion whose body holds
    the consumer's instructions (or the consumer) reading the producer's instructions (or the
    producer) where it read the producer, every outside value a parameter — what
    HloFusionAdaptor::ForProducerConsumer presents, built in one copy."""
    program = Program("scratch")
    outer = _ScratchGraph(program, "scratch")
    body = _ScratchGraph(program, "scratch_body")
    owner = consumer.graph.program if consumer.graph is not None else None
    if owner is not None:
        # taken apart when the program being replayed is disposed; alone, every scratch pair
        # would be a cycle left for the collector (priority fusion makes one per candidate)
        owner.made_graphs += (outer, body)
    params: dict[int, Node] = {}
    outside_operands: list[Node] = []

    def add(graph: Graph, node: Node) -> Node:
        return graph.add(node)

    def outside(value: Node) -> Node:
        param = params.get(value.uid)
        if param is None:
            param = add(body, Node(value.name, "parameter", value.shape, literal=str(len(params))))
            params[value.uid] = param
            outside_operands.append(value)
        return param

    def copy(node: Node) -> Node:
        return add(body, Node(node.name, node.opcode, node.shape, attrs=node.attrs, literal=node.literal,
                              called=node.called, origin=node.origin))

    def inline(node: Node, operand_value) -> Node:
        """Copy `node` (a fusion: its body) into the scratch body; returns the copy of its
        result.  `operand_value(op)` gives the body node standing for an operand."""
        if node.opcode != "fusion" or node.fused is None:
            clone = copy(node)
            for op in node.operands:
                add_operand(clone, operand_value(op))
            return clone
        mapping: dict[int, Node] = {}
        for inner in node.fused.post_order():
            if inner.opcode == "parameter":
                mapping[inner.uid] = operand_value(node.operands[inner.parameter_number])
                continue
            clone = copy(inner)
            if inner.fused is not None:
                clone.fused = inner.fused  # a nested fusion: shared, read only
            for op in inner.operands:
                add_operand(clone, mapping[op.uid])
            mapping[inner.uid] = clone
        return mapping[node.fused.root.uid]

    p = inline(producer, outside)
    gtes: dict[int, Node] = {}

    def consumer_operand(op: Node) -> Node:
        if op is producer:
            return p
        if op.opcode == "get-tuple-element" and op.operands and op.operands[0] is producer:
            gte = gtes.get(op.uid)
            if gte is None:
                gte = copy(op)
                add_operand(gte, p)
                gtes[op.uid] = gte
            return gte
        return outside(op)

    root = inline(consumer, consumer_operand)
    if root.opcode == "get-tuple-element" and root.operands[0].opcode == "tuple":
        root = root.operands[0].operands[int(root.attr("index") or 0)]
    body.root = root
    kind = consumer.fusion_kind if consumer.opcode == "fusion" else "kLoop"
    fusion = add(outer, Node(consumer.name, "fusion", consumer.shape, attrs=[("kind", kind or "kLoop")]))
    for value in outside_operands:
        add_operand(fusion, add(outer, Node(value.name, "parameter", value.shape, literal="0")))
    fusion.fused = body
    body.fusion_owner = fusion
    # dead copies (a producer also read through the consumer's other paths) stay harmless
    return fusion


# ------------------------------------------------------------------------------------------
# Launch dimensions (EstimateFusionLaunchDimensions)
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchDimensions:
    blocks: int
    threads_per_block: int
    emitter: str  # which emitter's formula gave them (for explanations and tests)

    def __post_init__(self):
        # Nothing to compute still launches one thread (XLA's CalculateLaunchDimensions for a
        # shape of no elements); zero-sized arrays reach the replay only from hand-written text.
        if self.blocks < 1 or self.threads_per_block < 1:
            object.__setattr__(self, "blocks", max(self.blocks, 1))
            object.__setattr__(self, "threads_per_block", max(self.threads_per_block, 1))

    def __str__(self) -> str:
        return f"{self.blocks} blocks x {self.threads_per_block} threads ({self.emitter})"


def _first_array_shape(shape):
    while shape.is_tuple:
        shape = shape.tuple_shapes[0]
    return shape


def _calculate(shape, cfg: GpuConfig, unroll: int, emitter: str) -> LaunchDimensions:
    """CalculateLaunchDimensions: one thread per `unroll` elements, 128 threads per block."""
    n = elements(shape) if shape.is_array else 0
    if n <= 1:
        return LaunchDimensions(1, 1, emitter)
    n = -(-n // unroll)
    threads = min(cfg.device.threads_per_warp * _WARP_SCHEDULERS, n)
    return LaunchDimensions(-(-n // threads), threads, emitter)


def _may_prevent_vectorization(a: FusionAnalysis) -> bool:
    """MayPreventVectorization: ops whose unrolled code spills registers."""
    for n in a.nodes:
        op = n.opcode
        if op in ("sort", "dot"):
            return True
        if op == "reduce-window":
            window = attributes.window(n)
            size = 1
            for w in window:
                size *= w.size
            if size > 8:
                return True
        if op == "concatenate" and len(n.operands) > _MAX_CONCAT_OPERANDS_FOR_UNROLLING:
            return True
        if op == "reduce" and n.shape.is_tuple and len(n.shape.tuple_shapes) > 1:
            return True
    return False


def loop_unroll(a: FusionAnalysis, shape) -> int:
    """ComputeLoopFusionConfig's unroll factor."""
    device = a.config.device
    n = elements(shape)
    unroll = 1
    if n >= device.threads_per_core_limit * device.core_count and not _may_prevent_vectorization(a):
        unroll = gcd(n, _MAX_UNROLL) or 1
    out_bits = a.smallest_output_bits if a.smallest_output_bits != _INT_MAX else 32
    return max(unroll, -(-8 // max(out_bits, 1)))


def _in_place_dus_update(a: FusionAnalysis):
    """The update shape when the kernel is emitted as an in-place dynamic-update-slice: every
    root is (a bitcast of) a dynamic-update-slice whose operand 0 comes from outside."""
    updates = []
    for root in a.roots:
        node = root
        while node.opcode == "bitcast" and node.operands and node in a.nodes:
            node = node.operands[0]
        if node.opcode != "dynamic-update-slice":
            return None
        base = node.operands[0]
        while base.opcode == "bitcast" and base in a.nodes:
            base = base.operands[0]
        if base in a.nodes:
            return None
        updates.append(node.operands[1].shape)
    return updates[0] if updates else None


def launch_dimensions(a: FusionAnalysis) -> LaunchDimensions:
    cfg = a.config
    kind = a.kind
    if kind == LOOP:
        update = _in_place_dus_update(a)
        if update is not None:
            return _calculate(update, cfg, 1, "in-place dynamic-update-slice")
        shape = _first_array_shape(a.roots[0].shape)
        return _calculate(shape, cfg, loop_unroll(a, shape), "loop")
    if kind == REDUCTION:
        return _reduction_launch(a)
    if kind == TRANSPOSE and a.transpose is not None:
        return _transpose_launch(a)
    if kind == CONCATENATE:
        concat = a.heroes[0]
        dim = (attributes.dimensions(concat) or (0,))[0]
        largest = max(concat.operands, key=lambda o: o.shape.dims[dim]).shape
        unroll = loop_unroll(a, largest)
        for op in concat.operands:
            if unroll == 1:
                break
            unroll = gcd(unroll, op.shape.dims[dim])
        return _calculate(largest, cfg, unroll, "concatenate")
    if kind == SCATTER:
        scatter = a.roots[0]
        updates = scatter.operands[len(scatter.operands) // 2 + 1].shape
        return _calculate(updates, cfg, loop_unroll(a, updates), "scatter")
    if kind == TRITON:
        triton = _triton_launch(a)
        if triton is not None:
            return triton
    n = elements_recursive(a.roots[0].shape)
    return LaunchDimensions(max(-(-n // 128), 1) if n else 0, 128, "fallback")


def _triton_launch(a: FusionAnalysis) -> LaunchDimensions | None:
    """TritonFusion::GetLaunchConfig for generic (`__triton`) fusions: one block per output
    tile, `num_warps` warps per block."""
    if a.backend_kind != "__triton":
        return None
    block = (a.backend_config.get("fusion_backend_config") or {}).get("block_level_fusion_config") or {}
    tiles = block.get("output_tiles") or []
    if not tiles:
        return None
    sizes = [int(s) for s in (tiles[0].get("sizes") or [])]
    shape = _first_array_shape(a.roots[0].shape)
    blocks = 1
    # zipped as XLA zips them: a pair whose root has another rank than the Triton side's
    # tile (its bitcast user) is counted over the shorter of the two
    for dim, tile in zip(shape.dims, sizes):
        blocks *= -(-dim // max(tile, 1))
    warps = int(block.get("num_warps") or 4)
    return LaunchDimensions(blocks, warps * a.config.device.threads_per_warp, "triton")


def _vector_size_for_mlir(a: FusionAnalysis, minor: int, threads: int) -> int:
    """GetVectorSizeForMlir (reduction emitters)."""
    if minor % 2 != 0 or threads * 2 > minor:
        return 1
    for hero in a.heroes:
        for op in hero.operands:
            if op.shape.element_type in ("c64", "c128"):
                return 1
    if a.smallest_input_bits >= 64:
        return 1
    if a.smallest_input_bits >= 32:
        return 2
    if threads * 4 > minor:
        return 2
    return 4 if minor % 4 == 0 else 2


def _reduction_launch(a: FusionAnalysis) -> LaunchDimensions:
    hero = a.hero_reduction()
    dims: ReductionDimensions = reduction_dimensions(hero)
    d0, d1, d2 = dims.dims
    device = a.config.device
    warp = device.threads_per_warp
    if dims.is_row:
        multi = _multi_row(a, dims)
        if multi is not None:
            return multi
        reduced = min(a.config.row_reduction_min_threads, -(-(-(-d2 // 16)) // warp) * warp)
        kept = 1
        if reduced * 2 <= 256:
            kept = d1 if d1 * reduced <= 256 else 256 // reduced
        vector = _vector_size_for_mlir(a, d2, reduced)
        minor = d2 // vector
        tile = min(16 // vector, -(-minor // reduced))
        blocks = -(-d1 // kept) * -(-minor // (tile * reduced))
        return LaunchDimensions(blocks, kept * reduced, "row reduction")
    if d2 and warp % d2 == 0:
        vector = _vector_size_for_mlir(a, d1 * d2, warp)
        threads = 128
        shared_rows = vector * threads // d2
        while shared_rows > warp and vector > 1:
            vector //= 2
            shared_rows //= 2
        if shared_rows > warp:
            threads //= shared_rows // warp
        return LaunchDimensions(d0, threads, "small column reduction")
    vector = _vector_size_for_mlir(a, d2, warp)
    return LaunchDimensions(d0 * -(-d2 // (warp * vector)), warp * warp, "column reduction")


def _multi_row(a: FusionAnalysis, dims: ReductionDimensions) -> LaunchDimensions | None:
    """MultiRowReductionFusion::TryCreate: several short rows per block."""
    _, d1, d2 = dims.dims
    if d2 & (d2 - 1):
        return None
    smallest = min(a.smallest_input_bits, a.smallest_output_bits)
    largest = max(a.smallest_input_bits, a.smallest_output_bits)
    if largest == _INT_MAX:
        largest = a.smallest_output_bits
    vector = min(d2, 64 // max(smallest, 1))
    if largest >= 32:
        vector = min(128 // largest, vector)
    warp = a.config.device.threads_per_warp
    if d2 > warp * vector:
        return None

    def grid(v: int) -> tuple[int, int]:
        reduced = d2 // v
        kept = d1 if d1 * reduced <= 256 else 256 // reduced
        return -(-d1 // kept), kept * reduced

    while vector > 1 and grid(vector)[0] < a.config.device.core_count:
        vector //= 2
    if d2 > warp * vector:
        return None
    blocks, threads = grid(vector)
    return LaunchDimensions(blocks, threads, "multi-row reduction")


def _transpose_launch(a: FusionAnalysis) -> LaunchDimensions:
    """TransposeFusion: 32x32 tiles (x vector size when there is enough work), 128 threads."""
    desc = a.transpose
    perm = list(desc.permutation)
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    input_shape = [desc.dimensions[inverse[i]] for i in range(len(perm))]
    base = a.config.device.threads_per_warp
    minor_unchanged = perm[-1] == len(perm) - 1
    max_bytes = 0
    shmem = 0
    for hero in a.heroes:
        if tiled_transpose(hero, a.config) is None:
            continue
        size = (bit_width(hero.shape.element_type) + 7) // 8
        if minor_unchanged:
            size *= input_shape[-1]
        max_bytes = max(max_bytes, size)
        shmem += base * (base + 1) * size

    def counts(vector: int) -> list[int]:
        sizes = [1] * len(input_shape)
        if minor_unchanged:
            sizes[-1] = vector
            sizes[-2] = base
            sizes[perm[-2]] = base
        else:
            sizes[-1] = base * vector
            sizes[perm[-1]] = base * vector
        return [-(-d // s) for d, s in zip(input_shape, sizes)]

    def product(xs):
        out = 1
        for x in xs:
            out *= x
        return out

    if minor_unchanged:
        block_counts = counts(input_shape[-1])
    else:
        block_counts = counts(1)
        device = a.config.device
        vec = _TRANSPOSE_MAX_VECTORIZED_BYTES // max(max_bytes, 1)
        while vec > 1:
            per_thread = vec * vec
            enough_work = product(block_counts) * _TRANSPOSE_THREADS >= \
                per_thread * device.core_count * device.threads_per_core_limit
            enough_shmem = shmem * per_thread <= device.shared_memory_per_block
            aligned = input_shape[-1] % vec == 0 and input_shape[perm[-1]] % vec == 0
            if enough_work and enough_shmem and aligned:
                block_counts = counts(vec)
                break
            vec //= 2
    return LaunchDimensions(product(block_counts), _TRANSPOSE_THREADS, "transpose")

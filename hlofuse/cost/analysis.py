"""GpuHloCostAnalysis: flops, bytes and operand utilisation of every instruction and fusion.

What XLA:GPU's performance model reads about an instruction (xla/service/hlo_cost_analysis.cc
and xla/service/gpu/model/gpu_hlo_cost_analysis.cc at 5a9e73cb; docs/xla/priority-fusion.md
§5.2–5.3), computed on `hlofuse.graph` nodes:

* **flops**: elementwise ops cost the device's measured cycles per element (`profiles.py`;
  GPU has no separate transcendental count: exp, log... are just more flops); a reduce costs
  its reducer's flops per reduction step; a concatenate 6 per element, or 400 when it joins
  along a minor dimension whose first operand is not 32-aligned (an XLA tuning constant); a
  dot 2 per multiply-add; a sort n·⌈log2 n⌉.
* **output bytes** and **operand bytes**: every operand read in full by default; a broadcast,
  slice, dynamic-slice or gather reads only as much of operand 0 as it writes; a
  dynamic-update-slice writes only the update (operand 0 is aliased); a bitcast, tuple,
  get-tuple-element, parameter or constant moves nothing.
* **operand utilisation**: how many times each operand element is used (a broadcast of x to
  N times its size uses each element N times; a slice uses a fraction).
* for a **fusion**: utilisation propagated from the root through the fused body (users before
  operands), giving each fused instruction how often it is computed, the fusion's flops
  (Σ utilisation × flops), its IR size (how many times each instruction is emitted, for the
  code-duplication limit), and the bytes read per fusion parameter (size × utilisation, never
  capped at 1 because XLA:GPU sets `count_multiple_input_accesses`).

Properties are stored as float32 as in XLA.  Shapes printed without a layout get XLA's default
layout (the HLO parser fills missing layouts in), so they are counted, not treated as 0 bytes.

Simplifications (expected effect): collectives, custom calls (−1, "unknown", as in XLA's base
analysis; cuBLAS/cuDNN flops are not computed) and convolutions (flops without the padding-
and dilation-aware window count) are not modelled exactly — none of them is fusible, so
PriorityFusion never asks for their time.  Tuple-shaped fusion parameters (rare) count their
full size.  Nested fusions inside fusions are costed as plain instructions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from ..native import mypyc_attr
from .. import attributes
from ..graph import Graph, Node
from ..gpu.properties import ELEMENTWISE_OPCODES, is_elementwise
from ..ir import Shape
from ..gpu.shapes import byte_size, elements, elements_recursive, equal_ignoring_element_type, transpose_is_bitcast
from .durations import f32
from .profiles import OpProfile

#: XLA's kMaxIRSize: a fusion whose IR would exceed this many emitted instructions is refused.
MAX_IR_SIZE = 10000
#: HloCostAnalysis::immediate_constant_max_elements(): larger constants are read from memory.
IMMEDIATE_CONSTANT_MAX_ELEMENTS = 8
#: Flops per multiply-add (kFmaFlops).
FMA_FLOPS = 2

#: Opcodes whose cost handler is HandleElementwiseOp (copy has its own handler: 0 flops).
_FLOP_ELEMENTWISE = ELEMENTWISE_OPCODES - {"copy"}


@lru_cache(maxsize=65536)
def shape_size(shape) -> int:
    """XLA:GPU's shape size function: ShapeUtil::ByteSizeOf(shape, pointer_size=8)."""
    return byte_size(shape, 8)


#: shape → (byte size, elements, elements_recursive): the analysis asks them for every operand
#: of every fused instruction; a Shape keeps its hash once computed, so a lookup is cheap.
_SHAPE_FACTS: dict[Shape, tuple[int, int, int]] = {}
_MAX_SHAPE_FACTS = 1 << 18


def _shape_facts(shape: Shape) -> tuple[int, int, int]:
    """(shape_size, elements, elements_recursive) of `shape`."""
    found = _SHAPE_FACTS.get(shape)
    if found is None:
        if len(_SHAPE_FACTS) >= _MAX_SHAPE_FACTS:
            _SHAPE_FACTS.clear()
        found = _SHAPE_FACTS[shape] = (shape_size(shape), elements(shape), elements_recursive(shape))
    return found


#: Below this, every integer is a float32 value (2**24): sums and products of such integers
#: that stay below it need no float32 rounding.
_F32_EXACT_INT = 16777216


def concat_is_penalised(node: Node) -> bool:
    """GpuHloCostAnalysis::HandleConcatenate's special case: a concatenate along a dimension
    other than the first whose first operand's size there is not a multiple of 32 (warps
    straddle operand boundaries; XLA charges 400 flops per element instead of 6)."""
    if node.opcode != "concatenate" or not node.operands:
        return False
    dim = (attributes.dimensions(node) or (0,))[0]
    return dim > 0 and bool(node.operands[0].shape.dims[dim] & 31)


def _signature(node: Node) -> tuple:
    """What a node's cost properties depend on besides the node itself."""
    fused = node.fused
    return (node.opcode, node.fusion_kind if fused is not None else None,
            fused.version if fused is not None else None, id(fused) if fused is not None else None,
            tuple(op.shape for op in node.operands))


def _unpacked(order: list[Node], positional: tuple) -> FusionInfo:
    """A FusionInfo kept by post-order position, for the fused instructions `order`."""
    inner, roots, utilization, _ = positional
    uids = [n.uid for n in order]
    return FusionInfo(dict(zip(uids, inner)),
                      {uid: dict.fromkeys([uids[j] for j in mine]) for uid, mine in zip(uids, roots)},
                      dict(zip(uids, utilization)))


def _tuple_leaf_sizes(shape) -> int:
    if shape.is_tuple:
        return sum(_tuple_leaf_sizes(s) for s in shape.tuple_shapes)
    return shape_size(shape) if shape.is_array else 0


@dataclass
class Properties:
    """HloCostAnalysis properties of one instruction (float32 values, as XLA keeps them)."""

    flops: float = 0.0
    output_bytes: float = 0.0
    operand_bytes: list[float] = field(default_factory=list)
    operand_utilization: list[float] = field(default_factory=list)
    ir_size: float = 1.0
    #: Only for fused instructions: how often the instruction is computed per fusion output
    #: element (the propagated utilisation) — XLA's kUtilizationKey.
    utilization: float = 0.0


@dataclass
class FusionInfo:
    """What utilisation propagation found inside one fusion (keyed by fused-node uid)."""

    props: dict[int, Properties]
    roots: dict[int, dict[int, None]]  # node uid → its elementwise-use roots (ordered set)
    root_utilization: dict[int, float]


@mypyc_attr(allow_interpreted_subclasses=True)
class GpuHloCostAnalysis:
    """Cost properties of graph nodes, computed on demand and cached per node.

    Call `revisit(node)` after a node changed (a fusion that absorbed a producer keeps its
    identity), as XLA's PriorityFusion calls RevisitInstruction."""

    def __init__(self, profile: OpProfile, concat_penalty: bool = True, by_structure: bool = False):
        self.profile = profile
        #: XLA prices a concatenate along a minor dimension whose first operand is not
        #: 32-aligned at 400 flops per element (a tuning constant); False prices it at 6.
        self.concat_penalty = concat_penalty
        self._props: dict[int, tuple[tuple, Properties]] = {}
        self._fusions: dict[int, FusionInfo] = {}
        #: Fusions whose properties were found by structure: (body, its version, positional
        #: utilisations and the parameters' positions), unpacked into `_fusions` by the first
        #: question that needs them (_fusion_info; most fusions are never asked).
        self._packed: dict[int, tuple[Graph, int, tuple]] = {}
        self._reducer_flops: dict[str, float] = {}
        #: `by_structure`: a fusion's properties and utilisations by (kind, body structure),
        #: in post-order positions (_analyse_fusion_by_structure); None when not asked for (a
        #: subclass that edits the properties it gets must not share them).
        self._by_structure: dict[tuple, tuple] | None = {} if by_structure else None

    # -- public queries ------------------------------------------------------------------
    def properties(self, node: Node) -> Properties:
        """The node's properties, as last analysed (XLA's analysis too is only brought up to
        date by RevisitInstruction: `revisit`)."""
        cached = self._props.get(node.uid)
        if cached is not None:
            return cached[1]
        props = self._analyse(node)
        self._props[node.uid] = (_signature(node), props)
        return props

    def revisit(self, node: Node) -> None:
        """XLA's RevisitInstruction: the next query recomputes the node if what its properties
        depend on changed (its fused body, its kind, its operands' shapes)."""
        cached = self._props.get(node.uid)
        if cached is not None and cached[0] != _signature(node):
            del self._props[node.uid]
            self._fusions.pop(node.uid, None)
            self._packed.pop(node.uid, None)

    def flop_count(self, node: Node) -> int:
        return int(self.properties(node).flops)

    def output_bytes_accessed(self, node: Node) -> int:
        return int(self.properties(node).output_bytes)

    def operand_bytes_accessed(self, node: Node, index: int) -> int:
        values = self.properties(node).operand_bytes
        return int(values[index]) if index < len(values) else 0

    def operand_utilization(self, node: Node, index: int) -> float:
        values = self.properties(node).operand_utilization
        return values[index] if index < len(values) else 0.0

    def ir_size(self, node: Node) -> float:
        """IrSize: 1 for a plain instruction; for a fusion, how many instructions its emitted
        code holds (each fused instruction counted as often as it is emitted)."""
        return self.properties(node).ir_size

    def fused_ir_size(self, fusion: Node, parameter_index: int) -> float:
        """IrSize of a fusion's fused parameter: how many times the code reading it is emitted.
        (Read from the properties found by structure while they are still packed: the merger
        asks this of every user, and unpacking a body's utilisations walks all of it.)"""
        self.properties(fusion)
        packed = self._packed.get(fusion.uid)
        if packed is not None and packed[0].version == packed[1]:
            inner, _, _, param_at = packed[2]
            at = param_at[parameter_index] if parameter_index < len(param_at) else -1
            return inner[at].ir_size if at >= 0 else 0.0
        info = self._fusion_info(fusion)
        param = fusion.fused.parameters[parameter_index]
        props = info.props.get(param.uid)
        return props.ir_size if props is not None else 0.0

    def common_elementwise_utilization(self, fusion: Node, a: Node, b: Node) -> float:
        """Σ root utilisation over the elementwise-use roots two fused nodes share."""
        info = self._fusion_info(fusion)
        ra = info.roots.get(a.uid, {})
        rb = info.roots.get(b.uid, {})
        total = 0.0
        for r in ra:
            if r in rb:
                total = f32(total + info.root_utilization.get(r, 0.0))
        return total

    def producer_consumer_merged_too_large(self, producer: Node, consumer: Node) -> tuple[bool, int]:
        """XLA's ProducerConsumerMergedTooLarge: (refuse?, the merged IR size)."""
        replication = 1
        if consumer.opcode == "fusion" and consumer.fused is not None:
            replication = int(self.fused_ir_size(consumer, consumer.operand_index(producer)))
        merged = int(self.ir_size(producer) * replication + self.ir_size(consumer))
        return merged > MAX_IR_SIZE, merged

    # -- analysis --------------------------------------------------------------------------
    def _fusion_info(self, fusion: Node) -> FusionInfo:
        self.properties(fusion)
        info = self._fusions.get(fusion.uid)
        if info is None:
            body, version, positional = self._packed.pop(fusion.uid)
            if body.version != version:
                # (the body changed and no one revisited the fusion: the passes revisit every
                # node they change, so this is not reached; its own instructions, afresh)
                self._analyse_fusion(fusion)
                return self._fusions[fusion.uid]
            info = self._fusions[fusion.uid] = _unpacked(body.post_order(), positional)
        return info

    def _analyse(self, node: Node) -> Properties:
        if node.opcode == "fusion" and node.fused is not None:
            if self._by_structure is not None:
                return self._analyse_fusion_by_structure(node)
            return self._analyse_fusion(node)
        return self._instruction(node)

    def _analyse_fusion_by_structure(self, fusion: Node) -> Properties:
        """_analyse_fusion, remembered by the fusion's kind and body structure (what it reads:
        hlofuse.cost.structure.body_key spells out every fused instruction, its shape,
        attributes, reducer and operands): the layers of a model fuse the same kernels again
        and again.  The utilisations are kept by post-order position and handed to this
        fusion's own instructions; the values are shared, never edited after analysis."""
        from .structure import body_key

        body = fusion.fused
        key = (fusion.fusion_kind, body_key(body))
        found = self._by_structure.get(key)
        if found is None:
            self._packed.pop(fusion.uid, None)
            before = self._fusions.get(fusion.uid)
            props = self._analyse_fusion(fusion)
            info = self._fusions.get(fusion.uid)
            if info is None or info is before:  # (a custom fusion costed as its gather or scatter)
                self._by_structure[key] = (props, None)
                return props
            order = body.post_order()
            position = {n.uid: i for i, n in enumerate(order)}
            self._by_structure[key] = (props, (
                [info.props[n.uid] for n in order],
                [tuple(position[r] for r in info.roots[n.uid]) for n in order],
                [info.root_utilization[n.uid] for n in order],
                # each parameter's position (-1: not in the post order), for fused_ir_size
                tuple(position.get(p.uid, -1) for p in body.parameters)))
            return props
        props, positional = found
        if positional is not None:
            self._fusions.pop(fusion.uid, None)
            self._packed[fusion.uid] = (body, body.version, positional)
        return props

    def _instruction(self, node: Node) -> Properties:
        """HloCostAnalysis::Preprocess, then the opcode's handler."""
        facts = _SHAPE_FACTS.get
        shape = node.shape
        own = facts(shape) or _shape_facts(shape)
        operands = node.operands
        p = Properties(0.0, float(own[0]),
                       [float((facts(o.shape) or _shape_facts(o.shape))[0]) for o in operands],
                       [1.0] * len(operands), 1.0)
        op = node.opcode
        if op in _FLOP_ELEMENTWISE:
            p.flops = f32(self.profile.flops_per_element(op, shape.element_type) * own[2])
        elif op in ("parameter", "constant"):
            p.output_bytes = 0.0
        elif op == "get-tuple-element":
            p.output_bytes = 0.0
            p.operand_bytes = [0.0]
        elif op == "bitcast" or (op == "transpose" and _transpose_is_effective_bitcast(node)):
            p.output_bytes = 0.0
            p.operand_bytes = [0.0] * len(node.operands)
        elif op == "tuple":
            p.operand_bytes = [0.0] * len(node.operands)
        elif op in ("broadcast", "slice", "gather", "dynamic-slice"):
            p.operand_bytes[0] = float(own[0])
            p.operand_utilization[0] = f32(own[1] / max(_shape_facts(operands[0].shape)[1], 1))
        elif op == "dynamic-update-slice":
            update = node.operands[1].shape
            out_elems = elements(node.shape)
            p.output_bytes = float(shape_size(update))
            p.operand_bytes[0] = 0.0
            p.operand_utilization[0] = f32((out_elems - elements(update)) / out_elems) if out_elems else 0.0
        elif op == "concatenate":
            per_element = 400 if self.concat_penalty and concat_is_penalised(node) else 6
            p.flops = f32(per_element * elements_recursive(node.shape))
        elif op == "reduce":
            self._reduce(node, p)
        elif op == "reduce-window":
            self._reduce_window(node, p)
        elif op == "scatter":
            self._scatter(node, p)
        elif op == "dot":
            lhs = node.operands[0].shape
            width = 1
            for d in attributes.ints(node, "lhs_contracting_dims"):
                width *= lhs.dims[d]
            p.flops = f32(FMA_FLOPS * elements(node.shape) * width)
        elif op == "convolution":
            p.flops = f32(_convolution_flops(node))
        elif op == "sort":
            n = elements(node.operands[0].shape)
            p.flops = f32(n * (max(n - 1, 0)).bit_length()) if n > 0 else 0.0
        elif op == "custom-call":
            p.flops = -1.0
            p.output_bytes = -1.0
            p.operand_bytes = [-1.0] * len(node.operands)
        elif op == "map":
            p.flops = f32(self._computation_flops(node) * elements(node.shape))
        return p

    def _reduce(self, node: Node, p: Properties) -> None:
        arg = node.operands[0].shape
        out = node.shape if not node.shape.is_tuple else node.shape.tuple_shapes[0]
        steps = elements(arg) - elements(out)
        p.flops = f32(self._computation_flops(node) * steps)
        p.output_bytes = float(_tuple_leaf_sizes(node.shape))
        inputs = len(node.operands) // 2
        out_elems = elements(out)
        for i in range(inputs, len(node.operands)):
            p.operand_bytes[i] = float(out_elems * shape_size(node.operands[i].shape))
            p.operand_utilization[i] = float(out_elems)

    def _reduce_window(self, node: Node, p: Properties) -> None:
        window = attributes.window(node)
        window_elems = math.prod(w.size for w in window) if window else 1
        out = node.shape if not node.shape.is_tuple else node.shape.tuple_shapes[0]
        out_elems = elements(out)
        in_elems = elements(node.operands[0].shape)
        count = (window_elems - 1) * out_elems
        reducing = [w for w in window if w.size != 1]
        padded = [w for w in window if w.pad_low != 0 or w.pad_high != 0]
        if len(reducing) == 1 and len(padded) == 1 and not node.shape.is_tuple:
            for i, w in enumerate(window):
                if (w.size != 1 and w.pad_low != 0 and w.pad_high != 0 and w.pad_low == w.pad_high
                        and w.size == 2 * w.pad_low + 1):
                    if w.pad_low == node.shape.dims[i] - 1:
                        window_elems = node.shape.dims[i]
                        count = out_elems // window_elems + (window_elems - 1)
                    break
        p.operand_utilization[0] = f32(out_elems * window_elems / in_elems) if in_elems else 0.0
        p.operand_bytes[0] = float(out_elems * window_elems
                                   * ((node.operands[0].shape.element_bits + 7) // 8))
        p.flops = f32(self._computation_flops(node) * count)

    def _scatter(self, node: Node, p: Properties) -> None:
        n = len(node.operands) // 2  # scatter_operand_count: operands..., indices, updates...
        updates = node.operands[n + 1:]
        total = 0
        for i, upd in enumerate(updates):
            size = shape_size(upd.shape)
            p.operand_bytes[i] = float(size)
            p.operand_bytes[n + 1 + i] = float(size)
            total += size
        p.operand_bytes[n] = float(shape_size(node.operands[n].shape))
        p.output_bytes = float(total)
        count = elements(updates[0].shape) if updates else 0
        p.flops = f32(self._computation_flops(node) * count)

    def _computation_flops(self, node: Node) -> float:
        """Flops of one application of the computation a reduce/map/scatter calls (XLA's
        ProcessSubcomputation: the sum over its instructions)."""
        name = node.attr("to_apply")
        if not name:
            return 0.0
        name = name.strip().lstrip("%")
        if name in self._reducer_flops:
            return self._reducer_flops[name]
        graph = node.graph.program.graphs.get(name) if node.graph is not None else None
        total = 0.0
        if graph is not None:
            for inner in graph.nodes():
                total = f32(total + self._instruction(inner).flops)
        self._reducer_flops[name] = total
        return total

    def _analyse_fusion(self, fusion: Node) -> Properties:
        """HloCostAnalysis::HandleFusion with GPU's utilisation propagation."""
        body = fusion.fused
        if fusion.fusion_kind == "kCustom":
            for inner in body.nodes():
                if inner.opcode in ("gather", "scatter"):
                    p = self._instruction(inner)
                    return _as_fusion_props(p, fusion)
        nodes = body.nodes()
        instruction = self._instruction
        inner_props: dict[int, Properties] = {inner.uid: instruction(inner) for inner in nodes}
        props = Properties(operand_bytes=[0.0] * len(fusion.operands),
                           operand_utilization=[0.0] * len(fusion.operands))
        root = body.root
        # Output bytes (FusionProcessOutputBytesAccessed): an in-place dynamic-update-slice
        # writes only its update, and does not read operand 0.
        outputs = list(root.operands) if root.opcode == "tuple" else [root]
        out_total = 0.0
        for out in outputs:
            if not out.shape.is_array:
                continue
            if out.opcode == "dynamic-update-slice":
                out_total += shape_size(out.operands[1].shape)
                inner_props[out.uid].operand_utilization[0] = 0.0
            else:
                out_total += shape_size(out.shape)
        props.output_bytes = f32(out_total)
        info = self._propagate(body, inner_props)
        self._fusions[fusion.uid] = info
        # Σ utilisation × flops and Σ IR size in float32, term by term as XLA adds them.  A zero
        # term leaves a float32 sum unchanged (it never becomes -0.0: it starts at +0.0), and
        # IR sizes are whole numbers: while their exact sum stays below 2**24 every float32
        # partial sum is exact, so only larger sums are added the slow way.
        flops = 0.0
        ir = 0.0
        for inner in nodes:
            ip = inner_props[inner.uid]
            term = ip.utilization * ip.flops
            if term != 0.0:  # NaN included
                flops = f32(flops + f32(term))
            ir += ip.ir_size
        if ir > _F32_EXACT_INT:
            ir = 0.0
            for inner in nodes:
                ir = f32(ir + inner_props[inner.uid].ir_size)
        props.flops = flops
        props.ir_size = ir
        facts = _SHAPE_FACTS.get
        for i, param in enumerate(body.parameters):
            pp = inner_props[param.uid]
            util = pp.utilization
            props.operand_utilization[i] = util
            size = (facts(param.shape) or _shape_facts(param.shape))[0]
            if util == 1.0 and size <= _F32_EXACT_INT:
                props.operand_bytes[i] = float(size)
            else:
                props.operand_bytes[i] = float(_llround(f32(size * util)))
        return props

    def _propagate(self, body, inner_props: dict[int, Properties]) -> FusionInfo:
        """GpuHloCostAnalysis::FusionCalculateUtilizations.

        Values are float32, each operation rounded as XLA rounds it.  Where the rounding cannot
        change a value it is skipped: every stored utilisation is already a float32 value, so
        adding it to zero, multiplying it by 1, or rounding 1 element-wise over fewer than 2**24
        elements gives it back exactly."""
        order = body.post_order()
        order.reverse()
        roots: dict[int, dict[int, None]] = {n.uid: {} for n in order}
        root_util: dict[int, float] = {n.uid: 0.0 for n in order}
        root_ir: dict[int, int] = {}
        root = body.root
        root_util[root.uid] = 1.0
        root_ir[root.uid] = 1
        roots[root.uid][root.uid] = None
        facts = _SHAPE_FACTS.get
        for node in order:
            uid = node.uid
            ip = inner_props[uid]
            mine = roots[uid]
            util = 0.0
            times = 0
            first = True
            for r in mine:  # most nodes have one root
                if first:  # f32(0.0 + u) is u (+0.0 for -0.0, as 0.0 + u gives)
                    util = 0.0 + root_util.get(r, 0.0)
                    times = root_ir.get(r, 0)
                    first = False
                else:
                    util = f32(util + root_util.get(r, 0.0))
                    times += root_ir.get(r, 0)
            ip.utilization = util
            ip.ir_size = float(times)
            op = node.opcode
            passes_through = (
                is_elementwise(node)
                or (op == "bitcast" and equal_ignoring_element_type(node.operands[0].shape, node.shape))
                or op in ("tuple", "get-tuple-element")
            )
            if passes_through:
                for operand in node.operands:
                    roots[operand.uid].update(mine)  # the same keys, added in the same order
                continue
            utilization = ip.operand_utilization
            for i, operand in enumerate(node.operands):
                ouid = operand.uid
                roots[ouid][ouid] = None
                factor = utilization[i]
                used = util if factor == 1.0 else f32(util * factor)
                count = (facts(operand.shape) or _shape_facts(operand.shape))[2]
                if not count or used == 0.0:
                    used = 0.0
                elif used != 1.0 or count > _F32_EXACT_INT:
                    used = f32(math.ceil(f32(used * count)) / count)
                before = root_util.get(ouid, 0.0)
                root_util[ouid] = before + used if before == 0.0 else f32(before + used)
                root_ir[ouid] = root_ir.get(ouid, 0) + times
        return FusionInfo(inner_props, roots, root_util)


def _llround(x: float) -> int:
    """std::llround: halves away from zero (Python's round() rounds them to even)."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def _as_fusion_props(p: Properties, fusion: Node) -> Properties:
    """A custom fusion costed as its gather/scatter: operand lists sized for the fusion."""
    n = len(fusion.operands)
    return Properties(p.flops, p.output_bytes, (p.operand_bytes + [0.0] * n)[:n],
                      (p.operand_utilization + [1.0] * n)[:n], p.ir_size)


def _transpose_is_effective_bitcast(node: Node) -> bool:
    """HloInstruction::IsEffectiveBitcast for a transpose: it keeps every element in place."""
    return transpose_is_bitcast(node.operands[0].shape, node.shape, attributes.dimensions(node))


def _convolution_flops(node: Node) -> int:
    """2 × multiply-adds, with every window position counted as valid (see module doc)."""
    if len(node.operands) < 2:
        return 0
    lhs, rhs = node.operands[0].shape, node.operands[1].shape
    window = attributes.window(node)
    kernel = math.prod(w.size for w in window) if window else 1
    labels = node.attr("dim_labels") or ""
    in_feature = lhs.dims[labels.index("f")] if "f" in labels.split("_")[0] else 1
    groups = attributes.integer(node, "feature_group_count", 1) or 1
    del rhs
    return FMA_FLOPS * elements(node.shape) * kernel * max(in_feature // groups, 1)

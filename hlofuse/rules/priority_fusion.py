"""PriorityFusion's rules (xla/backends/gpu/transforms/priority_fusion.cc at XLA 5a9e73cb,
jaxlib 0.10.2; docs/xla/priority-fusion.md §3–§4).

PriorityFusion asks `CanFuse(producer, consumer)` for every user of a producer, in this order,
and the first refusal wins (XLA's FusionDecision):

     1  PF-ROOT-PRODUCER            the producer is its computation's root
     2  PF-PRODUCER-NOT-FUSIBLE     the producer is not an op PriorityFusion fuses
     3  PF-CONSUMER-NOT-FUSIBLE     the consumer is not
     4  (a generic Triton fusion on either side: PF-TRITON-UNSUPPORTED and the operand budget
        decide alone, see `TRITON_RULES`)
     5  PF-BITCAST-CONSUMER         never into a lone bitcast
     6  GF-SCATTER-*                CanEmitInputFusedScatter (shared with the legacy pipeline)
     7  PF-REDUCE-INTO-REDUCE       both sides hold a reduce of 16+ elements per output
     8  PF-REDUCTION-TO-LOOP        a reduction kernel would become a loop kernel
     9  GF-*-BUDGET                 FusionFitsInBudget(consumer, producer)
    10  PF-CODE-DUPLICATION         the emitted IR would exceed 10000 instructions
    11  IF-INPLACE-*                InstructionFusion::ShouldFuseInPlaceOp

A producer is fused into all its non-bitcast users or into none (PF-ALL-USERS), only when the
cost model says that saves time (PF-UNPROFITABLE).  Constants are fused last: a constant of at
most one element into every fusible user (PF-CONSTANT-USER-NOT-FUSIBLE), larger ones never
(PF-LARGE-CONSTANT).  Producers are never fused into bitcast users (PF-BITCAST-USER): a
bitcast is fused into its own users instead.

Rules whose check needs the pass's state (cost model, fusion analyses) find it in a
`PriorityCandidate`'s `pf` (a `PfState`: the cost model and GPU config of the computation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..attributes import backend_config
from ..cost import durations as dur
from ..cost.fusion_analysis import LOOP, REDUCTION
from ..gpu.config import GpuConfig
from ..gpu.properties import is_elementwise, is_fusible as hlo_is_fusible
from ..gpu.shapes import bit_width, elements
from ..gpu.triton_support import triton_support as _triton_support
from . import XLA_COMMITS, Candidate, XlaRef, objection, rule
from . import gpu_fusible, instruction_fusion  # noqa: F401  (registers the shared rules asked below)
from .candidates import PriorityCandidate
from .instruction_facts import updates_in_place
from .instruction_fusion import IN_PLACE_RULES

if TYPE_CHECKING:  # pragma: no cover
    from ..cost import GpuPerformanceModel
    from ..graph import Node

_FILE = "xla/backends/gpu/transforms/priority_fusion.cc"
_COMMIT = XLA_COMMITS["priority"]
_PASSES = ("priority-fusion",)
_PIPELINES = ("priority",)


def _ref(function: str, message: str | None, file: str = _FILE) -> XlaRef:
    return XlaRef(file, function, message, _COMMIT)


@dataclass
class PfState:
    """What PriorityFusion's checks read besides the two instructions."""

    model: "GpuPerformanceModel"
    config: GpuConfig
    #: The terms of a cost-model verdict, by producer and verdict totals: asked once per user
    #: of the producer when the pass reports its refusals, on a graph that no longer changes.
    terms: dict = field(default_factory=dict, compare=False)


def _state(c: Candidate) -> PfState:
    return c.pf


def _cost_facts(c: Candidate, times) -> dict:
    from ..cost.terms import cost_facts

    state = _state(c)
    key = (c.producer.uid, times.time_fused, times.time_unfused)
    found = state.terms.get(key)
    if found is None:
        found = state.terms[key] = cost_facts(state.model, c.producer, c.producer.users, times=times)
    return found


# ------------------------------------------------------------------------------------------
# Predicates of priority_fusion.cc
# ------------------------------------------------------------------------------------------


def is_fusible_bitcast(node: "Node") -> bool:
    """IsFusibleBitcast: a bitcast that keeps the element bit width."""
    return node.opcode == "bitcast" and all(
        bit_width(op.shape.element_type) == bit_width(node.shape.element_type) for op in node.operands)


def is_generic_triton_fusion(node: "Node") -> bool:
    """IsGenericTritonFusion: a kCustom fusion whose backend config kind is `__triton` and whose
    config parses at 5a9e73cb (the 2025 `output_tile_sizes` field no longer does, pitfall P9)."""
    if node.opcode != "fusion" or node.fusion_kind != "kCustom":
        return False
    config = backend_config(node).get("fusion_backend_config") or {}
    if config.get("kind") != "__triton":
        return False
    block = config.get("block_level_fusion_config") or {}
    return "output_tile_sizes" not in block


_PF_FUSIBLE_OPCODES = frozenset({
    "copy", "iota", "constant", "reduce", "broadcast", "concatenate", "dynamic-slice",
    "dynamic-update-slice", "gather", "pad", "reduce-window", "reshape", "reverse", "scatter", "slice",
    "transpose",
})


def is_pf_fusible(node: "Node") -> bool:
    """PriorityFusion's IsFusible: fusible at all (no side effect, not a parameter or control
    flow), and elementwise, a width-keeping bitcast, a non-custom (or generic Triton) fusion, or
    one of the data-movement ops the emitters inline."""
    if not hlo_is_fusible(node):
        return False
    if node.opcode == "fusion":
        # (a kLoop/kInput fusion first: an elementwise fusion, whose every instruction would
        # be looked at, passes either way)
        return node.fusion_kind != "kCustom" or is_elementwise(node) or is_generic_triton_fusion(node)
    if is_elementwise(node) or is_fusible_bitcast(node):
        return True
    return node.opcode in _PF_FUSIBLE_OPCODES


def contains_significant_reduce(node: "Node") -> tuple[str, int] | None:
    """A reduce producing an array with at least 16 input elements per output element (in a
    fusion: any of its instructions); returns (its name, the ratio)."""
    nodes = node.fused.nodes() if node.opcode == "fusion" and node.fused is not None else [node]
    for n in nodes:
        if n.opcode != "reduce" or not n.shape.is_array:
            continue
        out = elements(n.shape)
        ratio = elements(n.operands[0].shape) // out if out else 0
        if ratio >= 16:
            return n.name, ratio
    return None


# ------------------------------------------------------------------------------------------
# CanFuse, in XLA's order
# ------------------------------------------------------------------------------------------


@rule(id="PF-ROOT-PRODUCER", name="pf-root-producer", passes=_PASSES, pipelines=_PIPELINES,
      tags={"structure", "root", "legality"}, relaxable=False,
      xla=_ref("PriorityFusionQueue::CanFuse", "not fusing into the output of the root instruction"),
      message="{producer} is the root of {computation}; its value leaves the computation")
def root_producer(c: Candidate):
    """The producer is its computation's root.

    What it checks: the producer is the root instruction of its computation.
    Why XLA does this: the root's value is the computation's result (a loop's next state, the
    module's output); instructions after the root are not necessarily dead (an outfeed may read
    them), so XLA never fuses across it.
    Example:
        b = f32[8] broadcast(c), dimensions={}
        ROOT r = f32[8] broadcast(...)      # the root: not fused into later users
    Relaxing: not possible; the root must stay materialised.
    """
    p = c.producer
    if p.graph is None or p.graph.root is not p:
        return None
    return objection(producer=p.name, computation=p.graph.name)


_NOT_FUSIBLE_WHY = {
    "custom-call": "a custom call is an opaque library kernel (cuBLAS, cuDNN, an RNG, ...)",
    "dot": "a dot runs as a library GEMM or a Triton GEMM fusion",
    "convolution": "a convolution runs as a cuDNN kernel",
    "tuple": "a tuple only groups buffers",
    "get-tuple-element": "a get-tuple-element names a buffer",
    "parameter": "a parameter is an input buffer",
    "while": "a while loop runs its body as separate kernels",
    "conditional": "a conditional runs its branches as separate kernels",
    "call": "a call runs another computation",
    "sort": "a sort runs as its own kernel",
    "rng-bit-generator": "the RNG bit generator runs as its own kernel",
    "fft": "an FFT runs as a cuFFT kernel",
    "bitcast": "this bitcast changes the element width",
    "bitcast-convert": "this bitcast-convert changes the element width",
    "fusion": "a custom fusion (cuBLAS/cuDNN/Triton GEMM, sort-iota...) is a library kernel",
}


def _why_not_fusible(node: "Node") -> str:
    if node.opcode == "fusion" and node.fusion_kind == "kCustom":
        kind = (backend_config(node).get("fusion_backend_config") or {}).get("kind") or "no backend config"
        return f"a kCustom fusion ({kind}) is a library kernel, not one XLA's emitters extend"
    if not hlo_is_fusible(node) and node.opcode not in _NOT_FUSIBLE_WHY:
        return "it has side effects"
    return _NOT_FUSIBLE_WHY.get(node.opcode, f"PriorityFusion does not fuse {node.opcode}")


@rule(id="PF-PRODUCER-NOT-FUSIBLE", name="pf-producer-not-fusible", passes=_PASSES, pipelines=_PIPELINES,
      tags={"structure", "custom-call", "tuple", "library", "legality"}, relaxable=False,
      xla=_ref("PriorityFusionQueue::CanFuse", "the producer is not fusible"),
      message="{producer} ({opcode}) cannot be fused into another kernel: {why}")
def producer_not_fusible(c: Candidate):
    """The producer is not an instruction PriorityFusion fuses.

    What it checks: PriorityFusion's IsFusible(producer): no side effects, and elementwise, a
    width-keeping bitcast, a kLoop/kInput fusion (or a generic Triton fusion), or one of copy,
    iota, constant, reduce, broadcast, concatenate, dynamic-slice, dynamic-update-slice, gather,
    pad, reduce-window, reshape, reverse, scatter, slice, transpose.  Custom calls (the
    cu_threefry2x32 RNG, cuBLAS, cuDNN), dots, convolutions, sorts, library fusions
    (`kind=kCustom`), tuples and get-tuple-elements fail.
    Why XLA does this: XLA's own emitters can only inline what they can compute element by
    element or tile by tile; library kernels are opaque.
    Example:
        r = u32[2,2048] custom-call(k), custom_call_target="cu_threefry2x32_ffi"
        ROOT a = u32[2,2048] add(r, one)      # r stays its own kernel
    Relaxing: not possible; no emitter could produce the fused kernel.
    """
    p = c.producer
    if is_pf_fusible(p):
        return None
    return objection(producer=p.name, opcode=p.opcode, why=_why_not_fusible(p))


@rule(id="PF-CONSUMER-NOT-FUSIBLE", name="pf-consumer-not-fusible", passes=_PASSES, pipelines=_PIPELINES,
      tags={"structure", "tuple", "custom-call", "library", "legality"}, relaxable=False,
      xla=_ref("PriorityFusionQueue::CanFuse", "the consumer is not fusible"),
      message="{consumer} ({opcode}) cannot take {producer} in: {why}")
def consumer_not_fusible(c: Candidate):
    """The consumer is not an instruction PriorityFusion fuses into.

    What it checks: PriorityFusion's IsFusible(consumer), as for the producer.  The most common
    consumer that fails is a tuple: a loop body's result or the module's output.
    Why XLA does this: a tuple is a list of buffers, not a kernel, so what it collects must be
    written to memory; a library call or a dot reads its inputs from memory.
    Example:
        n = f32[8] negate(x)
        ROOT t = (f32[8], s32[]) tuple(n, i)    # n is written out for the next iteration
    Relaxing: not possible.
    """
    con = c.consumer
    if is_pf_fusible(con):
        return None
    return objection(producer=c.producer.name, consumer=con.name, opcode=con.opcode, why=_why_not_fusible(con))


# -- the Triton path ----------------------------------------------------------------------

def triton_support(node: "Node", config: GpuConfig | None = None) -> str | None:
    """PriorityFusionQueue::IsTritonSupported for `node` (hlofuse/gpu/triton_support.py): None
    when Triton can emit it, else XLA's reason."""
    hopper = config is None or config.device is None or config.device.compute_capability >= (9, 0)
    return _triton_support(node, is_generic_triton_fusion(node), hopper)


@rule(id="PF-TRITON-UNSUPPORTED", name="pf-triton-unsupported", passes=_PASSES, pipelines=_PIPELINES,
      tags={"triton", "library", "legality"}, relaxable=False,
      xla=_ref("PriorityFusionQueue::CanFuseTriton / IsTritonSupportedInstruction", "Unsupported opcode {opcode}",
               file="xla/backends/gpu/codegen/triton/support.cc"),
      message="{consumer_or_producer} would join the Triton fusion on the other side, but Triton cannot "
              "emit {what}: {triton_reason}")
def triton_unsupported(c: Candidate):
    """A generic Triton fusion only absorbs (or is absorbed by) what Triton can emit.

    What it checks: when the producer or the consumer is a generic Triton fusion (`kind=kCustom`,
    `"kind":"__triton"`: the normalisation fusions XLA forms before fusion), every instruction
    on both sides must be supported by Triton's emitter (CanFuseTriton asks
    IsTritonSupportedInstruction of the producer's instructions, then the consumer's; the
    first refusal is XLA's reason: "Unsupported opcode gather", "Unsupported elementwise
    operation.", "Only scalar constants are supported in Triton.", "Unsupported instruction
    opcode reverse"...).  Supported at XLA 5a9e73cb: the elementwise ops of each element
    type's table, broadcast, bitcast, reshape, slice, transpose, iota, scalar constants,
    single-operand row reductions, concatenates, high pads.  The result is a Triton fusion.
    Why XLA does this: the fused kernel is generated by Triton; an op it cannot lower makes the
    fusion impossible.
    Example:
        g = f32[64,128] gather(table, ids), ...
        ROOT s = f32[64,128] fusion(g), kind=kCustom, calls=softmax, backend_config={"fusion_backend_config":{"kind":"__triton",...}}
    Relaxing: not possible.
    """
    config = _state(c).config if isinstance(c, PriorityCandidate) else None
    for side, node in (("the producer", c.producer), ("the consumer", c.consumer)):
        reason = triton_support(node, config)
        if reason is not None:
            what = node.name if node.opcode != "fusion" else f"everything in {node.name}"
            opcode = reason.split()[-1] if reason.startswith("Unsupported opcode") else node.opcode
            return objection(producer=c.producer.name, consumer=c.consumer.name, consumer_or_producer=side,
                             what=what, triton_reason=reason, opcode=opcode, xla_reason=reason)
    return None


@rule(id="PF-TRITON-NOT-TILEABLE", name="pf-triton-not-tileable", passes=_PASSES, pipelines=_PIPELINES,
      tags={"triton", "library", "legality"}, relaxable=False,
      xla=_ref("PriorityFusionQueue::GetTiledRunTimeDataCached",
               "Fusion can not be tiled with SymbolicTileAnalysis: No valid tilings found."),
      message="{producer} fused into {consumer} would be a Triton fusion with no valid tiling: {why}")
def triton_not_tileable(c: Candidate):
    """A Triton fusion must have an output tile Triton can run.

    What it checks: after Triton's support check and the parameter limit, XLA searches the
    output tiles of the fused computation (TryFindBestTilingForFusion over
    SymbolicTileAnalysis::GetValidTilings, hlofuse/cost/tiling.py, tiled.py) and refuses the pair when
    none is valid: every candidate has a tile of more than 2^20 elements, a concatenate tile
    that straddles two operands, or an output, operand or iota tile too large for 40% of a
    block's registers (its run time is then infinite) — or the analysis bails out on an
    instruction it cannot tile (a pad outside a GEMM fusion), or finds no symbolic tile for an
    instruction's index ("Failed to compute symbolic tile for <map> for HLO <instr>": a
    floordiv or mod of a reduced dimension, hlofuse/cost/symbolic_tile.py).
    Why XLA does this: Triton runs one block per output tile and keeps each tile in registers;
    a row normalisation feeding a column reduction would need whole columns of whole rows.
    Example:
        y = f32[256,768] fusion(x), kind=kCustom, ...{"kind":"__triton"}   # a row normalisation
        ROOT s = f32[768] reduce(y, zero), dimensions={0}                # a column reduction
    Relaxing: not possible.
    """
    model = _state(c).model
    best = model.triton_tiling(c.producer, c.consumer)
    if best.found:
        return None
    return objection(producer=c.producer.name, consumer=c.consumer.name, why=best.reason,
                     xla_reason=f"Fusion can not be tiled with SymbolicTileAnalysis: {best.reason}")


# -- the emitter-based checks ---------------------------------------------------------------


@rule(id="PF-BITCAST-CONSUMER", name="pf-bitcast-consumer", passes=_PASSES, pipelines=_PIPELINES,
      tags={"bitcast"}, relaxable=True,
      xla=_ref("PriorityFusionQueue::CanFuse", "not fusing into a single bitcast as consumer"),
      message="{consumer} is a lone bitcast; {producer} is not fused into it")
def bitcast_consumer(c: Candidate):
    """Nothing is fused into a lone bitcast.

    What it checks: the consumer is a width-keeping bitcast.  (Other producers skip bitcast
    users anyway; this check decides for a bitcast producer whose user is also a bitcast.)
    Why XLA does this: a bitcast costs nothing; fusing into it would make a kernel where there
    was none.  The bitcast is fused into its own users instead.
    Example:
        b1 = f32[8,4] bitcast(x)
        ROOT b2 = f32[32] bitcast(b1)
    Relaxing: a performance trade: the bitcasts become a copy kernel.
    """
    if not is_fusible_bitcast(c.consumer):
        return None
    return objection(producer=c.producer.name, consumer=c.consumer.name)


@rule(id="PF-REDUCE-INTO-REDUCE", name="pf-reduce-into-reduce", passes=_PASSES, pipelines=_PIPELINES,
      tags={"reduction", "cost-model"}, relaxable=True,
      xla=_ref("PriorityFusionQueue::CanFuse", "both the producer and the consumer contain a reduce"),
      message="{producer} holds the reduce {producer_reduce} ({producer_ratio} inputs per output) and "
              "{consumer} holds {consumer_reduce} ({consumer_ratio} per output)")
def reduce_into_reduce(c: Candidate):
    """A reduction is not fused into another reduction.

    What it checks: both sides contain an array-shaped reduce whose operand has at least 16
    elements per output element (smaller reductions are emitted elementally anyway).
    Why XLA does this: a workaround (b/312200883): the cost model has no tiling analysis and
    cannot price a reduction recomputed inside another reduction's tiles.
    Example:
        r1 = f32[8,16,32] reduce(f32[8,16,32,64] x, zero), dimensions={3}
        ROOT r2 = f32[8,16] reduce(r1, zero), dimensions={2}
    Relaxing: a performance trade: the fused kernel recomputes the inner reduction per tile.
    """
    p = contains_significant_reduce(c.producer)
    if p is None:
        return None
    q = contains_significant_reduce(c.consumer)
    if q is None:
        return None
    return objection(producer=c.producer.name, consumer=c.consumer.name, producer_reduce=p[0],
                     producer_ratio=p[1], consumer_reduce=q[0], consumer_ratio=q[1])


@rule(id="PF-REDUCTION-TO-LOOP", name="pf-reduction-to-loop", passes=_PASSES, pipelines=_PIPELINES,
      tags={"reduction", "emitter", "cost-model"}, relaxable=True,
      xla=_ref("PriorityFusionQueue::CanFuse", "fusion into output of a reduce fusion would create a loop fusion"),
      message="{producer} is a reduction kernel; with {consumer} fused in, its hero would be {hero} and "
              "XLA would emit a loop kernel")
def reduction_to_loop(c: Candidate):
    """A reduction's epilogue must keep the kernel a reduction kernel.

    What it checks: the producer alone is emitted as a reduction, but the producer with the
    consumer fused in would be emitted by the loop emitter: the consumer is not a chain of
    single-operand elementwise ops after the reduce (a binary op such as `add(reduce, y)`, a
    broadcast back to the input shape...), or the reduction is not race free.
    Why XLA does this: a loop kernel computes a reduction element by element, far slower than
    the reduction emitter; XLA keeps the epilogue out (TODO b/312686229: the cost model should
    decide).
    Example:
        r = f32[28672] reduce(f32[28672,4096] x, zero), dimensions={1}
        ROOT a = f32[28672] add(r, y)
    Relaxing: a performance trade: the reduction is emitted by the loop emitter.
    """
    state = _state(c)
    producer_kind = state.model.analysis(c.producer).kind
    if producer_kind != REDUCTION:
        return None
    if state.model.pair_kind(c.producer, c.consumer) != LOOP:
        return None
    fused = state.model.pair_analysis(c.producer, c.consumer)
    hero = fused.roots[0] if fused.roots else c.consumer
    return objection(producer=c.producer.name, consumer=c.consumer.name, hero=f"{hero.name} ({hero.opcode})")


@rule(id="PF-CODE-DUPLICATION", name="pf-code-duplication", passes=_PASSES, pipelines=_PIPELINES,
      tags={"duplication", "compile-time"}, relaxable=True,
      xla=_ref("PriorityFusionQueue::CanFuse", "the fusion would result in an overly large code duplication"),
      message="fusing {producer} into {consumer} would emit {merged} IR instructions (limit {limit}): "
              "{producer} ({producer_ir}) would be emitted {replication} times")
def code_duplication(c: Candidate):
    """The fused kernel's code would be too large.

    What it checks: GpuHloCostAnalysis::ProducerConsumerMergedTooLarge: the producer's IR size
    times the number of times the consumer emits the code reading it, plus the consumer's IR
    size, exceeds 10000.  A consumer that reads a value along several non-elementwise paths
    (a concatenate of slices of it, a pad of a pad...) emits the producer once per path.
    Why XLA does this: the emitters duplicate code per use; some fusions take exponential time
    and memory to compile (TODO b/119692968).
    Example:
        a chain of 20 `concatenate(slice(x), slice(x))` steps: each level doubles the copies of x
    Relaxing: a compile-time trade: compilation may become very slow; the result is the same.
    """
    from ..cost import MAX_IR_SIZE

    model = _state(c).model
    too_large, merged = model.cost.producer_consumer_merged_too_large(c.producer, c.consumer)
    if not too_large:
        return None
    replication = 1
    if c.consumer.opcode == "fusion" and c.consumer.fused is not None:
        replication = int(model.cost.fused_ir_size(c.consumer, c.consumer.operand_index(c.producer)))
    return objection(producer=c.producer.name, consumer=c.consumer.name, merged=merged, limit=MAX_IR_SIZE,
                     producer_ir=int(model.cost.ir_size(c.producer)), replication=replication)


# ------------------------------------------------------------------------------------------
# Producer-level decisions: all users, bitcast users, the cost model, constants
# ------------------------------------------------------------------------------------------


@rule(id="PF-ALL-USERS", name="pf-all-users", passes=_PASSES, pipelines=_PIPELINES,
      tags={"duplication", "policy"}, relaxable=True,
      xla=_ref("PriorityFusionQueue::CanFuseWithAllNonBitcastUsers", None),
      message="{producer} could fuse into {consumer}, but PriorityFusion fuses a producer into all its "
              "users or none, and it cannot fuse into {blocking_user}: {blocking_reason}")
def all_users(c: Candidate):
    """A producer is fused into all of its (non-bitcast) users, or into none.

    What it checks: another user of the producer refuses it (any CanFuse rule); this pair is
    then not fused either.  XLA logs the other user's reason for the producer.
    Why XLA does this: PriorityFusion prices a producer by removing its kernel entirely; fusing
    it into only some users would keep its kernel and add the recomputation.
    Example:
        e = f32[1024] exponential(x)
        a = f32[1024] add(e, y)                    # could take e
        ROOT t = (f32[1024], f32[1024]) tuple(e, a)   # cannot: e stays a kernel, a reads it
    Relaxing: a performance trade: the producer is also computed inside the users that can
    take it (duplicated), and stays a kernel for the others.
    """
    blocking = c.blocking
    if blocking is None:
        return None
    user, rule_id, reason = blocking
    return objection(producer=c.producer.name, consumer=c.consumer.name, blocking_user=user,
                     blocking_rule=rule_id, blocking_reason=reason)


@rule(id="PF-BITCAST-USER", name="pf-bitcast-user", passes=_PASSES, pipelines=_PIPELINES,
      tags={"bitcast", "policy"}, relaxable=True,
      xla=_ref("PriorityFusionQueue::CanFuseWithAllNonBitcastUsers",
               "not fusing because there are only bitcast users"),
      message="{consumer} is a bitcast of {producer}; bitcasts are fused into their users, not the other way")
def bitcast_user(c: Candidate):
    """A producer is never fused into its bitcast users.

    What it checks: the consumer is a width-keeping bitcast (PriorityFusion skips such users;
    if all users are bitcasts XLA logs "not fusing because there are only bitcast users").
    Why XLA does this: a bitcast is free; it is fused into its own users (it has the highest
    priority), and the producer stays for it, computed again inside the other users.
    Example:
        c = f32[512] convert(p)
        m = f32[512] multiply(c, c)          # c is fused into m ...
        b = s32[512] bitcast(c)              # ... and stays a kernel for b
    Relaxing: a performance trade: the bitcast becomes a kernel computing the producer.
    """
    if c.bitcast_user is None or not is_fusible_bitcast(c.consumer):
        return None
    return objection(producer=c.producer.name, consumer=c.consumer.name, only=c.bitcast_user)


@rule(id="PF-UNPROFITABLE", name="pf-unprofitable", passes=_PASSES, pipelines=_PIPELINES,
      tags={"cost-model", "profitability"}, relaxable=True,
      xla=_ref("PriorityFusionQueue::CalculateProducerPriority", None),
      message="the cost model predicts that fusing {producer} into its {users} user(s) would be slower: "
              "{fused_us:.3f} µs fused vs {unfused_us:.3f} µs as separate kernels ({device}){dominant_words}")
def unprofitable(c: Candidate):
    """Fusing the producer into its users would not save modelled time.

    What it checks: the priority of the producer — time unfused minus time fused, over all its
    users, with 1 µs of launch overhead per kernel, from GpuPerformanceModel — is negative.  XLA
    logs this only as an `update_priority` step whose `us_unfused` is below `us_fused`.
    Why XLA does this: a producer whose recomputation in every user costs more than writing and
    reading its result (a broadcast feeding a reduction many times, a compute-heavy producer
    read by several users, a concatenate priced at 400 flops per element...) is better left
    alone.
    Example:
        c = f32[64,2046] concatenate(a, b), dimensions={1}   # operand 0 of width 1023: 400 flops/elt
        r = f32[64] reduce(c, zero), dimensions={1}
    Relaxing: a performance trade, by the model's own estimate.
    """
    times = c.times
    if times is None or times.priority >= 0:
        return None
    return objection(producer=c.producer.name, consumer=c.consumer.name, users=len(c.producer.users),
                     fused_us=times.fused_us, unfused_us=times.unfused_us,
                     priority_us=times.unfused_us - times.fused_us, device=_state(c).config.device.name,
                     **_cost_facts(c, times))


@rule(id="PF-CONCAT-PENALTY", name="pf-concat-penalty", passes=_PASSES, pipelines=_PIPELINES,
      tags={"concat", "cost-model", "profitability"}, relaxable=True,
      xla=_ref("GpuHloCostAnalysis::HandleConcatenate", None, file="xla/service/gpu/model/gpu_hlo_cost_analysis.cc"),
      message="the cost model prices the concatenate {concat} at 400 flops per element (it joins along "
              "dimension {dimension}, and its first operand's size there, {size}, is not a multiple of 32); "
              "fusing {producer} into its users would then take {fused_us:.3f} µs vs {unfused_us:.3f} µs "
              "({device}){dominant_words}")
def concat_penalty(c: Candidate):
    """The cost model charges a misaligned concatenate 400 flops per element.

    What it checks: the fusion is unprofitable by the cost model (as PF-UNPROFITABLE) and the
    producer or one of its users holds a concatenate along a dimension other than the first
    whose first operand is not 32-aligned there: XLA prices such a concatenate at 400 flops
    per element instead of 6.
    Why XLA does this: a warp that straddles two operands executes both branches; XLA's comment
    calls the constant tuned to one case (an LLM that fused a concat into a column reduction,
    PriorityFusionTest.DontFuseConcat) until tiling can be reasoned about (b/315776282).
    Example:
        c = f32[64,2046] concatenate(f32[64,1023] a, f32[64,1023] b), dimensions={1}
        ROOT r = f32[64] reduce(c, zero), dimensions={1}
    Relaxing: the cost model prices the concatenate at 6 flops per element like any other; the
    fused kernel is correct, only its modelled speed changes (`--relax concat`).
    """
    times = c.times
    if times is None or times.priority >= 0:
        return None
    from ..cost.analysis import concat_is_penalised

    nodes = []
    for n in [c.producer] + list(c.producer.users):
        nodes.extend(n.fused.nodes() if n.opcode == "fusion" and n.fused is not None else [n])
    for n in nodes:
        if concat_is_penalised(n):
            from ..attributes import dimensions

            dim = (dimensions(n) or (0,))[0]
            return objection(producer=c.producer.name, consumer=c.consumer.name, concat=n.name, dimension=dim,
                             size=n.operands[0].shape.dims[dim], fused_us=times.fused_us,
                             unfused_us=times.unfused_us, priority_us=times.unfused_us - times.fused_us,
                             device=_state(c).config.device.name, **_cost_facts(c, times))
    return None


@rule(id="PF-LARGE-CONSTANT", name="pf-large-constant", passes=_PASSES, pipelines=_PIPELINES,
      tags={"constant", "compile-time"}, relaxable=True,
      xla=_ref("IsSmallConstant", None),
      message="{producer} is a constant of {elements} elements; only constants of at most one element "
              "are fused, larger ones are read from memory")
def large_constant(c: Candidate):
    """Only constants of at most one element are fused.

    What it checks: the producer is a constant with more than one element.  (Constants get no
    priority; after the queue drains, small constants are fused into every fusible user.)
    Why XLA does this: a fused large constant is still read from memory, so fusing gains
    nothing, and duplicated large constants would be filled with different data when a dump is
    parsed back.
    Example:
        c = f32[64] constant({...})
        ROOT a = f32[64] add(x, c)           # c stays an operand of the add's fusion
    Relaxing: a compile-time trade: the constant's data is copied into each kernel.
    """
    p = c.producer
    if p.opcode != "constant" or not p.shape.is_array or elements(p.shape) <= 1:
        return None
    return objection(producer=p.name, consumer=c.consumer.name, elements=elements(p.shape))


@rule(id="PF-CONSTANT-USER-NOT-FUSIBLE", name="pf-constant-user-not-fusible", passes=_PASSES,
      pipelines=_PIPELINES, tags={"constant", "structure", "legality"}, relaxable=False,
      xla=_ref("PriorityFusion::CanFuseConstant", "User is not fusible"),
      message="{consumer} ({opcode}) cannot take the constant {producer} in: {why}")
def constant_user_not_fusible(c: Candidate):
    """A small constant is fused into every user that is fusible.

    What it checks: PriorityFusion's IsFusible(user) for a constant of at most one element
    (scatter users are checked by the scatter rules first; a generic Triton user by Triton's
    support of the constant).
    Why XLA does this: the constant can only be folded into a kernel XLA emits.
    Example:
        c = f32[] constant(2)
        ROOT t = (f32[]) tuple(c)
    Relaxing: not possible.
    """
    if c.producer.opcode != "constant" or is_pf_fusible(c.consumer) or is_generic_triton_fusion(c.consumer):
        return None
    return objection(producer=c.producer.name, consumer=c.consumer.name, opcode=c.consumer.opcode,
                     why=_why_not_fusible(c.consumer))


@rule(id="PF-NOT-RECONSIDERED", name="pf-not-reconsidered", passes=_PASSES, pipelines=_PIPELINES,
      tags={"cost-model", "policy"}, relaxable=False,
      xla=_ref("PriorityFusionQueue::UpdatePriorities", None),
      message="{producer} could fuse into {consumer} (modelled saving {now_us:.3f} µs now), but its priority "
              "was last computed as {last_us} µs and XLA recomputes priorities only for the operands of "
              "fusions it creates")
def not_reconsidered(c: Candidate):
    """A producer whose priority XLA did not recompute after the graph around it changed.

    What it checks: the producer may fuse into all its users and the cost model, asked now,
    would approve, but the priority PriorityFusion last computed for it was negative (or it
    was never queued).
    Why XLA does this: priorities are recomputed only for the fusions made in a step and their
    operands; a producer is reconsidered only when it becomes an operand of a new fusion.
    Incremental priority updates can also differ slightly from a fresh computation.
    Example:
        a producer whose only change was in the cost of a user's other operand
    Relaxing: not possible; it describes the order of XLA's greedy algorithm, not a check.
    """
    stale = c.stale
    if stale is None:
        return None
    last, times = stale
    return objection(producer=c.producer.name, consumer=c.consumer.name, now_us=times.unfused_us - times.fused_us,
                     last_us="never" if last is None else f"{dur.to_us(last):.3f}")


# ------------------------------------------------------------------------------------------
# Rule lists, in XLA's order
# ------------------------------------------------------------------------------------------


SCATTER_RULES = ("GF-SCATTER-PRODUCER", "GF-SCATTER-IN-PLACE-OPERAND", "GF-SCATTER-SHARED-OPERAND")
BUDGET_RULES = ("GF-SHARED-MEMORY-BUDGET", "GF-UNNESTED-REDUCTIONS-BUDGET", "GF-OPERAND-BUDGET")
HEAD_RULES = ("PF-ROOT-PRODUCER", "PF-PRODUCER-NOT-FUSIBLE", "PF-CONSUMER-NOT-FUSIBLE")


def head_rules_pass(producer: "Node", consumer: "Node") -> bool:
    """None of HEAD_RULES objects (their checks, without building a candidate: asked for every
    pair PriorityFusion considers)."""
    graph = producer.graph
    return (graph is None or graph.root is not producer) and is_pf_fusible(producer) and is_pf_fusible(consumer)


#: PriorityFusionQueue::CanFuse when no generic Triton fusion is involved.
CAN_FUSE_RULES = (HEAD_RULES + ("PF-BITCAST-CONSUMER",) + SCATTER_RULES + ("PF-REDUCE-INTO-REDUCE", "PF-REDUCTION-TO-LOOP")
                  + BUDGET_RULES + ("PF-CODE-DUPLICATION",) + IN_PLACE_RULES)
#: The same list for a consumer that updates no operand in place: the in-place rules cannot
#: object there (InstructionFusion::ShouldFuseInPlaceOp has no in-place buffer to check), and
#: they are asked for nearly every pair.
CAN_FUSE_RULES_NOT_IN_PLACE = tuple(r for r in CAN_FUSE_RULES if r not in IN_PLACE_RULES)
#: CAN_FUSE_RULES_NOT_IN_PLACE after the head rules (those about the pair's structure alone).
CAN_FUSE_TAIL = CAN_FUSE_RULES_NOT_IN_PLACE[len(HEAD_RULES):]


def can_fuse_rules(consumer: "Node | None" = None) -> tuple[str, ...]:
    """PriorityFusionQueue::CanFuse when no generic Triton fusion is involved (given a consumer
    that updates nothing in place, without the in-place rules, which cannot object to it)."""
    if consumer is not None and not updates_in_place(consumer):
        return CAN_FUSE_RULES_NOT_IN_PLACE
    return CAN_FUSE_RULES


#: CanFuse when the producer or the consumer is a generic Triton fusion: CanFuseTriton decides.
TRITON_RULES = HEAD_RULES + ("PF-TRITON-UNSUPPORTED", "GF-OPERAND-BUDGET", "PF-TRITON-NOT-TILEABLE")

#: PriorityFusion::CanFuseConstant (small constants, after the queue).
CONSTANT_RULES = SCATTER_RULES + ("PF-CONSTANT-USER-NOT-FUSIBLE",)


def rules_for(producer: "Node", consumer: "Node") -> tuple[str, ...]:
    if is_generic_triton_fusion(producer) or is_generic_triton_fusion(consumer):
        return TRITON_RULES
    return can_fuse_rules(consumer)

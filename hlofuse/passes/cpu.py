"""XLA:CPU's fusion passes as jaxlib 0.10.2 runs them (docs/xla/cpu-fusion.md):

  0. library fusions: XLA:CPU's `dot-library-rewriter` turns dots, convolutions and large
     reductions (with neighbours) into `kind=kCustom` fusions marked
     `"fusion_config":{"kind":"__ynn_fusion"}` *before* the fusion passes, so XLA's
     before-fusion snapshot already holds them.  The replay keeps them as kernels (nothing is
     fused into or out of them: rules CPU-CUSTOM-FUSION-CONSUMER and CPU-NOT-LOOP-FUSIBLE).
     `Options.library_fusion=False` replays XLA without library fusion
     (`xla_cpu_experimental_ynn_fusion_type=""`): library fusions found in the input are
     inlined back into plain instructions first (approximate: without YNN, XLA's earlier
     passes also shape reductions differently).
     With `Options.library_fusion=True` and an input without library fusions, the
     `dot-library-rewriter` pass builds them first (hlofuse/passes/cpu_library.py).
  1. `fusion`: the generic InstructionFusion driver with CpuInstructionFusion's policy.
  2. `fusion-wrapper`: every remaining instruction the new CPU emitters handle becomes a
     one-instruction kLoop fusion `wrapped_<opcode>`.

`--passes fusion` replays (1) alone, which is what XLA dumps as
`...after_fusion.before_fusion-wrapper.txt`; the default replays (1) and (2).
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING

from .. import graph as g
from .. import fusion_primitives as fp
from ..decision import Decision, Verdict
from ..rules import Outcome
from ..rules import cpu as rc
from ..rules import instruction_fusion as rif
from .instruction_fusion import FusionPolicy, FusionRun, InstructionFusion, source_location

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Node, Program
    from ..pipeline import Context

# ------------------------------------------------------------------------------------------
# 1. fusion: CpuInstructionFusion
# ------------------------------------------------------------------------------------------

#: emitters::IsSupportedElementalOp is true for every opcode except these.
_NOT_ELEMENTAL_EMITTER_OPS = frozenset({
    "add-dependency", "after-all", "all-gather", "all-gather-start", "all-gather-done", "all-reduce",
    "all-reduce-start", "all-reduce-done", "all-to-all", "async-start", "async-update", "async-done",
    "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "cholesky", "collective-permute",
    "collective-permute-start", "collective-permute-done", "copy-start", "copy-done", "custom-call", "domain",
    "dynamic-reshape", "fft", "fusion", "get-dimension-size", "opt-barrier", "infeed", "outfeed",
    "partition-id", "recv", "recv-done", "reduce-scatter", "replica-id", "rng", "rng-bit-generator",
    "rng-get-and-update-state", "scatter", "select-and-scatter", "send", "send-done", "set-dimension-size",
    "sort", "topk", "triangular-solve", "while", "conditional", "stochastic-convert", "call",
})


class CpuPolicy(FusionPolicy):
    """CpuInstructionFusion: XLA:CPU's ShouldFuse, IsExpensive, ChooseKind and the
    code-duplication bookkeeping of its FuseInstruction override."""

    def __init__(self, may_duplicate: bool = True, use_fusion_emitters: bool = True):
        super().__init__(may_duplicate)
        self.use_fusion_emitters = use_fusion_emitters

    def start_run(self, run: FusionRun) -> None:
        run.indexing_evaluations.clear()
        run.skipped = self._instructions_to_skip(run.program)

    def _instructions_to_skip(self, program: "Program") -> set[int]:
        """ComputeInstructionsToSkip: custom fusions themselves, and the bodies of custom calls
        and of instructions whose sub-computations the fusion emitters emit themselves."""
        skip: set[int] = set()
        for graph in program.graph_order():
            for node in graph:
                if node.opcode == "fusion":  # (a fusion's own body is not among `called`)
                    if node.fusion_kind == "kCustom":
                        skip.add(node.uid)
                    continue
                if not node.called:  # (most instructions: nothing to look into)
                    continue
                called = [program.graphs[c] for c in node.called if c in program.graphs]
                if node.opcode == "custom-call":
                    for body in called[:1]:
                        skip.update(n.uid for n in body)
                elif self._blocks_subcomputations(node):
                    for body in called:
                        skip.update(n.uid for n in body)
        return skip

    def _blocks_subcomputations(self, node: "Node") -> bool:
        if not self.use_fusion_emitters:
            return False
        return node.opcode == "scatter" or node.opcode not in _NOT_ELEMENTAL_EMITTER_OPS

    def should_fuse(self, run: FusionRun, consumer: "Node", operand_index: int) -> Outcome:
        """C0–C1, the kOutput shortcut C2, then C3–C15: C2 is a test of the pair alone, so
        it is made first, and a pair it does not take is asked both lists as one."""
        producer = consumer.operands[operand_index]
        if rc.can_be_output_fused(producer, consumer):
            return run.evaluate(rc.should_fuse_before_output(producer), consumer, operand_index)
        return run.evaluate(rc.should_fuse_rules(consumer, producer, run.may_duplicate), consumer, operand_index)

    def is_expensive(self, node: "Node") -> bool:
        return rc.is_expensive(node)

    def choose_kind(self, producer: "Node", consumer: "Node") -> str:
        return rc.choose_kind(producer, consumer)

    def fuse_instruction(self, run: FusionRun, fusion: "Node", producer: "Node") -> "Node":
        if not self.may_duplicate:
            return fp.fuse_instruction(fusion, producer)
        evaluation = run.indexing_evaluation(fusion)
        users = evaluation.remove_operand(producer)
        clone = fp.fuse_instruction(fusion, producer)
        evaluation.update(clone, users)
        return clone


def library_pass(program: "Program", ctx: "Context") -> bool:
    """XLA:CPU's `dot-library-rewriter`, replayed only when asked (`Options.library_fusion`
    True) on a module that has no library fusion yet: XLA's before-fusion snapshots already
    hold them (hlofuse/passes/cpu_library.py)."""
    if ctx.options.library_fusion is not True:
        return False
    if any(rc.library_fusion_kind(n) for gr in program.graphs.values() for n in gr):
        ctx.notes.append("library fusion: the input already holds library fusions; dot-library-rewriter not replayed")
        return False
    from .cpu_library import dot_library_rewriter

    before = sum(1 for gr in program.graphs.values() for n in gr if rc.library_fusion_kind(n))
    changed = dot_library_rewriter(program, ctx)
    made = sum(1 for gr in program.graphs.values() for n in gr if rc.library_fusion_kind(n)) - before
    ctx.notes.append(f"library fusion: replayed dot-library-rewriter (YNNPACK), {made} library fusion(s) built; "
                     "XLA's earlier passes (DotDecomposer, GemvRewriter, TreeReductionRewriter...) were not replayed")
    return changed


def fusion_pass(program: "Program", ctx: "Context") -> bool:
    """XLA:CPU's `fusion` pass (CpuInstructionFusion, may_duplicate as XLA's default)."""
    if ctx.options.library_fusion is False:
        inlined = inline_library_fusions(program)
        if inlined:
            ctx.notes.append(f"no-library mode: inlined {inlined} library fusion(s) of the input before `fusion`; "
                             "XLA without YNN fusion also shapes reductions differently earlier, so this is approximate")
    else:
        types = ynn_fusion_types(ctx.options.xla_flags)
        if types is not None:
            reduces: list = []
            inlined = inline_library_fusions(program, lambda node: ynn_fusion_type(node) not in types, reduces)
            rewritten = sum(tree_reduction_rewrite(node) for node in reduces if "REDUCE" not in types)
            if inlined:
                ctx.notes.append(f"xla_cpu_experimental_ynn_fusion_type={','.join(sorted(types)) or '(empty)'}: "
                                 f"inlined {inlined} library fusion(s) of other types before `fusion`, "
                                 f"{rewritten} reduction(s) split as XLA's TreeReductionRewriter splits those "
                                 "YNNPACK does not take (approximate: other passes before fusion are not replayed)")
    return InstructionFusion(CpuPolicy()).run(program, ctx)


#: What `xla_cpu_experimental_ynn_fusion_type` holds unless set (docs/xla/cpu-fusion.md §5.1).
DEFAULT_YNN_FUSION_TYPES = frozenset({"INDIVIDUAL_DOT", "INDIVIDUAL_CONVOLUTION", "REDUCE"})
YNN_FUSION_TYPES = frozenset({"DOT", "ELTWISE", "REDUCE", "INDIVIDUAL_DOT", "INDIVIDUAL_CONVOLUTION"})
YNN_FLAG = "xla_cpu_experimental_ynn_fusion_type"


def ynn_fusion_types(xla_flags) -> frozenset[str] | None:
    """The library fusion types `--xla_cpu_experimental_ynn_fusion_type` sets in XLA_FLAGS text
    (None when the flag is not given): a comma-separated list, or `+TYPE`/`-TYPE` edits of
    the default; "" turns library fusion off."""
    from ..errors import InputError

    found = None
    for token in " ".join(xla_flags or ()).split():
        name, _, value = token.lstrip("-").partition("=")
        if name == YNN_FLAG:
            found = value.strip("'\"")
    if found is None:
        return None
    items = [item.strip() for item in found.split(",") if item.strip()]
    types = set(DEFAULT_YNN_FUSION_TYPES) if items and all(i[0] in "+-" for i in items) else set()
    for item in items:
        name = item.lstrip("+-").upper()
        if name not in YNN_FUSION_TYPES:
            raise InputError(f"--{YNN_FLAG}={found}: {name} is not a library fusion type; XLA's types: "
                             f"{', '.join(sorted(YNN_FUSION_TYPES))}")
        (types.discard if item.startswith("-") else types.add)(name)
    return frozenset(types)


def ynn_fusion_type(node: "Node") -> str:
    """Which type of `xla_cpu_experimental_ynn_fusion_type` made a library fusion: what started
    it (a dot or convolution alone, a reduction grown with its neighbours) — the types
    LibraryRewriter starts fusions from (docs/xla/cpu-fusion.md §5.3)."""
    opcodes = {n.opcode for n in node.fused.nodes()} if node.fused is not None else {node.opcode}
    if "dot" in opcodes:
        return "INDIVIDUAL_DOT"
    if "convolution" in opcodes:
        return "INDIVIDUAL_CONVOLUTION"
    if opcodes & {"reduce", "reduce-window"}:
        return "REDUCE"
    return "ELTWISE"


def inline_library_fusions(program: "Program", which=None, reduces: list | None = None) -> int:
    """Replace every library (kCustom) fusion (or those `which(node)` picks) by the
    instructions of its body; the reduces inlined are appended to `reduces`."""
    count = 0
    for graph in program.non_fusion_graphs():
        for node in graph.post_order():
            if rc.library_fusion_kind(node) is not None and (which is None or which(node)):
                names = [n.name for n in node.fused.nodes() if n.opcode == "reduce"]
                inline_fusion(node)
                if reduces is not None:
                    reduces.extend(graph.get(name) for name in names if graph.get(name) is not None)
                count += 1
    return count


#: XLA:CPU's TreeReductionRewriter window (cpu_compiler.cc: TreeReductionRewriter(32)).
TREE_REDUCTION_WINDOW = 32


def tree_reduction_rewrite(node: "Node") -> bool:
    """XLA's TreeReductionRewriter (xla/hlo/transforms/simplifiers/tree_reduction_rewriter.cc)
    on one reduce: an array reduce with a reduced dimension longer than the window becomes a
    reduce-window (window and stride min(size, 32) on the reduced dimensions, SAME padding)
    followed by the reduce of its result.  XLA:CPU's simplification pipeline skips the
    reductions YNNPACK prefers and supports while REDUCE is a library fusion type, so a
    reduction taken back from YNNPACK gets it."""
    import math

    from .. import attributes, ir

    if not node.shape.is_array or len(node.operands) != 2:
        return False  # variadic reductions are not rewritten (XLA's TODO b/210786051)
    operand, init = node.operands
    dims = attributes.dimensions(node)
    shape = operand.shape
    if all(shape.dims[d] <= TREE_REDUCTION_WINDOW for d in dims):
        return False
    sizes, strides, pads, out = [], [], [], []
    for d, size in enumerate(shape.dims):
        window = min(size, TREE_REDUCTION_WINDOW) if d in dims else 1
        count = math.ceil(size / window)  # MakePadding(kSame): output size ceil(size / stride)
        total = max((count - 1) * window + window - size, 0)
        sizes.append(window)
        strides.append(window)
        pads.append((total // 2, total - total // 2))
        out.append(count)
    text = f"size={'x'.join(map(str, sizes))} stride={'x'.join(map(str, strides))}"
    if any(p != (0, 0) for p in pads):
        text += " pad=" + "x".join(f"{lo}_{hi}" for lo, hi in pads)
    layout = ir.Layout(tuple(range(len(out) - 1, -1, -1)))
    to_apply = node.attr("to_apply")
    window_node = g.Node("reduce-window", "reduce-window", ir.Shape(shape.element_type, tuple(out), layout),
                         attrs=[("window", "{" + text + "}"), ("to_apply", to_apply)], called=node.called,
                         origin=node.origin, span=node.span)
    node.graph.add(window_node)
    g.add_operand(window_node, operand)
    g.add_operand(window_node, init)
    g.set_operand(node, 0, window_node)
    return True


def inline_fusion(fusion: "Node") -> "Node":
    """Put a fusion's body back into its computation (names kept); returns the new root."""
    graph = fusion.graph
    body = fusion.fused
    mapping: dict[int, Node] = {}
    for node in body.post_order():
        if node.opcode == "parameter":
            mapping[node.uid] = fusion.operands[node.parameter_number]
            continue
        copy = g.Node(node.name, node.opcode, node.shape, attrs=node.attrs, literal=node.literal,
                      called=node.called, origin=node.origin, span=node.span)
        graph.add(copy, unique_name=False)  # body names are unique module-wide already
        for op in node.operands:
            g.add_operand(copy, mapping[op.uid])
        mapping[node.uid] = copy
    root = mapping[body.root.uid]
    graph.replace_instruction(fusion, root)
    graph.program.remove_graph(body)
    return root


# ------------------------------------------------------------------------------------------
# 2. fusion-wrapper: FusionWrapper (xla/service/cpu/fusion_wrapper.cc)
# ------------------------------------------------------------------------------------------

#: Opcodes FusionWrapper wraps with the new fusion emitters (scatter: always).
WRAPPED_OPCODES = frozenset({
    "abs", "add", "and", "atan2", "bitcast-convert", "broadcast", "cbrt", "ceil", "clamp", "count-leading-zeros",
    "compare", "complex", "convert", "cosine", "divide", "dynamic-slice", "erf", "exponential",
    "exponential-minus-one", "floor", "gather", "imag", "iota", "is-finite", "log", "log-plus-one", "map",
    "maximum", "minimum", "multiply", "negate", "not", "or", "pad", "popcnt", "power", "real", "reduce",
    "reduce-precision", "reduce-window", "remainder", "reshape", "reverse", "round-nearest-afz",
    "round-nearest-even", "rsqrt", "select", "shift-left", "shift-right-arithmetic", "shift-right-logical",
    "sign", "sine", "slice", "sqrt", "subtract", "tan", "tanh", "xor",
})


def must_wrap(node: "Node") -> bool:
    """FusionWrapper::MustWrapInstruction with jaxlib 0.10.2's defaults (new emitters, tiled copy)."""
    if node.opcode == "scatter" or node.opcode in WRAPPED_OPCODES:
        return True
    if node.opcode == "copy" and node.operands:
        if node.shape == node.operands[0].shape:
            return False  # a plain memcpy
        return _tiling_type(node.shape.element_type)
    return False


def _tiling_type(element_type: str) -> bool:
    if element_type == "pred":
        return True
    bits = node_bits(element_type)
    return (bits >= 8 and not element_type.startswith("u") and element_type not in ("c64", "c128")
            and not element_type.startswith("f8") and not element_type.startswith(("f4", "f6")))


def node_bits(element_type: str) -> int:
    from ..ir import ELEMENT_BITS

    return ELEMENT_BITS.get(element_type, 0)


def fusion_wrapper_pass(program: "Program", ctx: "Context") -> bool:
    """Wrap each remaining instruction the emitters handle in a one-instruction kLoop fusion,
    visiting the entry in post order and descending into loops, branches and calls (a stack of
    walks, not recursion: call chains may be thousands deep)."""
    if program.entry is None:
        return False
    wrapped = False
    # The remembered post orders are walked, not copies: `wrap` edits a computation, which
    # makes it a new version with a new list; the list being walked is never edited.
    walks = [iter(program.entry._remembered_post_order())]
    while walks:
        node = next(walks[-1], None)
        if node is None:
            walks.pop()
            continue
        if node.opcode in ("conditional", "while", "call", "async-start"):
            called = list(node.called)
            if node.opcode == "while":  # XLA lists the body before the condition
                called.sort(key=lambda name: 0 if name == node.attr("body") else 1)
            inner = [program.graphs[n] for n in (name.lstrip("%") for name in called) if n in program.graphs]
            walks.append(chain.from_iterable(g._remembered_post_order() for g in inner))  # each walked when reached
            continue
        if not must_wrap(node) or node.graph is None or node not in node.graph:  # (most: not wrapped)
            continue
        wrap(node)
        wrapped = True
    return wrapped


def wrap(node: "Node") -> "Node":
    """Make `node` the only instruction of a new kLoop fusion `wrapped_<opcode>`."""
    # create_fusion relays the node's control dependencies to the fusion, as XLA's FusionWrapper
    # does (CopyAllControlDepsFrom, DropAllControlDeps)
    return fp.create_fusion(node, "kLoop", name=f"wrapped_{node.opcode}",
                           computation_name=f"wrapped_{node.opcode}_computation")


# ------------------------------------------------------------------------------------------
# transpose-folding (xla/service/transpose_folding.cc): shapes the input of `fusion`
# ------------------------------------------------------------------------------------------


def transpose_folding(program: "Program", ctx: "Context | None" = None) -> bool:
    """XLA's TransposeFolding with its default callbacks (as XLA's unit tests run it): a
    row/column transpose feeding a dot is folded into the dot's dimension numbers.  Not part
    of the fusion replay (XLA:CPU runs it long before `fusion`; its effect is in the
    before-fusion snapshot), but it explains why such dumps hold no transposes before dots."""
    changed = False
    for graph in program.non_fusion_graphs():
        for dot in [n for n in graph.post_order() if n.opcode == "dot"]:
            if len(dot.operands) != 2 or any(op.shape.rank < 2 for op in dot.operands):
                continue
            folds = [i for i in (0, 1) if _foldable(dot, i)]
            if folds:
                _fold(dot, folds)
                changed = True
    return changed


def _dot_dims(dot: "Node", side: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    from ..attributes import int_list

    return int_list(dot.attr(f"{side}_contracting_dims")), int_list(dot.attr(f"{side}_batch_dims"))


def _foldable(dot: "Node", i: int) -> bool:
    from ..attributes import int_list

    t = dot.operands[i]
    if t.opcode != "transpose":
        return False
    perm = int_list(t.attr("dimensions"))
    if perm == tuple(range(len(perm))):
        return False  # an identity transpose is left to the simplifier
    contracting, batch = _dot_dims(dot, "lhs" if i == 0 else "rhs")
    return (len(batch) == t.shape.rank - 2 and len(contracting) == 1
            and all(perm[d] == d for d in batch))


def _fold(dot: "Node", sides: list[int]) -> None:
    from ..attributes import int_list

    graph = dot.graph
    attrs = list(dot.attrs)
    operands = list(dot.operands)
    for i in sides:
        t = operands[i]
        perm = int_list(t.attr("dimensions"))
        side = "lhs" if i == 0 else "rhs"
        for key in (f"{side}_contracting_dims", f"{side}_batch_dims"):
            dims = int_list(dot.attr(key))
            if dot.attr(key) is not None:
                attrs = [(k, "{" + ",".join(str(perm[d]) for d in dims) + "}" if k == key else v) for k, v in attrs]
        operands[i] = t.operands[0]
    new = g.Node(dot.name, "dot", dot.shape, attrs=attrs, literal=dot.literal, called=dot.called,
                 origin=dot.origin, span=dot.span)
    graph.add(new)
    for op in operands:
        g.add_operand(new, op)
    graph.replace_instruction(dot, new)


# ------------------------------------------------------------------------------------------
# Explaining boundaries of an already fused CPU module
# ------------------------------------------------------------------------------------------


def explain_boundary(producer: "Node", consumer: "Node", ctx: "Context") -> Decision | None:
    """Which CPU rule keeps kernel `producer` and kernel `consumer` apart, on a fused module.

    The fused module is flattened (every non-library fusion inlined, as before XLA's `fusion`
    pass) and `fusion` is replayed on it once per program; the decision that replay made for
    the producer's root and the consumer instruction that reads it is the answer.  When the
    replay fused what XLA kept apart, the CPU rules are asked directly about that pair."""
    program = producer.graph.program
    replay = program.boundary_explainer
    if not isinstance(replay, _ExplainReplay) or replay.asked_by is not ctx:
        replay = program.boundary_explainer = _ExplainReplay(program, ctx)
    return replay.explain(producer, consumer)


class _ExplainReplay:
    def __init__(self, program: "Program", ctx: "Context"):
        from ..pipeline import Context as Ctx

        #: the context whose questions this replay answers (its options and relaxed rules)
        self.asked_by = ctx
        flat_module = _flattened(program)
        self.flat = g.Program.from_module(flat_module)
        self.ctx = Ctx(ctx.options, "cpu", "cpu", None, ctx.relaxed)
        self.ctx.pass_name = "fusion"
        # the flat program before fusion, to ask rules directly when the replay disagrees
        self.direct = g.Program.from_module(flat_module)
        self.direct_fusion = InstructionFusion(CpuPolicy())
        self.direct_run = FusionRun(self.direct_fusion, self.direct, self.ctx)
        self.direct_fusion.policy.start_run(self.direct_run)
        self.prepared: set[str] = set()
        InstructionFusion(CpuPolicy()).run(self.flat, self.ctx)
        self.by_pair: dict[tuple[str, str], Decision] = {}
        for d in self.ctx.decisions:
            for p in d.producer_members:
                for c in d.consumer_members:
                    self.by_pair[(p, c)] = d

    def explain(self, producer: "Node", consumer: "Node") -> Decision | None:
        # The consumer may read the producer through get-tuple-elements and bitcasts (a
        # multi-output sort, a tuple-shaped loop): the value crossing is then that view.
        for via in _views_of(producer, consumer):
            value = _value_name(via)
            readers = _readers(consumer, via)
            for reader in readers:
                found = self.by_pair.get((value, reader))
                if found is not None and found.verdict == Verdict.BLOCKED:
                    return _as_boundary(found, producer, consumer)
            direct = self._direct(value, readers, producer, consumer)
            if direct is not None:
                return direct
        return None

    def _direct(self, value: str, readers: list[str], producer: "Node", consumer: "Node") -> Decision | None:
        for graph in self.direct.graphs.values():
            p = graph.get(value)
            if p is None:
                continue
            if graph.name not in self.prepared:
                self.direct_run.fuse_computation(graph, fuse_it=False)
                self.prepared.add(graph.name)
            for reader in readers:
                c = graph.get(reader)
                if c is None or not any(op is p for op in c.operands):
                    continue
                i = c.operand_index(p)
                self.direct_run.graph = graph
                if not rif.is_fusible(c) and c.opcode != "fusion":
                    outcome = self.direct_run.evaluate(("IF-CONSUMER-NOT-FUSIBLE",), c, i)
                elif not rif.is_fusible(p):
                    outcome = self.direct_run.evaluate(("IF-PRODUCER-NOT-FUSIBLE",), c, i)
                else:
                    outcome = self.direct_run.evaluate(("IF-DO-NOT-DUPLICATE",), c, i)
                    if outcome.allowed:
                        outcome = self.direct_fusion.policy.should_fuse(self.direct_run, c, i)
                if outcome.blocked_by is not None:
                    r = outcome.blocked_by
                    return Decision("fusion", producer.name, consumer.name, Verdict.BLOCKED, r.id,
                                    r.reason(outcome.facts), r.xla.message, dict(outcome.facts), outcome.relaxed,
                                    producer.graph.name, producer.members(), consumer.members(),
                                    source_location(producer.graph.program, producer))
        return None


def _views_of(producer: "Node", consumer: "Node") -> list["Node"]:
    """The consumer's operands that are the producer or views of it (get-tuple-element, bitcast)."""
    out = []
    for op in consumer.operands:
        node = op
        while node is not producer and node.opcode in ("get-tuple-element", "bitcast") and node.operands:
            node = node.operands[0]
        if node is producer and not any(o is op for o in out):
            out.append(op)
    return out or [producer]


def _value_name(producer: "Node") -> str:
    """The instruction whose value leaves a kernel: a fusion's root, else the node itself."""
    node = producer
    while node.fused is not None and node.fusion_kind != "kCustom":
        node = node.fused.root
    return node.name


def _readers(consumer: "Node", producer: "Node") -> list[str]:
    """The instructions inside `consumer` that read `producer`'s value."""
    if consumer.fused is None or consumer.fusion_kind == "kCustom":
        return [consumer.name]
    out: list[str] = []
    for i, op in enumerate(consumer.operands):
        if op is not producer:
            continue
        out.extend(user.name for user in consumer.fused.parameters[i].users)
    return out or [consumer.name]


def _as_boundary(found: Decision, producer: "Node", consumer: "Node") -> Decision:
    """The replay's decision, told with the fused module's kernel names (the flattened replay
    names its own fusions differently)."""
    from ..rules import REGISTRY

    facts, reason = dict(found.facts), found.reason
    rule = REGISTRY.get(found.rule or "")
    if rule is not None and "consumer" in facts:
        facts["consumer"] = consumer.name
        reason = rule.reason(facts)
    return Decision(found.pass_name, producer.name, consumer.name, found.verdict, found.rule, reason,
                    found.xla_reason, facts, found.relaxed, producer.graph.name, producer.members(),
                    consumer.members(), found.source)


def _flattened(program: "Program"):
    """The module with every non-library fusion inlined (a copy; `program` is not touched)."""
    copy = g.Program.from_module(program.to_module())
    for graph in copy.non_fusion_graphs():
        for node in graph.post_order():
            if node.opcode == "fusion" and node.fusion_kind != "kCustom" and node.fused is not None:
                inline_fusion(node)
    flat = copy.to_module()
    copy.dispose()
    return flat

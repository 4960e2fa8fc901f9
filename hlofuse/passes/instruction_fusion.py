"""XLA's generic InstructionFusion pass (xla/service/instruction_fusion.cc), for every backend.

The pass owns the traversal; a backend owns the policy, as in XLA where CpuInstructionFusion
and GpuInstructionFusion subclass InstructionFusion and override a few virtual methods.  Here a
backend subclasses `FusionPolicy` and hands an instance to `InstructionFusion`:

    class CpuPolicy(FusionPolicy):
        def should_fuse(self, run, consumer, i): ...      # XLA's ShouldFuse, through the rule registry
        def is_expensive(self, node): ...                 # XLA's is_expensive_ function
        def choose_kind(self, producer, consumer): ...    # kLoop / kInput / kOutput
    fusion = InstructionFusion(CpuPolicy(may_duplicate=True))
    changed = fusion.run(program, ctx)

What the driver does, in XLA's order (docs/xla/cpu-fusion.md §2, legacy-gpu-pipeline.md §2):
  1. computations: `policy.computations(program)`, each with a flag saying whether it is fused
     (XLA:GPU still computes the do-not-duplicate set of the computations it does not fuse);
  2. per computation: if the pass may duplicate, the do-not-duplicate set
     (ComputeGloballyUnfusible), then a reverse-post-order queue;
  3. pop a consumer; its candidate operands are those still queued, latest in post order first;
  4. per operand: the do-not-duplicate check, then `policy.should_fuse`; on refusal the
     multi-output hooks; at most one fusion per pop, after which the fusion is re-queued at the
     back (so it is examined again at once) and a producer left without users is deleted.

Every candidate pair yields exactly one Decision (the last time the pair was considered wins,
so a fusion re-examined after it grew does not leave stale refusals behind), including the
pairs XLA skips without a reason string (a parameter producer, a `while` consumer).

Policy interface (override what your backend overrides in XLA; defaults are the base class):
  name                         pass name as in dump file names ("fusion")
  may_duplicate                XLA's may_duplicate_
  computations(program)        [(graph, fuse_it)] in XLA's order
  start_run(run)               per-run set-up (caches, skip sets)
  should_fuse(run, c, i)       -> rules.Outcome; the base is InstructionFusion::ShouldFuse
  is_expensive(node)           -> bool
  choose_kind(p, c)            -> "kLoop" | "kInput" | "kOutput"
  fusion_name(p, c)            -> name requested for a new fusion
  consumer_mof_refusal(run, c) -> XLA's reason when the consumer cannot take multi-output
                                  fusion, None when it can (base: "not supported by this pass")
  operand_mof_refusal(run,c,i) -> the same per operand (asked only when the consumer can)
  fuse_instruction(run, f, p)  -> the clone inside f (hook for code-duplication caches)
  fuse_into_multi_output(run, f, p)
The pass object keeps XLA's reuse cache (`reused_operands`) across runs, as XLA's pass object
does (pitfall P-3 of the legacy spec: a pass object run again answers from stale entries).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ..native import mypyc_attr
from .. import fusion_primitives as fp
from .. import ir
from ..decision import Decision, Verdict
from ..rules import Candidate, Outcome, evaluate
from ..rules.evaluation import rule_reason
from ..rules import instruction_fusion as rif
from ..rules.candidates import FusionCandidate

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Graph, Node, Program
    from ..pipeline import Context

#: What stands in ctx.decisions for a pair's Decision until the computation is flushed (a
#: Decision: the list holds Decisions only, which the compiled core checks).
_PENDING = Decision("", "", "", Verdict.BLOCKED, reason="pending: replaced when the computation is done")

#: Reason XLA appends to every refusal of a pass without multi-output fusion.
MOF_NOT_SUPPORTED = "multi-output fusion not supported by this pass"


@mypyc_attr(allow_interpreted_subclasses=True)
class FusionPolicy:
    """XLA's InstructionFusion virtual methods, with the base class's behaviour."""

    name = "fusion"

    def __init__(self, may_duplicate: bool = True):
        self.may_duplicate = may_duplicate

    # -- scope ------------------------------------------------------------------------------
    def computations(self, program: "Program") -> list[tuple["Graph", bool]]:
        """GetNonFusionComputations minus embedded ones (reducers, comparators, ...)."""
        callers = program.callers()
        out = []
        for graph in program.non_fusion_graphs():
            first = callers.get(graph.name) or ()
            if first and first[0].opcode in rif.EMBEDDED_CALLERS:  # XLA looks at the first caller
                continue
            out.append((graph, True))
        return out

    def start_run(self, run: "FusionRun") -> None:
        """Called once per run before any computation (clear per-run caches here)."""

    # -- decisions --------------------------------------------------------------------------
    def should_fuse(self, run: "FusionRun", consumer: "Node", operand_index: int) -> Outcome:
        return run.evaluate(rif.GENERIC_SHOULD_FUSE, consumer, operand_index)

    def is_expensive(self, node: "Node") -> bool:
        return generic_is_expensive(node)

    def choose_kind(self, producer: "Node", consumer: "Node") -> str:
        return "kLoop"

    def fusion_name(self, producer: "Node", consumer: "Node") -> str:
        return f"{producer.opcode}_{consumer.opcode}_fusion"

    def consumer_mof_refusal(self, run: "FusionRun", consumer: "Node") -> str | None:
        return MOF_NOT_SUPPORTED

    def operand_mof_refusal(self, run: "FusionRun", consumer: "Node", operand_index: int) -> str | None:
        return None

    # -- mutation ---------------------------------------------------------------------------
    def fuse_instruction(self, run: "FusionRun", fusion: "Node", producer: "Node") -> "Node":
        return fp.fuse_instruction(fusion, producer)

    def fuse_into_multi_output(self, run: "FusionRun", fusion: "Node", producer: "Node") -> "Node":
        fp.fuse_into_multi_output(fusion, producer)
        return fusion


@mypyc_attr(allow_interpreted_subclasses=True)
class InstructionFusion:
    """One instance of XLA's pass: a policy plus the caches that outlive a run."""

    def __init__(self, policy: FusionPolicy):
        self.policy = policy
        #: XLA's reused_fusion_operands_: node uid → uids of operands it reads repeatedly.
        self.reused_operands: dict[int, set[int]] = {}

    def run(self, program: "Program", ctx: "Context") -> bool:
        run = FusionRun(self, program, ctx)
        self.policy.start_run(run)
        changed = False
        for graph, fuse_it in self.policy.computations(program):
            changed |= run.fuse_computation(graph, fuse_it)
        return changed


class FusionRun:
    """The state of one run of the pass (XLA's locals of InstructionFusion::RunImpl)."""

    def __init__(self, fusion: InstructionFusion, program: "Program", ctx: "Context"):
        self.fusion = fusion
        self.policy = fusion.policy
        self.program = program
        self.ctx = ctx
        self.may_duplicate = fusion.policy.may_duplicate
        #: do-not-duplicate set: producer uid → facts explaining why it is in the set.
        self.do_not_duplicate: dict[int, dict] = {}
        #: FusionNodeIndexingEvaluation per consumer fusion uid (cleared every run, as in XLA).
        self.indexing_evaluations: dict[int, rif.FusionNodeIndexingEvaluation] = {}
        #: uids of the instructions the policy keeps out of every fusion this run (XLA:CPU's
        #: ComputeInstructionsToSkip, set by CpuPolicy.start_run; empty for other policies).
        self.skipped: set[int] = set()
        self.graph: Graph | None = None
        self._queue: list[Node | None] = []
        self._position: dict[int, int] = {}
        self._reach: dict[int, _Reach] = {}
        self._post_position: dict[int, int] = {}
        self._post_list: list[Node] = []
        self._wide_reach: dict[int, tuple[dict[int, int], list[list[int]]]] = {}
        self._pending: dict[int, tuple] = {}
        #: consumer uid → the fusion that replaced it (for members when decisions are flushed)
        self._current: dict[int, Node] = {}
        #: consumer uid → {producer uid → index into ctx.decisions}; shared by runs of one pass.
        self._decided: dict[int, dict[int, int]] = ctx.fusion_decision_slots.setdefault(
            ctx.pass_name or self.policy.name, {})

    # -- asking rules -----------------------------------------------------------------------
    def candidate(self, consumer: "Node", operand_index: int) -> Candidate:
        return FusionCandidate(consumer.operands[operand_index], consumer, self.ctx, self, operand_index)

    def evaluate(self, rule_ids: Iterable[str], consumer: "Node", operand_index: int,
                 question: Candidate | None = None) -> Outcome:
        """Ask `rule_ids` about operand `operand_index` of `consumer`.  `question`: that pair's
        candidate already built (a policy asking two rule lists in a row, with no edit between,
        shares one, and with it what the first list's rules derived in its memo)."""
        if question is None:
            question = self.candidate(consumer, operand_index)
        return evaluate(tuple(rule_ids), question, self.ctx.relaxed)

    def reuses_operand_elements(self, consumer: "Node", operand_index: int) -> bool:
        """XLA's cached ReusesOperandElements: is that operand's value in the consumer's set?"""
        return consumer.operands[operand_index].uid in self._reused_of(consumer)

    def _reused_of(self, node: "Node") -> set[int]:
        cache = self.fusion.reused_operands
        found = cache.get(node.uid)
        if found is None:
            found = cache[node.uid] = {op.uid for i, op in enumerate(node.operands)
                                       if rif.reuses_operand_elements(node, i)}
        return found

    def indexing_evaluation(self, fusion: "Node") -> rif.FusionNodeIndexingEvaluation:
        if fusion.uid not in self.indexing_evaluations:
            self.indexing_evaluations[fusion.uid] = rif.FusionNodeIndexingEvaluation(fusion)
        return self.indexing_evaluations[fusion.uid]

    # -- one computation --------------------------------------------------------------------
    def fuse_computation(self, graph: "Graph", fuse_it: bool = True) -> bool:
        self.graph = graph
        self._reach = {}
        post_order = graph.post_order()
        self._post_position = {node.uid: i for i, node in enumerate(post_order)}
        self._post_list = post_order
        self._wide_reach = {}
        self.do_not_duplicate = self._globally_unfusible(post_order) if self.may_duplicate else {}
        if not fuse_it:
            return False
        self._queue = list(post_order)
        self._position = {node.uid: i for i, node in enumerate(self._queue)}
        changed = False
        while True:
            consumer = self._pop()
            if consumer is None:
                self._flush()
                return changed
            candidates = self._candidates(consumer)
            if not rif.is_fusible(consumer) and consumer.opcode != "fusion":
                for i in candidates:
                    self._record(consumer, i, self.evaluate(("IF-CONSUMER-NOT-FUSIBLE",), consumer, i))
                continue
            mof_consumer: list[str | None] = []  # XLA caches the consumer's answer per pop
            for i in candidates:
                if self._consider(consumer, i, mof_consumer):
                    changed = True
                    break

    def _candidates(self, consumer: "Node") -> list[int]:
        """The consumer's operands still queued, latest in post order first (XLA's
        GetInstructionsToFuse order); an operand used twice keeps its operand order."""
        position = self._position
        operands = consumer.operands
        if len(operands) == 1:  # (most consumers: no sort)
            return [0] if operands[0].uid in position else []
        if len(operands) == 2:  # (most of the others: two positions compared, no sort)
            first, second = position.get(operands[0].uid), position.get(operands[1].uid)
            if first is None:
                return [] if second is None else [1]
            if second is None:
                return [0]
            return [1, 0] if second > first else [0, 1]
        return sorted((i for i, op in enumerate(operands) if op.uid in position),
                      key=lambda i: -position[operands[i].uid])

    def _consider(self, consumer: "Node", i: int, mof_consumer: list) -> bool:
        producer = consumer.operands[i]
        if not rif.is_fusible(producer):
            self._record(consumer, i, self.evaluate(("IF-PRODUCER-NOT-FUSIBLE",), consumer, i))
            return False
        if producer.uid in self.do_not_duplicate:
            outcome = self.evaluate(("IF-DO-NOT-DUPLICATE",), consumer, i)
            if outcome.allowed:  # relaxed by the user
                second = self.policy.should_fuse(self, consumer, i)
                outcome = Outcome(second.blocked_by, second.facts, outcome.relaxed + second.relaxed)
        else:
            outcome = self.policy.should_fuse(self, consumer, i)
        if outcome.allowed:
            fusion = self._fuse(producer, consumer, multi_output=False)
            self._after_fusion(fusion, producer, consumer, outcome)
            return True
        if not mof_consumer:
            mof_consumer.append(self.policy.consumer_mof_refusal(self, consumer))
        mof = mof_consumer[0]
        if mof is None:
            mof = self.policy.operand_mof_refusal(self, consumer, i)
        if mof is None and _mof_creates_cycle(producer, consumer):
            mof = "multi-output fusion creates a cycle"
        if mof is None:
            fusion = self._fuse(producer, consumer, multi_output=True)
            self._after_fusion(fusion, producer, consumer, outcome, multi_output=True)
            return True
        self._record(consumer, i, outcome, mof_reason=mof)
        return False

    # -- queue (XLA's ReversePostOrderFusionQueue) ------------------------------------------
    def _pop(self) -> "Node | None":
        while self._queue and self._queue[-1] is None:
            self._queue.pop()
        if not self._queue:
            return None
        node = self._queue.pop()
        self._position.pop(node.uid, None)
        return node

    def _push(self, node: "Node") -> None:
        self._position[node.uid] = len(self._queue)
        self._queue.append(node)

    def _remove_from_queue(self, node: "Node") -> None:
        pos = self._position.pop(node.uid, None)
        if pos is not None:
            self._queue[pos] = None

    # -- fusing -----------------------------------------------------------------------------
    def _fuse(self, producer: "Node", consumer: "Node", multi_output: bool) -> "Node":
        kind = self.policy.choose_kind(producer, consumer)
        if consumer.opcode == "fusion":
            fusion = consumer
            if fusion.fusion_kind != kind:
                fusion.fusion_kind = kind
        else:
            fusion = fp.create_fusion(consumer, kind, name=self.policy.fusion_name(producer, consumer))
            self._replace_consumer(consumer, fusion)
        self._update_reused(producer, fusion)
        if multi_output:
            self.policy.fuse_into_multi_output(self, fusion, producer)
        else:
            self.policy.fuse_instruction(self, fusion, producer)
        return fusion

    def _update_reused(self, producer: "Node", fusion: "Node") -> None:
        """UpdateReusedOperandsForFusion: a reused producer passes reuse on to its operands."""
        reused = self._reused_of(fusion)
        if producer.uid in reused:
            reused.discard(producer.uid)
            reused.update(op.uid for op in producer.operands)
        else:
            reused.update(self._reused_of(producer))

    def _after_fusion(self, fusion: "Node", producer: "Node", consumer: "Node", outcome: Outcome,
                      multi_output: bool = False) -> None:
        self._record_fused(producer, fusion, outcome, multi_output)
        self._push(fusion)
        if producer.graph is not None and producer in producer.graph and producer.is_dead:
            self.do_not_duplicate.pop(producer.uid, None)
            self._remove_from_queue(producer)
            producer.graph.remove(producer)
        if fusion is not consumer:
            self.do_not_duplicate.pop(consumer.uid, None)

    def _replace_consumer(self, consumer: "Node", fusion: "Node") -> None:
        """The new fusion takes over the consumer's earlier decisions (it is the same kernel)."""
        earlier = self._decided.pop(consumer.uid, None)
        if earlier:
            self._decided.setdefault(fusion.uid, {}).update(earlier)
        self._current[consumer.uid] = fusion

    # -- ComputeGloballyUnfusible -----------------------------------------------------------
    def _reachable(self, producer: "Node", target: "Node") -> bool:
        """Is `target` reachable from `producer` through users (XLA's HloReachabilityMap)?
        Users come later in post order, so the search from `producer` only walks nodes up to
        `target`'s position, extending what it found for earlier, nearer targets."""
        if target is producer:
            return True
        pos = self._post_position
        if pos.get(target.uid, -1) < pos.get(producer.uid, -1):
            return False
        reach = self._reach.get(producer.uid)
        if reach is None:
            reach = self._reach[producer.uid] = _Reach(producer)
        return reach.reaches(target, pos)

    def _operand_reach(self, consumer: "Node") -> tuple[dict[int, int], list[list[int]]]:
        """For a consumer with many operands (an output tuple, a big concatenate): for every
        node, which of the consumer's distinct operands it reaches, as a bit mask, and the
        operand positions of each bit.  One backward sweep answers what would otherwise be one
        forward search per producer over most of the graph."""
        cached = self._wide_reach.get(consumer.uid)
        if cached is not None:
            return cached
        index: dict[int, int] = {}
        positions: list[list[int]] = []
        for i, op in enumerate(consumer.operands):
            bit = index.setdefault(op.uid, len(index))
            if bit == len(positions):
                positions.append([])
            positions[bit].append(i)
        pos = self._post_position
        limit = max((pos.get(op.uid, -1) for op in consumer.operands), default=-1)
        bits: dict[int, int] = {}
        post_list = self._post_list
        for k in range(limit, -1, -1):  # (no copy of the list's head for each wide consumer)
            node = post_list[k]
            mask = 1 << index[node.uid] if node.uid in index else 0
            for user in node.users:
                mask |= bits.get(user.uid, 0)
            if mask:
                bits[node.uid] = mask
        self._wide_reach[consumer.uid] = (bits, positions)
        return bits, positions

    def _globally_unfusible(self, post_order: list["Node"]) -> dict[int, dict]:
        """Producers that read more than they write and cannot be fused into all their users."""
        out: dict[int, dict] = {}
        self.do_not_duplicate = out  # CanFuseOnAllPaths sees the set as it grows
        memo: dict[tuple[int, int], bool] = {}
        for producer in reversed(post_order):
            # (fewer than two operands: effectively at most unary, without asking)
            if len(producer.operands) < 2 or rif.effectively_at_most_unary(producer):
                continue
            operand_elements = 0
            for op in rif.unique_operands(producer):
                operand_elements += rif.total_elements(op.shape)
            output_elements = rif.total_elements(producer.shape)
            if operand_elements <= output_elements:
                continue
            blocker = None
            if not rif.is_fusible(producer):
                blocker = "it is not fusible"
            else:
                for user in producer.users:
                    why = self._can_fuse_on_all_paths(producer, user, memo)
                    if why is not None:
                        blocker = why
                        break
            if blocker is None:
                continue
            out[producer.uid] = {"operand_elements": operand_elements, "output_elements": output_elements,
                                 "blocker": blocker}
        return out

    def _can_fuse_on_all_paths(self, producer: "Node", consumer: "Node",
                               memo: dict[tuple[int, int], bool]) -> str | None:
        """XLA's CanFuseOnAllPaths; returns None when it can, else which edge cannot fuse."""
        if consumer is producer:
            return None
        if not rif.is_fusible(consumer):
            return f"{consumer.name} is not fusible"
        key = (producer.uid, consumer.uid)
        if key in memo:
            return None if memo[key] else f"it cannot be fused into {consumer.name}"
        why = None
        if len(consumer.operands) > _WIDE:
            # only the operands the producer reaches, in operand order, without a pass over
            # all of them (an output tuple's thousands, for each producer)
            bits, positions = self._operand_reach(consumer)
            reached = sorted(i for bit in _set_bits(bits.get(producer.uid, 0)) for i in positions[bit])
        else:
            reached = [i for i, op in enumerate(consumer.operands) if self._reachable(producer, op)]
        for i in reached:
            operand = consumer.operands[i]
            if operand.uid in self.do_not_duplicate:
                why = f"{operand.name} cannot be duplicated into {consumer.name}"
                break
            outcome = self.policy.should_fuse(self, consumer, i)
            if not outcome.allowed:
                why = f"{operand.name} cannot be fused into {consumer.name}: " \
                      f"{rule_reason(outcome.blocked_by.message, outcome.facts)}"
                break
            deeper = self._can_fuse_on_all_paths(producer, operand, memo)
            if deeper is not None:
                why = deeper
                break
        memo[key] = why is None
        return why

    # -- decisions --------------------------------------------------------------------------
    # Decisions are kept as (producer, consumer, fields) until the computation is done: the
    # same pair is often refused again each time its fusion grows, and only the last answer
    # is kept, so building each Decision (members, source line) once saves much time on
    # large modules.  Members are those of the kernels when the computation is done.

    def _record(self, consumer: "Node", i: int, outcome: Outcome, mof_reason: str | None = None) -> None:
        # the sentences are built in _flush, for the last answer only
        producer = consumer.operands[i]
        self._store(producer, consumer, (producer.name, outcome, mof_reason))

    def _record_fused(self, producer: "Node", fusion: "Node", outcome: Outcome, multi_output: bool) -> None:
        relaxed = outcome.relaxed
        how = "multi-output fused" if multi_output else "fused"
        reason = f"{producer.name} {how} into {fusion.name}"
        if relaxed:
            reason += f" (relaxed: {', '.join(relaxed)})"
        self._store(producer, fusion, (producer.name, Verdict.RELAXED if relaxed else Verdict.FUSED,
                                       relaxed[0] if relaxed else None, reason, None,
                                       {"kind": fusion.fusion_kind or "", "multi_output": multi_output}, relaxed))

    def _store(self, producer: "Node", consumer: "Node", fields: tuple) -> None:
        slots = self._decided.get(consumer.uid)
        if slots is None:  # (not setdefault: no empty dict built for each pair asked again)
            slots = self._decided[consumer.uid] = {}
        index = slots.get(producer.uid)
        if index is None:
            index = slots[producer.uid] = len(self.ctx.decisions)
            self.ctx.record(_PENDING)  # placeholder until _flush
        self._pending[index] = (producer, consumer, fields)

    def _flush(self) -> None:
        """Turn the pending records of this computation into Decisions.  Members and source
        line are looked up once per node (a producer refused by many consumers repeats them).
        Each refusal is worded: its facts name the pair, so sentences rarely repeat."""
        computation = self.graph.name if self.graph is not None else None
        pass_name = self.ctx.pass_name or self.policy.name
        program = self.program
        members: dict[int, tuple[str, ...]] = {}
        sources: dict[int, ir.SourceLocation | None] = {}
        decisions = self.ctx.decisions
        for index, (producer, consumer, fields) in self._pending.items():
            live = self._current.get(consumer.uid, consumer)
            producer_members = members.get(producer.uid)
            if producer_members is None:
                producer_members = members[producer.uid] = producer.members()
            consumer_members = members.get(live.uid)
            if consumer_members is None:
                consumer_members = members[live.uid] = live.members()
            if producer.uid in sources:
                source = sources[producer.uid]
            else:
                source = sources[producer.uid] = program.location(producer)
            if len(fields) == 3:  # a refusal: (producer name, outcome, mof reason)
                name, outcome, mof_reason = fields
                blocked = outcome.blocked_by
                refused = dict(outcome.facts)
                if blocked is None:
                    decisions[index] = Decision(pass_name, name, live.name, Verdict.BLOCKED, None, "", None, refused,
                                                outcome.relaxed, computation, producer_members, consumer_members,
                                                source)
                    continue
                xla_reason = blocked.xla.message
                if xla_reason is not None and mof_reason:
                    xla_reason = f"{xla_reason} ; {mof_reason}"
                decisions[index] = Decision(
                    pass_name, name, live.name, Verdict.BLOCKED, blocked.id, rule_reason(blocked.message, refused),
                    xla_reason, refused, outcome.relaxed, computation, producer_members, consumer_members, source)
            else:
                name, verdict, rule, reason, xla_reason, facts, relaxed = fields
                decisions[index] = Decision(pass_name, name, live.name, verdict, rule, reason, xla_reason, facts,
                                            relaxed, computation, producer_members, consumer_members, source)
        self._pending.clear()


def _set_bits(mask: int):
    """The positions of the 1 bits of `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


#: Consumers with more operands than this answer reachability with one sweep (_operand_reach).
_WIDE = 16


class _Reach:
    """Nodes reachable from one start node, found lazily up to a post-order position."""

    def __init__(self, start: "Node"):
        self.bound = -1
        self.seen = {start.uid}
        self.pending = [start]  # found, users not expanded yet (they lie beyond `bound`)

    def reaches(self, target: "Node", pos: dict[int, int]) -> bool:
        limit = pos.get(target.uid, -1)
        if limit > self.bound:
            self.bound = limit
            stack, self.pending = self.pending, []
            while stack:
                node = stack.pop()
                if pos.get(node.uid, -1) > limit:
                    self.pending.append(node)
                    continue
                for user in node.users:
                    if user.uid not in self.seen:
                        self.seen.add(user.uid)
                        stack.append(user)
        return target.uid in self.seen


def _mof_creates_cycle(producer: "Node", consumer: "Node") -> bool:
    """MultiOutputFusionCreatesCycle: another operand of the consumer depends on the producer."""
    others = {op.uid for op in consumer.operands if op is not producer}
    if not others:
        return False
    seen: set[int] = set()
    work = list(producer.users)
    while work:
        node = work.pop()
        if node.uid in others:
            return True
        if node.uid not in seen:
            seen.add(node.uid)
            work.extend(node.users)
    return False


def source_location(program: "Program", node: "Node"):
    """The user's source line of an instruction, from metadata or the stack-frame tables."""
    return program.location(node)


# ------------------------------------------------------------------------------------------
# InstructionFusion::IsExpensive (the generic list; backends pass their own)
# ------------------------------------------------------------------------------------------

_CHEAP = frozenset({
    "add", "and", "bitcast", "bitcast-convert", "broadcast", "ceil", "clamp", "count-leading-zeros",
    "compare", "complex", "concatenate", "constant", "convert", "copy", "copy-done", "copy-start",
    "dynamic-slice", "dynamic-update-slice", "floor", "get-tuple-element", "imag", "infeed", "iota",
    "is-finite", "maximum", "minimum", "multiply", "mulhi", "negate", "not", "opt-barrier", "or",
    "xor", "outfeed", "pad", "partition-id", "popcnt", "real", "reduce-precision", "replica-id",
    "reshape", "dynamic-reshape", "reverse", "round-nearest-afz", "round-nearest-even", "select",
    "shift-left", "shift-right-arithmetic", "shift-right-logical", "slice", "stochastic-convert",
    "subtract", "transpose", "tuple",
})
_COMPLEX_EXPENSIVE = frozenset({"abs", "cosine", "sign", "sine", "tan", "sinh"})
_EXPENSIVE = frozenset({
    "acos", "acosh", "asin", "asinh", "add-dependency", "after-all", "atan2", "atanh", "async-start",
    "async-update", "async-done", "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "cosh",
    "call", "cholesky", "conditional", "convolution", "all-gather", "all-gather-start", "all-gather-done",
    "all-reduce", "all-reduce-start", "all-reduce-done", "reduce-scatter", "all-to-all",
    "collective-broadcast", "collective-permute", "collective-permute-start", "collective-permute-done",
    "custom-call", "domain", "dot", "erf", "exponential", "exponential-minus-one", "fft", "fusion", "gather",
    "log", "log-plus-one", "logistic", "map", "parameter", "power", "ragged-all-to-all", "ragged-dot", "recv",
    "recv-done", "reduce", "reduce-window", "rng", "rng-get-and-update-state", "rng-bit-generator", "rsqrt",
    "scaled-dot", "scan", "scatter", "select-and-scatter", "send", "send-done", "sort", "topk", "sqrt", "cbrt",
    "tanh", "triangular-solve", "while", "get-dimension-size", "set-dimension-size",
})


def is_scalar_constant_or_broadcast_of_one(node: "Node") -> bool:
    if node.opcode == "broadcast" and node.operands:
        node = node.operands[0]
    return node.opcode == "constant" and node.shape.is_effective_scalar


def generic_is_expensive(node: "Node") -> bool:
    """InstructionFusion::IsExpensive (X0102).  Opcodes XLA's switch does not list are cheap."""
    op = node.opcode
    if op in _CHEAP:
        return False
    if op in _COMPLEX_EXPENSIVE:
        return node.shape.element_type in ("c64", "c128")
    if op in ("divide", "remainder"):
        integral = node.shape.element_type.startswith(("s", "u")) and node.shape.element_type != "tuple"
        return not (integral and len(node.operands) > 1 and is_scalar_constant_or_broadcast_of_one(node.operands[1]))
    return op in _EXPENSIVE

"""XLA:GPU's fusion pipeline as in jaxlib 0.10.2 (XLA 5a9e73cb): PriorityFusion and the passes
around it (docs/xla/priority-fusion.md; xla/backends/gpu/transforms/priority_fusion.cc).

    variadic-op-splitter → sort-iota-fusion → priority-fusion → cse → dce
        → multi_output_fusion → cse                       (`--backend gpu --pipeline priority`)

PriorityFusion, per fusible computation (entry, loop bodies and conditions, branches):
  1. cost every instruction (GpuPerformanceModel) and give each candidate producer a priority:
     the modelled time of the producer and its users as separate kernels minus the time with
     the producer fused into each user (bitcasts first, +inf; constants never, -inf; a producer
     that cannot fuse into all its non-bitcast users, -inf, with XLA's reason logged);
  2. pop the producer with the highest priority (ties: the later-created instruction), fuse it
     into every user (a new fusion wraps a user that is not one yet), delete it when no user
     is left, and recompute the priorities of the fusions made and of their operands —
     incrementally, from the cached times of the consumers they replaced, as XLA does;
  3. when the queue is empty, fuse constants of at most one element into every fusible user.

Every producer→consumer pair yields exactly one Decision: FUSED (or RELAXED) when it was fused,
otherwise BLOCKED with the rule that kept it apart on the final graph (a CanFuse rule, the
all-users policy, the cost model with its times, a bitcast or constant rule).  The steps XLA
logs in `*.priority_fusion_dump.txt` are recorded too (`ctx.priority_fusion_log`, an
`hlofuse.xla_log.FusionLog`), so a replay can be compared with XLA's log step by step.

Differences from XLA (and their effect): instructions created by earlier passes keep text
order as their unique ids (XLA's in-memory ids are not in the dump): ties between equal
priorities may break differently, which changes fusion *names*, rarely groupings; users keep
text order too, which matters for Triton pairs XLA's FusionDeduplicationCache would make share
a tiling (not modelled: each pair is tiled on its own, hlofuse/cost/tiled.py); compiler fuel is
not modelled.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

from .. import fusion_primitives as fp
from ..cost import GpuPerformanceModel
from ..cost import durations as dur
from ..cost.fusion_analysis import FUSION_KIND_OF_EMITTER, TRITON
from ..cost.model import KERNEL_LAUNCH_OVERHEAD, RunTimes
from ..cost.structure import grown_body_key, pair_key, set_body_key
from ..decision import Decision
from ..gpu.config import ERA_PRIORITY, GpuConfig
from ..gpu.fusible import fusible_computations
from ..gpu.properties import is_fusible as hlo_is_fusible
from ..rules import Candidate, Outcome, evaluate
from ..rules import priority_fusion as pf
from ..rules.candidates import PriorityCandidate
from ..xla_log import FusionLog, FusionStep, ProducerIneligible, UpdatePriority

if TYPE_CHECKING:  # pragma: no cover
    from ..graph import Graph, Node, Program
    from ..pipeline import Context

PASS_NAME = "priority-fusion"
#: Where each rule of pf.CAN_FUSE_TAIL sits in it.
_TAIL_INDEX = {rule_id: i for i, rule_id in enumerate(pf.CAN_FUSE_TAIL)}
#: Where PF-CODE-DUPLICATION sits in pf.CAN_FUSE_TAIL.
_CODE_DUPLICATION_AT = pf.CAN_FUSE_TAIL.index("PF-CODE-DUPLICATION")
INF = math.inf


def gpu_config_2026(ctx: "Context") -> GpuConfig:
    """The GPU config of the replay, for XLA 5a9e73cb."""
    from ..device import load_gpu
    from ..gpu import gpu_config

    cfg = gpu_config(ctx)
    if cfg.era != ERA_PRIORITY:
        cfg = cfg.replace(era=ERA_PRIORITY)
    if ctx.device is None and cfg.device is None:
        cfg = cfg.replace(device=load_gpu(None))
    return cfg


# ------------------------------------------------------------------------------------------
# sort-iota-fusion
# ------------------------------------------------------------------------------------------


def sort_iota_fusion(program: "Program", ctx: "Context") -> bool:
    """SortIotaFusion: a sort reading iotas becomes a `kind=kCustom` fusion (no backend config)
    with those iotas inside; an iota with other users stays outside too.  The fusion is then a
    library-like kernel: PriorityFusion does not fuse it and MultiOutputFusion skips it."""
    changed = False
    for graph in program.non_fusion_graphs():
        for node in list(graph.post_order()):
            if node.opcode != "sort" or not any(op.opcode == "iota" for op in node.operands):
                continue
            iotas = []
            for op in node.operands:
                if op.opcode == "iota" and all(op is not x for x in iotas):
                    iotas.append(op)
            fusion = fp.create_fusion(node, "kCustom")
            for iota in iotas:
                fp.fuse_instruction(fusion, iota)
                if iota in graph and iota.is_dead:
                    graph.remove(iota)
            changed = True
    return changed


# ------------------------------------------------------------------------------------------
# priority-fusion
# ------------------------------------------------------------------------------------------


def priority_fusion(program: "Program", ctx: "Context") -> bool:
    """Run PriorityFusion over every fusible computation of `program`."""
    cfg = gpu_config_2026(ctx)
    log = ctx.priority_fusion_log
    if log is None:
        log = ctx.priority_fusion_log = FusionLog([])
    changed = False
    for graph in fusible_computations(program, cfg):
        run = PriorityFusionRun(graph, ctx, cfg, log)
        changed |= run.run()
    return changed


class PriorityFusionRun:
    """PriorityFusionQueue and RunImpl's loop for one computation."""

    def __init__(self, graph: "Graph", ctx: "Context", cfg: GpuConfig, log: FusionLog):
        self.graph = graph
        self.ctx = ctx
        self.cfg = cfg
        self.log = log
        self.model = GpuPerformanceModel(cfg.device, cfg, concat_penalty="PF-CONCAT-PENALTY" not in ctx.relaxed)
        self.state = pf.PfState(self.model, cfg)
        self.relaxed = ctx.relaxed
        # the queue: heap entries (-priority, -uid, uid) with lazy deletion
        self._heap: list[tuple[float, int, int]] = []
        self._key: dict[int, tuple[float, int]] = {}
        self._nodes: dict[int, "Node"] = {}
        #: CanFuse outcomes by producer uid << 32 | consumer uid (one int per pair: nothing
        #: to build or hash per question), and the pairs each uid is in (for _invalidate; a
        #: pair forgotten through one side stays listed on the other, and is skipped there)
        self._can_fuse: dict[int, Outcome] = {}
        self._can_fuse_keys: dict[int, list[int]] = {}
        #: CanFuse verdicts past the head rules by pair structure (_evaluate_can_fuse)
        self._verdicts: dict[object, "Outcome | tuple"] = {}
        self._to_update: dict[int, "Node"] = {}
        self._new_consumers: dict[int, list["Node"]] = {}
        self._removed: dict[int, tuple[float, float]] = {}
        #: the last priority computed for a producer (also when it left the queue)
        self.priority: dict[int, float] = {}
        self.changed = False

    # -- the loop (PriorityFusion::RunImpl) --------------------------------------------------
    def run(self) -> bool:
        candidates = []
        for node in self.graph.post_order():
            if pf.is_pf_fusible(node):
                self.model.estimate(node)
            if (node.opcode in ("parameter", "tuple", "get-tuple-element") or not node.users
                    or not hlo_is_fusible(node)):
                continue
            candidates.append(node)
        self._set_priorities(candidates)
        while True:
            producer, consumers = self._dequeue()
            if producer is None:
                break
            for consumer in consumers:
                if pf.is_fusible_bitcast(consumer) and "PF-BITCAST-USER" not in self.relaxed:
                    continue
                self._record_fused(producer, consumer)
                fusion = self.fuse(producer, consumer)
                self._on_fusing(fusion, producer, consumer)
                self.changed = True
            self._removed_consumer_runtimes(producer, consumers)
            if producer.is_dead:
                self._invalidate(producer)
                self._unqueue(producer)
                self.graph.remove(producer)
            for consumer in consumers:
                self._invalidate(consumer)
            self._update_priorities()
        self._fuse_constants()
        self._record_remaining()
        return self.changed

    # -- the queue -------------------------------------------------------------------------
    def _push(self, node: "Node", priority: float) -> None:
        key = (priority, node.uid)
        self._key[node.uid] = key
        self._nodes[node.uid] = node
        heapq.heappush(self._heap, (-priority, -node.uid, node.uid))

    def _unqueue(self, node: "Node") -> None:
        self._key.pop(node.uid, None)
        self._to_update.pop(node.uid, None)

    def _dequeue(self) -> tuple["Node | None", list["Node"]]:
        """DequeueNextProducer: the highest priority (latest unique id on ties) with users."""
        while self._heap:
            neg_priority, _, uid = heapq.heappop(self._heap)
            key = self._key.get(uid)
            if key is None or key[0] != -neg_priority:
                continue
            producer = self._nodes[uid]
            del self._key[uid]
            if producer not in self.graph:
                continue
            consumers = list(producer.users)
            if pf.is_fusible_bitcast(producer):
                consumers = [c for c in consumers if self.can_fuse(producer, c).allowed]
            elif "PF-ALL-USERS" in self.relaxed:
                consumers = [c for c in consumers if pf.is_fusible_bitcast(c) or self.can_fuse(producer, c).allowed]
            if consumers:
                return producer, consumers
        return None, []

    def _set_priorities(self, nodes: list["Node"]) -> None:
        """ComputeAndSetPriorities."""
        for node in nodes:
            priority = self._priority(node)
            key = (priority, node.uid)
            if node.uid in self._key:
                if self._key[node.uid] == key:
                    continue
                del self._key[node.uid]
            if priority < 0 and not (priority > -INF and "PF-UNPROFITABLE" in self.relaxed):
                continue
            self._push(node, priority)

    def _priority(self, producer: "Node") -> float:
        """CalculateProducerPriority."""
        if pf.is_fusible_bitcast(producer):
            return INF
        if producer.opcode == "constant":
            return -INF
        refusal = self._refusal_for_all_users(producer)
        if refusal is not None:
            self.log.steps.append(ProducerIneligible(len(self.log.steps), producer.name, refusal[0]))
            self.priority[producer.uid] = -INF
            return -INF
        incremental = producer.uid in self._removed
        if incremental:
            consumers = self._new_consumers[producer.uid]
        else:
            consumers = self._fusible_users(producer)
        times = self.model.run_times(producer, consumers)
        unfused, fused = times.time_unfused, times.time_fused
        current: int | float = 0  # ticks (infinite where a time is)
        if incremental:
            removed_unfused, removed_fused = self._removed[producer.uid]
            unfused -= removed_unfused
            fused -= removed_fused
            current = self._key[producer.uid][0]
        self.log.steps.append(UpdatePriority(len(self.log.steps), producer.name,
                                             tuple(u.name for u in producer.users),
                                             dur.us_as_logged(fused), dur.us_as_logged(unfused)))
        priority = current + unfused - fused
        self.priority[producer.uid] = priority
        return priority

    def _fusible_users(self, producer: "Node") -> list["Node"]:
        users = list(producer.users)
        if "PF-ALL-USERS" in self.relaxed:
            users = [u for u in users if pf.is_fusible_bitcast(u) or self.can_fuse(producer, u).allowed]
        return users

    # -- CanFuse ---------------------------------------------------------------------------
    def candidate(self, producer: "Node", consumer: "Node", **extra) -> Candidate:
        return PriorityCandidate(producer, consumer, self.ctx, self.state, **extra)

    def can_fuse(self, producer: "Node", consumer: "Node") -> Outcome:
        """CanFuseCached: XLA's ordered checks, cached until either side changes."""
        key = producer.uid << 32 | consumer.uid
        outcome = self._can_fuse.get(key)
        if outcome is None:
            outcome = self._evaluate_can_fuse(producer, consumer)
            self._can_fuse[key] = outcome
            keys = self._can_fuse_keys
            for uid in (producer.uid, consumer.uid):
                listed = keys.get(uid)
                if listed is None:
                    keys[uid] = [key]
                else:
                    listed.append(key)
        return outcome

    def _evaluate_can_fuse(self, producer: "Node", consumer: "Node") -> Outcome:
        """CanFuse's rules.  Past the head rules (root, fusibility: cheap, and about where the
        nodes sit), the common list's verdict is a function of the pair's structure
        (hlofuse.cost.structure.pair_key: what each rule reads, the fused bodies, the wiring),
        so it is remembered by that key: the layers of a model ask the same pairs again and
        again.  A refusal's facts name this very pair, so only the verdict (which rule, which
        relaxed rules) is remembered and the refusing rule is asked again for its facts.  Not
        remembered: Triton pairs (their tiling search sets the pair's fused time as a side
        effect) and in-place consumers (their rules compare index values, which the key
        leaves out)."""
        rules = pf.rules_for(producer, consumer)
        if rules is not pf.CAN_FUSE_RULES_NOT_IN_PLACE or not pf.head_rules_pass(producer, consumer):
            return evaluate(rules, self.candidate(producer, consumer), self.relaxed)
        structure = pair_key(producer, consumer, self.model._node_keys)
        verdict = self._verdicts.get(structure)
        if verdict is None:
            outcome = evaluate(pf.CAN_FUSE_TAIL, self.candidate(producer, consumer), self.relaxed)
            # (a refusal with where its rule sits in the list: the rules asked before it)
            self._verdicts[structure] = outcome if outcome.allowed else (
                outcome.blocked_by, outcome.relaxed, _TAIL_INDEX[outcome.blocked_by.id])
            return outcome
        if type(verdict) is Outcome:
            self._read_as_the_rules_do(producer, consumer, len(pf.CAN_FUSE_TAIL))
            return verdict
        blocked_by, relaxed, asked = verdict
        self._read_as_the_rules_do(producer, consumer, asked)
        candidate = self.candidate(producer, consumer)  # (only here: a remembered fusion asks nothing)
        facts = blocked_by.check(candidate)
        if facts is None:  # (cannot happen while the key holds all the rule reads)
            return evaluate(rules, candidate, self.relaxed)
        return Outcome(blocked_by, dict(facts), relaxed)

    def _read_as_the_rules_do(self, producer: "Node", consumer: "Node", asked: int) -> None:
        """What the first `asked` rules of CAN_FUSE_TAIL read from the cost analysis, read
        again for a remembered verdict.  The cost analysis keeps a node's properties as first
        computed until the node is revisited (XLA's HloCostAnalysis), so when they are first
        computed is part of the replay: a verdict remembered must not move that moment.  (The
        fusion analyses PF-REDUCTION-TO-LOOP reads are not read again: they are functions of
        the nodes as they are, read no cost property, and are dropped whenever a node changes.)"""
        if asked > _CODE_DUPLICATION_AT:
            cost = self.model.cost
            cost.properties(consumer)
            cost.properties(producer)

    def _refusal_for_all_users(self, producer: "Node") -> tuple[str, "Node | None", Outcome | None] | None:
        """CanFuseWithAllNonBitcastUsers: None, or (XLA's reason, the refusing user, its outcome)."""
        if not producer.users:
            return "No users to fuse", None, None
        relax_all = "PF-ALL-USERS" in self.relaxed
        relax_bitcast = "PF-BITCAST-USER" in self.relaxed
        has_non_bitcast = False
        first_refusal = None
        any_allowed = False
        for user in producer.users:
            if pf.is_fusible_bitcast(user) and not relax_bitcast:
                continue
            has_non_bitcast = True
            outcome = self.can_fuse(producer, user)
            if not outcome.allowed:
                if first_refusal is None:
                    first_refusal = (xla_reason(outcome), user, outcome)
                if not relax_all:
                    return first_refusal
            else:
                any_allowed = True
        if not has_non_bitcast:
            return "not fusing because there are only bitcast users", None, None
        if relax_all and not any_allowed:
            return first_refusal
        return None

    # -- fusing (PriorityFusion::Fuse) -------------------------------------------------------
    def fuse(self, producer: "Node", consumer: "Node") -> "Node":
        # the new body's key, from the pair as it is before fusing (no walk of the grown body)
        grown = grown_body_key(producer, consumer, self.model._node_keys)
        emitter, backend_kind = self.model.pair_kinds(producer, consumer)
        kind = FUSION_KIND_OF_EMITTER[emitter]
        if consumer.opcode != "fusion":
            fusion = fp.create_fusion(consumer, kind)
        else:
            fusion = consumer
            if fusion.fusion_kind != kind:
                fusion.fusion_kind = kind
        tiling = None
        if emitter == TRITON and backend_kind == "__triton":
            best = self.model.triton_tiling(producer, consumer)
            source = consumer if pf.is_generic_triton_fusion(consumer) else producer
            tiling = (source, best.tile, best.warps)
        fp.fuse_instruction(fusion, producer)
        if grown is not None and fusion.fused is not None:
            set_body_key(fusion.fused, grown)
        if tiling is not None:
            # XLA gives the result the best tiling it found (and kind kCustom)
            fusion.set_attr("backend_config", _triton_config(*tiling))
            fusion.fusion_kind = "kCustom"
        return fusion

    def _on_fusing(self, fusion: "Node", producer: "Node", consumer: "Node") -> None:
        """OnFusingInstruction: log the step, forget the replaced consumer, and schedule the
        fusion and its operands for a new priority."""
        self.log.steps.append(FusionStep(len(self.log.steps), fusion.name, producer.name, consumer.name))
        if fusion is not consumer:
            self._unqueue(consumer)
        for operand in fusion.operands:
            if operand is producer or operand.opcode in ("constant", "get-tuple-element"):
                continue
            if not hlo_is_fusible(operand):
                continue
            self._to_update[operand.uid] = operand
            self._new_consumers.setdefault(operand.uid, []).append(fusion)
        self._to_update[fusion.uid] = fusion

    def _removed_consumer_runtimes(self, producer: "Node", consumers: list["Node"]) -> None:
        """ComputeRuntimesOfRemovedConsumers: what the operands of the new fusions had priced
        for the consumers that are gone (for the incremental priority update).  A producer
        fused into thousands of users makes thousands of operands to update: each finds the
        removed nodes it priced from the smaller side, then adds them up in XLA's order (the
        consumers, then the producer)."""
        removed = None
        for uid in self._new_consumers:
            if uid not in self._key:
                continue
            operand = self._nodes.get(uid) or self._to_update.get(uid)
            original = self.model.cached_fused_times(operand)
            if original is None:
                continue
            if removed is None:
                removed = {node.uid: (i, node) for i, node in enumerate(list(consumers) + [producer])}
            if len(original) < len(removed):
                priced = [node for _, node in sorted(removed[u] for u in original if u in removed)]
            else:
                priced = [node for u, (_, node) in removed.items() if u in original]
            removed_unfused: int | float = 0  # ticks
            removed_fused: int | float = 0
            for node in priced:
                removed_fused += original[node.uid]
                runtime = self.model.cached_runtime(node)
                if runtime is not None:
                    removed_unfused += runtime.exec_time
            own = self.model.cached_runtime(operand)
            removed_unfused += (own.exec_time if own is not None else 0) + KERNEL_LAUNCH_OVERHEAD
            self._removed[uid] = (removed_unfused, removed_fused)

    def _invalidate(self, node: "Node") -> None:
        """InvalidateCaches."""
        keys = self._can_fuse_keys.pop(node.uid, None)
        if keys is not None:
            can_fuse = self._can_fuse
            for key in keys:
                can_fuse.pop(key, None)
        self.model.invalidate(node)

    def _update_priorities(self) -> None:
        """UpdatePriorities: re-cost what changed, then recompute those priorities at once."""
        nodes = list(self._to_update.values())
        for node in nodes:
            self.model.cost.revisit(node)
        for node in nodes:
            if pf.is_pf_fusible(node) and self.model.cached_runtime(node) is None:
                self.model.estimate(node)
        self._set_priorities(nodes)
        self._to_update.clear()
        self._new_consumers.clear()
        self._removed.clear()

    # -- constants (after the queue) ---------------------------------------------------------
    def _fuse_constants(self) -> None:
        small = [n for n in self.graph.nodes()
                 if n.opcode == "constant" and n.shape.is_array and _elements(n) <= 1]
        for constant in small:
            for user in list(constant.users):
                outcome = self._can_fuse_constant(constant, user)
                if not outcome.allowed:
                    continue
                self._record(constant, user, outcome)
                self.fuse(constant, user)
                self.changed = True

    def _can_fuse_constant(self, constant: "Node", user: "Node") -> Outcome:
        rules = pf.SCATTER_RULES + ("PF-TRITON-UNSUPPORTED",) if pf.is_generic_triton_fusion(user) \
            else pf.CONSTANT_RULES
        return evaluate(rules, self.candidate(constant, user), self.relaxed)

    # -- decisions ---------------------------------------------------------------------------
    def _record(self, producer: "Node", consumer: "Node", outcome: Outcome, **overrides) -> None:
        self.ctx.record(make_decision(producer, consumer, outcome, **overrides))

    def _record_fused(self, producer: "Node", consumer: "Node") -> None:
        outcome = self.can_fuse(producer, consumer)
        relaxed = list(outcome.relaxed)
        if self.priority.get(producer.uid, 0) < 0:
            relaxed.append("PF-UNPROFITABLE")
        if pf.is_fusible_bitcast(consumer) and not pf.is_fusible_bitcast(producer):
            relaxed.append("PF-BITCAST-USER")
        if "PF-CONCAT-PENALTY" in self.relaxed and self._concat_penalty_decides(producer):
            relaxed.append("PF-CONCAT-PENALTY")
        if "PF-ALL-USERS" in self.relaxed and not pf.is_fusible_bitcast(producer) and any(
                not self.can_fuse(producer, u).allowed for u in producer.users if not pf.is_fusible_bitcast(u)):
            relaxed.append("PF-ALL-USERS")
        if not outcome.allowed:
            relaxed.append(outcome.blocked_by.id)
        self._record(producer, consumer, Outcome(None, {}, tuple(dict.fromkeys(relaxed))))

    def _concat_penalty_decides(self, producer: "Node") -> bool:
        """With XLA's 400-flops price of a misaligned concatenate, would the producer's
        priority have been negative?  (Asked only when the user relaxed that price.)"""
        from ..cost.analysis import concat_is_penalised

        nodes = []
        for n in [producer] + list(producer.users):
            nodes.extend(n.fused.nodes() if n.opcode == "fusion" and n.fused is not None else [n])
        if not any(concat_is_penalised(n) for n in nodes):
            return False
        penalised = GpuPerformanceModel(self.cfg.device, self.cfg, concat_penalty=True)
        return penalised.run_times(producer, self._fusible_users(producer)).priority < 0

    def _record_remaining(self) -> None:
        """One BLOCKED decision for every producer→consumer edge left in the computation.  The
        decision that carries the reason XLA logs for the producer (its first refusing user, in
        user order) says so in its facts: `logged_for_producer`."""
        import dataclasses

        for producer in self.graph.post_order():
            if producer.opcode in ("parameter", "tuple", "get-tuple-element") or not producer.users:
                continue
            logged = None
            if producer.opcode != "constant" and not pf.is_fusible_bitcast(producer):
                refusal = self._refusal_for_all_users(producer)
                if refusal is not None:
                    logged = refusal[1] if refusal[1] is not None else next(iter(producer.users))
                elif self.priority.get(producer.uid, 0) < 0:
                    logged = producer.users[0]
            for consumer in list(producer.users):
                decision = self.explain(producer, consumer)
                if decision is None:
                    continue
                if consumer is logged:
                    decision = dataclasses.replace(decision, facts={**decision.facts, "logged_for_producer": True})
                self.ctx.record(decision)

    def explain(self, producer: "Node", consumer: "Node") -> Decision | None:
        """Why `producer` is not fused into `consumer` on the current graph."""
        if producer.is_multi_output_fusion:
            # Made by multi_output_fusion after priority-fusion; consumers read one of its
            # outputs through get-tuple-element, and no pass fuses it further.
            outcome = evaluate(("GF-PRODUCER-MULTI-OUTPUT",), self.candidate(producer, consumer), frozenset())
            if not outcome.allowed:
                return make_decision(producer, consumer, outcome)
        if producer.opcode == "constant":
            outcome = evaluate(("PF-LARGE-CONSTANT",), self.candidate(producer, consumer), frozenset())
            if outcome.allowed:
                outcome = self._can_fuse_constant(producer, consumer)
            return make_decision(producer, consumer, outcome) if not outcome.allowed else None
        if pf.is_fusible_bitcast(consumer) and not pf.is_fusible_bitcast(producer):
            only = all(pf.is_fusible_bitcast(u) for u in producer.users)
            if not only:
                # Fused into its other users, the producer would stay a kernel for the bitcast
                # alone; it is still here for them too, so their verdict is the bitcast's.
                decision = self._producer_verdict(producer, consumer)
                if decision is not None:
                    return decision
            outcome = evaluate(("PF-BITCAST-USER",), self.candidate(producer, consumer, bitcast_user=only),
                               frozenset())
            return make_decision(producer, consumer, outcome) if not outcome.allowed else None
        outcome = self.can_fuse(producer, consumer)
        if not outcome.allowed:
            return make_decision(producer, consumer, outcome)
        decision = self._producer_verdict(producer, consumer)
        if decision is not None:
            return decision
        times = self.model.run_times(producer, producer.users)
        priority = self.priority.get(producer.uid)
        outcome = evaluate(("PF-NOT-RECONSIDERED",), self.candidate(
            producer, consumer, stale=(priority, times)), frozenset())
        return make_decision(producer, consumer, outcome)

    def _producer_verdict(self, producer: "Node", consumer: "Node") -> Decision | None:
        """The decision about the producer as a whole, for the pair with `consumer`: another
        user refuses it (the all-users policy), or the cost model's priority is negative."""
        refusal = self._refusal_for_all_users(producer)
        if refusal is not None and refusal[1] is not None:
            reason, user, other = refusal
            outcome = evaluate(("PF-ALL-USERS",), self.candidate(
                producer, consumer, blocking=(user.name, other.blocked_by.id, reason)), frozenset())
            return make_decision(producer, consumer, outcome, xla_reason=reason)
        times = self.model.run_times(producer, producer.users)
        priority = self.priority.get(producer.uid)
        if priority is not None and priority < 0 or priority is None and times.priority < 0:
            if priority is not None and priority < 0 <= times.priority:
                times = RunTimes(times.time_unfused, times.time_unfused - priority)
            outcome = evaluate(("PF-CONCAT-PENALTY", "PF-UNPROFITABLE"),
                               self.candidate(producer, consumer, times=times), frozenset())
            return make_decision(producer, consumer, outcome)
        return None


def _triton_config(source: "Node", tile: tuple[int, ...], warps: int) -> str:
    """The Triton side's backend config with the new tiling (GetTritonGpuBackendConfig)."""
    import json

    from ..attributes import backend_config

    config = json.loads(json.dumps(backend_config(source) or {}))
    fusion = config.setdefault("fusion_backend_config", {})
    fusion["kind"] = "__triton"
    block = fusion.setdefault("block_level_fusion_config", {})
    block["output_tiles"] = [{"sizes": [str(t) for t in tile]}]
    block["num_warps"] = str(warps)
    return json.dumps(config, separators=(",", ":"))


def xla_reason(outcome: Outcome) -> str:
    """The string XLA gives for a refusal: the rule's reason, with the facts it is built from."""
    if outcome.blocked_by is None:
        return ""
    facts = outcome.facts
    if "xla_reason" in facts:
        return str(facts["xla_reason"])
    message = outcome.blocked_by.xla.message or ""
    if "{" in message:
        try:
            return message.format(**facts)
        except (KeyError, IndexError, ValueError):
            return message
    return message


def make_decision(producer: "Node", consumer: "Node", outcome: Outcome, **overrides) -> Decision:
    from ..pipeline import decision_from

    decision = decision_from(PASS_NAME, producer, consumer, outcome)
    changes = dict(overrides)
    if "xla_reason" not in changes and outcome.blocked_by is not None and "xla_reason" in outcome.facts:
        changes["xla_reason"] = str(outcome.facts["xla_reason"])
    if changes:
        import dataclasses

        decision = dataclasses.replace(decision, **changes)
    return decision


def _elements(node: "Node") -> int:
    from ..gpu.shapes import elements

    return elements(node.shape)


# ------------------------------------------------------------------------------------------
# Explaining a boundary of an already fused module
# ------------------------------------------------------------------------------------------


def explain_boundary(producer: "Node", consumer: "Node", ctx: "Context") -> Decision | None:
    """Which PriorityFusion rule keeps two kernels of a fused graph apart (CanFuse on the
    kernels as they are, the all-users policy, the cost model); None when none objects."""
    graph = producer.graph
    run = graph.boundary_explainer
    if not isinstance(run, PriorityFusionRun) or run.ctx is not ctx:
        run = graph.boundary_explainer = PriorityFusionRun(graph, ctx, gpu_config_2026(ctx), FusionLog([]))
    return run.explain(producer, consumer)


# ------------------------------------------------------------------------------------------
# The pipeline (fusion_pipeline.cc FusionPipeline at 5a9e73cb)
# ------------------------------------------------------------------------------------------


class _MofTimes:
    """What MultiOutputFusion reads of a pair's run times."""

    def __init__(self, times: RunTimes):
        self.unfused = times.time_unfused
        self.fused = times.time_fused
        self.unfused_us = times.unfused_us
        self.fused_us = times.fused_us


class _MofAnalysis:
    """What MultiOutputFusion asks of the cost analysis: forget a changed node."""

    def __init__(self, model: GpuPerformanceModel):
        self._model = model

    def revisit(self, node: "Node") -> None:
        self._model.invalidate(node)


class MofModel:
    """The cost model MultiOutputFusion asks (hlofuse/passes/multi_output_fusion.py's model
    interface) backed by the 2026 GpuPerformanceModel."""

    def __init__(self, cfg: GpuConfig, concat_penalty: bool = True):
        self.model = GpuPerformanceModel(cfg.device, cfg, concat_penalty=concat_penalty)
        self.analysis = _MofAnalysis(self.model)

    def estimate_run_times(self, producer: "Node", consumers, multi_output: bool = False):
        consumers = list(consumers)
        if multi_output and len(consumers) == 1:
            return _MofTimes(self.model.run_times_multi_output(producer, consumers[0]))
        return _MofTimes(self.model.run_times(producer, consumers))

    def merged_too_large(self, producer: "Node", consumer: "Node") -> tuple[bool, int, int]:
        too_large, merged = self.model.cost.producer_consumer_merged_too_large(producer, consumer)
        return too_large, merged, 0


def multi_output_fusion(program: "Program", ctx: "Context") -> bool:
    """MultiOutputFusion (hlofuse/passes/multi_output_fusion.py) with the 2026 cost model."""
    from . import multi_output_fusion as mof

    penalty = "PF-CONCAT-PENALTY" not in ctx.relaxed
    ctx.mof_model = lambda cfg: MofModel(cfg, concat_penalty=penalty)
    return mof.run(program, ctx)

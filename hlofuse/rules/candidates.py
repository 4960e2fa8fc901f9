"""What a pass asks its rules about, per pass family: a subclass of `rules.Candidate` whose typed
slots are the facts the pass hands to the rules.

A rule reads a fact as an attribute (`c.run`, `c.reachable`).  A fact its candidate does not
carry is not an attribute at all, so a rule asked by a pass that does not supply what it needs
fails with AttributeError naming the fact, rather than reading a default.  Facts that are
optional say what None means.  These are plain slotted classes without a dict: one is made per
question, millions on a large module, so each constructor sets the base slots itself instead of
calling `Candidate.__init__` (a call per question saved).
"""

from __future__ import annotations

from typing import Any

from . import Candidate


class FusionCandidate(Candidate):
    """InstructionFusion's question (XLA:CPU's CpuInstructionFusion, the legacy GpuInstructionFusion):
    may operand `operand_index` of `consumer` (the producer) be fused into it?
    `run` is the pass's `passes.instruction_fusion.FusionRun` (policy, caches, sets)."""

    __slots__ = ("run", "operand_index")

    def __init__(self, producer: Any, consumer: Any, ctx: Any, run: Any, operand_index: int):
        self.producer = producer
        self.consumer = consumer
        self.ctx = ctx
        self.pair = None
        self.budget = None
        self.memo = None
        self.run = run
        self.operand_index = operand_index


class MergerCandidate(Candidate):
    """FusionMerger's question for one user of a loop fusion: `users` are all the producer's
    users (the producer merges into all or none), `model` the pass's performance model."""

    __slots__ = ("users", "model")

    def __init__(self, producer: Any, consumer: Any, ctx: Any, users: list, model: Any):
        self.producer = producer
        self.consumer = consumer
        self.ctx = ctx
        self.pair = None
        self.budget = None
        self.memo = None
        self.users = users
        self.model = model


class MofCandidate(Candidate):
    """MultiOutputFusion's question: siblings (producer, consumer) = (i, j) of `parent`, or a
    producer and one consumer.  `reachable(a, b)` answers whether b reaches a through users;
    `model` is the pass's performance model (passes/multi_output_fusion.py's interface).
    `parent`: the siblings' shared operand (None: a producer-consumer question).
    `chosen`: the consumer the pass picked for the producer (None: not chosen yet)."""

    __slots__ = ("reachable", "model", "parent", "chosen")

    def __init__(self, producer: Any, consumer: Any, ctx: Any, *, reachable: Any, model: Any,
                 pair: tuple | None = None, budget: tuple | None = None, parent: Any = None, chosen: Any = None):
        self.producer = producer
        self.consumer = consumer
        self.ctx = ctx
        self.pair = pair
        self.budget = budget
        self.memo = None
        self.reachable = reachable
        self.model = model
        self.parent = parent
        self.chosen = chosen


class HorizontalCandidate(Candidate):
    """HorizontalLoopFusion's question about a candidate kernel (`producer`) among the operands
    of `consumer`.  `xla`: the LoopFusionXla variant replayed (None: P); `sliced`: the
    sliced-input mode; `candidates`: every candidate of this consumer, with `candidate_ids`
    their ids precomputed (None: derived from `candidates`); `alone`: its span holds only it."""

    __slots__ = ("xla", "sliced", "candidates", "candidate_ids", "alone")

    def __init__(self, producer: Any, consumer: Any, ctx: Any, xla: Any = None, sliced: bool = False,
                 candidates: Any = (), candidate_ids: Any = None, alone: bool = False):
        self.producer = producer
        self.consumer = consumer
        self.ctx = ctx
        self.pair = None
        self.budget = None
        self.memo = None
        self.xla = xla
        self.sliced = sliced
        self.candidates = candidates
        self.candidate_ids = candidate_ids
        self.alone = alone


class SpanCandidate(HorizontalCandidate):
    """GetNextSpanOfFusions' question: may `producer` join the span that starts at `left`?
    The totals are the span's with the producer added: `accum_outputs` outputs, `accum_io`
    operands and outputs, `accum_cost` unroll cost; `max_batch` is the span's output limit."""

    __slots__ = ("left", "max_batch", "accum_outputs", "accum_io", "accum_cost")

    def __init__(self, producer: Any, consumer: Any, ctx: Any, xla: Any, sliced: bool, *, left: Any,
                 max_batch: int, accum_outputs: int, accum_io: int, accum_cost: int):
        HorizontalCandidate.__init__(self, producer, consumer, ctx, xla, sliced)
        self.left = left
        self.max_batch = max_batch
        self.accum_outputs = accum_outputs
        self.accum_io = accum_io
        self.accum_cost = accum_cost


class PriorityCandidate(Candidate):
    """PriorityFusion's question.  `pf` is the computation's `rules.priority_fusion.PfState`
    (cost model, GPU config).  The facts of the questions asked once the queue is done (None
    when not asked): `blocking` (user, rule id, XLA's reason) of the user that refuses the
    producer; `bitcast_user` whether all the producer's users are bitcasts; `times` the cost
    model's RunTimes for the producer; `stale` (the queued priority, RunTimes now)."""

    __slots__ = ("pf", "blocking", "bitcast_user", "times", "stale")

    def __init__(self, producer: Any, consumer: Any, ctx: Any, pf: Any, blocking: tuple | None = None,
                 bitcast_user: bool | None = None, times: Any = None, stale: tuple | None = None):
        self.producer = producer
        self.consumer = consumer
        self.ctx = ctx
        self.pair = None
        self.budget = None
        self.memo = None
        self.pf = pf
        self.blocking = blocking
        self.bitcast_user = bitcast_user
        self.times = times
        self.stale = stale


class BoundaryCandidate(Candidate):
    """The explainer's question about an edge between two kernels of a fused module
    (rules/boundaries.py): `producer` and `consumer` are `graph.Node`s of that module and `ctx`
    the explainer.  What the edge tracer found: `crossing` (the loop or call boundaries the
    value crosses), `bytes` it carries, the display names `producer_name` and
    `consumer_name`, `loop` (words for the enclosing loop), `tuple_role`, the copies copy
    insertion added (`inserted_copies`, with `copy_reasons` by name) and the `pipeline`."""

    __slots__ = ("crossing", "bytes", "producer_name", "consumer_name", "loop", "tuple_role",
                 "inserted_copies", "copy_reasons", "pipeline")

    def __init__(self, producer: Any, consumer: Any, ctx: Any, *, crossing: tuple, bytes: int,
                 producer_name: str, consumer_name: str, loop: str, tuple_role: str,
                 inserted_copies: frozenset, copy_reasons: Any, pipeline: str | None):
        self.producer = producer
        self.consumer = consumer
        self.ctx = ctx
        self.pair = None
        self.budget = None
        self.memo = None
        self.crossing = crossing
        self.bytes = bytes
        self.producer_name = producer_name
        self.consumer_name = consumer_name
        self.loop = loop
        self.tuple_role = tuple_role
        self.inserted_copies = inserted_copies
        self.copy_reasons = copy_reasons
        self.pipeline = pipeline

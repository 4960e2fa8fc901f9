"""What a pass asks its rules about: `Candidate` (the pair), and per pass family a subclass whose
typed slots are the facts the pass hands to the rules.

A rule reads a fact as an attribute (`c.run`, `c.reachable`).  A fact its candidate does not
carry is not an attribute at all, so a rule asked by a pass that does not supply what it needs
fails with AttributeError naming the fact, rather than reading a default.  Facts that are
optional say what None means.  These are plain slotted classes without a dict: one is made per
question, millions on a large module, so each constructor sets the base slots itself instead of
calling `Candidate.__init__` (a call per question saved).

Compiled with the rules and passes (hlofuse.native): every rule reads the pair from its
candidate, and compiled code reads a native class's attributes from the object itself instead
of looking them up by name.  Outside mypyc the `__slots__` give the same shape (no dict, a
misspelt fact is an error).  So the classes stay native, nothing outside this module may
subclass them; the registry (rules/__init__.py, not compiled) re-exports `Candidate`.
"""

from __future__ import annotations

from typing import Any


class Candidate:
    """A pair a pass considers: fuse `producer` into `consumer` (or, for sibling and horizontal
    fusion, `producer` and `consumer` are the two siblings).  `ctx` is the pass context (device,
    options; the explainer for boundary rules).  The facts of each pass family are typed slots of
    a subclass (below).  The other slots here are read by rules every GPU pass asks
    (rules/gpu_fusible.py, the in-place rules):

    `pair`: the two instructions the symmetric shape checks compare, in the order XLA passes
    them (None: (producer, consumer)).
    `budget`: FusionFitsInBudget's (instr1, instr2, is_consumer_producer) (None: (consumer,
    producer, True)).
    `memo`: what several rules derive from the pair, kept by the first that asks (the hero
    compatibility, the in-place analysis); None until then.  Written by rules only."""

    __slots__ = ("producer", "consumer", "ctx", "pair", "budget", "memo")

    def __init__(self, producer: Any, consumer: Any, ctx: Any, pair: Any = None, budget: Any = None):
        self.producer = producer
        self.consumer = consumer
        self.ctx = ctx
        self.pair = pair
        self.budget = budget
        self.memo: dict | None = None

    def __repr__(self) -> str:
        facts = ", ".join(f"{name}={getattr(self, name)!r}" for name in fact_names(type(self))
                          if hasattr(self, name))
        return f"{type(self).__name__}({self.producer!r}, {self.consumer!r}, {facts})"


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

    def __init__(self, producer: Any, consumer: Any, ctx: Any, users: Any, model: Any):
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
                 pair: Any = None, budget: Any = None, parent: Any = None, chosen: Any = None):
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

    def __init__(self, producer: Any, consumer: Any, ctx: Any, xla: Any = None, sliced: Any = False,
                 candidates: Any = (), candidate_ids: Any = None, alone: Any = False):
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

    def __init__(self, producer: Any, consumer: Any, ctx: Any, xla: Any, sliced: Any, *, left: Any,
                 max_batch: Any, accum_outputs: Any, accum_io: Any, accum_cost: Any):
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

    def __init__(self, producer: Any, consumer: Any, ctx: Any, pf: Any, blocking: Any = None,
                 bitcast_user: Any = None, times: Any = None, stale: Any = None):
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

    def __init__(self, producer: Any, consumer: Any, ctx: Any, *, crossing: Any, bytes: Any,
                 producer_name: Any, consumer_name: Any, loop: Any, tuple_role: Any,
                 inserted_copies: Any, copy_reasons: Any, pipeline: Any):
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


#: Each class's facts (its slots and its bases', less the pair and the memo), for repr.  Listed
#: here: a compiled class keeps no `__slots__` to read them from.
_FACTS: dict[str, tuple[str, ...]] = {}


def fact_names(cls: type) -> tuple[str, ...]:
    found = _FACTS.get(cls.__name__)
    if found is None:
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            names += [n for n in _SLOTS.get(klass.__name__, ()) if n not in ("producer", "consumer", "ctx", "memo")]
        found = _FACTS[cls.__name__] = tuple(names)
    return found


_SLOTS: dict[str, tuple[str, ...]] = {
    "Candidate": ("producer", "consumer", "ctx", "pair", "budget", "memo"),
    "FusionCandidate": ("run", "operand_index"),
    "MergerCandidate": ("users", "model"),
    "MofCandidate": ("reachable", "model", "parent", "chosen"),
    "HorizontalCandidate": ("xla", "sliced", "candidates", "candidate_ids", "alone"),
    "SpanCandidate": ("left", "max_batch", "accum_outputs", "accum_io", "accum_cost"),
    "PriorityCandidate": ("pf", "blocking", "bitcast_user", "times", "stale"),
    "BoundaryCandidate": ("crossing", "bytes", "producer_name", "consumer_name", "loop", "tuple_role",
                          "inserted_copies", "copy_reasons", "pipeline"),
}

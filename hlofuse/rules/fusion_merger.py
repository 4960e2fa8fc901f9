"""FusionMerger's rules (xla/service/gpu/transforms/fusion_merger.cc at XLA 76da7301): merge a
loop fusion into *all* of its users, or into none.

Candidates are (producer fusion, one user).  The pass asks the per-user rules user by user,
then the whole-producer rules; a `MergerCandidate`'s `users` holds every user, its `model`
the LegacyPerformanceModel of the computation.  The ordered lists at the end say which rules run
in which stage (docs/xla/legacy-gpu-pipeline.md §5.2).
"""

from __future__ import annotations

from ..gpu import gpu_config
from ..gpu.fusible import is_input_fusible_reduction
from ..gpu.properties import is_custom_fusion
from ..gpu.transposes import transposes_most_data
from . import XLA_COMMITS, Candidate, XlaRef, objection, rule
from .gpu_fusible import BUDGET_RULES, HERO_RULES, producer_consumer_rules

_FILE = "xla/service/gpu/transforms/fusion_merger.cc"
_FUNC = "FusionInstructionMerger::ShouldFuse"
_P = XLA_COMMITS["legacy"]
_PASSES = ("fusion_merger",)
_PIPELINES = ("legacy",)


def _ref(message: str) -> XlaRef:
    return XlaRef(_FILE, _FUNC, message, _P)


@rule(id="FM-NOT-LOOP-FUSION", name="merger-not-loop-fusion", passes=_PASSES, pipelines=_PIPELINES,
      tags={"structure", "reduction", "legality"}, relaxable=False, xla=_ref("not a loop fusion"),
      message="{producer} is a {kind} fusion; only loop fusions are merged into their users")
def not_loop_fusion(c: Candidate):
    """Only kLoop fusions are merged into their users.

    What it checks: the producer fusion's kind is kLoop.
    Why XLA does this: input fusions must stay rooted at their hero (a reduction, a scatter, a
    tiled transpose) and custom fusions match library patterns; neither can be inlined into a
    consumer.
    Example:
        r = f32[64] fusion(x), kind=kInput, calls=reduce_rows
        ROOT n = f32[64] negate(r)
    Relaxing: not possible.
    """
    p = c.producer
    if p.fusion_kind == "kLoop":
        return None
    return objection(producer=p.name, kind=p.fusion_kind or "non-loop")


@rule(id="FM-BITCAST-USER", name="merger-bitcast-user", passes=_PASSES, pipelines=_PIPELINES,
      tags={"bitcast"}, relaxable=True, xla=_ref("not fusing bitcast ops"),
      message="{user} (a bitcast) reads {producer}; the merger does not turn bitcasts into fusions")
def bitcast_user(c: Candidate):
    """The merger does not merge into a bitcast user.

    What it checks: one of the producer's users is a bitcast.
    Why XLA does this: a bitcast is free (a reinterpretation of the buffer); wrapping it in a
    fusion to absorb the producer would turn a no-op into a kernel root.
    Example:
        f = f32[64] fusion(x), kind=kLoop, calls=g
        ROOT b = f32[8,8] bitcast(f)
    Relaxing: a performance trade: the producer's work moves into a fusion rooted at the bitcast.
    """
    if c.consumer.opcode != "bitcast":
        return None
    return objection(producer=c.producer.name, user=c.consumer.name)


@rule(id="FM-CUSTOM-FUSION-USER", name="merger-custom-fusion-user", passes=_PASSES, pipelines=_PIPELINES,
      tags={"custom-call", "legality"}, relaxable=False, xla=_ref("not fusing custom fusions"),
      message="{user} is a custom (library) fusion; nothing is merged into it")
def custom_fusion_user(c: Candidate):
    """Nothing is merged into a custom (library) fusion.

    What it checks: one of the producer's users is a fusion of kind kCustom (cuBLAS, cuDNN,
    Triton GEMM...).
    Why XLA does this: custom fusions match fixed library patterns; extra instructions would
    break the match.
    Example:
        f = f32[64,64] fusion(x), kind=kLoop, calls=g
        ROOT d = f32[64,64] fusion(f, w), kind=kCustom, calls=gemm
    Relaxing: not possible.
    """
    if not is_custom_fusion(c.consumer):
        return None
    return objection(producer=c.producer.name, user=c.consumer.name)


@rule(id="FM-UNCOALESCED-READ", name="merger-uncoalesced-read", passes=_PASSES, pipelines=_PIPELINES,
      tags={"transpose", "layout", "reduction"}, relaxable=True, xla=_ref("would read mostly uncoalesced"),
      message="{producer} transposes {share:.0%} of its output in memory and {user} is a reduction; merged, "
              "the reduction would read it uncoalesced")
def uncoalesced_read(c: Candidate):
    """A reduction user would read a mostly transposing producer uncoalesced.

    What it checks: some user is an input-fusible reduction and physically transposing ops
    (copies, non-bitcast transposes) of the producer cover at least half its output.
    Why XLA does this: the reduction emitter's memory accesses are tuned for its input layout;
    reading through a transpose would make them strided.
    Example:
        f = f32[64,128]{0,1} fusion(x), kind=kLoop, calls=copy_transposing
        ROOT r = f32[64] fusion(f), kind=kInput, calls=reduce
    Relaxing: a performance trade: the merged reduction reads uncoalesced memory.
    """
    cfg = gpu_config(c.ctx)
    users = c.users or [c.consumer]
    reducer = next((u for u in users if is_input_fusible_reduction(u, cfg)), None)
    if reducer is None:
        return None
    most, share = transposes_most_data(c.producer)
    if not most:
        return None
    return objection(producer=c.producer.name, user=reducer.name, share=share)


@rule(id="FM-HUGE-IR", name="merger-huge-ir", passes=_PASSES, pipelines=_PIPELINES,
      tags={"compile-time", "duplication"}, relaxable=True,
      xla=_ref("if merged with {user} will generate huge IR"),
      message="merged into {user}, {producer}'s code would be emitted {replication} times: {merged} IR "
              "instructions (limit 10000{splits_note})")
def huge_ir(c: Candidate):
    """Merging would make the user's emitted IR too large.

    What it checks: ProducerConsumerMergedTooLarge: the producer's IR size times how often the
    user emits its parameter for the producer, plus the user's own IR size, exceeds 10000
    (with the pre-MLIR emitters, `xla_gpu_mlir_emitter_level` < 4, also more than 10 basic-block
    splits, each doubling the size).
    Why XLA does this: the elemental emitter duplicates the producer's code per use; huge
    kernels compile very slowly.
    Example:
        a user fusion that reads its parameter through 100 different slices, merged with a
        producer of 200 instructions
    Relaxing: a compile-time trade: the kernel is huge and slow to compile, not wrong.
    """
    model = c.model
    too_large, merged, splits = model.merged_too_large(c.producer, c.consumer)
    if not too_large:
        return None
    replication = 1
    if c.consumer.opcode == "fusion":
        replication = int(model.analysis.fused_ir_size(c.consumer, c.consumer.operand_index(c.producer)))
    note = f"; {splits} basic-block splits" if model.cfg.mlir_emitter_level < 4 else ""
    return objection(producer=c.producer.name, user=c.consumer.name, merged=merged, replication=replication,
                     splits=splits, splits_note=note)


@rule(id="FM-SLOWER-IF-FUSED", name="merger-slower-if-fused", passes=_PASSES, pipelines=_PIPELINES,
      tags={"cost-model", "duplication"}, relaxable=True, xla=_ref("will execute slower if fused"),
      message="merging {producer} into its {n_users} users is modelled slower: {fused_us:.3f} us fused vs "
              "{unfused_us:.3f} us unfused{dominant_words}")
def slower_if_fused(c: Candidate):
    """XLA's performance model says the merged kernels would run slower.

    What it checks: GpuPerformanceModel::EstimateRunTimes: unfused = the producer's kernel, one
    launch per user and the users reading its output; fused = one launch per user and the
    producer recomputed inside each user (its reads repeated as often as the user reads it).
    Refused when fused > unfused.
    Why XLA does this: merging saves a launch and a round trip through memory, but duplicates
    the producer's work and reads in every user; for expensive producers or users that read
    each element many times (a broadcast) that is slower.
    Example:
        f = f32[1024] fusion(x), kind=kLoop, calls=expensive      # exp, log...
        ROOT u = f32[1024,1024] fusion(f), kind=kLoop, calls=broadcast_then_add
    Relaxing: a performance trade: the model predicts the merged kernels run slower.
    """
    if _concatenate_with_users(c) is not None:
        return None  # reported by FM-CONCAT-SLOWER-IF-FUSED
    return _slower(c)


def _slower(c: Candidate) -> dict | None:
    model = c.model
    users = c.users or [c.consumer]
    if not hasattr(model, "estimate_run_time_terms"):  # (another model: priced again for its terms)
        times = model.estimate_run_times(c.producer, users)
        if times.fused <= times.unfused:
            return None
        from ..cost.terms import cost_facts

        return objection(producer=c.producer.name, n_users=len(users), fused_us=times.fused_us,
                         unfused_us=times.unfused_us, **cost_facts(model, c.producer, users, times=times))
    found = model.estimate_run_time_terms(c.producer, users)
    times = found.times
    if times.fused <= times.unfused:
        return None
    from ..cost.terms import legacy_terms, terms_facts

    return objection(producer=c.producer.name, n_users=len(users), fused_us=times.fused_us,
                     unfused_us=times.unfused_us, **terms_facts(legacy_terms(found), c.producer.name, times))


def _concatenate_with_users(c: Candidate):
    """The concatenate a loop fusion with several users is built around (its hero), if any."""
    from ..gpu.heroes import find_non_trivial_hero

    p = c.producer
    users = c.users or [c.consumer]
    if p.fused is None or len(users) < 2:
        return None
    hero = find_non_trivial_hero(p.fused.root, gpu_config(c.ctx))
    return hero if hero.opcode == "concatenate" else None


@rule(id="FM-CONCAT-SLOWER-IF-FUSED", name="merger-concat-slower-if-fused", passes=_PASSES, pipelines=_PIPELINES,
      tags={"concat", "cost-model", "duplication"}, relaxable=True, xla=_ref("will execute slower if fused"),
      message="{producer} is a concatenate kernel ({concat}) read by {n_users} users; recomputing it in each is "
              "modelled slower: {fused_us:.3f} us fused vs {unfused_us:.3f} us unfused{dominant_words}")
def concat_slower_if_fused(c: Candidate):
    """A concatenate kernel with several users is not merged into them (cost model).

    What it checks: the producer is a loop fusion whose hero is a concatenate, it has several
    users, and XLA's performance model says recomputing it in every user is slower (the same
    test as merger-slower-if-fused, named apart for concatenates; XLA's concatenate costs 400
    flops per element when it joins along a minor dimension not aligned to 32).
    Why XLA does this: merging duplicates the concatenate's work and reads in each user.  This
    is the situation of the paper's cart-pole simulator (Snider & Liang): the packed state,
    a concatenate, read by the done test and by the reset, stays a kernel of its own.
    Example:
        s = f32[2048,4] fusion(x, xd, t, td), kind=kLoop, calls=concatenate_state
        r = pred[2048] fusion(s), kind=kInput, calls=any_over_limits
        ROOT n = f32[2048,4] fusion(r, reset, s), kind=kLoop, calls=select
    Relaxing: a performance trade (in the spirit of the paper's change to XLA): the
    concatenate is recomputed inside each user instead of being written to memory once.
    """
    concat = _concatenate_with_users(c)
    if concat is None:
        return None
    found = _slower(c)
    if found is None:
        return None
    return objection(concat=concat.name, **found)


def per_user_rules() -> tuple[str, ...]:
    """Asked for each user in turn: bitcast, custom fusion, heroes, IsProducerConsumerFusible."""
    return ("FM-BITCAST-USER", "FM-CUSTOM-FUSION-USER") + HERO_RULES + producer_consumer_rules()


#: The stages of FusionInstructionMerger::ShouldFuse: (rules, asked per user?).
def stages() -> tuple[tuple[tuple[str, ...], bool], ...]:
    return (
        (("FM-NOT-LOOP-FUSION",), False),
        (per_user_rules(), True),
        (("FM-UNCOALESCED-READ",), False),
        (BUDGET_RULES, True),
        (("FM-HUGE-IR",), True),
        (("FM-CONCAT-SLOWER-IF-FUSED", "FM-SLOWER-IF-FUSED"), False),
    )

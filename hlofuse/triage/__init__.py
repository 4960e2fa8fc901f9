"""Triage: what each kernel and each kernel boundary costs, the boundaries grouped by cause and
ranked by cost, and what a fix would gain for this program.

The last step of `explain`, over a finished Explanation:

  1. price (pricing.py, targets.py): every kernel's modelled time on the program's machine
     (XLA:GPU's performance model for the `--gpu` spec, in the pipeline's era; a roofline for
     the CPU), times how often it runs; every boundary's cost (the value written and read back,
     the launch it adds), per run;
  2. group (groups.py): boundaries by (rule, source line), ranked by modelled time, with their
     share of the program's;
  3. predict (fixes.py, gains.py): for a group whose rule is relaxable, the replay run again
     with the rule relaxed and priced (kernels, launches and time, after minus before); for a
     hint, what its change would gain here (an XLA option by replaying with it; a change to
     the program from the priced kernels and boundaries).

Library use (e.g. to compare two compiles of one program):

    from hlofuse.triage import price_module, target_for
    cost = price_module(fused_module, target_for("gpu", "priority", "h100_sxm"))
    cost.total_us, cost.launches, cost.kernels[0].us_per_run
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from .fixes import Variant, flag_variant, predict_changes, relax_variant
from .groups import Change, Group, group_boundaries
from .pricing import BoundaryCost, KernelCost, ModuleCost, price_boundaries, price_module
from .targets import CpuRoofline, GpuTarget, target_for

__all__ = [
    "BoundaryCost", "Change", "CpuRoofline", "GpuTarget", "Group", "KernelCost", "ModuleCost", "PREDICT_MAX_INSTRUCTIONS",
    "TriageOptions", "Variant", "group_boundaries", "price_boundaries", "price_module", "target_for", "triage",
]

#: Without --predict/--no-predict, fixes are predicted (one replay per relaxable rule) when the
#: module before fusion has at most this many instructions and the replays are modelled to take
#: at most PREDICT_BUDGET_SECONDS one after another.  The model is a fixed cost per instruction
#: (REPLAY_US_PER_INSTRUCTION), not the time this machine took: the same input gets the same
#: explanation on any machine at any load.
PREDICT_MAX_INSTRUCTIONS = 20_000
PREDICT_BUDGET_SECONDS = 60.0
#: CPU µs per instruction of a replay, by pipeline: bench/replay_speed.py at 100k instructions on
#: the 2-core development machine (2026-11-25), rounded up.
REPLAY_US_PER_INSTRUCTION = {"priority": 330.0, "legacy": 230.0, "cpu": 90.0}


@dataclass(frozen=True)
class TriageOptions:
    """`predict`: replay relaxable rules and XLA options to predict fixes (None: when the
    module before fusion is at most PREDICT_MAX_INSTRUCTIONS); `cpu`: the CPU roofline
    (None: the defaults); `jobs`: processes for the predictions (None: the idle cores);
    `predict_top`: for the costliest groups only."""

    predict: bool | None = None
    cpu: CpuRoofline | None = None
    jobs: int | None = None
    #: Predict the relaxable rules and XLA options of the `predict_top` costliest groups only
    #: (None: of every group): each distinct rule costs a replay.
    predict_top: int | None = 10


def triage(ex, options: TriageOptions = TriageOptions(), xla_flags: tuple[str, ...] = ()):
    """The explanation with its kernels and boundaries priced, its groups, and predictions."""
    target = target_for(ex.backend, ex.pipeline, ex.gpu, options.cpu)
    if target is None or ex.fused_module is None:
        groups = group_boundaries(ex.boundaries, {c.name: c.runs or 1 for c in ex.computations}, None)
        return replace(ex, groups=tuple(groups), predictions="no cost model for this backend")
    program = ex.fused_program if ex.fused_program is not None and ex.fused_program.entry is not None else None
    cost = price_module(ex.fused_module, target, program)
    if program is not None:
        program.dispose()  # nothing asks the explainer's graph after this: free it now, cycles and all
    kernels = []
    for k in ex.kernels:
        priced = cost.kernel(k.computation, k.name)
        kernels.append(k if priced is None else replace(k, modelled_us=priced.us, launches=priced.launches,
                                                         priced_by=priced.priced_by))
    costs = price_boundaries(ex.boundaries, cost, target)
    boundaries = [replace(b, modelled_us=c.us, cost=c) for b, c in zip(ex.boundaries, costs)]
    groups = group_boundaries(boundaries, cost.runs, cost.total_us)
    start = time.perf_counter()
    changes, status = _predict(ex, groups, boundaries, cost, target, options, xla_flags)
    took = time.perf_counter() - start if changes else None
    groups, boundaries = _with_predictions(ex, groups, boundaries, cost, changes)
    return replace(ex, kernels=tuple(kernels), boundaries=tuple(boundaries), groups=tuple(groups), cost=cost,
                   predictions=status, prediction_seconds=took, fused_program=None)


def _predict(ex, groups, boundaries, cost, target, options: TriageOptions, xla_flags) -> tuple[dict, str]:
    """Replays for the relaxable rules and XLA options the groups ask about."""
    variants: dict[str, Variant] = {}
    for g in groups if options.predict_top is None else groups[:options.predict_top]:
        if g.relaxable and g.rule:
            v = relax_variant(g.rule)
            variants.setdefault(v.basis, v)
        hint = _hint_of(boundaries, g)
        if hint is not None and hint.kind == "xla-flag":
            v = flag_variant(hint.facts["flag"])
            variants.setdefault(v.basis, v)
    if not variants:
        return {}, "nothing to predict: no relaxable rule or XLA option decided a boundary"
    result = ex.replay_result
    if result is None:
        return {}, "not predicted: no replay behind this explanation"
    size = sum(len(c.instructions) for c in result.input.computations)
    if options.predict is False:
        return {}, f"not predicted (--no-predict): {len(variants)} replay(s) would be needed"
    if options.predict is None and size > PREDICT_MAX_INSTRUCTIONS:
        return {}, (f"not predicted: the module before fusion has {size:,} instructions (more than "
                    f"{PREDICT_MAX_INSTRUCTIONS:,}); --predict replays it {len(variants)} more time(s)")
    if options.predict is None:
        each = modelled_replay_seconds(size, ex.pipeline)
        expected = len(variants) * each
        if expected > PREDICT_BUDGET_SECONDS:
            return {}, (f"not predicted: {len(variants)} replay(s) of about {each:.0f} s each would "
                        f"take about {expected:.0f} s; --predict runs them")
    baseline = cost if ex.stage == "replayed" else None
    changes = predict_changes(result, tuple(xla_flags), target, list(variants.values()), baseline, options.jobs)
    which = "every group" if options.predict_top is None or options.predict_top >= len(groups) else \
        f"the {options.predict_top} costliest groups"
    return changes, f"predicted for {which} by {len(variants)} replay(s)"


def modelled_replay_seconds(instructions: int, pipeline: str | None) -> float:
    """What one replay of a module of `instructions` instructions is modelled to take (CPU
    seconds on the development machine; the costliest pipeline when the pipeline is unknown)."""
    us = REPLAY_US_PER_INSTRUCTION.get(pipeline or "", max(REPLAY_US_PER_INSTRUCTION.values()))
    return instructions * us / 1e6


def _with_predictions(ex, groups, boundaries, cost, changes):
    """Groups with their fix (relaxed replay) and their hint's predicted change; each hinted
    boundary's hint says the prediction of its group."""
    from .gains import hint_change

    out = []
    words_of: dict[int, str] = {}
    by_hint: dict[tuple, object] = {}
    for g in groups:
        fix = changes.get(f"relax:{g.rule}") if g.relaxable else None
        hint = _hint_of(boundaries, g)
        hint_fix = None
        text = g.hint
        if hint is not None:
            if hint.kind == "xla-flag":
                hint_fix = changes.get(f"flag:{hint.facts['flag']}")
            elif hint.kind == "packed-state":
                hint_fix = hint_change(hint, ex, boundaries, cost, g.boundaries)
            else:  # a loop's hint: the same change for every group it holds
                key = (hint.kind, tuple(sorted(hint.facts.items())))
                if key not in by_hint:
                    by_hint[key] = hint_change(hint, ex, boundaries, cost, g.boundaries)
                hint_fix = by_hint[key]
            text = hint.words(hint_fix.words(cost.total_us) if hint_fix is not None else None)
            for i in g.boundaries:
                if boundaries[i].hint_kind == hint.kind:
                    words_of[i] = text
        out.append(replace(g, fix=fix, hint=text, hint_fix=hint_fix))
    if words_of:
        boundaries = [replace(b, hint=words_of[i]) if i in words_of else b for i, b in enumerate(boundaries)]
    return out, boundaries


def _hint_of(boundaries, group: Group):
    for i in group.boundaries:
        detail = boundaries[i].hint_detail
        if detail is not None:
            return detail
    return None

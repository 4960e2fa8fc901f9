"""Boundaries that exist in one compile only, and what the other compile did with the same two
instructions.

A boundary is keyed by its producer's and consumer's instruction keys (keys.py) and where it
crosses; the boundaries of each key are counted on both sides, and those one side has more of
are that side's own.  For each, the other side is asked: are producer and consumer one kernel
there (and which of its replay's decisions fused them: the pass, the rule relaxed, the cost
model's numbers), in two kernels that the value does not cross between this way, or absent?
"""

from __future__ import annotations

from collections import defaultdict

from ..decision import Verdict
from .records import APART, FUSED, MISSING, BoundaryChange, OtherSide
from .side import SideIndex


def one_sided(a: SideIndex, b: SideIndex) -> tuple[tuple[BoundaryChange, ...], tuple[BoundaryChange, ...]]:
    """(added: the boundaries of B that A has not, removed: those of A that B has not), each
    largest first (bytes per run)."""
    keyed_a, keyed_b = _keyed(a), _keyed(b)
    added, removed = [], []
    for key in list(keyed_a) + [k for k in keyed_b if k not in keyed_a]:
        in_a, in_b = keyed_a.get(key, []), keyed_b.get(key, [])
        for boundary in in_a[len(in_b):]:
            removed.append(_change("a", boundary, key, a, b))
        for boundary in in_b[len(in_a):]:
            added.append(_change("b", boundary, key, b, a))
    return _largest_first(added), _largest_first(removed)


def _keyed(side: SideIndex) -> dict[tuple, list]:
    out: dict[tuple, list] = defaultdict(list)
    for boundary in side.ex.boundaries:
        out[side.boundary_key(boundary)].append(boundary)
    return out


def _largest_first(changes: list[BoundaryChange]) -> tuple[BoundaryChange, ...]:
    return tuple(sorted(changes, key=lambda c: -(c.bytes_per_run if c.bytes_per_run is not None
                                                 else c.boundary.bytes)))


def _change(side: str, boundary, key: tuple, own: SideIndex, other: SideIndex) -> BoundaryChange:
    runs = own.runs(boundary.consumer_computation)
    per_run = boundary.bytes * runs if runs is not None else None
    return BoundaryChange(side, boundary, per_run, other_account(boundary, own, other, "B" if side == "a" else "A"),
                          key)


def other_account(boundary, own: SideIndex, other: SideIndex, name: str) -> OtherSide:
    """What `other` (called `name`) did with the producer and consumer of `boundary`."""
    producer, consumer = own.producer_key(boundary), own.key(boundary.consumer)
    there = other.near(producer)
    if there is None:
        what = producer.short() if producer is not None else boundary.producer
        return OtherSide(MISSING, f"{name} has no {what} in a kernel (the modules differ there)")
    producer, consumer = there, other.near(consumer) or consumer
    kernels_p = other.kernels_of[producer]
    if boundary.consumer_kernel is None or consumer is None:
        where = ", ".join(n for _, n in kernels_p[:3])
        return OtherSide(APART, f"in {name}, {producer.short()} is computed in {where} and reaches "
                                f"{boundary.consumer} another way")
    kernels_c = other.kernels_of.get(consumer)
    if not kernels_c:
        return OtherSide(MISSING, f"{name} has no {consumer.short()} in a kernel (the modules differ there)")
    common = [k for k in kernels_p if k in kernels_c]
    if common and boundary.crossing:  # across iterations or calls: one kernel there is no fusion
        return OtherSide(APART, f"in {name} both are computed in {common[0][1]}, and the value does not cross "
                                f"there as a {'/'.join(boundary.crossing)} boundary")
    if common:
        kernel = common[0][1]
        decision = fusing_decision(other, producer, consumer)
        return OtherSide(FUSED, f"in {name} they are one kernel, {kernel}" + _by(decision), kernel, decision)
    between = _between(other, kernels_p, kernels_c)
    if between is not None:  # the same two kernels apart there, by another value or path
        return OtherSide(APART, f"in {name} they are in different kernels too ({between.producer_kernel} and "
                                f"{between.consumer_kernel}), kept apart by {own_account(between)}",
                         boundary=between)
    return OtherSide(APART, f"in {name} they are in different kernels ({kernels_p[0][1]} and {kernels_c[0][1]}) "
                            "and the value crosses between them another way")


def _between(side: SideIndex, producers: list, consumers: list):
    """A boundary of `side` from one of `producers` to one of `consumers` (kernel ids)."""
    from_p = {name for _, name in producers}
    to_c = {name for _, name in consumers}
    return next((b for b in side.ex.boundaries if b.producer_kernel in from_p and b.consumer_kernel in to_c), None)


def fusing_decision(side: SideIndex, producer, consumer):
    """The side's replay's first decision that fused an instruction keyed `producer` with one
    keyed `consumer`; None without a replay or when none did (XLA's kernels and the replay's
    differ there)."""
    replay = side.ex.replay_result
    if replay is None or side.replay_keys is None:
        return None
    keys = side.replay_keys
    for d in replay.decisions:
        if d.verdict not in (Verdict.FUSED, Verdict.RELAXED):
            continue
        before = d.producer_members or (d.producer,)
        after = d.consumer_members or (d.consumer,)
        if any(keys.key(n) == producer for n in before) and any(keys.key(n) == consumer for n in after):
            return d
    return None


def _by(decision) -> str:
    if decision is None:
        return ""
    words = f": fused by {decision.pass_name}"
    if decision.relaxed:
        words += f" (with {', '.join(decision.relaxed)} relaxed)"
    facts = decision.facts or {}
    fused, unfused = facts.get("fused_us"), facts.get("unfused_us")
    if isinstance(fused, (int, float)) and isinstance(unfused, (int, float)):
        words += f", the cost model: fused {_us(fused)} vs unfused {_us(unfused)}"
    return words


def own_account(boundary) -> str:
    """Why the boundary's own side kept the two apart, in a few words: the cost model's
    numbers when it refused, else the pass, the rule and its reason."""
    rule = f"{boundary.rule} ({boundary.decided_in})" if boundary.decided_in else boundary.rule
    return f"{rule}: {own_reason(boundary)}"


def own_reason(boundary) -> str:
    """The boundary's reason: the cost model's two numbers when it refused, else its sentence."""
    facts = boundary.facts or {}
    fused, unfused = facts.get("fused_us"), facts.get("unfused_us")
    if isinstance(fused, (int, float)) and isinstance(unfused, (int, float)) and fused > unfused:
        return f"the cost model refused it: fused {_us(fused)} vs unfused {_us(unfused)}"
    return boundary.reason


def _us(value: float) -> str:
    from ..render.table import _us as duration

    return duration(value)

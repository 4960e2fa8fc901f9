"""What a hint's change to the program would gain, computed for this program from its priced
kernels and boundaries (no replay: the changed program is not there to replay).

  rng-in-loop   precomputing the random numbers moves the loop's RNG kernels before the
                loop: the same work in one launch each instead of one per iteration, so the
                gain is those launches (launch overhead × (launches per run − runs of the
                loop's computation));
  packed-state  with the variables as separate arrays the concatenate's value is never
                materialised: the gain is the modelled cost of every boundary carrying it
                (writing it, reading it back, the launches those boundaries add);
  unroll        unrolled k times, the body's kernels launch once per k steps, and the state
                crosses iterations once per k steps: the gain is the launches saved and that
                share of the loop-carried boundaries' cost (an upper bound: it assumes XLA
                fuses each kernel with its copies of the other steps).
XLA options (xla-flag hints) are predicted by replaying with the option (fixes.py).
"""

from __future__ import annotations

import math

from ..hints import RNG_WORDS
from .groups import Change
from .pricing import ModuleCost


def hint_change(hint, ex, boundaries, cost: ModuleCost, members: tuple[int, ...]) -> Change | None:
    """The predicted Change of `hint` (a hints.Hint of the group whose boundary indices are
    `members`), or None for hints predicted elsewhere (xla-flag)."""
    loops = {lp.name: lp for lp in ex.loops}
    if hint.kind == "rng-in-loop":
        return _rng(ex, cost, loops.get(hint.facts.get("loop")))
    if hint.kind == "packed-state":
        return _packed(boundaries, members, cost)
    if hint.kind == "unroll":
        return _unroll(boundaries, cost, loops.get(hint.facts.get("loop")), hint.facts.get("unroll", 1))
    return None


def _rng(ex, cost: ModuleCost, loop) -> Change | None:
    if loop is None:
        return None
    outer = cost.runs.get(loop.computation, 1)
    saved = 0
    us = 0.0
    for k in ex.kernels:
        if k.computation not in (loop.body, loop.condition) or not _is_rng_kernel(ex.fused_module, k):
            continue
        priced = cost.kernel(k.computation, k.name)
        if priced is None:
            continue
        extra = max(priced.launches - outer, 0)
        saved += extra
        us += priced.launch_us * extra
    return Change("hint:rng-in-loop", -us, 0, -saved, cost.total_us)


def _packed(boundaries, members, cost: ModuleCost) -> Change:
    values = {(boundaries[i].producer_computation, boundaries[i].producer_kernel, tuple(boundaries[i].output))
              for i in members}
    us = sum(b.modelled_us or 0.0 for b in boundaries
             if (b.producer_computation, b.producer_kernel, tuple(b.output)) in values)
    return Change("hint:packed-state", -us, None, None, cost.total_us)


def _unroll(boundaries, cost: ModuleCost, loop, k: int) -> Change | None:
    if loop is None or not loop.trip_count or k < 2:
        return None
    outer = cost.runs.get(loop.computation, 1)
    trip = loop.trip_count
    kept = math.ceil(trip / k)
    saved_launches = loop.kernels_per_iteration * (trip - kept) * outer
    launch_us = next((kc.launch_us for kc in cost.kernels if kc.computation == loop.body), 0.0)
    crossing_us = sum(b.modelled_us or 0.0 for b in boundaries
                      if b.consumer_computation in (loop.body, loop.condition)
                      and ("loop-carried" in b.crossing or (b.consumer_kernel is None and not b.crossing)))
    us = saved_launches * launch_us + crossing_us * (trip - kept) / trip
    return Change("hint:unroll", -us, None, -saved_launches, cost.total_us, upper_bound=True)


def _is_rng_kernel(module, kernel) -> bool:
    """Whether a kernel generates random numbers: an RNG library call, an rng op, or an op
    JAX's PRNG named."""
    if kernel.library and "RNG" in kernel.library:
        return True
    if module is None:
        return False
    from .. import attributes

    comp = module.by_name.get(kernel.computation)
    instr = comp[kernel.name] if comp is not None and kernel.name in comp else None
    if instr is None:
        return False
    inside = [instr]
    if instr.opcode == "fusion" and instr.fused_computation in module.by_name:
        inside = list(module[instr.fused_computation].instructions)
    for i in inside:
        if i.opcode in ("rng", "rng-bit-generator"):
            return True
        op_name = attributes.metadata(i).op_name or ""
        if any(word in op_name for word in RNG_WORDS):
            return True
    return False

"""Compare the fusion plans of two compiles of a program: which kernels are the same, split,
merged, added or removed, which kernel boundaries exist on one side only and what the other
side decided for the same pair, and the totals of each side as `explain` prints them.

Pure functions from two explanations to a `Diff`; nothing here prints.  The flow:

  1. each side is indexed by what its instructions compute (`keys`, `side`): the user's source
     location, op name and opcode, so that names XLA numbered differently still match;
  2. kernels are matched by the instructions they cover (`kernels`);
  3. boundaries are matched by their producer's and consumer's keys; each one-sided boundary
     is given the other side's account of the same pair (`boundaries`);
  4. the totals, their differences and the headline (`headline`).
"""

from __future__ import annotations

from .boundaries import one_sided
from .headline import headline
from .kernels import match_kernels
from .records import (ADDED, APART, CHANGED, CHANGED_KIND, FUSED, MERGED, MISSING, REGROUPED, REMOVED, SAME, SPLIT,
                      STATUSES, BoundaryChange, Diff, KernelMatch, KernelRef, OtherSide, Totals, delta)
from .side import SideIndex

__all__ = [
    "ADDED", "APART", "CHANGED", "CHANGED_KIND", "FUSED", "MERGED", "MISSING", "REGROUPED", "REMOVED", "SAME", "SPLIT",
    "STATUSES", "BoundaryChange", "Diff", "KernelMatch", "KernelRef", "OtherSide", "Totals", "compare", "delta",
]


def compare(a, b, a_options=None, b_options=None) -> Diff:
    """Compare two ExplainReports (A, the reference, and B); the options are what was applied
    to each side ({"relax": ..., "xla_flags": ...}), for the record."""
    side_a, side_b = SideIndex(a.explanation), SideIndex(b.explanation)
    totals_a, totals_b = side_a.totals(), side_b.totals()
    kernels = match_kernels(side_a, side_b)
    added, removed = one_sided(side_a, side_b)
    changes = tuple(sorted(added + removed, key=lambda c: -(c.bytes_per_run if c.bytes_per_run is not None
                                                            else c.boundary.bytes)))
    notes = []
    if totals_a.target != totals_b.target and totals_a.target and totals_b.target:
        notes.append(f"A and B are priced by different models (A: {totals_a.target}; B: {totals_b.target}): "
                     "the modelled difference includes the change of model")
    stages = {"fused": "XLA's kernels", "replayed": "hlofuse's replay"}
    if a.explanation.stage != b.explanation.stage:
        notes.append(f"A is {stages.get(a.explanation.stage, a.explanation.stage)} and B "
                     f"{stages.get(b.explanation.stage, b.explanation.stage)}: XLA's final module also has what "
                     "passes after fusion add (copies of loop state), which a replay of the fusion passes has not")
    return Diff(a, b, totals_a, totals_b, kernels, added, removed, headline(totals_a, totals_b, changes, kernels),
                tuple(notes), dict(a_options or {}), dict(b_options or {}))

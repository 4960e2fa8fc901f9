"""The records a comparison of two explained compiles is made of (frozen dataclasses; the
renderers read only these)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

# How a kernel of one side relates to the other side's (kernels.py).
SAME = "same"  # one kernel each side, computing the same instructions, of the same kind
CHANGED_KIND = "changed-kind"  # the same instructions, another kind of kernel (loop → input fusion)
CHANGED = "changed"  # one kernel each side, computing partly different instructions
SPLIT = "split"  # one kernel of A is several of B
MERGED = "merged"  # several kernels of A are one of B
REGROUPED = "regrouped"  # several of A and several of B share instructions
ADDED = "added"  # a kernel of B whose instructions A has no kernel for
REMOVED = "removed"  # a kernel of A whose instructions B has no kernel for
STATUSES = (SAME, CHANGED_KIND, CHANGED, SPLIT, MERGED, REGROUPED, ADDED, REMOVED)

# What the other side did with the two instructions of a one-sided boundary (boundaries.py).
FUSED = "fused"  # one kernel there, with the replay's decision that fused them when found
APART = "apart"  # both there, in different kernels, but not as this boundary (traced otherwise)
MISSING = "missing"  # the other side's program has no such producer or consumer


@dataclass(frozen=True)
class Totals:
    """One side's totals, as `explain` prints them for that input."""

    kernels: int
    launches_per_run: int | None
    boundaries: int
    bytes_per_run: int | None  # across kernel boundaries, each as often as its consumer runs
    modelled_us_per_run: float | None
    target: str | None  # what priced it (the triage's target description)


@dataclass(frozen=True)
class KernelRef:
    """One kernel of one side, as a comparison lists it."""

    name: str
    label: str  # "loop fusion", "library call (cuBLAS GEMM)", ...
    computation: str
    launches: int | None
    modelled_us: float | None  # one launch
    source: Any  # explain.SourceRef | None


@dataclass(frozen=True)
class KernelMatch:
    """Kernels of A and of B that compute the same instructions of the program (a connected
    group of shared instruction keys), and how they relate."""

    status: str  # one of STATUSES
    a: tuple[KernelRef, ...]
    b: tuple[KernelRef, ...]
    shared: int  # instruction keys both sides compute in these kernels
    only_a: int  # instruction keys only A's kernels compute
    only_b: int
    #: Matched by opcode and op name only (their source lines differ: a source change).
    loose: bool = False
    #: A kernel of one side whose instructions the other side computes inside its kernels
    #: (duplicated into them, or split out of them): the other side's kernels listed are the
    #: hosts, which have their own matches too.
    hosts: bool = False

    def launches(self, side: str) -> int | None:
        refs = self.a if side == "a" else self.b
        if any(r.launches is None for r in refs):
            return None
        return sum(r.launches for r in refs)


@dataclass(frozen=True)
class OtherSide:
    """What the other compile did with a one-sided boundary's producer and consumer."""

    status: str  # FUSED | APART | MISSING
    text: str  # in words, naming the other side
    kernel: str | None = None  # FUSED: the kernel holding both
    decision: Any = None  # FUSED: the replay's decision.Decision that fused them, when found
    boundary: Any = None  # APART: a boundary of the other side between the same two kernels


@dataclass(frozen=True)
class BoundaryChange:
    """A boundary that exists on one side only: `side` "a" (removed in B) or "b" (added in B),
    explain's Boundary of that side, what it moves per run, and the other side's account."""

    side: str
    boundary: Any  # explain.Boundary
    bytes_per_run: int | None
    other: OtherSide
    key: tuple = ()


@dataclass(frozen=True)
class Diff:
    """Two explained compiles compared: A's and B's explanations (ExplainReports) and totals,
    the kernels matched, the boundaries on one side only (largest first), the headline."""

    a: Any  # api.ExplainReport
    b: Any
    a_totals: Totals
    b_totals: Totals
    kernels: tuple[KernelMatch, ...]
    added: tuple[BoundaryChange, ...]  # in B only
    removed: tuple[BoundaryChange, ...]  # in A only
    headline: str
    notes: tuple[str, ...] = ()
    #: What was applied to each side beyond its input: {"relax": (...), "xla_flags": (...)}.
    a_options: Mapping[str, tuple] = field(default_factory=dict)
    b_options: Mapping[str, tuple] = field(default_factory=dict)

    @property
    def changes(self):
        """The boundaries on one side only as a pandas DataFrame (the columns of `--csv`)."""
        from ..render.diff_rows import changes_frame

        return changes_frame(self)

    def _repr_html_(self) -> str:
        from ..render.diff_html import render_diff_html

        return render_diff_html(self)

    def to_dict(self) -> dict:
        """What `hlofuse diff --json` prints (schema "hlofuse.diff/1")."""
        from ..render.diff_json import diff_dict

        return diff_dict(self)

    def count(self, status: str) -> int:
        return sum(1 for m in self.kernels if m.status == status)

    @property
    def unchanged(self) -> bool:
        return not self.added and not self.removed and all(m.status == SAME for m in self.kernels)

    def largest(self, n: int = 5) -> tuple[BoundaryChange, ...]:
        """The largest buffers a boundary materialises on one side only, per run."""
        changes = list(self.added) + list(self.removed)
        return tuple(sorted(changes, key=lambda c: -(c.bytes_per_run or c.boundary.bytes))[:n])


def delta(a, b):
    """b - a, None when either is unknown or not finite (a launch count past what a float
    holds is priced as infinite time)."""
    if a is None or b is None:
        return None
    if isinstance(a, float) and not math.isfinite(a) or isinstance(b, float) and not math.isfinite(b):
        return None
    return b - a

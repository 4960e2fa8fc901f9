"""Boundaries grouped by cause — the rule that keeps the kernels apart and the line of the
user's program that made the value — and ranked by what they cost per run.

A group's figures are sums over its boundaries (so the groups add up to the boundary list):
`count`, `bytes` (each boundary once), `bytes_per_run` (as often as the consumer runs) and
`modelled_us` (per run, pricing.py); `share` is that time over the program's whole modelled
time per run.  Groups are sorted by modelled time, then bytes per run, then count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class Change:
    """A predicted change of the program's modelled time: relaxing a rule in the replay
    (`basis` relax:RULE), an XLA option (flag:...), or a change to the program a hint
    suggests (hint:KIND).  Deltas are after minus before; negative time is a gain."""

    basis: str
    modelled_us_delta: float | None
    kernels_delta: int | None = None
    launches_delta: int | None = None
    baseline_us: float | None = None
    error: str | None = None
    #: Seconds the prediction took (a replay and its pricing), where it needed one.
    seconds: float | None = None
    #: Whether the prediction is a bound (the most the change can gain), not an estimate.
    upper_bound: bool = False

    @property
    def worse(self) -> bool | None:
        return None if self.modelled_us_delta is None else self.modelled_us_delta > 0

    @property
    def ratio(self) -> float | None:
        """Modelled time before over after (above 1: faster)."""
        if self.modelled_us_delta is None or not self.baseline_us:
            return None
        after = self.baseline_us + self.modelled_us_delta
        return self.baseline_us / after if after > 0 else None

    def to_dict(self) -> dict:
        return {"basis": self.basis, "kernels_delta": self.kernels_delta, "launches_delta": self.launches_delta,
                "modelled_us_delta": _r(self.modelled_us_delta), "worse": self.worse,
                "speedup": _r(self.ratio), "upper_bound": self.upper_bound, "error": self.error}

    def words(self, total_us: float | None) -> str:
        """"-12.3 µs per run (8.1% of the modelled time), 100 launches fewer"."""
        if self.error:
            return f"not predicted ({self.error})"
        if self.modelled_us_delta is None:
            return "not predicted"
        delta = self.modelled_us_delta
        parts = [f"{'up to ' if self.upper_bound else ''}{_signed(delta)} µs per run"]
        if total_us:
            parts[0] += f" ({abs(delta) / total_us:.1%} {'slower' if delta > 0 else 'faster'})" \
                if abs(delta) / total_us >= 0.0005 else " (no change)"
        if self.kernels_delta:
            parts.append(f"{abs(self.kernels_delta)} kernel(s) {'more' if self.kernels_delta > 0 else 'fewer'}")
        if self.launches_delta:
            parts.append(f"{abs(self.launches_delta)} launch(es) {'more' if self.launches_delta > 0 else 'fewer'}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Group:
    """Boundaries with one cause: a rule and a source line."""

    rule: str
    source: Any  # explain.SourceRef of the values (None: no source line)
    count: int
    bytes: int
    bytes_per_run: int
    modelled_us: float | None
    share: float | None
    relaxable: bool | None
    tags: tuple[str, ...]
    #: Indices of the group's boundaries in the explanation's boundary list.
    boundaries: tuple[int, ...]
    hint: str | None = None
    hint_kind: str | None = None
    #: What the hint's change would gain for this program (a Change, basis hint:KIND or flag:...).
    hint_fix: Change | None = None
    #: What relaxing the rule in the replay changes (a Change, basis relax:RULE); None when the
    #: rule is not relaxable or predictions were not made.
    fix: Change | None = None

    @property
    def key(self) -> tuple:
        return group_key_of(self.rule, self.source)

    def source_words(self) -> str:
        return self.source.short() if self.source is not None else ""


def group_key_of(rule: str, source) -> tuple:
    if source is None:
        return (rule, None, None)
    return (rule, source.file, source.line)


def group_boundaries(boundaries: Sequence, runs, total_us: float | None) -> list[Group]:
    """The boundaries (with modelled_us set, or None) grouped by (rule, source file and line),
    ranked by modelled time per run.  `runs` maps a computation to its runs per run."""
    order: dict[tuple, list[int]] = {}
    for i, b in enumerate(boundaries):
        order.setdefault(group_key_of(b.rule, b.source), []).append(i)
    groups = []
    for key, members in order.items():
        first = boundaries[members[0]]
        priced = [boundaries[i].modelled_us for i in members]
        us = None if any(p is None for p in priced) else sum(priced)
        hinted = next((boundaries[i] for i in members if boundaries[i].hint), None)
        groups.append(Group(
            rule=first.rule, source=first.source, count=len(members),
            bytes=sum(boundaries[i].bytes for i in members),
            bytes_per_run=sum(boundaries[i].bytes * runs.get(boundaries[i].consumer_computation, 1)
                              for i in members),
            modelled_us=us, share=(us / total_us) if us is not None and total_us else None,
            relaxable=first.relaxable, tags=tuple(first.tags), boundaries=tuple(members),
            hint=hinted.hint if hinted is not None else None,
            hint_kind=hinted.hint_kind if hinted is not None else None))
    groups.sort(key=lambda g: (-(g.modelled_us or 0.0), -g.bytes_per_run, -g.count, g.rule))
    return groups


def _signed(x: float) -> str:
    return f"{x:+.3g}" if abs(x) < 1000 else f"{x:+,.0f}"


def _r(x):
    return None if x is None else round(x, 4)

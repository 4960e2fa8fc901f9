"""What a kernel count counts, and why two counts of one program differ.

The commands count different modules of the same program, and say which:
  fuse      kernels of hlofuse's replay (of XLA's snapshot right before fusion)
  check     XLA's kernels right after fusion (its snapshot), and the replay's
  explain   kernels of the module explained (XLA's final module, after_optimizations, by
            default), and launches per run (loop bodies times their trip counts)
  parse     kernels of the module given
XLA's final module has more kernels than its snapshot right after fusion: copy insertion,
which runs after fusion, adds copies (of loop state, of parameters and constants that are
outputs).  A replay that differs from XLA's fusion differs by the kernels `check` lists.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from . import ir
from .kernels import count_kernels

REPLAY = "replay"
XLA_AFTER_FUSION = "xla_after_fusion"
XLA_FINAL = "xla_final"
MODULE = "module"

WORDS = {
    REPLAY: "hlofuse's replay",
    XLA_AFTER_FUSION: "XLA's snapshot right after fusion",
    XLA_FINAL: "XLA's final module (after_optimizations)",
    MODULE: "the module given",
}


@dataclass(frozen=True)
class KernelCount:
    """Kernels of one module: how many, of which kind, and which module that is."""

    what: str  # replay | xla_after_fusion | xla_final | module
    kernels: int
    file: str | None = None
    by_kind: Mapping[str, int] = field(default_factory=dict)

    @property
    def words(self) -> str:
        return WORDS[self.what]

    def to_dict(self) -> dict:
        return {"what": self.what, "counted_in": self.words, "kernels": self.kernels, "file": self.file,
                "by_kind": dict(self.by_kind)}


def count(module: ir.Module, what: str, file: str | None = None) -> KernelCount:
    kinds: Counter = Counter()
    for c in count_kernels(module):
        kinds.update(c.by_kind)
    return KernelCount(what, sum(kinds.values()), file, dict(sorted(kinds.items())))


#: Which counts come earlier in XLA's pipeline: a difference is told from the earlier one.
_ORDER = {REPLAY: 0, XLA_AFTER_FUSION: 0, MODULE: 1, XLA_FINAL: 2}


def why_differ(a: KernelCount, b: KernelCount) -> str | None:
    """One sentence saying how two counts differ and why, or None when they agree."""
    if a.kernels == b.kernels and dict(a.by_kind) == dict(b.by_kind):
        return None
    if _ORDER[b.what] < _ORDER[a.what]:
        a, b = b, a
    delta = {k: b.by_kind.get(k, 0) - a.by_kind.get(k, 0) for k in set(a.by_kind) | set(b.by_kind)}
    parts = [f"{v:+d} {k}" for k, v in sorted(delta.items(), key=lambda kv: (-abs(kv[1]), kv[0])) if v]
    reasons = []
    if delta.get("copy", 0) > 0 and b.what == XLA_FINAL:
        reasons.append("copy insertion adds copies after fusion")
    if REPLAY in (a.what, b.what) and (a.what == XLA_AFTER_FUSION or not reasons):
        reasons.append("where the replay and XLA's fusion differ, `hlofuse check` lists the kernels")
    if a.kernels == b.kernels:
        head = f"{b.words} has {b.kernels} kernels too, of other kinds than {a.words}"
    else:
        head = f"{b.words} has {b.kernels} kernels, {b.kernels - a.kernels:+d} against {a.words} ({a.kernels})"
    return f"{head}: {', '.join(parts)}" + (f" ({'; '.join(reasons)})" if reasons else "")


def differences(counts: list[KernelCount]) -> list[str]:
    """Why each count differs from the first one (the command's own)."""
    out = []
    for other in counts[1:]:
        line = why_differ(counts[0], other)
        if line is not None:
            out.append(line)
    return out


def repeated(us: float, count: int) -> float:
    """`us` repeated `count` times.  Counts are exact integers (nested loops of int64 trip
    counts reach counts no float holds); their time is then infinite, never an exception."""
    if not us:
        return 0.0
    try:
        return us * count
    except OverflowError:
        return math.inf if us > 0 else -math.inf


def shared(us: float, count: int) -> float:
    """`us` shared out over `count` repetitions (0 where the count is past what a float holds)."""
    try:
        return us / count
    except OverflowError:
        return 0.0

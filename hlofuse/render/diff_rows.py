"""The rows of a comparison, once, for every format: the totals side by side, the kernels that
changed, the boundaries on one side only (terminal tables, HTML and CSV read these)."""

from __future__ import annotations

from dataclasses import dataclass

from .table import _bytes, _us

#: The CSV's columns: one row per boundary that exists on one side only.
CHANGE_COLUMNS = ("side", "producer", "consumer", "producer_kernel", "consumer_kernel", "crossing", "rule",
                  "decided_in", "reason", "bytes", "bytes_per_run", "modelled_us", "source_file", "source_line",
                  "other_side", "other_kernel", "other_pass", "other_text")


@dataclass(frozen=True)
class TotalRow:
    what: str
    a: str
    b: str
    delta: str


def total_rows(d) -> list[TotalRow]:
    from ..diff import delta

    a, b = d.a_totals, d.b_totals

    def count(x):
        return "?" if x is None else f"{x:,}"

    def signed(x, fmt):
        if x is None:
            return "?"
        if not x:
            return "0"
        return ("+" if x > 0 else "-") + fmt(abs(x))

    return [
        TotalRow("kernels", count(a.kernels), count(b.kernels), signed(delta(a.kernels, b.kernels), count)),
        TotalRow("launches per run", count(a.launches_per_run), count(b.launches_per_run),
                 signed(delta(a.launches_per_run, b.launches_per_run), count)),
        TotalRow("boundaries", count(a.boundaries), count(b.boundaries),
                 signed(delta(a.boundaries, b.boundaries), count)),
        TotalRow("bytes across boundaries per run", _bytes(a.bytes_per_run), _bytes(b.bytes_per_run),
                 signed(delta(a.bytes_per_run, b.bytes_per_run), _bytes)),
        TotalRow("modelled time per run", _us(a.modelled_us_per_run), _us(b.modelled_us_per_run),
                 signed(_rounded(delta(a.modelled_us_per_run, b.modelled_us_per_run)), _us)),
    ]


def _rounded(x):
    return None if x is None else (0 if abs(x) < 0.005 else x)


@dataclass(frozen=True)
class KernelRow:
    status: str
    a: tuple[str, ...]  # A's kernels: name (label), one per line
    b: tuple[str, ...]
    source: str
    launches: str  # A → B per run
    instructions: str  # shared, only A, only B


def kernel_rows(d, include_same: bool = False) -> list[KernelRow]:
    from ..diff import SAME

    rows = []
    for m in d.kernels:
        if m.status == SAME and not include_same:
            continue
        source = next((r.source.short() for r in m.a + m.b if r.source is not None and r.source.short()), "")
        la, lb = m.launches("a"), m.launches("b")
        launches = f"{'-' if not m.a else la if la is not None else '?'} → {'-' if not m.b else lb if lb is not None else '?'}"
        status = m.status + (" (by op)" if m.loose else "")
        rows.append(KernelRow(status, _refs(m.a), _refs(m.b), source, launches,
                              f"{m.shared} shared, {m.only_a} only A, {m.only_b} only B"))
    return rows


def _refs(refs) -> tuple[str, ...]:
    if not refs:
        return ("-",)
    shown = [f"{r.name} ({r.label})" for r in refs[:4]]
    if len(refs) > 4:
        shown.append(f"... {len(refs) - 4} more")
    return tuple(shown)


@dataclass(frozen=True)
class ChangeRow:
    """Boundaries on one side only with one producer and one account on both sides (a value
    refused to several users is one row)."""

    producer: str  # producer (kernel)
    consumers: tuple[str, ...]  # consumer (kernel), each
    bytes_per_run: str
    rule: str
    why: str  # this side's decision: the pass and the reason (the rule has its own column)
    other: str  # the other side's account
    source: str

    @property
    def pair(self) -> str:
        more = f" (+{len(self.consumers) - 3} more)" if len(self.consumers) > 3 else ""
        return f"{self.producer} → {', '.join(self.consumers[:3])}{more}"


def change_rows(changes) -> list[ChangeRow]:
    from ..diff.boundaries import own_reason

    grouped: dict[tuple, list] = {}
    for c in changes:
        b = c.boundary
        why = f"{b.decided_in}: {own_reason(b)}" if b.decided_in else own_reason(b)
        key = (b.producer, b.producer_kernel, b.rule, why, c.other.text,
               b.source.short() if b.source is not None else "")
        grouped.setdefault(key, []).append(c)
    rows = []
    for (producer, kernel, rule, why, other, source), group in grouped.items():
        consumers = tuple(f"{c.boundary.consumer} ({c.boundary.consumer_kernel})" if c.boundary.consumer_kernel
                          else c.boundary.consumer for c in group)
        per_run = [c.bytes_per_run if c.bytes_per_run is not None else c.boundary.bytes for c in group]
        rows.append(ChangeRow(f"{producer} ({kernel})", consumers, _bytes(sum(per_run)), rule, why, other, source))
    return rows


def changes_frame(d):
    """A DataFrame of the boundaries on one side only (CHANGE_COLUMNS), largest first."""
    import pandas as pd

    rows = []
    for c in sorted(d.added + d.removed, key=lambda c: -(c.bytes_per_run or c.boundary.bytes)):
        b = c.boundary
        decision = c.other.decision
        rows.append({
            "side": "B only" if c.side == "b" else "A only", "producer": b.producer, "consumer": b.consumer,
            "producer_kernel": b.producer_kernel, "consumer_kernel": b.consumer_kernel,
            "crossing": ";".join(b.crossing), "rule": b.rule, "decided_in": b.decided_in, "reason": b.reason,
            "bytes": b.bytes, "bytes_per_run": c.bytes_per_run, "modelled_us": b.modelled_us,
            "source_file": b.source.file if b.source is not None else None,
            "source_line": b.source.line if b.source is not None else None,
            "other_side": c.other.status, "other_kernel": c.other.kernel,
            "other_pass": decision.pass_name if decision is not None else None, "other_text": c.other.text,
        })
    return pd.DataFrame(rows, columns=list(CHANGE_COLUMNS))


def side_line(label: str, report, options) -> str:
    """`A: jit_f — gpu, priority pipeline, h100_sxm; XLA's final module; path`."""
    ex = report.explanation
    parts = [ex.backend]
    if ex.pipeline:
        parts.append(f"{ex.pipeline} pipeline")
    if ex.gpu:
        parts.append(ex.gpu)
    how = "replayed by hlofuse" if ex.stage == "replayed" else "as XLA fused it"
    extra = ""
    if options.get("relax"):
        extra += f", --relax {','.join(options['relax'])}"
    if options.get("xla_flags"):
        extra += f", XLA flags {' '.join(options['xla_flags'])}"
    return f"{label}: {ex.module} — {', '.join(parts)}; {how}{extra}; {ex.input or ''}"

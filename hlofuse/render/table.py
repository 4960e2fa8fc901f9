"""An explanation for people: rich tables (colour only on a terminal; rich decides).  Text from
the dump goes through terminal.markup: control characters shown as escapes, markup escaped."""

from __future__ import annotations

from collections import defaultdict

from rich.console import Console
from rich.table import Table

from ..terminal import markup

#: Colours of boundary reasons, by rule tag (first match) — the same families as the SVG.
TAG_STYLES = (
    ("loop", "magenta"), ("tuple", "blue"), ("library", "green"), ("custom-call", "green"),
    ("copy", "yellow"), ("control-flow", "cyan"), ("concat", "bright_blue"),
    ("duplication", "bright_blue"), ("expensive", "bright_red"), ("reduction", "bright_magenta"),
    ("budget", "bright_yellow"),
)


def rule_style(rule: str, tags) -> str:
    if rule == "unknown":
        return "bold red"
    for tag, style in TAG_STYLES:
        if tag in tags:
            return style
    return "white"


def print_explanation(ex, console: Console, *, limit: int | None = None, counted: str | None = None) -> None:
    """The whole report: header, kernels per computation, loops, boundaries, rules, hints.
    `counted` says which module the kernel count is of ("in XLA's final module ...")."""
    s = ex.summary()
    pipeline = f", {ex.pipeline} pipeline" if ex.pipeline else ""
    gpu = f", {markup(ex.gpu)}" if ex.gpu else ""
    replayed = " (fused by hlofuse's replay)" if ex.stage == "replayed" else ""
    console.print(f"[bold]{markup(ex.module)}[/] — {ex.backend}{pipeline}{gpu}{replayed}")
    if ex.input:
        console.print(f"[dim]{markup(str(ex.input))}[/]")
    if ex.detected:
        console.print(f"[dim]{markup(ex.detected)}[/]")
    launched = s["kernels_launched"]
    console.print(f"{s['kernels']} kernels{' ' + markup(counted) if counted else ''}; "
                  f"{launched if launched is not None else 'unknown number of'} "
                  f"launches per run; {s['boundaries']} boundaries ({s['unknown']} unknown); "
                  f"{_bytes(s['bytes_across_boundaries'])} cross them per pass over the code"
                  + (f", {_bytes(s['bytes_across_boundaries_per_run'])} per run"
                     if s["bytes_across_boundaries_per_run"] is not None else ""))
    console.print(computations_table(ex))
    if ex.loops:
        console.print(loops_table(ex))
    if ex.boundaries:
        console.print(boundaries_table(ex, limit=limit))
        console.print(rules_table(ex))
    else:
        console.print("No kernel boundaries: no value passes from one kernel to another.")
    hints = hints_by_text(ex)
    if hints:
        console.print("[bold]Hints[/]")
        for text, numbers in hints.items():
            console.print(f"  • {markup(text)} [dim](boundaries {_ranges(numbers)})[/]")
    for note in ex.notes:
        console.print(f"[yellow]note:[/] {markup(note)}")


def computations_table(ex) -> Table:
    table = Table(title="Kernels per computation", title_justify="left")
    table.add_column("computation")
    table.add_column("role")
    table.add_column("kernels", justify="right")
    table.add_column("of which")
    table.add_column("runs", justify="right")
    for c in ex.computations:
        runs = "?" if c.runs is None else _int(c.runs)
        table.add_row(markup(c.name), c.role, str(c.kernels),
                      ", ".join(f"{v} {k}" for k, v in sorted(c.by_kind.items(), key=lambda kv: -kv[1])), runs)
    return table


def loops_table(ex) -> Table:
    table = Table(title="While loops", title_justify="left")
    table.add_column("while")
    table.add_column("source")
    table.add_column("trip count", justify="right")
    table.add_column("kernels per iteration", justify="right")
    table.add_column("launches in all", justify="right")
    for lp in ex.loops:
        trip = "unknown" if lp.trip_count is None else f"{lp.trip_count} ({lp.trip_count_from})"
        cond = f"condition {lp.condition_kernels}" if lp.condition_launched else \
            "condition not launched: trip count known"
        per = f"{lp.kernels_per_iteration} (body {lp.body_kernels}; {cond})"
        total = "?" if lp.kernels_total is None else str(lp.kernels_total)
        table.add_row(markup(lp.name), markup(lp.source.short()) if lp.source else "", trip, per, total)
    return table


def boundaries_table(ex, *, limit: int | None = None) -> Table:
    shown = ex.boundaries if limit is None else ex.boundaries[:limit]
    title = f"Kernel boundaries ({len(ex.boundaries)})"
    if limit is not None and len(ex.boundaries) > limit:
        title += f", first {limit} (--json or --csv for all)"
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("producer → consumer")
    table.add_column("rule")
    table.add_column("why")
    table.add_column("bytes", justify="right")
    table.add_column("source")
    for i, b in enumerate(shown, 1):
        consumer = f"{b.consumer} ({b.consumer_kernel})" if b.consumer_kernel and b.consumer_kernel != b.consumer \
            else b.consumer
        producer = f"{b.producer} ({b.producer_kernel})" if b.producer != b.producer_kernel else b.producer
        style = rule_style(b.rule, b.tags)
        why = markup(b.reason)
        if b.decided_in:
            why = f"[dim]{markup(b.decided_in)}:[/] " + why
        for later in b.then:
            why += f"\n[dim]then {markup(later.text())}[/]"
        if b.xla_reason:
            mark = "" if b.agrees_with_xla is not False else " [bold red]≠[/]"
            why += f"\n[dim]XLA: {markup(b.xla_reason)}[/]{mark}"
        table.add_row(str(i), markup(f"{producer} → {consumer}"), f"[{style}]{markup(b.rule)}[/]", why,
                      _bytes(b.bytes), markup(b.source.short()) if b.source else "")
    return table


def rules_table(ex) -> Table:
    table = Table(title="Boundaries by rule", title_justify="left")
    table.add_column("rule")
    table.add_column("count", justify="right")
    table.add_column("relaxable")
    table.add_column("bytes", justify="right")
    totals: dict[str, list] = defaultdict(lambda: [0, 0, None, ()])
    for b in ex.boundaries:
        row = totals[b.rule]
        row[0] += 1
        row[1] += b.bytes
        row[2] = b.relaxable
        row[3] = b.tags
    for rule, (count, nbytes, relaxable, tags) in sorted(totals.items(), key=lambda kv: (-kv[1][0], kv[0])):
        rel = "?" if relaxable is None else ("yes" if relaxable else "no")
        table.add_row(f"[{rule_style(rule, tags)}]{markup(rule)}[/]", str(count), rel, _bytes(nbytes))
    return table


def hints_by_text(ex) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, b in enumerate(ex.boundaries, 1):
        if b.hint:
            out.setdefault(b.hint, []).append(i)
    return out


def _ranges(numbers: list[int]) -> str:
    parts = []
    start = prev = numbers[0]
    for n in numbers[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


def _bytes(n) -> str:
    if n is None:
        return "?"
    if isinstance(n, int) and n >= 10**18:  # counts multiplied by trip counts: past any float
        return f"~10^{len(str(n)) - 1} B"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _int(value) -> str:
    if isinstance(value, int):
        return str(value)
    return str(int(value)) if float(value).is_integer() else f"{value:g}"

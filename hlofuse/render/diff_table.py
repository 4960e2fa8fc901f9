"""A comparison on the terminal: the headline, both sides, the totals side by side, the kernels
that changed and the boundaries on one side only (rich tables; colour only on a terminal)."""

from __future__ import annotations

from ..terminal import markup
from .diff_rows import change_rows, kernel_rows, side_line, total_rows

#: One-sided boundaries shown per side unless --all.
DEFAULT_LIMIT = 10


def print_diff(d, console, *, limit: int | None = DEFAULT_LIMIT, include_same: bool = False) -> None:
    from rich.table import Table

    console.print(f"[bold]{markup(d.headline)}[/]", soft_wrap=False)
    console.print(f"[dim]{markup(side_line('A', d.a, d.a_options))}[/]")
    console.print(f"[dim]{markup(side_line('B', d.b, d.b_options))}[/]")

    totals = Table(title="Totals (as `explain` prints them for each side)", title_justify="left")
    for column, justify in (("", "left"), ("A", "right"), ("B", "right"), ("B - A", "right")):
        totals.add_column(column, justify=justify)
    for row in total_rows(d):
        totals.add_row(row.what, row.a, row.b, _coloured(row.delta))
    console.print(totals)

    counts = ", ".join(f"{d.count(s)} {s}" for s in _statuses() if d.count(s))
    console.print(f"Kernels matched by the instructions they compute: {counts or 'none'}")
    rows = kernel_rows(d, include_same)
    if rows:
        table = Table(title="Kernels that differ" if not include_same else "Kernels", title_justify="left")
        for column in ("status", "A", "B", "source", "launches A → B", "instructions"):
            table.add_column(column, overflow="fold")
        for row in rows[: limit if limit is not None else len(rows)]:
            table.add_row(row.status, "\n".join(map(markup, row.a)), "\n".join(map(markup, row.b)), markup(row.source),
                          row.launches,
                          row.instructions)
        console.print(table)
        _more(console, len(rows), limit, "kernel groups")

    for title, changes in (("Boundaries in B only (A does not materialise these values)", d.added),
                           ("Boundaries in A only (B does not materialise these values)", d.removed)):
        if not changes:
            continue
        rows = change_rows(changes)
        table = Table(title=f"{title}: {len(changes)} in {len(rows)} row(s), largest first", title_justify="left")
        for column in ("producer → consumer", "bytes/run", "rule", "why, on its side", "the other side", "source"):
            table.add_column(column, justify="right" if column == "bytes/run" else "left", overflow="fold",
                             no_wrap=column in ("rule", "bytes/run"))
        for row in rows[: limit if limit is not None else len(rows)]:
            table.add_row(markup(row.pair), row.bytes_per_run, markup(row.rule), markup(row.why), markup(row.other),
                          markup(row.source))
        console.print(table)
        _more(console, len(rows), limit, "rows of boundaries")
    for note in d.notes:
        console.print(f"[dim]note: {markup(note)}[/]")


def _statuses():
    from ..diff import STATUSES

    return STATUSES


def _coloured(delta: str) -> str:
    if delta.startswith("+"):
        return f"[red]{delta}[/]"
    if delta.startswith("-"):
        return f"[green]{delta}[/]"
    return delta


def _more(console, total: int, limit: int | None, what: str) -> None:
    if limit is not None and total > limit:
        console.print(f"[dim]{total - limit} more {what}: --all lists them, --json has everything[/]")

"""An explanation for people, on a terminal or piped: what it costs first (the modelled time,
the costliest causes of boundaries with what fixing them would gain), every boundary with
`--all`.  Colour only on a terminal (rich decides).

Lines fit the console's width without cutting a name: text is wrapped at spaces only, so a
rule id, a path or an instruction name is never split or cropped (a line holding one longer
than the width runs past it rather than losing characters); continuation lines are indented
under their item.  Text from the dump goes through terminal.markup (control characters shown
as escapes, markup escaped)."""

from __future__ import annotations

import math
import textwrap
from collections import defaultdict

from rich.console import Console
from rich.table import Table

from ..counts import repeated
from ..terminal import markup, printable

#: Colours of boundary reasons, by rule tag (first match) — the same families as the SVG.
TAG_STYLES = (
    ("loop", "magenta"), ("tuple", "blue"), ("library", "green"), ("custom-call", "green"),
    ("copy", "yellow"), ("control-flow", "cyan"), ("concat", "bright_blue"),
    ("duplication", "bright_blue"), ("expensive", "bright_red"), ("reduction", "bright_magenta"),
    ("budget", "bright_yellow"),
)
#: Groups shown without --top / --all.
DEFAULT_TOP = 10


def rule_style(rule: str, tags) -> str:
    if rule == "unknown":
        return "bold red"
    for tag, style in TAG_STYLES:
        if tag in tags:
            return style
    return "white"


# ------------------------------------------------------------------------------------------
# Lines that fit
# ------------------------------------------------------------------------------------------


def wrap(text: str, width: int, indent: str = "", first: str | None = None) -> list[str]:
    """Plain `text` in lines of at most `width` columns, broken at spaces only (a word longer
    than the line stays whole); `first` prefixes the first line, `indent` the others."""
    wrapper = textwrap.TextWrapper(width=max(width, 20), initial_indent=indent if first is None else first,
                                   subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
    return wrapper.wrap(printable(text)) or [indent if first is None else first]


def _say(console: Console, text: str, style: str = "", indent: str = "", first: str = "") -> None:
    """Print plain `text` wrapped to the console (the first line prefixed by `first`, the
    others by `indent`), in one style."""
    for line in wrap(text, console.width, indent, first):
        console.print(f"[{style}]{markup(line)}[/]" if style else markup(line), soft_wrap=True)


# ------------------------------------------------------------------------------------------
# The report
# ------------------------------------------------------------------------------------------


def print_explanation(ex, console: Console, *, limit: int | None = None, counted: str | None = None,
                      top: int | None = DEFAULT_TOP, full: bool = False) -> None:
    """The report: the header with the modelled time, the costliest `top` groups of boundaries
    (every group with `top=None`) with predicted fixes and hints; with `full`, before them the
    kernels per computation, the loops, every boundary (the first `limit`) and the rules.
    `counted` says which module the kernel count is of ("in XLA's final module ...")."""
    s = ex.summary()
    pipeline = f", {ex.pipeline} pipeline" if ex.pipeline else ""
    gpu = f", {markup(ex.gpu)}" if ex.gpu else ""
    replayed = " (fused by hlofuse's replay)" if ex.stage == "replayed" else ""
    console.print(f"[bold]{markup(ex.module)}[/] — {ex.backend}{pipeline}{gpu}{replayed}", soft_wrap=True)
    if ex.input:
        _say(console, str(ex.input), "dim")
    if ex.detected:
        _say(console, ex.detected, "dim")
    launched = s["kernels_launched"]
    _say(console, f"{s['kernels']} kernels{' ' + counted if counted else ''}; "
                  f"{launched if launched is not None else 'unknown number of'} launches per run; "
                  f"{s['boundaries']} boundaries ({s['unknown']} unknown); "
                  f"{_bytes(s['bytes_across_boundaries'])} cross them per pass over the code"
                  + (f", {_bytes(s['bytes_across_boundaries_per_run'])} per run"
                     if s["bytes_across_boundaries_per_run"] is not None else ""))
    modelled = s.get("modelled")
    if modelled is not None:
        total = modelled["modelled_us_per_run"]
        paid = modelled["boundaries_us_per_run"]
        share = f" ({paid / total:.1%})" if total and paid is not None else ""
        head = f"Modelled: {_us(total)} per run"
        lines = wrap(f"{head} on {modelled['target']['description']}; the boundaries account for {_us(paid)} of "
                     f"it{share}", console.width, "  ", first="")
        console.print(f"[bold]{markup(head)}[/]" + markup(lines[0][len(head):]), soft_wrap=True)
        for line in lines[1:]:
            console.print(markup(line), soft_wrap=True)
        if modelled["unknown_runs"]:
            _say(console, "a loop's trip count is unknown: its computations are counted as running once "
                          f"({', '.join(modelled['unknown_runs'])})", "yellow")
    if full:
        console.print(computations_table(ex))
        if ex.loops:
            console.print(loops_table(ex))
        if ex.boundaries:
            print_boundaries(ex, console, limit=limit)
            console.print(rules_table(ex))
    if not ex.boundaries:
        console.print("No kernel boundaries: no value passes from one kernel to another.")
    else:
        print_groups(ex, console, top=None if full else top)
    if ex.predictions and ex.groups:
        took = f" in {ex.prediction_seconds:.1f} s" if ex.prediction_seconds is not None else ""
        _say(console, f"Predictions: {ex.predictions}{took}" + (
            " (`hlofuse bench --plan replay --plan relax:RULE` measures a relaxation)"
            if ex.predictions.startswith("predicted") else ""), "dim", indent="  ")
    for note in ex.notes:
        _say(console, f"note: {note}", indent="  ")


def print_groups(ex, console: Console, *, top: int | None = DEFAULT_TOP) -> None:
    """The groups of boundaries (a rule and a source line), most costly first."""
    groups = list(ex.groups)
    shown = groups if top is None else groups[:top]
    priced = ex.cost is not None
    title = "Costliest causes" if priced else "Causes"
    _say(console, f"{title} ({len(shown)} of {len(groups)} groups of boundaries, by rule and source line"
                  f"{', modelled time per run' if priced else ''})", "bold", indent="  ")
    total = ex.cost.total_us if priced else None
    said: dict[str, int] = {}
    console.print(f"[dim]{'#':>4}  {'µs/run':>9}  {'share':>6}  {'count':>5}  {'bytes/run':>10}  rule  source[/]",
                  soft_wrap=True)
    for rank, g in enumerate(shown, 1):
        numbers = (f"{rank:>4}  {_num_us(g.modelled_us):>9}  {_share(g.share):>6}  {g.count:>5}  "
                   f"{_bytes(g.bytes_per_run):>10}  ")
        pad = " " * 8
        _print_words(console, [(numbers.rstrip(), ""), (g.rule, rule_style(g.rule, g.tags)),
                               (g.source_words(), "")], pad)
        if g.fix is not None:
            _say(console, f"relaxing {g.rule} (predicted by a replay): {g.fix.words(total)}", indent=pad + "  ",
                 first=pad)
        elif g.relaxable:
            why = ex.predictions or "no replay"
            _say(console, f"{g.rule} is relaxable: " + (why if why.startswith("not predicted")
                                                          else f"not predicted ({why})"), "dim",
                 indent=pad + "  ", first=pad)
        if g.hint:
            if g.hint in said:
                _say(console, f"hint: as for #{said[g.hint]}", "dim", first=pad)
            else:
                said[g.hint] = rank
                _say(console, f"hint: {g.hint}", "cyan", indent=pad + "  ", first=pad)
    if any(g.relaxable is False for g in shown):
        _say(console, "Rules that are not relaxable protect correctness or describe structure: no relaxation "
                      "is predicted for them (`hlofuse rules RULE` says why each exists).", "dim", indent="  ")
    rest = groups[len(shown):]
    if rest:
        us = sum(g.modelled_us or 0.0 for g in rest)
        more = f" ({_us(us)}, {us / total:.1%})" if priced and total else ""
        _say(console, f"{len(rest)} more group(s){more}: --top {len(groups)} lists them, --all lists every "
                      "boundary, --json has everything", "dim", indent="  ")


def _print_words(console: Console, pieces: list[tuple[str, str]], pad: str) -> None:
    """Pieces (text, style) on one line two spaces apart, a piece that does not fit starting a
    line of its own (indented by `pad`): never cut."""
    line, plain = "", ""
    for text, style in pieces:
        if not text:
            continue
        styled = f"[{style}]{markup(text)}[/]" if style else markup(text)
        if plain and len(plain) + 2 + len(text) > console.width:
            console.print(line, soft_wrap=True)
            line, plain = markup(pad) + styled, pad + text
        elif plain:
            line, plain = line + "  " + styled, plain + "  " + text
        else:
            line, plain = styled, text
    if plain:
        console.print(line, soft_wrap=True)


def print_folder(result, console: Console, *, top: int | None = DEFAULT_TOP, seconds: float | None = None) -> None:
    """`explain --all-modules`: a line per module, then the costliest groups across them."""
    mods = result.modules
    failed = [m for m in mods if m.error]
    took = f" in {seconds:.1f} s" if seconds is not None else ""
    _say(console, f"{len(mods)} modules in {result.folder}: {len(mods) - len(failed)} explained, {len(failed)} "
                  f"failed{took}; modelled times are per run of each module", "bold")
    console.print(f"[dim]{'µs/run':>10}  {'kernels':>7}  {'boundaries':>10}  module  (backend, costliest cause)[/]",
                  soft_wrap=True)
    ranked = sorted(mods, key=lambda m: -((m.payload or {}).get("summary", {}).get("modelled") or {}).get(
        "modelled_us_per_run", 0.0) if m.payload else 0.0)
    for m in ranked:
        if m.error:
            _say(console, f"{'-':>10}  {'':>7}  {'':>10}  {m.key}: {m.error}", "red", indent=" " * 12)
            continue
        s = m.payload["summary"]
        modelled = s.get("modelled") or {}
        first = m.payload["groups"][0] if m.payload["groups"] else None
        cause = f"{first['rule']} {_num_us(first['modelled_us'])} µs" if first else "no boundary"
        where = ", ".join(x for x in (m.payload["backend"], m.payload["pipeline"], m.payload["gpu"]) if x)
        _print_words(console, [(f"{_num_us(modelled.get('modelled_us_per_run')):>10}  {s['kernels']:>7}  "
                                f"{s['boundaries']:>10}", ""), (m.key, "bold"), (f"({where}; {cause})", "dim")],
                     " " * 12)
    groups = list(result.groups)
    shown = groups if top is None else groups[:top]
    if not shown:
        return
    _say(console, f"Costliest causes across the modules ({len(shown)} of {len(groups)} groups, by module, rule and "
                  "source line; share of its module's modelled time)", "bold")
    console.print(f"[dim]{'#':>4}  {'µs/run':>9}  {'share':>6}  {'count':>5}  {'bytes/run':>10}  module  rule  "
                  f"source[/]", soft_wrap=True)
    pad = " " * 8
    for rank, g in enumerate(shown, 1):
        source = g["source"]
        where = f"{source['file'] or '?'}:{source['line'] if source['line'] is not None else '?'}" if source else ""
        numbers = f"{rank:>4}  {_num_us(g['modelled_us']):>9}  {_share(g['share']):>6}  {g['count']:>5}  " \
                  f"{_bytes(g['bytes_per_run']):>10}"
        _print_words(console, [(numbers, ""), (g["module"], "dim"), (g["rule"], rule_style(g["rule"], g["tags"])),
                               (where, "")], pad)
        fix = g.get("fix")
        if fix is not None:
            words = f"{fix['modelled_us_delta']:+.3g} µs per run" if fix["modelled_us_delta"] is not None else \
                f"not predicted ({fix['error']})"
            if fix.get("kernels_delta"):
                words += f", {fix['kernels_delta']:+d} kernel(s)"
            _say(console, f"relaxing {g['rule']} (predicted by a replay): {words}", indent=pad + "  ", first=pad)
        if g.get("hint"):
            _say(console, f"hint: {g['hint']}", "cyan", indent=pad + "  ", first=pad)
    rest = len(groups) - len(shown)
    if rest:
        _say(console, f"{rest} more group(s): --top {len(groups)} lists them, --json has everything", "dim",
             indent="  ")


def print_boundaries(ex, console: Console, *, limit: int | None = None) -> None:
    """Every boundary (the first `limit`): producer → consumer, rule, bytes, modelled time,
    source; the reason, what later passes did, XLA's own reason indented below."""
    shown = ex.boundaries if limit is None else ex.boundaries[:limit]
    title = f"Kernel boundaries ({len(ex.boundaries)})"
    if limit is not None and len(ex.boundaries) > limit:
        title += f", first {limit} (--json or --csv for all)"
    console.print(f"[bold]{title}[/]", soft_wrap=True)
    pad = " " * 6
    for i, b in enumerate(shown, 1):
        consumer = f"{b.consumer} ({b.consumer_kernel})" if b.consumer_kernel and b.consumer_kernel != b.consumer \
            else b.consumer
        producer = f"{b.producer} ({b.producer_kernel})" if b.producer != b.producer_kernel else b.producer
        cost = f"  {_num_us(b.modelled_us)} µs/run" if b.modelled_us is not None else ""
        source = f"  {b.source.short()}" if b.source is not None and b.source.short() else ""
        style = rule_style(b.rule, b.tags)
        first = f"{i:>4}  {producer} → {consumer}  "
        tail = f"{b.rule}  {_bytes(b.bytes)}{cost}{source}"
        if len(first) + len(tail) <= console.width:
            console.print(markup(first) + f"[{style}]{markup(b.rule)}[/]" + markup(tail[len(b.rule):]), soft_wrap=True)
        else:
            _say(console, first.rstrip(), indent=pad)
            rest = tail[len(b.rule):]
            if len(pad) + len(tail) <= console.width:
                console.print(markup(pad) + f"[{style}]{markup(b.rule)}[/]" + markup(rest), soft_wrap=True)
            else:
                console.print(markup(pad) + f"[{style}]{markup(b.rule)}[/]", soft_wrap=True)
                _say(console, rest.strip(), indent=pad + "  ", first=pad + "  ")
        why = (f"{b.decided_in}: " if b.decided_in else "") + b.reason
        _say(console, why, indent=pad + "  ", first=pad)
        for later in b.then:
            _say(console, f"then {later.text()}", "dim", indent=pad + "  ", first=pad)
        if b.xla_reason:
            mark = "" if b.agrees_with_xla is not False else "  ≠ ours"
            _say(console, f"XLA: {b.xla_reason}{mark}", "red" if mark else "dim", indent=pad + "  ", first=pad)


def computations_table(ex) -> Table:
    table = Table(title="Kernels per computation", title_justify="left")
    table.add_column("computation", no_wrap=True, overflow="fold")
    table.add_column("role")
    table.add_column("kernels", justify="right")
    table.add_column("of which", overflow="fold")
    table.add_column("runs", justify="right")
    priced = ex.cost is not None
    if priced:
        table.add_column("µs per run", justify="right")
    per_comp = ex.cost.by_computation() if priced else {}
    for c in ex.computations:
        runs = "?" if c.runs is None else _int(c.runs)
        row = [markup(c.name), c.role, str(c.kernels),
               ", ".join(f"{v} {k}" for k, v in sorted(c.by_kind.items(), key=lambda kv: -kv[1])), runs]
        if priced:
            row.append(_num_us(repeated(per_comp.get(c.name, 0.0), 1 if c.runs is None else c.runs)))
        table.add_row(*row)
    return table


def loops_table(ex) -> Table:
    table = Table(title="While loops", title_justify="left")
    table.add_column("while", no_wrap=True, overflow="fold")
    table.add_column("source", no_wrap=True, overflow="fold")
    table.add_column("trip count", justify="right")
    table.add_column("kernels per iteration", justify="right")
    table.add_column("launches in all", justify="right")
    priced = ex.cost is not None
    if priced:
        table.add_column("µs per iteration", justify="right")
    for lp in ex.loops:
        trip = "unknown" if lp.trip_count is None else f"{lp.trip_count} ({lp.trip_count_from})"
        cond = f"condition {lp.condition_kernels}" if lp.condition_launched else \
            "condition not launched: trip count known"
        per = f"{lp.kernels_per_iteration} (body {lp.body_kernels}; {cond})"
        total = "?" if lp.kernels_total is None else str(lp.kernels_total)
        row = [markup(lp.name), markup(lp.source.short()) if lp.source else "", trip, per, total]
        if priced:
            found = ex.cost.loops.get(lp.name)
            row.append(_num_us(found[0]) if found else "?")
        table.add_row(*row)
    return table


def boundaries_table(ex, *, limit: int | None = None) -> Table:
    """Every boundary as one rich table (kept for callers that want a Table)."""
    shown = ex.boundaries if limit is None else ex.boundaries[:limit]
    title = f"Kernel boundaries ({len(ex.boundaries)})"
    if limit is not None and len(ex.boundaries) > limit:
        title += f", first {limit} (--json or --csv for all)"
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("producer → consumer", overflow="fold")
    table.add_column("rule", no_wrap=True, min_width=max((len(b.rule) for b in shown), default=4))
    table.add_column("why", overflow="fold")
    table.add_column("bytes", justify="right")
    table.add_column("source", no_wrap=True)
    for i, b in enumerate(shown, 1):
        consumer = f"{b.consumer} ({b.consumer_kernel})" if b.consumer_kernel and b.consumer_kernel != b.consumer \
            else b.consumer
        producer = f"{b.producer} ({b.producer_kernel})" if b.producer != b.producer_kernel else b.producer
        why = markup(b.reason)
        if b.decided_in:
            why = f"[dim]{markup(b.decided_in)}:[/] " + why
        for later in b.then:
            why += f"\n[dim]then {markup(later.text())}[/]"
        if b.xla_reason:
            mark = "" if b.agrees_with_xla is not False else " [bold red]≠[/]"
            why += f"\n[dim]XLA: {markup(b.xla_reason)}[/]{mark}"
        table.add_row(str(i), markup(f"{producer} → {consumer}"), f"[{rule_style(b.rule, b.tags)}]{markup(b.rule)}[/]",
                      why, _bytes(b.bytes), markup(b.source.short()) if b.source else "")
    return table


def rules_table(ex) -> Table:
    table = Table(title="Boundaries by rule", title_justify="left")
    table.add_column("rule", no_wrap=True, min_width=max((len(b.rule) for b in ex.boundaries), default=4))
    table.add_column("count", justify="right")
    table.add_column("relaxable")
    table.add_column("bytes", justify="right")
    priced = ex.cost is not None
    if priced:
        table.add_column("µs per run", justify="right")
    totals: dict[str, list] = defaultdict(lambda: [0, 0, None, (), 0.0])
    for b in ex.boundaries:
        row = totals[b.rule]
        row[0] += 1
        row[1] += b.bytes
        row[2] = b.relaxable
        row[3] = b.tags
        row[4] += b.modelled_us or 0.0
    for rule, (count, nbytes, relaxable, tags, us) in sorted(totals.items(), key=lambda kv: (-kv[1][0], kv[0])):
        rel = "?" if relaxable is None else ("yes" if relaxable else "no")
        row = [f"[{rule_style(rule, tags)}]{markup(rule)}[/]", str(count), rel, _bytes(nbytes)]
        if priced:
            row.append(_num_us(us))
        table.add_row(*row)
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


def _num_us(us) -> str:
    if us is None:
        return "?"
    if us == math.inf:  # a count of launches past what a float holds
        return "∞"
    if us >= 100:
        return f"{us:,.0f}"
    return f"{us:.3g}" if us >= 0.01 else ("0" if us == 0 else f"{us:.1e}")


def _us(us) -> str:
    if us is None:
        return "? µs"
    if us == math.inf:
        return "∞ µs"
    if us >= 10_000:
        return f"{us / 1000:,.1f} ms"
    return f"{_num_us(us)} µs"


def _share(share) -> str:
    return "?" if share is None else f"{share:.1%}"


def _int(value) -> str:
    if isinstance(value, int):
        return str(value)
    return str(int(value)) if float(value).is_integer() else f"{value:g}"

"""One self-contained HTML report of an explanation — summary, loops, the boundary table, hints
and the drawing inline — that can be attached to a GitHub issue as it is: no scripts, no
external files, inline CSS only."""

from __future__ import annotations

from html import escape

from .dot import rule_color
from .table import DEFAULT_TOP, _bytes, _num_us, _ranges, _share, _us, hints_by_text

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.4em;margin-bottom:.2em} h2{font-size:1.1em;margin-top:1.6em;border-bottom:1px solid #ddd}
.dim{color:#666;font-size:.9em} table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border:1px solid #ddd;padding:3px 7px;vertical-align:top;text-align:left}
th{background:#f4f6f8} td.num{text-align:right;white-space:nowrap} code{font-size:.95em}
.rule{font-weight:600;white-space:nowrap} .xla{color:#555;font-size:.9em}
.disagree{color:#d62728;font-weight:600} .drawing{overflow:auto;border:1px solid #ddd;padding:.5em}
.note{color:#8a6d00}
"""


def summary_html(ex, counted: str | None = None, top: int | None = DEFAULT_TOP) -> str:
    """The summary the command prints first, as an HTML fragment (a notebook's view of a
    report): the counts, the modelled time, the costliest groups with their predictions."""
    out = [f"<div><style>{_CSS}</style>", f"<h3>{escape(ex.module)}</h3>"]
    out += _summary(ex, counted)
    out += _groups(ex, top)
    out.append("</div>")
    return "\n".join(out)


def _summary(ex, counted: str | None = None) -> list[str]:
    s = ex.summary()
    pipeline = f", {ex.pipeline} pipeline" if ex.pipeline else ""
    gpu = f", {ex.gpu}" if ex.gpu else ""
    out = [f'<p class="dim">{escape(ex.backend)}{escape(pipeline)}{escape(gpu)}'
           f"{' — fused by hlofuse replay' if ex.stage == 'replayed' else ''}<br>"
           f"{escape(str(ex.input or ''))}<br>{escape(ex.detected)}</p>"]
    launched = s["kernels_launched"]
    per_run = s["bytes_across_boundaries_per_run"]
    out.append(f"<p><b>{s['kernels']}</b> kernels{' ' + escape(counted) if counted else ''}, "
               f"<b>{launched if launched is not None else '?'}</b> launches per run, "
               f"<b>{s['boundaries']}</b> boundaries (<b>{s['unknown']}</b> unknown), "
               f"{_bytes(s['bytes_across_boundaries'])} across them per pass"
               + (f", {_bytes(per_run)} per run" if per_run is not None else "") + ".</p>")
    modelled = s.get("modelled")
    if modelled is not None:
        total = modelled["modelled_us_per_run"]
        paid = modelled["boundaries_us_per_run"]
        share = f" ({paid / total:.1%})" if total else ""
        out.append(f"<p><b>Modelled: {escape(_us(total))} per run</b> on {escape(modelled['target']['description'])}; "
                   f"the boundaries account for {escape(_us(paid))} of it{share}.</p>")
    return out


def _groups(ex, top: int | None) -> list[str]:
    """The groups of boundaries (rule, source line), most costly first, as a table."""
    groups = list(ex.groups)
    shown = groups if top is None else groups[:top]
    if not shown:
        return []
    total = ex.cost.total_us if ex.cost is not None else None
    out = [f"<h2>Costliest causes ({len(shown)} of {len(groups)} groups of boundaries)</h2>",
           "<table><tr><th>#</th><th>µs/run</th><th>share</th><th>count</th><th>bytes/run</th><th>rule</th>"
           "<th>source</th><th>relaxing the rule (predicted)</th><th>hint</th></tr>"]
    for rank, g in enumerate(shown, 1):
        fix = g.fix.words(total) if g.fix is not None else ("" if not g.relaxable else "not predicted")
        out.append(f'<tr><td class="num">{rank}</td><td class="num">{_num_us(g.modelled_us)}</td>'
                   f'<td class="num">{_share(g.share)}</td><td class="num">{g.count}</td>'
                   f'<td class="num">{_bytes(g.bytes_per_run)}</td>'
                   f'<td class="rule" style="color:{rule_color(g.rule, g.tags)}">{escape(g.rule)}</td>'
                   f"<td><code>{escape(g.source_words())}</code></td><td>{escape(fix)}</td>"
                   f"<td>{escape(g.hint or '')}</td></tr>")
    out.append("</table>")
    if ex.predictions:
        out.append(f'<p class="dim">Predictions: {escape(ex.predictions)}.</p>')
    return out


def render_html(ex, svg: str | None = None, dot_source: str | None = None, svg_error: str | None = None) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>hlofuse explain: {escape(ex.module)}</title>", f"<style>{_CSS}</style></head><body>"]
    out.append(f"<h1>{escape(ex.module)}: why these kernels</h1>")
    out += _summary(ex)
    out += _groups(ex, None)
    s = ex.summary()

    out.append("<h2>Kernels per computation</h2><table><tr><th>computation</th><th>role</th><th>kernels</th>"
               "<th>of which</th><th>runs</th></tr>")
    for c in ex.computations:
        kinds = ", ".join(f"{v} {k}" for k, v in sorted(c.by_kind.items(), key=lambda kv: -kv[1]))
        runs = "?" if c.runs is None else str(c.runs)
        out.append(f"<tr><td><code>{escape(c.name)}</code></td><td>{escape(c.role)}</td>"
                   f'<td class="num">{c.kernels}</td><td>{escape(kinds)}</td><td class="num">{runs}</td></tr>')
    out.append("</table>")

    if ex.loops:
        out.append("<h2>While loops</h2><table><tr><th>while</th><th>source</th><th>trip count</th>"
                   "<th>kernels per iteration</th><th>launches in all</th></tr>")
        for lp in ex.loops:
            trip = "unknown" if lp.trip_count is None else f"{lp.trip_count} ({lp.trip_count_from})"
            cond = f"condition {lp.condition_kernels}" if lp.condition_launched else \
                "condition not launched: trip count known"
            out.append(f"<tr><td><code>{escape(lp.name)}</code></td>"
                       f"<td>{escape(lp.source.short()) if lp.source else ''}</td><td>{escape(trip)}</td>"
                       f'<td>{lp.kernels_per_iteration} (body {lp.body_kernels}; {escape(cond)})</td>'
                       f'<td class="num">{"?" if lp.kernels_total is None else lp.kernels_total}</td></tr>')
        out.append("</table>")

    out.append(f"<h2>Kernel boundaries ({len(ex.boundaries)})</h2><table><tr><th>#</th><th>producer → consumer</th>"
               "<th>rule</th><th>why</th><th>bytes</th><th>µs/run</th><th>source</th><th>hint</th></tr>")
    for i, b in enumerate(ex.boundaries, 1):
        consumer = b.consumer if b.consumer_kernel in (None, b.consumer) else f"{b.consumer} ({b.consumer_kernel})"
        producer = b.producer if b.producer == b.producer_kernel else f"{b.producer} ({b.producer_kernel})"
        why = escape(b.reason)
        if b.decided_in:
            why = f'<span class="dim">{escape(b.decided_in)}:</span> ' + why
        for later in b.then:
            why += f'<br><span class="dim">then {escape(later.text())}</span>'
        if b.xla_reason:
            cls = "disagree" if b.agrees_with_xla is False else "xla"
            why += f'<br><span class="{cls}">XLA: {escape(b.xla_reason)}</span>'
        src = ""
        if b.source is not None:
            src = escape(b.source.short())
            if b.source.op_name:
                src += f'<br><span class="dim">{escape(b.source.op_name)}</span>'
        relax = "" if b.relaxable is None else (" (relaxable)" if b.relaxable else "")
        out.append(f"<tr><td class=\"num\">{i}</td><td><code>{escape(producer)}</code> → "
                   f"<code>{escape(consumer)}</code></td>"
                   f'<td class="rule" style="color:{rule_color(b.rule, b.tags)}">{escape(b.rule)}{relax}</td>'
                   f'<td>{why}</td><td class="num">{_bytes(b.bytes)}</td><td class="num">{_num_us(b.modelled_us)}</td>'
                   f"<td>{src}</td><td>{escape(b.hint or '')}</td></tr>")
    out.append("</table>")

    out.append("<h2>Boundaries by rule</h2><table><tr><th>rule</th><th>count</th></tr>")
    for rule, count in s["boundaries_by_rule"].items():
        tags = next((b.tags for b in ex.boundaries if b.rule == rule), ())
        out.append(f'<tr><td class="rule" style="color:{rule_color(rule, tags)}">{escape(rule)}</td>'
                   f'<td class="num">{count}</td></tr>')
    out.append("</table>")

    hints = hints_by_text(ex)
    if hints:
        out.append("<h2>Hints</h2><ul>")
        for text, numbers in hints.items():
            out.append(f"<li>{escape(text)} <span class=\"dim\">(boundaries {_ranges(numbers)})</span></li>")
        out.append("</ul>")
    if ex.notes:
        out.append("<h2>Notes</h2><ul>" + "".join(f'<li class="note">{escape(n)}</li>' for n in ex.notes) + "</ul>")

    out.append("<h2>Drawing</h2>")
    if svg is not None:
        from .svg import inline_svg

        out.append(f'<div class="drawing">{inline_svg(svg)}</div>')
        out.append('<p class="dim">Each dashed box is a kernel; labelled edges are boundaries '
                   "(hover for the reason and source line).</p>")
    else:
        out.append(f'<p class="note">No drawing: {escape(svg_error or "Graphviz is not available")}.</p>')
        if dot_source:
            out.append(f"<details><summary>DOT source</summary><pre>{escape(dot_source)}</pre></details>")
    out.append('<p class="dim">Made by hlofuse explain.</p></body></html>')
    return "\n".join(out) + "\n"

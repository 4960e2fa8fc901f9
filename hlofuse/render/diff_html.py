"""A comparison as one self-contained HTML page, A and B side by side: no scripts, no external
files, inline CSS only (it can be attached to an issue as it is)."""

from __future__ import annotations

from html import escape

from .diff_rows import change_rows, kernel_rows, side_line, total_rows
from .html import _CSS

_DIFF_CSS = """
.a{background:#fdf3f3} .b{background:#f2f8f2} td.more{color:#b00020} td.less{color:#1a7f37}
td pre{margin:0;font-family:inherit;white-space:pre-wrap}
"""


def render_diff_html(d) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>hlofuse diff: {escape(d.a.explanation.module)} vs {escape(d.b.explanation.module)}</title>",
           f"<style>{_CSS}{_DIFF_CSS}</style></head><body>",
           f"<h1>{escape(d.a.explanation.module)} (A) vs {escape(d.b.explanation.module)} (B)</h1>",
           f"<p><b>{escape(d.headline)}</b></p>",
           f'<p class="dim">{escape(side_line("A", d.a, d.a_options))}<br>'
           f'{escape(side_line("B", d.b, d.b_options))}</p>']
    out.append("<h2>Totals</h2><table><tr><th></th><th class=\"a\">A</th><th class=\"b\">B</th><th>B − A</th></tr>")
    for row in total_rows(d):
        css = "more" if row.delta.startswith("+") else "less" if row.delta.startswith("-") else ""
        out.append(f'<tr><td>{escape(row.what)}</td><td class="num a">{escape(row.a)}</td>'
                   f'<td class="num b">{escape(row.b)}</td><td class="num {css}">{escape(row.delta)}</td></tr>')
    out.append("</table>")
    out.append("<h2>Kernels, matched by the instructions they compute</h2>")
    out.append('<table><tr><th>status</th><th class="a">A</th><th class="b">B</th><th>source</th>'
               "<th>launches A → B</th><th>instructions</th></tr>")
    for row in kernel_rows(d, include_same=True):
        out.append(f"<tr><td>{escape(row.status)}</td><td class=\"a\"><pre>{escape(chr(10).join(row.a))}</pre></td>"
                   f"<td class=\"b\"><pre>{escape(chr(10).join(row.b))}</pre></td><td>{escape(row.source)}</td>"
                   f"<td class=\"num\">{escape(row.launches)}</td><td>{escape(row.instructions)}</td></tr>")
    out.append("</table>")
    for title, changes, css in (("Boundaries in B only", d.added, "b"), ("Boundaries in A only", d.removed, "a")):
        out.append(f"<h2>{escape(title)} ({len(changes)})</h2>")
        if not changes:
            out.append('<p class="dim">none</p>')
            continue
        out.append(f'<table><tr><th>producer → consumer</th><th>bytes/run</th><th>rule</th>'
                   f'<th class="{css}">why, on its side</th><th>the other side</th><th>source</th></tr>')
        for row in change_rows(changes):
            out.append(f'<tr><td><code>{escape(row.pair)}</code></td><td class="num">{escape(row.bytes_per_run)}</td>'
                       f'<td class="rule">{escape(row.rule)}</td><td class="{css}">{escape(row.why)}</td>'
                       f"<td>{escape(row.other)}</td><td>{escape(row.source)}</td></tr>")
        out.append("</table>")
    for note in d.notes:
        out.append(f'<p class="note">note: {escape(note)}</p>')
    out.append("</body></html>")
    return "\n".join(out)

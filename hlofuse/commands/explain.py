"""`hlofuse explain`: every kernel boundary of a dump, the rule that keeps the two kernels
apart, the user's source line, and what to change."""

from __future__ import annotations

import click

from ..cli import check_outputs, guarded, input_options, main, stderr_console, stdout_console, write_atomically
from ..terminal import markup


def backend_options(fn):
    """--backend / --pipeline / --gpu / --xla-flags, shared by explain and render."""
    fn = click.option("--xla-flags", "xla_flags", metavar="FLAGS",
                      help="The XLA_FLAGS the program was compiled with, applied to the replay of the fusion "
                           "passes behind the explanation (default: jax's defaults).")(fn)
    fn = click.option("--gpu", metavar="NAME|FILE",
                      help="GPU description for the rules that depend on it (rtx2080ti, h100_sxm, a6000, ... "
                           "or a .txtpb); default: from the dump's sm_X file name.")(fn)
    fn = click.option("--pipeline", type=click.Choice(["legacy", "priority", "cpu"]),
                      help="Whose rules explain pass decisions: legacy (XLA:GPU of jaxlib 0.4.35, the paper's), "
                           "priority (today's XLA:GPU) or cpu; default: detected from the dump.")(fn)
    fn = click.option("--backend", type=click.Choice(["gpu", "cpu", "tpu"]),
                      help="XLA:GPU, XLA:CPU or XLA:TPU (default: detected from the dump's file names and "
                           "contents; XLA:TPU modules are explained by structure only).")(fn)
    return fn


def build_explanation(input, module_name, stage, backend, pipeline, gpu, relax=(), xla_flags=None, *,
                      quiet=False):
    """Resolve INPUT (file, dump folder or stdin) and explain it, as hlofuse.explain does; a
    module before fusion is replayed first.  Shared by `explain` and `render`; what was
    chosen is printed on stderr (unless quiet) before the work.  Returns the ExplainReport."""
    from ..api import explain_resolved, resolve_for_explain
    from ..cli import print_evidence, print_warnings

    resolved, flags = resolve_for_explain(input, module=module_name, stage=stage, backend=backend,
                                          pipeline=pipeline, gpu=gpu, relax=relax, xla_flags=xla_flags)
    print_warnings(resolved)
    if not quiet:
        print_evidence(resolved, detection=False)  # the report's header has the detection line
    return explain_resolved(resolved, relax=relax, xla_flags=flags)


@main.command("explain")
@input_options
@backend_options
@click.option("--relax", multiple=True, metavar="RULE|TAG",
              help="Relax a profitability rule in the replay, as `fuse`: a module before fusion is replayed; "
                   "on a fused dump, its snapshot before fusion is replayed instead (an error without one).")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON (schema in README.md).")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also write one CSV row per boundary (pandas can read it).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also write a self-contained HTML report (summary, boundary table, drawing) to attach to an issue.")
@click.option("--limit", type=int, default=None, metavar="N",
              help="Show at most N boundaries in the table (JSON, CSV and HTML always hold all).")
@guarded()
def explain_cmd(input, module_name, stage, backend, pipeline, gpu, xla_flags, relax, as_json, csv_path, html_path,
                limit):
    """Explain every kernel boundary: which rule keeps two kernels apart, with XLA's reason,
    the line of your code, the bytes that cross, and a hint.

    INPUT is a dump folder (XLA_FLAGS=--xla_dump_to=DIR), an HLO file or - (stdin).  A fused
    module (after_optimizations, the default; or a snapshot after fusion) is explained as XLA
    left it; a module before fusion (--stage before_fusion) is fused by hlofuse's replay first.

    \b
    Examples:
      hlofuse explain sample_dumps/gpu-legacy-rtx2080ti/cartpole_a_rng_customcall
      hlofuse explain dump/ --module jit_step --html report.html
      hlofuse explain dump/ --json | jq '.boundaries[] | select(.rule == "unknown")'
      hlofuse explain dump/ --csv boundaries.csv --limit 20
      hlofuse explain dump/ --stage before_fusion --pipeline legacy --relax concat

    A fused module is explained by replaying XLA's fusion passes from the dump's snapshot
    before fusion (or, without one, from the module with its fusions inlined): each boundary
    gets the decision that first kept its two kernels apart.

    \b
    Reading the output:
      rule       BND-* are structural (loops, tuples, library calls, copies added after
                 fusion); other ids are the fusion passes' rules (`hlofuse rules ID`)
      why        "PASS:" the pass that decided; "then ..." what later passes did to the
                 pair; a cost-model verdict shows µs fused vs unfused and its dominant term
      relaxable  whether `hlofuse fuse --relax RULE` may lift it (profitability only)
      XLA        XLA's own reason from *.priority_fusion_dump.txt, when the dump has it
                 (≠ where it differs from ours)
    """
    check_outputs({"--csv": csv_path, "--html": html_path}, [input, gpu])
    report = build_explanation(input, module_name, stage, backend, pipeline, gpu, relax, xla_flags, quiet=as_json)
    print_report(report, as_json=as_json, csv_path=csv_path, html_path=html_path, limit=limit)


def print_report(report, *, as_json=False, csv_path=None, html_path=None, limit=None) -> None:
    """An ExplainReport as `explain` prints it (also `compile --explain`): the table, or
    JSON; the CSV and HTML files written."""
    ex = report.explanation
    err = stderr_console()
    if csv_path:
        from ..render.csv import to_csv

        write_atomically(csv_path, to_csv(ex))
        err.print(f"[dim]wrote {markup(csv_path)}[/]")
    if html_path:
        write_atomically(html_path, html_report(ex))
        err.print(f"[dim]wrote {markup(html_path)}[/]")
    if as_json:
        import json

        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    from ..render.table import print_explanation

    counted = f"in {report.counts[0].words}" if report.counts else None
    # wide enough for the boundary table when piped; a terminal keeps its own width
    print_explanation(ex, stdout_console(width=200), limit=limit, counted=counted)


def html_report(ex) -> str:
    """The HTML report, with the drawing when Graphviz is installed (a note otherwise)."""
    from ..render.dot import DrawOptions, to_dot
    from ..render.html import render_html
    from ..render.svg import GraphvizMissing, to_svg

    dot_source = to_dot(ex.fused_module, ex, DrawOptions()) if ex.fused_module is not None else None
    svg = svg_error = None
    if dot_source is not None:
        try:
            svg = to_svg(dot_source)
        except GraphvizMissing as missing:
            svg_error = str(missing)
            stderr_console().print(f"[yellow]warning:[/] {markup(missing)}; the HTML report has no drawing")
    return render_html(ex, svg, dot_source, svg_error)


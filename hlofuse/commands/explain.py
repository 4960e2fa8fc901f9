"""`hlofuse explain`: every kernel boundary of a dump, the rule that keeps the two kernels
apart, the user's source line, and what to change."""

from __future__ import annotations

import click

from ..cli import check_outputs, guarded, input_options, main, stderr_console, stdout_console, write_atomically
from ..errors import OptionError
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


def triage_options(fn):
    """--predict/--no-predict and the CPU roofline's constants, shared by explain and compile."""
    fn = click.option("--cpu-launch-us", "cpu_launch_us", type=float, metavar="US",
                      help="CPU roofline: µs per kernel launch (default 0.25, measured; see README).")(fn)
    fn = click.option("--cpu-gflops", "cpu_gflops", type=float, metavar="GFLOP/S",
                      help="CPU roofline: elementwise FLOP rate of one core (default 2.25, measured).")(fn)
    fn = click.option("--cpu-bandwidth", "cpu_bandwidth", type=float, metavar="GB/S",
                      help="CPU roofline: memory bandwidth of one core in GB/s (default 25.6, measured).")(fn)
    fn = click.option("--predict/--no-predict", "predict", default=None,
                      help="Replay each relaxable rule (and XLA option) that decided one of the costliest groups "
                           "(--top N of them; every group with --all), to predict what relaxing it gains; one "
                           "replay per rule (default: when the module before fusion has at most 20,000 "
                           "instructions).")(fn)
    return fn


def build_explanation(input, module_name, stage, backend, pipeline, gpu, relax=(), xla_flags=None, *,
                      quiet=False, triage=None):
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
    return explain_resolved(resolved, relax=relax, xla_flags=flags, triage=triage)


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
@click.option("--top", type=click.IntRange(min=1), default=None, metavar="N",
              help="Show the N costliest groups of boundaries (default 10).")
@click.option("--all", "show_all", is_flag=True,
              help="Show everything: kernels per computation, loops, every boundary with its reason, every group.")
@click.option("--limit", type=click.IntRange(min=0), default=None, metavar="N",
              help="With --all, show at most N boundaries (JSON, CSV and HTML always hold all).")
@click.option("--all-modules", "all_modules", is_flag=True,
              help="Explain every module of the dump folder (in parallel processes) and rank their groups of "
                   "boundaries together.")
@click.option("--fail-on", "fail_on", multiple=True, metavar="COND",
              help="Exit with code 10 when a group of boundaries matches COND: a rule id, name or glob, a "
                   "tag, bytes>N (bytes per run; K, M, G suffixes), us>N (modelled µs per run), or several "
                   "joined with & (all must hold).  Repeat for several conditions (any may match).")
@triage_options
@guarded()
def explain_cmd(input, module_name, stage, backend, pipeline, gpu, xla_flags, relax, as_json, csv_path, html_path,
                top, show_all, limit, all_modules, fail_on, predict, cpu_bandwidth, cpu_gflops, cpu_launch_us):
    """Explain every kernel boundary and what it costs: the modelled time of the program, the
    costliest causes (rule and source line) with what relaxing the rule or following the hint
    would gain here; with --all, which rule keeps each pair of kernels apart, with XLA's reason,
    the line of your code and the bytes that cross.

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
    from ..api import triage_options as make_triage_options
    from ..render.table import DEFAULT_TOP
    from ..triage.gate import parse_conditions

    check_outputs({"--csv": csv_path, "--html": html_path}, [input, gpu])
    if limit is not None and not show_all:
        raise OptionError("--limit applies to the list of every boundary: give it with --all")
    if top is not None and show_all:
        raise OptionError("--top and --all contradict each other: --all lists every group")
    conditions = parse_conditions(fail_on)
    if all_modules:
        return _explain_folder(input, module_name, csv_path, html_path, relax, as_json, top, show_all, conditions,
                               dict(stage=stage, backend=backend, pipeline=pipeline, gpu=gpu, xla_flags=xla_flags,
                                    predict=predict, cpu_bandwidth=_giga(cpu_bandwidth),
                                    cpu_flop_rate=_giga(cpu_gflops), cpu_launch_us=cpu_launch_us))
    options = make_triage_options(predict, _giga(cpu_bandwidth), _giga(cpu_gflops), cpu_launch_us,
                                  predict_top=None if show_all else (top or DEFAULT_TOP))
    report = build_explanation(input, module_name, stage, backend, pipeline, gpu, relax, xla_flags, quiet=as_json,
                               triage=options)
    print_report(report, as_json=as_json, csv_path=csv_path, html_path=html_path, limit=limit, top=top,
                 full=show_all, conditions=conditions)


def _giga(value):
    return None if value is None else value * 1e9


def _explain_folder(folder, module_name, csv_path, html_path, relax, as_json, top, show_all, conditions, options):
    """--all-modules: every module of a dump folder, one ranking of their groups."""
    import os
    import time

    from ..render.table import DEFAULT_TOP, print_folder
    from ..triage.gate import check_gate, gate_dict, gate_message
    from ..triage.modules import triage_folder

    for given, name in ((module_name, "--module"), (csv_path, "--csv"), (html_path, "--html"), (relax, "--relax")):
        if given:
            raise OptionError(f"{name} applies to one module: give it without --all-modules")
    if not os.path.isdir(folder):
        raise OptionError(f"--all-modules needs a dump folder; {folder} is not one")
    start = time.perf_counter()
    result = triage_folder(folder, options)
    took = time.perf_counter() - start
    groups = result.group_records()
    matches = check_gate(groups, conditions) if conditions else []
    if as_json:
        import json

        payload = result.to_dict()
        payload["seconds"] = round(took, 2)
        if conditions:
            payload["fail_on"] = gate_dict(groups, conditions, matches)
        click.echo(json.dumps(payload, indent=2))
    else:
        print_folder(result, stdout_console(), top=None if show_all else (top or DEFAULT_TOP), seconds=took)
    if matches:
        import sys

        from ..errors import EXIT_GATE

        stderr_console().print(f"[red]failed:[/] {markup(gate_message(matches))}", soft_wrap=True)
        sys.exit(EXIT_GATE)


def print_report(report, *, as_json=False, csv_path=None, html_path=None, limit=None, top=None, full=False,
                 conditions=()) -> None:
    """An ExplainReport as `explain` prints it (also `compile --explain`): the report, or
    JSON; the CSV and HTML files written; then the --fail-on gate (exit code 10 when a
    condition matches a group)."""
    from ..triage.gate import check_gate, gate_dict

    ex = report.explanation
    matches = check_gate(ex.groups, conditions) if conditions else []
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

        payload = report.to_dict()
        if conditions:
            payload["fail_on"] = gate_dict(ex.groups, conditions, matches)
        click.echo(json.dumps(payload, indent=2))
    else:
        from ..render.table import DEFAULT_TOP, print_explanation

        counted = f"in {report.counts[0].words}" if report.counts else None
        # piped: $COLUMNS or 160 columns, wrapped at spaces only; a terminal keeps its width
        print_explanation(ex, stdout_console(), limit=limit, counted=counted, top=top or DEFAULT_TOP, full=full)
    if matches:
        import sys

        from ..errors import EXIT_GATE
        from ..triage.gate import gate_message

        err.print(f"[red]failed:[/] {markup(gate_message(matches))}", soft_wrap=True)
        sys.exit(EXIT_GATE)


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


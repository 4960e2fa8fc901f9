"""`hlofuse diff`: two compiles of a program compared — which kernels changed, which kernel
boundaries exist on one side only and what the other side decided for the same pair."""

from __future__ import annotations

import click

from ..cli import cache_option, check_outputs, guarded, main, stderr_console, stdout_console, write_atomically
from ..terminal import markup


@main.command("diff")
@click.argument("a", metavar="A")
@click.argument("b", metavar="[B]", required=False)
@click.option("--module", "module_name", metavar="NAME",
              help="Module of a dump folder, in A and in B (jit_f, module_0001, module_0001.jit_f); default: the "
                   "only or largest one of each, as `explain` chooses.")
@click.option("--stage", metavar="STAGE",
              help="Stage of a dump folder, in A and in B (default: XLA's final module, after_optimizations; "
                   "with A alone, its snapshot before fusion, replayed twice).")
@click.option("--backend", type=click.Choice(["gpu", "cpu", "tpu"]), help="A's compiler (default: detected).")
@click.option("--pipeline", type=click.Choice(["legacy", "priority", "cpu"]), help="A's pipeline (default: detected).")
@click.option("--gpu", metavar="NAME|FILE", help="A's GPU (rtx2080ti, h100_sxm, a100_sxm_80, ... or a .txtpb).")
@click.option("--xla-flags", "xla_flags", metavar="FLAGS", help="The XLA_FLAGS A was compiled with (its replay).")
@click.option("--vs-pipeline", "vs_pipeline", type=click.Choice(["legacy", "priority", "cpu"]),
              help="B's pipeline (with A alone: A replayed by this pipeline).")
@click.option("--vs-gpu", "vs_gpu", metavar="NAME|FILE", help="B's GPU (with A alone: A replayed for this GPU).")
@click.option("--vs-xla-flags", "vs_xla_flags", metavar="FLAGS",
              help="B's XLA_FLAGS (with A alone: A replayed with them; the flags the rules read are applied).")
@click.option("--relax", multiple=True, metavar="RULE|TAG",
              help="Relax a profitability rule in B's replay (with A alone: A replayed with and without it).")
@click.option("--json", "as_json", is_flag=True, help='Print the comparison as JSON ("schema": "hlofuse.diff/1").')
@click.option("--html", "html_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also write a self-contained HTML page, A and B side by side.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also write one CSV row per boundary that exists on one side only.")
@click.option("--all", "show_all", is_flag=True,
              help="List every kernel (the same ones too) and every one-sided boundary.")
@cache_option
@guarded()
def diff_cmd(a, b, module_name, stage, backend, pipeline, gpu, xla_flags, vs_pipeline, vs_gpu, vs_xla_flags, relax,
             as_json, html_path, csv_path, show_all):
    """Compare two compiles of a program: what changed in the fusion plan, and why.

    A and B are dump folders, HLO files or - (stdin), each explained as `explain` explains
    it.  Kernels are matched by the instructions they compute (the line of your code and the
    op, so a renumbered or upgraded compile still matches); a boundary that exists on one
    side only comes with its rule and reason there and the other side's account of the same
    pair (fused there, and by which decision).  With A alone, A is replayed twice: as it is
    and with --vs-gpu, --vs-pipeline, --vs-xla-flags or --relax.

    \b
    Examples:
      hlofuse diff sample_dumps/gpu-legacy-h100/adam_update sample_dumps/gpu-current-h100/adam_update
      hlofuse diff sample_dumps/gpu-current-h100/cartpole_b_concat sample_dumps/gpu-current-h100/cartpole_c_separate
      hlofuse diff sample_dumps/cpu-noynn/mlp sample_dumps/cpu/mlp --html mlp.html
      hlofuse diff sample_dumps/gpu-current-h100/adam_update --vs-gpu rtx2080ti
      hlofuse diff sample_dumps/gpu-legacy-rtx2080ti/softmax --vs-pipeline priority
      hlofuse diff dump/ --relax PF-UNPROFITABLE --json | jq .summary

    \b
    Reading the output:
      the headline   what B launches and moves more or less than A per run, then the
                     largest buffer a boundary materialises on one side only: why it is
                     there, and what the other side did with the same two instructions
      Totals         each side's totals exactly as `explain` prints them for it
      Kernels        same, changed-kind (same instructions, another kind), changed,
                     split, merged, regrouped, added, removed; "(by op)": matched by
                     opcode and op name where the source lines differ
    """
    from ..api import diff_resolved, resolve_for_diff
    from ..cli import print_evidence, print_warnings

    check_outputs({"--html": html_path, "--csv": csv_path}, [a, b, gpu, vs_gpu])
    sides = resolve_for_diff(a, b, module=module_name, stage=stage, backend=backend, pipeline=pipeline, gpu=gpu,
                             xla_flags=xla_flags, vs_pipeline=vs_pipeline, vs_gpu=vs_gpu,
                             vs_xla_flags=vs_xla_flags, relax=relax)
    for label, side in (("A", sides.a), ("B", sides.b)):
        print_warnings(side)
        if not as_json:
            err = stderr_console()
            err.print(f"[dim]{label}:[/]", end=" ")
            print_evidence(side)
        if sides.one_input:
            break
    if sides.one_input and not as_json:
        stderr_console().print(f"[dim]{markup(sides.b.detected)}[/]", soft_wrap=True)
    result = diff_resolved(sides)
    err = stderr_console()
    if csv_path:
        from ..render.csv import csv_text
        from ..render.diff_rows import changes_frame

        write_atomically(csv_path, csv_text(changes_frame(result)))
        err.print(f"[dim]wrote {markup(csv_path)}[/]")
    if html_path:
        from ..render.diff_html import render_diff_html

        write_atomically(html_path, render_diff_html(result))
        err.print(f"[dim]wrote {markup(html_path)}[/]")
    if as_json:
        import json

        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    from ..render.diff_table import DEFAULT_LIMIT, print_diff

    print_diff(result, stdout_console(), limit=None if show_all else DEFAULT_LIMIT, include_same=show_all)

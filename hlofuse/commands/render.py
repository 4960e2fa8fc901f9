"""`hlofuse render`: the module as a Graphviz drawing — operations as nodes, kernels as
clusters, boundaries as labelled edges (the paper's Fig. 3)."""

from __future__ import annotations

import click

from ..cli import check_outputs, guarded, main, stderr_console, write_atomically
from ..terminal import markup
from .explain import backend_options, build_explanation


@main.command("render")
@click.argument("input", metavar="INPUT")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), metavar="OUT.svg",
              help="Where to write the drawing (SVG, or DOT with --dot).")
@click.option("--module", "module_name", metavar="NAME",
              help="Module of a dump folder (jit_f, module_0001...); default: the only or largest one.")
@click.option("--stage", default="after", metavar="before|after|STAGE",
              help="after (default): the fused module, boundaries labelled; before: the graph XLA's fusion "
                   "started from (a dump's before-fusion snapshot), unlabelled; or any dump stage name.")
@click.option("--computation", metavar="NAME", help="Draw only this computation (e.g. a while body).")
@click.option("--focus", metavar="INSTR", help="Draw only the neighbourhood of this instruction or kernel.")
@click.option("--radius", type=int, default=2, show_default=True, metavar="N",
              help="With --focus: how many edges away from INSTR to draw.")
@click.option("--collapse/--expand", default=None,
              help="One node per kernel, or every operation (default: collapse above "
                   "300 operations unless --computation or --focus narrows the view).")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, metavar="N",
              help="On a large module (kernels collapsed, more than 40), draw the kernels of the N costliest groups "
                   "of boundaries (ranked as `hlofuse explain` ranks them).")
@click.option("--full", is_flag=True, help="Draw every kernel, however many (Graphviz may take minutes).")
@click.option("--dot", "as_dot", is_flag=True, help="Write Graphviz's DOT source instead of SVG.")
@backend_options
@guarded(None)
def render_cmd(input, output, module_name, stage, computation, focus, radius, collapse, top, full, as_dot,
               backend, pipeline, gpu, xla_flags):
    """Draw a module like the paper's Fig. 3: each kernel a dashed cluster of its operations,
    each boundary an edge labelled with its rule and coloured by kind of reason (loop: purple,
    tuple: blue, library call: green, copy: orange, concatenate/duplication: dark blue,
    unknown: red); hover an edge for the full reason and the source line.

    \b
    Examples:
      hlofuse render sample_dumps/gpu-legacy-rtx2080ti/cartpole_b_concat_vecdone -o cartpole.svg
      hlofuse render dump/ -o body.svg --computation region_0.99
      hlofuse render dump/ -o around.svg --focus concatenate.4 --radius 3
      hlofuse render dump/ -o before.svg --stage before
      hlofuse render dump/ -o graph.dot --dot

    A large module (more than 300 operations) is drawn one node per kernel, and with more than
    40 kernels only the kernels of the costliest groups of boundaries (--top N, default 10;
    edges labelled #N as `hlofuse explain` ranks the groups); --full draws every kernel.

    Without Graphviz's `dot` program the DOT source is written next to OUT (OUT.dot) and the
    command says how to install Graphviz.
    """
    from ..render.dot import DrawOptions, to_dot
    from ..render.svg import GraphvizMissing, to_svg

    check_outputs({"-o": output}, [input, gpu])
    options = DrawOptions(computation=computation, focus=focus, radius=radius, collapse=collapse,
                          top=None if full else top)
    if stage in ("before", "before_fusion"):
        module = _before_module(input, module_name, backend, pipeline, gpu)
        source = to_dot(module, None, DrawOptions(computation=computation, focus=focus, radius=radius,
                                                  collapse=collapse, title=f"{module.name} before fusion"))
    else:
        from ..triage import TriageOptions

        ex = build_explanation(input, module_name, stage, backend, pipeline, gpu, xla_flags=xla_flags,
                               quiet=True, triage=TriageOptions(predict=False)).explanation
        source = to_dot(ex.fused_module, ex, options)
    err = stderr_console()
    if as_dot:
        write_atomically(output, source)
        err.print(f"[dim]wrote {markup(output)}[/]")
        return
    try:
        svg = to_svg(source)
    except GraphvizMissing as missing:
        dot_path = output[:-4] + ".dot" if output.endswith(".svg") else output + ".dot"
        write_atomically(dot_path, source)
        raise GraphvizMissing(f"{missing} (the DOT source is in {dot_path})") from None
    write_atomically(output, svg)
    err.print(f"[dim]wrote {markup(output)}[/]")


def _before_module(input, module_name, backend, pipeline, gpu):
    """The module right before fusion: a dump's before-fusion snapshot, or the input itself."""
    from ..cli import resolve_input
    from ..inputs import BEFORE

    return resolve_input(input, need=BEFORE, module=module_name, backend=backend, pipeline=pipeline,
                         gpu=gpu).module

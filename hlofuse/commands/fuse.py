"""`hlofuse fuse`, `hlofuse rules` and `hlofuse check`: replay XLA's fusion passes, document
the rules, and measure the replay against what XLA really did."""

from __future__ import annotations

import json

import click

from ..cli import cache_option, check_outputs, guarded, main, stdout_console, write_atomically
from ..errors import OptionError
from ..terminal import markup


def _pipeline_options(fn):
    fn = click.option("--xla-flags", "xla_flags", metavar="FLAGS",
                      help="The XLA_FLAGS the program was compiled with, e.g. \"$XLA_FLAGS\" or "
                           "'--xla_gpu_mlir_emitter_level=4' (default: jax's defaults; flags hlofuse does not "
                           "model are listed in the notes).")(fn)
    fn = click.option("--library-fusion/--no-library-fusion", "library_fusion", default=None,
                      help="XLA:CPU: whether dots and their neighbours become library (YNNPACK) fusions before "
                           "`fusion` (default: as the input shows; XLA's option xla_cpu_experimental_ynn_fusion_type).")(fn)
    fn = click.option("--relax", "relax", multiple=True, metavar="RULE|TAG",
                      help="Relax a profitability rule (id, name, tag or glob); repeatable. "
                           "`--relax concat` lets a concatenate with several users fuse.")(fn)
    fn = click.option("--gpu", metavar="NAME|FILE",
                      help="GPU description: a6000, h100_sxm, rtx2080ti (default), ... or a .txtpb file.")(fn)
    fn = click.option("--passes", metavar="P,Q",
                      help="Only these passes, by XLA's names (fusion, fusion_merger, multi_output_fusion, "
                           "horizontal_loop_fusion, priority-fusion, fusion-wrapper, ...).")(fn)
    fn = click.option("--pipeline", type=click.Choice(["legacy", "priority", "cpu"]),
                      help="legacy: XLA:GPU until 2024 (the paper's); priority: today's XLA:GPU (default "
                           "for gpu); cpu: XLA:CPU.")(fn)
    fn = click.option("--backend", type=click.Choice(["gpu", "cpu", "tpu"]),
                      help="Which compiler's passes to replay (default: detected from the dump; XLA:TPU's "
                           "are not replayed).")(fn)
    return fn


@main.command("fuse")
@click.argument("input", metavar="INPUT")
@click.option("--module", "module_name", metavar="NAME", help="Module of a dump folder.")
@click.option("--stage", metavar="STAGE", help="Stage to start from (default: right before fusion).")
@_pipeline_options
@click.option("--json", "as_json", is_flag=True, help="Print kernels and decisions as JSON.")
@click.option("--all", "show_all", is_flag=True,
              help="List every kernel and every decision that kept ops apart or was relaxed (default: a summary "
                   "and the decisions that formed kernel boundaries; --json holds everything).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the fused module as HLO text.")
@cache_option
@guarded()
def fuse_cmd(input, module_name, stage, backend, pipeline, passes, gpu, relax, library_fusion, xla_flags, as_json,
             show_all, output):
    """Replay XLA's fusion passes: a summary of the kernels and the decisions that formed their
    boundaries (--all: every kernel and every decision that kept ops apart).

    \b
    Examples:
      hlofuse fuse sample_dumps/gpu-legacy-rtx2080ti/cartpole_b_concat --pipeline legacy
      hlofuse fuse dump/ --relax concat                 # what a bolder XLA would do
      hlofuse fuse model.hlo --backend cpu --passes fusion -o fused.hlo
      hlofuse fuse dump/ --json | jq '.decisions[] | select(.verdict=="blocked")'
    """
    from .. import counts
    from ..api import replay_options, xla_counts
    from ..cli import print_evidence, resolve_input
    from ..collector import collector_paused
    from ..inputs import REPLAY, check_options
    from ..result_cache import cached_replay as replay
    from ..printer import print_module
    from ..render.json import dumps_listing

    check_outputs({"-o": output}, [input, gpu])
    check_options(backend=backend, pipeline=pipeline, gpu=gpu, relax=relax,
                  xla_flags=(xla_flags,) if xla_flags else ())
    resolved = resolve_input(input, need=REPLAY, module=module_name, stage=stage, backend=backend,
                             pipeline=pipeline, gpu=gpu)
    options = replay_options(resolved, passes, relax, library_fusion, xla_flags)
    if not as_json:
        print_evidence(resolved)
    result = replay(resolved.module, options)
    baseline = None
    if options.relax:
        from dataclasses import replace

        baseline = replay(resolved.module, replace(options, relax=()))
    if output:
        write_atomically(output, print_module(result.module))
    kernel_counts = xla_counts(resolved, counts.count(result.module, counts.REPLAY, resolved.main.name))
    if as_json:
        with collector_paused():  # a million small dicts and strings, no cycles
            payload = result.to_dict()
            if baseline is not None:
                payload["kernels_without_relax"] = len(baseline.kernels)
            payload["replayed_from"] = resolved.main.name
            payload["counts"] = [c.to_dict() for c in kernel_counts]
            payload["counts_differ"] = counts.differences(kernel_counts)
            payload["evidence"] = list(resolved.evidence)
            text = dumps_listing(payload)
        click.echo(text)
        return
    _print_result(result, baseline, resolved, kernel_counts, show_all)


def _print_result(result, baseline, resolved, kernel_counts, show_all: bool) -> None:
    from .. import counts

    out = stdout_console()
    out.print(f"[bold]{markup(result.input.name)}[/]: {len(result.kernels)} kernels in hlofuse's "
              f"{result.backend}/{result.pipeline} replay ({', '.join(result.passes)})"
              + (f" on {markup(result.gpu)}" if result.gpu else "")
              + f" of {markup(resolved.main.role or 'the module given')} ({markup(_short(resolved.main.name))})")
    for line in counts.differences(kernel_counts):
        out.print(f"[dim]{markup(line)}[/]")
    if baseline is not None:
        out.print(f"relaxed {markup(', '.join(result.relaxed))}: {len(baseline.kernels)} → {len(result.kernels)} kernels")
    if show_all:
        _print_everything(out, result)
    else:
        _print_summary(out, result)
    for note in result.notes:
        out.print(f"[dim]note: {markup(note)}[/]")


def boundary_decisions(result) -> list:
    """The decisions that formed the replay's kernel boundaries: for each pair of kernels that a
    refusal kept apart (the instructions behind its producer all in kernels other than those
    behind its consumer), the first such refusal, in the order the passes made them.  Refusals
    whose pair was fused later, and those about instructions that launch nothing (parameters,
    tuples, constants), formed no boundary."""
    from ..decision import Verdict

    kernel_of = {}
    for k in result.kernels:
        for name in k.instructions:
            kernel_of[(k.computation, name)] = k.name
    seen, out = set(), []
    for d in result.decisions:
        if d.verdict == Verdict.FUSED:
            continue
        sides = []
        for members in (d.producer_members or (d.producer,), d.consumer_members or (d.consumer,)):
            sides.append(frozenset(kernel_of[(d.computation, m)] for m in members if (d.computation, m) in kernel_of))
        producer, consumer = sides
        if not producer or not consumer or producer & consumer:
            continue
        key = (d.computation, producer, consumer)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _print_summary(out, result) -> None:
    """Counts, then one line per decision that formed a boundary (plain lines: a table of
    thousands of wrapped rows would cost more than the replay)."""
    from collections import Counter

    from ..terminal import printable

    kinds = Counter(k.kind for k in result.kernels)
    verdicts = Counter(d.verdict.value for d in result.decisions)
    formed = boundary_decisions(result)
    out.print(_counted(len(result.kernels), "kernels", [f"{n} {markup(kind)}" for kind, n in kinds.most_common()]))
    out.print(_counted(len(result.decisions), "decisions", [f"{n} {v}" for v, n in verdicts.most_common()]))
    if not formed:
        out.print("no decision kept two kernels apart (--all lists every decision that kept ops apart)")
        return
    rules = Counter(_rule_label(d) for d in formed)
    out.print(f"{len(formed)} kernel {'boundary' if len(formed) == 1 else 'boundaries'} formed by: "
              + ", ".join(f"{markup(rule)} {n}" for rule, n in rules.most_common()))
    out.print("[bold]the decisions that formed them[/] (the first per pair of kernels; --all for every decision "
              "that kept ops apart, --json for everything):")
    lines = []
    for d in formed:
        where = f"{d.computation}: " if d.computation else ""
        xla = f"  (XLA: {d.xla_reason})" if d.xla_reason else ""
        lines.append(f"  {d.pass_name}  {where}{d.producer} → {d.consumer}  {_rule_label(d)}: {d.reason}{xla}")
    click.echo(printable("\n".join(lines), keep_newlines=True))


def _counted(total: int, noun: str, parts: list[str]) -> str:
    """'5 decisions: 3 fused, 2 blocked' (no colon when there is nothing to break down)."""
    return f"{total} {noun}: " + ", ".join(parts) if parts else f"{total} {noun}"


def _rule_label(d) -> str:
    from ..decision import Verdict

    if d.verdict == Verdict.RELAXED:
        return f"{', '.join(d.relaxed)} (relaxed)"
    return d.rule or d.verdict.value


def _print_everything(out, result) -> None:
    from rich.table import Table

    from ..decision import Verdict

    kernels = Table(title="kernels", title_justify="left")
    for col in ("computation", "kernel", "kind", "instructions"):
        kernels.add_column(col)
    for k in result.kernels:
        members = ", ".join(k.instructions[:6]) + (f", … ({len(k.instructions)})" if len(k.instructions) > 6 else "")
        kernels.add_row(markup(k.computation), markup(k.name), markup(k.kind), markup(members))
    out.print(kernels)
    blocked = [d for d in result.decisions if d.verdict != Verdict.FUSED]
    table = Table(title=f"decisions that kept ops apart or were relaxed ({len(blocked)} of "
                        f"{len(result.decisions)} considered)", title_justify="left")
    for col in ("pass", "producer → consumer", "rule", "why"):
        table.add_column(col)
    for d in blocked:
        why = markup(d.reason) + (f"  [dim](XLA: {markup(d.xla_reason)})[/]" if d.xla_reason else "")
        rule = d.rule or ""
        if d.verdict == Verdict.RELAXED:
            rule = f"{', '.join(d.relaxed)} (relaxed)"
        table.add_row(markup(d.pass_name), markup(f"{d.producer} → {d.consumer}"), markup(rule), why)
    out.print(table)


def _short(name: str) -> str:
    from pathlib import Path

    return Path(name).name if name not in ("-", "<stdin>") else name


# ------------------------------------------------------------------------------------------
# hlofuse rules
# ------------------------------------------------------------------------------------------


@main.command("rules")
@click.argument("refs", nargs=-1, metavar="[ID|NAME|TAG|GLOB]...")
@click.option("--json", "as_json", is_flag=True, help="Print the rules as JSON.")
@click.option("--pipeline", type=click.Choice(["legacy", "priority", "cpu"]), help="Only this pipeline's rules.")
@cache_option
@guarded()
def rules_cmd(refs, as_json, pipeline):
    """List the fusion rules, or document some of them (like `ruff rule`).

    \b
    Examples:
      hlofuse rules                      # the table of all rules
      hlofuse rules concat               # every rule tagged concat, documented
      hlofuse rules 'MOF-*' --json
    """
    from ..rule_catalogue import catalogue, find

    known = catalogue()
    rules = find(refs, known) if refs else sorted(known.values(), key=lambda r: r.id)
    if pipeline:
        rules = [r for r in rules if pipeline in r.pipelines]
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rules], indent=2))
        return
    if not refs:
        click.echo(_rules_table(rules))
        return
    out = stdout_console()
    for r in rules:
        out.rule(f"[bold]{r.id}[/] {r.name}")
        out.print(f"pipelines: {', '.join(r.pipelines)}   passes: {', '.join(r.passes)}   "
                  f"tags: {', '.join(sorted(r.tags))}   relaxable: {'yes' if r.relaxable else 'no'}")
        out.print(r.doc, markup=False)
        out.print(f"XLA: {r.xla.file} · {r.xla.function} · {r.xla.commit[:12]}", markup=False)
        if r.xla.message:
            out.print(f'XLA says: "{r.xla.message}"', markup=False)
        out.print(f"implemented at {r.source[0]}:{r.source[1]}", markup=False)


def _rules_table(rules) -> str:
    """The rules in aligned columns, one line each, the summary last and never cut (plain text:
    a rich table of a hundred wrapped rows costs more than the rest of the command)."""
    rows = [("id", "name", "pipelines", "tags", "relaxable", "summary")]
    rows += [(r.id, r.name, ",".join(r.pipelines), ",".join(sorted(r.tags)), "yes" if r.relaxable else "no",
              r.summary) for r in rules]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [f"{len(rules)} rules"]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[5] for row in rows]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# hlofuse check
# ------------------------------------------------------------------------------------------


@main.command("check")
@click.argument("inputs", nargs=-1, required=True, metavar="BEFORE AFTER | DUMP_DIR")
@click.option("--module", "module_name", metavar="NAME", help="Module of a dump folder.")
@_pipeline_options
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--all", "show_all", is_flag=True, help="List the kernels reproduced exactly too.")
@cache_option
@guarded()
def check_cmd(inputs, module_name, backend, pipeline, passes, gpu, relax, library_fusion, xla_flags, as_json,
              show_all):
    """Replay the fusion pipeline on XLA's module from right before fusion and compare the
    kernels with XLA's module right after it: how far to trust an explanation.

    \b
    Examples:
      hlofuse check dump/                                 # the dump's before/after fusion snapshots
      hlofuse check before_fusion.txt after_fusion.txt --pipeline legacy --gpu rtx2080ti
      hlofuse check dump/ --json | jq .agreement
    """
    from ..api import check_resolved, replay_options, resolve_for_check
    from ..cli import print_evidence, print_warnings

    if len(inputs) > 2:
        raise OptionError("give BEFORE AFTER files, or one dump folder")
    resolved, flags = resolve_for_check(inputs[0], inputs[1] if len(inputs) == 2 else None, module=module_name,
                                        backend=backend, pipeline=pipeline, gpu=gpu, relax=relax,
                                        xla_flags=xla_flags)
    print_warnings(resolved)
    options = replay_options(resolved, passes, relax, library_fusion, flags)
    if not as_json:
        print_evidence(resolved)
    report = check_resolved(resolved, options)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    _print_check(report.result, show_all, report.xla_reason, list(report.counts))


def _print_check(result, show_all, xla_reasons, kernel_counts) -> None:
    from rich.table import Table

    from .. import counts

    out = stdout_console()
    xla, ours = kernel_counts[0], kernel_counts[1]
    out.print(f"[bold]{markup(result.module)}[/]: {result.reproduced} of {result.xla_kernels} kernels of "
              f"{xla.words} reproduced exactly ({result.agreement:.0%}) by the {result.backend}/{result.pipeline} "
              f"replay" + (f" on {markup(result.gpu)}" if result.gpu else "") + f", which has {ours.kernels} kernels")
    for line in counts.differences(kernel_counts):
        out.print(f"[dim]{markup(line)}[/]")
    if all(m.status == "exact" for m in result.matches) and not show_all:
        return
    table = Table(title_justify="left")
    for col in ("computation", "status", "XLA kernel", "ours", "instructions", "why we differ"):
        table.add_column(col)
    for m in result.matches:
        if m.status == "exact" and not show_all:
            continue
        decisions = result.decisions.get((m.computation, m.xla_kernel, m.ours), ())
        why = "; ".join(
            markup(f"{d.producer}→{d.consumer}: {d.rule or d.verdict.value} {d.reason}")
            + (f" [dim](XLA log: {markup(xla_reasons(d.producer, d.consumer))})[/]"
               if xla_reasons and xla_reasons(d.producer, d.consumer) else "")
            for d in decisions[:3])
        if m.kinds:
            why = markup(f"XLA made a {m.kinds[0]} fusion of these instructions, the replay a {m.kinds[1]} one")
        if m.outputs:
            why = markup(f"the same instructions, but XLA's kernel writes {', '.join(m.outputs[0])} and the "
                         f"replay's {', '.join(m.outputs[1])}")
        members = ", ".join(m.members[:5]) + (f", … ({len(m.members)})" if len(m.members) > 5 else "")
        style = {"exact": "green", "kind": "magenta", "outputs": "magenta", "missing": "red",
                 "extra": "yellow"}[m.status]
        table.add_row(markup(m.computation), f"[{style}]{m.status}[/]", markup(m.xla_kernel or ""),
                      markup(m.ours or ""), markup(members), why)
    out.print(table)

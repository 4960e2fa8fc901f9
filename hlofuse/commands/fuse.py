"""`hlofuse fuse`, `hlofuse rules` and `hlofuse check`: replay XLA's fusion passes, document
the rules, and measure the replay against what XLA really did."""

from __future__ import annotations

import json

import click

from ..cli import guarded, main, stderr_console, stdout_console, write_atomically
from ..errors import InputError


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
    fn = click.option("--backend", type=click.Choice(["gpu", "cpu"]),
                      help="Which compiler's passes to replay (default: detected from the dump).")(fn)
    return fn


def _options(input_path, module, backend, pipeline, passes, gpu, relax, library_fusion=None, xla_flags=None):
    from ..pipeline import Options

    backend, pipeline, why = _detect(input_path, module, backend, pipeline)
    if why:
        stderr_console().print(f"[dim]{why}[/]")
    if backend == "gpu" and gpu is None:
        from ..device import detect_gpu

        gpu, why_gpu = detect_gpu(input_path, module)
        if why_gpu:
            stderr_console().print(f"[dim]{why_gpu}[/]")
    return Options(backend=backend, pipeline=pipeline,
                   passes=tuple(p.strip() for p in passes.split(",") if p.strip()) if passes else None,
                   gpu=gpu, relax=tuple(relax), library_fusion=library_fusion,
                   xla_flags=(xla_flags,) if xla_flags else ())


def _detect(input_path, module, backend, pipeline):
    """The backend and pipeline to use, and a line saying why when they were not given."""
    if pipeline == "cpu":
        backend = backend or "cpu"
    if pipeline in ("legacy", "priority"):
        backend = backend or "gpu"
    if backend is not None:
        return backend, pipeline, ""
    try:
        from ..backend import detect  # XLA:CPU / XLA:GPU detection from the dump
    except ImportError:
        return "gpu", pipeline, "backend: gpu (default; give --backend cpu for XLA:CPU dumps)"
    found = detect(input_path, module)
    return found.backend, pipeline or found.pipeline, f"backend: {found.backend} ({found.why})"


def _load_for_fusion(input_path, module_name, stage, pipeline):
    """The module to replay: XLA's snapshot right before fusion when the dump has one."""
    from .. import dumpdir
    from ..cli import load_input

    err = stderr_console()
    if stage is None:
        from pathlib import Path

        if Path(input_path).is_dir():
            files = dumpdir.choose_module(dumpdir.scan(input_path), module_name, input_path)
            snap = dumpdir.fusion_snapshot(files, "before_fusion", pipeline)
            if snap is not None:
                err.print(f"[dim]replaying from XLA's snapshot right before fusion: {snap.path.name}[/]")
                stage = str(snap.step)
            else:
                stage = "before_optimizations"
                err.print("[yellow]warning:[/] this dump has no snapshot right before fusion; using "
                          "before_optimizations: XLA's earlier passes (simplification, layout assignment, ...) "
                          "did not run, so the replay is approximate")
    module, name = load_input(input_path, module_name, stage, pipeline)
    if stage is None and "before_optimizations" in (name or ""):
        err.print("[yellow]warning:[/] this module is from before XLA's optimizations: earlier passes did not run, "
                  "so the replay is approximate")
    return module, name


@main.command("fuse")
@click.argument("input", metavar="INPUT")
@click.option("--module", "module_name", metavar="NAME", help="Module of a dump folder.")
@click.option("--stage", metavar="STAGE", help="Stage to start from (default: right before fusion).")
@_pipeline_options
@click.option("--json", "as_json", is_flag=True, help="Print kernels and decisions as JSON.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the fused module as HLO text.")
@guarded()
def fuse_cmd(input, module_name, stage, backend, pipeline, passes, gpu, relax, library_fusion, xla_flags, as_json,
             output):
    """Replay XLA's fusion passes and show the kernels and every decision that formed them.

    \b
    Examples:
      hlofuse fuse sample_dumps/gpu-legacy-rtx2080ti/cartpole_b_concat --pipeline legacy
      hlofuse fuse dump/ --relax concat                 # what a bolder XLA would do
      hlofuse fuse model.hlo --backend cpu --passes fusion -o fused.hlo
      hlofuse fuse dump/ --json | jq '.decisions[] | select(.verdict=="blocked")'
    """
    from ..pipeline import replay
    from ..printer import print_module
    from ..collector import collector_paused
    from ..render.json import dumps_listing

    options = _options(input, module_name, backend, pipeline, passes, gpu, relax, library_fusion, xla_flags)
    module, name = _load_for_fusion(input, module_name, stage, options.pipeline)
    result = replay(module, options)
    baseline = None
    if options.relax:
        from dataclasses import replace

        baseline = replay(module, replace(options, relax=()))
    if output:
        write_atomically(output, print_module(result.module))
    if as_json:
        with collector_paused():  # a million small dicts and strings, no cycles
            payload = result.to_dict()
            if baseline is not None:
                payload["kernels_without_relax"] = len(baseline.kernels)
            text = dumps_listing(payload)
        click.echo(text)
        return
    _print_result(result, baseline)


def _print_result(result, baseline) -> None:
    from rich.table import Table

    from ..decision import Verdict

    out = stdout_console()
    out.print(f"[bold]{result.input.name}[/]: {len(result.kernels)} kernels after "
              f"{result.backend}/{result.pipeline} ({', '.join(result.passes)})"
              + (f" on {result.gpu}" if result.gpu else ""))
    if baseline is not None:
        out.print(f"relaxed {', '.join(result.relaxed)}: {len(baseline.kernels)} → {len(result.kernels)} kernels")
    kernels = Table(title="kernels", title_justify="left")
    for col in ("computation", "kernel", "kind", "instructions"):
        kernels.add_column(col)
    for k in result.kernels:
        members = ", ".join(k.instructions[:6]) + (f", … ({len(k.instructions)})" if len(k.instructions) > 6 else "")
        kernels.add_row(k.computation, k.name, k.kind, members)
    out.print(kernels)
    blocked = [d for d in result.decisions if d.verdict != Verdict.FUSED]
    table = Table(title=f"decisions that kept ops apart or were relaxed ({len(blocked)} of "
                        f"{len(result.decisions)} considered)", title_justify="left")
    for col in ("pass", "producer → consumer", "rule", "why"):
        table.add_column(col)
    for d in blocked:
        why = d.reason + (f"  [dim](XLA: {d.xla_reason})[/]" if d.xla_reason else "")
        rule = d.rule or ""
        if d.verdict == Verdict.RELAXED:
            rule = f"{', '.join(d.relaxed)} (relaxed)"
        table.add_row(d.pass_name, f"{d.producer} → {d.consumer}", rule, why)
    out.print(table)
    for note in result.notes:
        out.print(f"[dim]note: {note}[/]")


# ------------------------------------------------------------------------------------------
# hlofuse rules
# ------------------------------------------------------------------------------------------


@main.command("rules")
@click.argument("refs", nargs=-1, metavar="[ID|NAME|TAG|GLOB]...")
@click.option("--json", "as_json", is_flag=True, help="Print the rules as JSON.")
@click.option("--pipeline", type=click.Choice(["legacy", "priority", "cpu"]), help="Only this pipeline's rules.")
@guarded()
def rules_cmd(refs, as_json, pipeline):
    """List the fusion rules, or document some of them (like `ruff rule`).

    \b
    Examples:
      hlofuse rules                      # the table of all rules
      hlofuse rules concat               # every rule tagged concat, documented
      hlofuse rules 'MOF-*' --json
    """
    from ..rules import find, load_all

    rules = find(refs) if refs else sorted(load_all().values(), key=lambda r: r.id)
    if pipeline:
        rules = [r for r in rules if pipeline in r.pipelines]
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rules], indent=2))
        return
    out = stdout_console()
    if not refs:
        from rich.table import Table

        table = Table(title=f"{len(rules)} rules", title_justify="left")
        for col in ("id", "name", "pipelines", "tags", "relaxable", "summary"):
            table.add_column(col)
        for r in rules:
            table.add_row(r.id, r.name, ",".join(r.pipelines), ",".join(sorted(r.tags)),
                          "yes" if r.relaxable else "no", r.summary)
        out.print(table)
        return
    for r in rules:
        out.rule(f"[bold]{r.id}[/] {r.name}")
        out.print(f"pipelines: {', '.join(r.pipelines)}   passes: {', '.join(r.passes)}   "
                  f"tags: {', '.join(sorted(r.tags))}   relaxable: {'yes' if r.relaxable else 'no'}")
        out.print(r.doc, markup=False)
        out.print(f"XLA: {r.xla.file} · {r.xla.function} · {r.xla.commit[:12]}", markup=False)
        if r.xla.message:
            out.print(f'XLA says: "{r.xla.message}"', markup=False)
        out.print(f"implemented at {r.source[0]}:{r.source[1]}", markup=False)


# ------------------------------------------------------------------------------------------
# hlofuse check
# ------------------------------------------------------------------------------------------


@main.command("check")
@click.argument("inputs", nargs=-1, required=True, metavar="BEFORE AFTER | DUMP_DIR")
@click.option("--module", "module_name", metavar="NAME", help="Module of a dump folder.")
@_pipeline_options
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--all", "show_all", is_flag=True, help="List the kernels reproduced exactly too.")
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
    from .. import dumpdir
    from ..check import check
    from ..cli import load_input

    options = _options(inputs[0], module_name, backend, pipeline, passes, gpu, relax, library_fusion, xla_flags)
    if len(inputs) == 2:
        before, _ = load_input(inputs[0], module_name, None)
        after, _ = load_input(inputs[1], module_name, None)
    elif len(inputs) == 1:
        files = dumpdir.choose_module(dumpdir.scan(inputs[0]), module_name, inputs[0])
        b = dumpdir.fusion_snapshot(files, "before_fusion", options.pipeline)
        a = dumpdir.fusion_snapshot(files, "after_fusion", options.pipeline)
        if b is not None and a is None:
            a = next((f for f in files if f.stage == "after_optimizations"), None)
            if a is not None:
                stderr_console().print(
                    "[yellow]warning:[/] no snapshot right after fusion here; comparing with after_optimizations, "
                    "where XLA's later passes also ran, so some differences may not be fusion's")
        if b is None or a is None:
            raise InputError(f"{inputs[0]}: needs XLA's snapshots right before and after fusion; dump with "
                             "--xla_dump_hlo_pass_re matching the fusion passes (see README)")
        before, _ = load_input(str(b.path), None, None)
        after, _ = load_input(str(a.path), None, None)
        if options.passes is None and a.stage == "pass":
            options = _until(options, a)
    else:
        raise click.UsageError("give BEFORE AFTER files, or one dump folder")
    result = check(before, after, options)
    xla_reasons = _xla_reasons(inputs[0], module_name) if len(inputs) == 1 else None
    if as_json:
        payload = result.to_dict()
        if xla_reasons is not None:
            for kernel in payload["kernels"]:
                for d in kernel["decisions"]:
                    d["xla_log_reason"] = xla_reasons(d["producer"], d["consumer"])
        click.echo(json.dumps(payload, indent=2))
        return
    _print_check(result, show_all, xla_reasons)


def _until(options, after_file):
    """Replay only the passes up to the one XLA's after-snapshot was taken after."""
    from dataclasses import replace

    from ..pipeline import get_pipeline

    spec = get_pipeline(options.backend, options.pipeline)
    names = [n for n, _ in spec.passes]
    if after_file.after_pass in names:
        last = len(names) - 1 - names[::-1].index(after_file.after_pass)
        return replace(options, passes=tuple(dict.fromkeys(names[: last + 1])))
    if after_file.before_pass in names:  # taken between passes: replay those before it
        first = names.index(after_file.before_pass)
        return replace(options, passes=tuple(dict.fromkeys(names[:first])))
    return options


def _xla_reasons(dump_dir, module_name):
    """A lookup (producer, consumer) → XLA's own reason, from its priority-fusion log."""
    from pathlib import Path

    from .. import dumpdir

    if not Path(dump_dir).is_dir():
        return None
    log_file = dumpdir.priority_fusion_log(dumpdir.choose_module(dumpdir.scan(dump_dir), module_name, dump_dir))
    if log_file is None:
        return None
    try:
        from ..xla_log import load_log
    except ImportError:
        return None
    log = load_log(log_file.path)
    return lambda producer, consumer: log.reason(producer, consumer)


def _print_check(result, show_all, xla_reasons) -> None:
    from rich.table import Table

    out = stdout_console()
    out.print(f"[bold]{result.module}[/]: {result.reproduced} of {result.xla_kernels} XLA kernels reproduced "
              f"exactly ({result.agreement:.0%}) by the {result.backend}/{result.pipeline} replay"
              + (f" on {result.gpu}" if result.gpu else ""))
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
            f"{d.producer}→{d.consumer}: {d.rule or d.verdict.value} {d.reason}"
            + (f" [dim](XLA log: {xla_reasons(d.producer, d.consumer)})[/]"
               if xla_reasons and xla_reasons(d.producer, d.consumer) else "")
            for d in decisions[:3])
        if m.kinds:
            why = f"XLA made a {m.kinds[0]} fusion of these instructions, the replay a {m.kinds[1]} one"
        if m.outputs:
            why = (f"the same instructions, but XLA's kernel writes {', '.join(m.outputs[0])} and the replay's "
                   f"{', '.join(m.outputs[1])}")
        members = ", ".join(m.members[:5]) + (f", … ({len(m.members)})" if len(m.members) > 5 else "")
        style = {"exact": "green", "kind": "magenta", "outputs": "magenta", "missing": "red",
                 "extra": "yellow"}[m.status]
        table.add_row(m.computation, f"[{style}]{m.status}[/]", m.xla_kernel or "", m.ours or "", members, why)
    out.print(table)

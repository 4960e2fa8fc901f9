"""`hlofuse bench`: run fusion plans as real kernels, checked against the reference
evaluator and timed (hlofuse/bench.py does the work; this module parses options and prints)."""

from __future__ import annotations

import json

import click

from ..cli import cache_option, check_outputs, guarded, main, stderr_console, stdout_console, write_atomically
from ..errors import EXIT_EXECUTE
from ..terminal import markup


class _Bar:
    """bench.Progress drawn with rich on stderr (nothing when stderr is not a terminal)."""

    def __init__(self, console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console, transient=True)
        self.task = None

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def stage(self, text, total=None):
        if self.task is not None:
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task(markup(text), total=total)  # plan and rule names

    def advance(self):
        if self.task is not None:
            self.progress.advance(self.task)


@main.command("bench")
@click.argument("input", metavar="INPUT")
@click.option("--module", "module_name", metavar="NAME", help="Module of a dump folder (default: the largest).")
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True,
              help="cuda: CuPy on a GPU; cpu: the same kernels compiled by the C compiler; auto: cuda if there.")
@click.option("--plan", "plans", multiple=True, metavar="PLAN",
              help="unfused, xla, replay (hlofuse's replay of XLA's fusion), relax:RULE (the replay with RULE "
                   "relaxed), loop (while loops as one kernel); repeatable (default: unfused and xla).")
@click.option("--gpu", metavar="NAME|FILE", help="GPU description for relax: replays (default: from the dump).")
@click.option("--repeat", default=5, show_default=True, type=click.IntRange(1), help="Timed runs per plan.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random inputs.")
@click.option("--inputs", "inputs_file", metavar="FILE.npz",
              help="Inputs instead of random ones: arrays named after the entry parameters, or arr_0, arr_1...")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: {device, plans: [...]}.")
@click.option("--csv", "csv_file", metavar="FILE", help="Also write the table as CSV.")
@click.option("--memory-limit", metavar="SIZE",
              help="Refuse plans whose declared shapes need more memory than this (bytes, or 512M, 8G...; "
                   "default: HLOFUSE_MEMORY_LIMIT, else half the physical memory).")
@click.option("--max-iterations", type=click.IntRange(0), metavar="N",
              help="Refuse plans with a while loop whose body runs more than N times per run (default: "
                   "HLOFUSE_MAX_ITERATIONS, else 1000000).")
@click.option("--compare-xla", is_flag=True,
              help="Also run XLA's own compiled program (the dump's module before optimizations, compiled by the "
                   "XLA:CPU of an installed JAX, or of the Python HLOFUSE_JAX_PYTHON names) on the same inputs, "
                   "interleaved with the plans, and print each plan's time over XLA's.")
@click.option("--xla-threads", type=click.Choice(["single", "xla-default"]), default="single", show_default=True,
              help="With --compare-xla: XLA on one thread, as hlofuse's kernels run (fair on the thread clock), or "
                   "with its default thread pools (compare with HLOFUSE_CPU_CLOCK=wall).")
@cache_option
@guarded()
def bench_cmd(input, module_name, device, plans, gpu, repeat, seed, inputs_file, as_json, csv_file,
              memory_limit, max_iterations, compare_xla, xla_threads):
    """Run fusion plans of a dump as real kernels, check them against the NumPy reference on
    the same random inputs, and time them: kernels, launches, bytes moved, median time with
    its spread (min – max, IQR; plans spreading over 10% are flagged noisy), speedup over
    `unfused` (of medians), largest relative error.  A plan that does not apply to the input
    (`loop` without a suitable loop) is listed as not applicable; unknown plans are refused
    before any work.  Exit code 7 when a plan fails or differs from the reference.

    Before allocating anything, the memory the declared shapes need and the trips of every
    while loop (known_trip_count, or the loop's condition) are checked against the limits.

    \b
    Examples:
      hlofuse bench sample_dumps/gpu-legacy-rtx2080ti/cartpole_b_concat_vecdone --device cpu
      hlofuse bench dump/ --plan unfused --plan xla --plan relax:concat --plan loop --json
      hlofuse bench big.hlo --memory-limit 4G --max-iterations 100000
    """
    from .. import bench
    from ..errors import OptionError
    from ..inputs import check_options
    from ..execute.budget import Limits

    limits = Limits.from_environment(memory_limit, max_iterations)

    check_outputs({"--csv": csv_file}, [input, inputs_file, gpu])
    err = stderr_console()
    names = bench.check_plan_names(list(plans) or list(bench.DEFAULT_PLANS))
    check_options(gpu=gpu)
    dev = bench.choose_device(device)
    source = bench.load_source(input, module_name)
    describe = dev.describe() if hasattr(dev, "describe") else dev.name
    if not as_json:
        err.print(f"[dim]{markup(source.name)}: {source.backend} ({source.pipeline}); device {markup(describe)}[/]",
                  soft_wrap=True)
        err.print(f"[dim]{markup('; '.join(source.evidence))}[/]", soft_wrap=True)
        if source.notes:
            err.print(f"[dim]plans from {markup('; '.join(source.notes))}[/]", soft_wrap=True)
    with _Bar(err) as bar:
        plan_list = bench.make_plans(source, names, gpu, progress=lambda text: bar.stage(text))
        if all(p.skipped for p in plan_list):
            raise OptionError("; ".join(f"--plan {p.name} does not apply to this module: {p.skipped}"
                                        for p in plan_list))
        inputs = None
        if inputs_file:
            reference = next((p.module for p in plan_list if p.module is not None), None)
            if reference is not None:
                inputs = bench.read_inputs(inputs_file, reference)
        if compare_xla:
            prepared = bench.prepare(plan_list, dev, inputs=inputs, seed=seed, progress=bar, limits=limits,
                                     xla_program=source.program, xla_threads=xla_threads)
            try:
                bench.time_prepared([prepared], dev, repeat=repeat, progress=bar)
            finally:
                prepared.close()
            results, xla = prepared.results, prepared.xla
        else:
            results = bench.run_plans(plan_list, dev, inputs=inputs, seed=seed, repeat=repeat, progress=bar,
                                      limits=limits)
            xla = None
    frame = bench.to_frame(results)
    if csv_file:
        from ..render.csv import csv_text

        write_atomically(csv_file, csv_text(frame))
    if as_json:
        click.echo(json.dumps(bench.to_json(describe, results, source, xla), indent=2))
    else:
        _table(stdout_console(), results, describe, xla)
        for r in results:
            for note in r.notes:
                err.print(f"[dim]{markup(r.name)}: {markup(note)}[/]")
        if xla is not None and xla.why_not:
            err.print(f"[yellow]XLA's own run: {'not compared' if not xla.ran else 'differs'}:[/] {markup(xla.why_not)}")
        elif xla is not None and xla.ran and not xla.ok:  # XLA's own approximations, not a plan's fault
            err.print(f"[yellow]XLA's own run differs from the reference by {xla.max_rel_error:.2g}[/] (over the "
                      "plans' tolerance: XLA's single-precision functions, compounded by the program)")
    if any(r.failed for r in results):
        raise SystemExit(EXIT_EXECUTE)


def _table(out, results, device: str, xla=None) -> None:
    from rich.table import Table

    from .. import bench

    runs = max((len(r.times) for r in results), default=0)
    table = Table(title=f"plans on {markup(device)}: time per run, median of {runs} interleaved runs", title_justify="left",
                  box=None, padding=(0, 1))
    table.add_column("plan", no_wrap=True)
    compared = xla is not None and xla.median_s is not None
    for name in ("kernels", "launches", "MB", "median", "min – max", "IQR", "speedup") + \
            (("vs XLA",) if compared else ()) + ("max err",):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("ok")
    for r in results:
        if r.skipped:
            table.add_row(markup(r.name), "", "", "", "", "", "", "", "", f"[dim]not applicable ({markup(r.skipped)})[/]")
            continue
        if r.error and r.kernels is None:
            table.add_row(markup(r.name), "", "", "", "", "", "", "", "", f"[red]{markup(r.error)}[/]")
            continue
        spread = f"{_seconds(r.min_s)} – {_seconds(r.max_s)}" if r.min_s is not None else ""
        iqr = f"{r.spread:.0%}" if r.spread is not None else ""
        if r.noisy:
            iqr = f"[yellow]{iqr} noisy[/]"
        speedup = f"{r.speedup:.2f}x" if r.speedup else ""
        if speedup and r.speedup_within_noise:
            speedup = f"[dim]≈{speedup}[/]"
        table.add_row(
            markup(r.name), str(r.kernels), str(r.launches), f"{r.bytes / 1e6:.2f}",
            _seconds(r.median_s), spread, iqr, speedup,
            *((f"{r.vs_xla:.2f}x" if r.vs_xla else "",) if compared else ()),
            f"{r.max_rel_error:.2g}" if r.max_rel_error is not None else "",
            "[green]yes[/]" if r.ok else f"[red]no[/] {markup(r.error or '')}")
    if compared:
        table.add_row(markup(xla.runner), "", "", "", _seconds(xla.median_s), f"{_seconds(xla.min_s)} – "
                      f"{_seconds(xla.max_s)}", f"{xla.spread:.0%}" if xla.spread is not None else "", "", "1.00x",
                      f"{xla.max_rel_error:.2g}" if xla.max_rel_error is not None else "",
                      "[green]yes[/]" if xla.ok else "[red]no[/]")
    out.print(table)
    if compared:
        out.print(f"[dim]vs XLA: the plan's median over XLA's own compiled program ({markup(xla.program)}), timed in "
                  f"the same rounds on the same clock ({markup(xla.xla_flags or 'default flags')})[/]")
    out.print("[dim]kernels: kernels each plan launches, as hlofuse lowers it; launches: per run (loop bodies times "
              "their trip counts); IQR: interquartile range of the runs over their median (max – min below 4 runs); "
              "speedup: median of unfused over median of the plan, ≈ when within the two plans' spread[/]")
    base = next((r for r in results if r.name == "unfused" and r.median_s), None)
    for r in results:
        if r.noisy:
            floor = bench.noise_floor(r, base) if base is not None and base is not r else 1 + r.spread
            out.print(f"[yellow]noisy:[/] {markup(r.name)} spreads {r.spread:.0%} around its median (over "
                      f"{bench.NOISY_SPREAD:.0%}): do not trust ratios below {floor:.2f}x against it")


def _seconds(s) -> str:
    if s is None:
        return ""
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"

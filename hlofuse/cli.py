"""The `hlofuse` command: a thin layer over the Python API (parsing options, printing,
exit codes).  Results go to stdout; warnings and progress to stderr; `--json` prints only
JSON on stdout, errors included."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections import Counter
from typing import Callable

import click

from . import __version__
from .errors import HlofuseError, HloSyntaxError, UserCodeError
from .outputs import check_outputs, write_atomically  # noqa: F401  (the commands write through these)
from .terminal import markup, printable

# ------------------------------------------------------------------------------------------
# Shared plumbing
# ------------------------------------------------------------------------------------------


def stdout_console(width: int | None = None):
    """Rich output on stdout: colour only on a terminal; piped output is not squeezed into 80
    columns (`width`, else COLUMNS, else 160).  Control characters of the text it prints are
    shown as escapes (terminal.safe_console)."""
    from .terminal import safe_console

    if sys.stdout.isatty():
        width = None
    elif width is None:
        width = int(os.environ.get("COLUMNS", "160"))
    return safe_console(highlight=False, soft_wrap=False, width=width)


def stderr_console():
    from .terminal import safe_console

    return safe_console(stderr=True, highlight=False)


def fail(err: HlofuseError, as_json: bool = False) -> None:
    """Print one error line (and the source line with a caret) and exit with its code."""
    if as_json:
        payload = {"error": err.one_line()}
        if isinstance(err, HloSyntaxError):
            payload.update(path=err.path, line=err.line, column=err.column)
        elif isinstance(err, UserCodeError):
            payload.update(path=err.path, line=err.line, function=err.function)
        click.echo(json.dumps(payload))
    else:  # the message and the source line quote the input: control characters made visible
        click.echo(printable(err.one_line()), err=True)
        if isinstance(err, HloSyntaxError) and err.context():
            click.echo(err.context(), err=True)
    sys.exit(err.exit_code)


def guarded(as_json_param: str | None = "as_json") -> Callable:
    """Run a command body; turn HlofuseErrors and surprises into one line and an exit code."""

    def wrap(fn):
        def inner(*args, **kwargs):
            as_json = bool(kwargs.get(as_json_param)) if as_json_param else False
            try:
                return fn(*args, **kwargs)
            except HlofuseError as err:
                fail(err, as_json)
            except KeyboardInterrupt:
                sys.exit(130)
            except click.exceptions.ClickException:
                raise
            except BrokenPipeError:
                sys.exit(0)
            except Exception as err:  # a bug of ours: one line, unless debugging
                if os.environ.get("HLOFUSE_DEBUG"):
                    raise
                message = f"internal error: {type(err).__name__}: {err} (set HLOFUSE_DEBUG=1 for details)"
                if as_json:
                    click.echo(json.dumps({"error": message}))
                else:
                    click.echo(printable(message), err=True)
                sys.exit(1)

        inner.__name__ = fn.__name__
        inner.__doc__ = fn.__doc__
        return inner

    return wrap


def cache_option(fn):
    """--no-cache: the command computes every parse and replay afresh and keeps none
    (hlofuse.result_cache; HLOFUSE_NO_CACHE=1 does the same for every command)."""

    def inner(*args, no_cache=False, **kwargs):
        from .result_cache import bypassed

        with bypassed(no_cache):
            return fn(*args, **kwargs)

    functools.update_wrapper(inner, fn)
    return click.option("--no-cache", "no_cache", is_flag=True,
                        help="Parse and replay afresh, without reading or writing hlofuse's cache of results "
                             "(~/.cache/hlofuse).")(inner)


def input_options(fn):
    """INPUT plus --module/--stage, shared by every command that reads HLO."""
    fn = click.option("--stage", metavar="STAGE",
                      help="Stage of a dump folder: before_optimizations, before_fusion (or before), "
                           "after_fusion, after_optimizations (the default, or after), last, a step number, "
                           "or after_PASS.")(fn)
    fn = click.option("--module", "module_name", metavar="NAME",
                      help="Module of a dump folder (jit_f, module_0001, module_0001.jit_f); default: the only "
                           "or largest one.  A name several modules share is an error listing them.")(fn)
    fn = click.argument("input", metavar="INPUT")(fn)
    return fn


def resolve_input(path: str, **kwargs):
    """hlofuse.inputs.resolve, with the module's parse warnings printed on stderr."""
    from .inputs import resolve

    resolved = resolve(path, **kwargs)
    print_warnings(resolved)
    return resolved


def print_warnings(resolved) -> None:
    """The parse warnings of a resolved input, on stderr (at most ten, then a count)."""
    warnings = list(resolved.warnings)
    if warnings:
        err = stderr_console()
        for warning in warnings[:10]:
            err.print(f"[yellow]warning:[/] {markup(warning)}")
        if len(warnings) > 10:
            err.print(f"[yellow]warning:[/] ... and {len(warnings) - 10} more")


def print_evidence(resolved, detection: bool = True) -> None:
    """What was chosen and detected, in two dim lines on stderr (the command's data goes to
    stdout); `detection=False` when the command prints the detection line itself."""
    err = stderr_console()
    if resolved.chosen:
        err.print(f"[dim]{markup('; '.join(resolved.chosen))}[/]", soft_wrap=True)
    if detection:
        err.print(f"[dim]{markup(resolved.detected)}[/]", soft_wrap=True)


#: The subcommands defined outside this file, in the order `hlofuse --help` lists them after
#: parse and print, each with the module of hlofuse.commands that registers it (`@main.command`).
#: A module is imported only when one of its commands is run or listed, so that a command
#: pays for its own imports alone.
COMMANDS = {
    "fuse": "fuse",
    "rules": "fuse",
    "check": "fuse",
    "explain": "explain",
    "diff": "diff",
    "render": "render",
    "bench": "bench",
    "compile": "compile",
}


class _Group(click.Group):
    def list_commands(self, ctx):
        own = [n for n in ("parse", "print") if n in self.commands]
        return own + list(COMMANDS) + sorted(n for n in self.commands if n not in own and n not in COMMANDS)

    def get_command(self, ctx, name):
        if name not in self.commands and name in COMMANDS:
            import importlib

            importlib.import_module(f"{__package__}.commands.{COMMANDS[name]}")
        return super().get_command(ctx, name)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="hlofuse")
def main():
    """Why did XLA launch 6 kernels here instead of 1?  hlofuse reads XLA's HLO dumps, replays
    XLA's fusion passes, and explains every kernel boundary.

    \b
    Start with a dump folder (jax: XLA_FLAGS=--xla_dump_to=DIR) or one of ours:
      hlofuse parse   sample_dumps/gpu-legacy-rtx2080ti/cartpole_b_concat
      hlofuse print   model.hlo > canonical.hlo
    INPUT is an HLO text file, a --xla_dump_to folder, or - for stdin.
    """


# ------------------------------------------------------------------------------------------
# hlofuse parse / print
# ------------------------------------------------------------------------------------------


def module_summary(module, resolved=None) -> dict:
    from .counts import MODULE, WORDS
    from .kernels import count_kernels

    opcodes = Counter(instr.opcode for _, instr in module.instructions())
    fusions = Counter(instr.fusion_kind or "?" for _, instr in module.instructions() if instr.opcode == "fusion")
    kernels = count_kernels(module)
    return {
        "module": module.name,
        "path": module.path,
        "entry": module.entry_name,
        "computations": len(module.computations),
        "instructions": module.instruction_count,
        "opcodes": dict(opcodes.most_common()),
        "fusions": dict(fusions.most_common()),
        "kernels": {
            "total": sum(k.kernels for k in kernels),
            "counted_in": (resolved.main.role or WORDS[MODULE]) if resolved is not None else WORDS[MODULE],
            "per_computation": [
                {"computation": k.computation, "role": k.role, "kernels": k.kernels, "by_kind": k.by_kind}
                for k in kernels
            ],
        },
        "warnings": list(module.warnings),
        "evidence": list(resolved.evidence) if resolved is not None else [],
    }


@main.command("parse")
@input_options
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@cache_option
@guarded()
def parse_cmd(input, module_name, stage, as_json):
    """Parse HLO and summarise it: computations, instructions by opcode, fusions, kernels.

    \b
    Examples:
      hlofuse parse dump/module_0001.jit_f.sm_9.0a_gpu_after_optimizations.txt
      hlofuse parse dump/ --module jit_f --stage before_fusion
      cat model.hlo | hlofuse parse - --json | jq .kernels.total
    """
    resolved = resolve_input(input, module=module_name, stage=stage)
    module, name = resolved.module, resolved.main.name
    summary = module_summary(module, resolved)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    from rich.table import Table

    out = stdout_console()
    out.print(f"[bold]{markup(module.name)}[/]  ({markup(name)})")
    out.print(f"{summary['computations']} computations, {summary['instructions']} instructions, "
              f"entry [bold]{markup(module.entry_name)}[/]; {summary['kernels']['total']} kernels in "
              f"{markup(summary['kernels']['counted_in'])}")
    table = Table(title="kernels per computation (launched once each time the computation runs)", title_justify="left")
    table.add_column("computation")
    table.add_column("role")
    table.add_column("kernels", justify="right")
    table.add_column("of which")
    for row in summary["kernels"]["per_computation"]:
        table.add_row(markup(row["computation"]), row["role"], str(row["kernels"]),
                      ", ".join(f"{v} {k}" for k, v in sorted(row["by_kind"].items(), key=lambda kv: -kv[1])))
    out.print(table)
    if summary["fusions"]:
        out.print("fusions by kind: " + ", ".join(f"{k} {v}" for k, v in summary["fusions"].items()), markup=False)
    top = list(summary["opcodes"].items())[:12]
    out.print("most frequent opcodes: " + ", ".join(f"{k} {v}" for k, v in top), markup=False)


@main.command("print")
@input_options
@click.option("--short", is_flag=True, help="Short form: no % before names, no signatures.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to a file (atomically) instead of stdout.")
@cache_option
@guarded(None)
def print_cmd(input, module_name, stage, short, output):
    """Parse HLO and print it back in XLA's canonical spelling (XLA and hlofuse parse it back).

    \b
    Examples:
      hlofuse print model.hlo
      hlofuse print dump/ --stage after_fusion --short -o fused.hlo
    """
    from .printer import SHORT, print_module

    check_outputs({"-o": output}, [input])
    module = resolve_input(input, module=module_name, stage=stage).module
    text = print_module(module, SHORT if short else None)
    if output:
        write_atomically(output, text)
    else:
        click.echo(text, nl=False)


if __name__ == "__main__":  # pragma: no cover
    main()

"""`hlofuse compile`: a function of the user's JAX script compiled by XLA (for a GPU described,
without one; for this machine's GPU; or for the CPU) into a dump folder, and explained."""

from __future__ import annotations

import click

from ..cli import cache_option, guarded, main, stderr_console, stdout_console
from ..errors import OptionError
from ..terminal import markup


@main.command("compile")
@click.argument("target", metavar="SCRIPT.py:FUNCTION")
@click.option("--arg", "arg_texts", multiple=True, metavar="SHAPE|VALUE",
              help="An example argument, in order; repeatable: a shape (f32[2048,4], bf16[], float32[8]) or, at a "
                   "static position, a Python literal (10, 'relu', (1, 2)).")
@click.option("--args-from", metavar="[SCRIPT.py:]FUNC",
              help="A function (of SCRIPT, or of the same script) that returns the example arguments as a tuple: "
                   "arrays, jax.ShapeDtypeStructs, pytrees of them.")
@click.option("--static-argnums", metavar="N[,M]", help="Positions of static arguments, as jax.jit's static_argnums.")
@click.option("--backend", type=click.Choice(["gpu", "cpu"]), default="gpu", show_default=True,
              help="XLA:GPU or XLA:CPU.")
@click.option("--gpu", metavar="NAME|FILE",
              help="The GPU to compile for, without one (h100_sxm, a100_sxm_80, rtx2080ti, ... or a .txtpb); "
                   "default: the GPU of this machine.")
@click.option("--xla-flags", "xla_flags", metavar="FLAGS", help="XLA flags for the compile (added to $XLA_FLAGS).")
@click.option("-o", "--output", "out", type=click.Path(file_okay=False), metavar="DUMP_DIR",
              help="Keep the dump in this folder (new, empty, or written by an earlier `hlofuse compile`).  "
                   "Without it the dump is temporary and is explained.")
@click.option("--explain", "do_explain", is_flag=True, help="Explain the compiled module (as `hlofuse explain`).")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: explain's (with the compile's record under \"compiled\"), or the record alone.")
@click.option("--limit", type=int, default=None, metavar="N", help="With --explain: show at most N boundaries.")
@cache_option
@guarded()
def compile_cmd(target, arg_texts, args_from, static_argnums, backend, gpu, xla_flags, out, do_explain, as_json,
                limit):
    """Compile a function of a JAX script as jax.jit would, with XLA dumping what hlofuse
    reads (the snapshots around fusion, XLA's fusion log, the final module), and explain it.

    No GPU is needed: with --gpu, XLA:GPU compiles for that GPU's description through JAX's
    CUDA plugin (pip install 'hlofuse[jax]').  The script is imported in a fresh Python
    process, as `python SCRIPT.py` would see it but with its `if __name__ == "__main__":`
    block not run.  Errors in the script or the function (tracing, shapes) are reported at
    their file and line (exit code 8); XLA's refusals exit with 9.

    \b
    Examples:
      hlofuse compile model.py:step --arg f32[2048,4] --gpu h100_sxm
      hlofuse compile model.py:step --args-from example_args --backend cpu --explain --json
      hlofuse compile model.py:mlp --arg f32[64,512] --arg 3 --static-argnums 1 --gpu a100_sxm_80 -o dump/
      hlofuse compile my_package.models:loss --args-from my_package.models:example --gpu rtx2080ti
    """
    from ..from_jax import compile_script
    from ..from_jax.arguments import parse_args, parse_argnums

    script, function = _split(target, "SCRIPT.py:FUNCTION")
    static = parse_argnums(static_argnums)
    if arg_texts and args_from:
        raise OptionError("give the example arguments with --arg or with --args-from, not both")
    args = parse_args(arg_texts, static) if not args_from else None
    maker = None
    if args_from:
        maker = _split(args_from, "[SCRIPT.py:]FUNC") if ":" in args_from else (script, args_from)
    explain_it = do_explain or out is None
    err = stderr_console()

    def starting():
        if not as_json:
            where = "XLA:CPU" if backend == "cpu" else (f"{gpu}, without it (deviceless XLA:GPU)" if gpu else
                                                          "this machine's GPU")
            err.print(f"[dim]compiling {markup(function)} of {markup(script)} for {markup(where)}[/]")

    dump = compile_script(script, function, args, args_from=maker, backend=backend, gpu=gpu, xla_flags=xla_flags,
                          static_argnums=static, out=out, starting=starting)
    if not as_json:
        err.print(f"[dim]{markup(_compiled_line(dump))}[/]", soft_wrap=True)
        for note in dump.notes:
            err.print(f"[yellow]note:[/] {markup(note)}")
    if not explain_it:
        if as_json:
            import json

            click.echo(json.dumps(dump.to_dict(), indent=2))
            return
        flags = f" --xla-flags {_quoted(' '.join(dump.xla_flags))}" if dump.xla_flags else ""
        stdout_console().print(f"{markup(dump.path)}\nnext: hlofuse explain {markup(_quoted(str(dump.path)))}{markup(flags)}",
                               soft_wrap=True)
        return
    from ..api import explain_resolved, resolve_for_explain
    from ..cli import print_warnings
    from .explain import print_report

    resolved, flags = resolve_for_explain(dump)
    print_warnings(resolved)
    report = explain_resolved(resolved, xla_flags=flags, source=dump)
    if as_json:
        import json

        click.echo(json.dumps({**report.to_dict(), "compiled": dump.to_dict()}, indent=2))
        return
    print_report(report, limit=limit)


def _split(text: str, form: str) -> tuple[str, str]:
    script, sep, name = text.rpartition(":")
    if not sep or not script or not name:
        raise OptionError(f"{text}: expected {form}")
    return script, name


def _compiled_line(dump) -> str:
    seconds = dump.seconds
    xla = f" (XLA's compile {seconds['compile']:.2f} s)" if "compile" in seconds else ""
    where = f" into {dump.path}" if not dump.temporary else ""
    return f"compiled {dump.module} by {dump.target}, in {seconds.get('total', 0):.1f} s{xla}{where}"


def _quoted(text: str) -> str:
    import shlex

    return shlex.quote(text)

"""hlofuse: make XLA's operator fusion visible and testable.

Primary API:
    loads(text) -> Module        parse HLO text
    load(path) -> Module         parse a file, a --xla_dump_to folder, or "-" for stdin
    dumps(module) -> str         print HLO text that XLA and hlofuse parse back
    resolve(path, need=...)      what a command works on: module, stages, backend, pipeline, GPU, evidence
    explain(input, **options)    `hlofuse explain`: a report whose .to_dict() is what --json prints
    check(input, **options)      `hlofuse check`: the same
    diff(a, b, **options)        `hlofuse diff`: two compiles of a program compared, the same
    compile_jax(fn, *args, ...)  a JAX function compiled by XLA (a GPU described, without one; or the
                                 CPU) into a dump folder the functions above read

`hlofuse.explain`, `hlofuse.check` and `hlofuse.diff` stay these functions after the
subpackages `hlofuse.explain`, `hlofuse.diff` and the module `hlofuse.check` are imported
(import those as `from hlofuse.explain import ...`, `from hlofuse.check import ...`).
"""

from __future__ import annotations

import sys
import types

from . import native as _native

_native.choose()  # before any module that may come compiled

from .errors import HloSyntaxError, HlofuseError
from .ir import Computation, Instruction, Module, Shape

__version__ = "0.1.0"


def loads(text: str, *, path: str | None = None, strict: bool = False) -> Module:
    """Parse HLO text: a module, bare computations, or one lone instruction.

    `strict=True` also rejects opcodes hlofuse does not know (by default they are kept, with a
    warning in `module.warnings`, since XLA adds opcodes over time)."""
    from .parse import parse_text

    return parse_text(text, path, strict=strict)


def load(path, *, module: str | None = None, stage: str | None = None, strict: bool = False) -> Module:
    """Parse an HLO file, a `--xla_dump_to` folder (choose with `module` and `stage`, as the
    commands do), or "-" (stdin)."""
    return resolve(path, module=module, stage=stage, strict=strict).module


def resolve(path, *, need: str = "module", module: str | None = None, stage: str | None = None,
            backend: str | None = None, pipeline: str | None = None, gpu: str | None = None, **kwargs):
    """The input resolution every command uses (hlofuse.inputs.resolve): the module and the
    stages `need` asks for ("module", "explain", "replay", "check", "bench"), the backend,
    pipeline and GPU, and one line of evidence per decision (`.evidence`)."""
    from .inputs import resolve as _resolve

    return _resolve(str(path), need=need, module=module, stage=stage, backend=backend, pipeline=pipeline,
                    gpu=gpu, **kwargs)


def dumps(module: Module) -> str:
    """HLO text for a module; `loads(dumps(m)) == m`."""
    from .printer import print_module

    return print_module(module)


def explain(source, **options):
    """Explain every kernel boundary, as `hlofuse explain` does: `source` is a path (HLO file,
    `--xla_dump_to` folder, "-"), a `compile_jax` folder or a parsed Module; the options are the
    command's (module, stage, backend, pipeline, gpu, relax, xla_flags).  Returns an
    ExplainReport: `.explanation`, `.kernels`, `.boundaries`, `.summary()`, `.counts`, and
    `.to_dict()`, equal to what `hlofuse explain --json` prints."""
    from .api import explain as _explain

    return _explain(source, **options)


def check(before, after=None, **options):
    """Replay XLA's fusion passes from its snapshot right before fusion and compare with its
    kernels right after, as `hlofuse check` does: a dump folder (or `compile_jax` folder), or
    BEFORE and AFTER (paths or Modules); options module, backend, pipeline, passes, gpu, relax,
    library_fusion, xla_flags.  Returns a CheckReport whose `.to_dict()` equals `hlofuse check
    --json`."""
    from .api import check as _check

    return _check(before, after, **options)


def diff(a, b=None, **options):
    """Compare two compiles of a program, as `hlofuse diff` does: `a` and `b` as `explain`
    takes them (the same module chosen in each), or `a` alone replayed twice (options
    vs_pipeline, vs_gpu, vs_xla_flags, relax: B's; module, stage, backend, pipeline, gpu,
    xla_flags: A's).  Returns a Diff: the kernels matched, the boundaries on one side only
    with the other side's decision, the totals, the headline, and `.to_dict()`, equal to what
    `hlofuse diff --json` prints."""
    from .api import diff as _diff

    return _diff(a, b, **options)


def compile_jax(fn, *example_args, **options):
    """Compile `fn` as jax.jit would for `example_args`, with XLA dumping what hlofuse reads;
    returns the dump folder (a path-like JaxDump).  Options: backend ("gpu" or "cpu"), gpu (a
    GPU description name such as "h100_sxm", or a .txtpb file: compiled without that GPU),
    xla_flags, static_argnums, out (a folder to keep; default a temporary one).  See
    hlofuse.from_jax.compile_jax."""
    from .from_jax import compile_jax as _compile_jax

    return _compile_jax(fn, *example_args, **options)


class _Package(types.ModuleType):
    """Keeps the API functions `explain`, `check` and `diff` under their names: importing the
    submodules of the same names would otherwise replace them with the modules."""

    _API = ("explain", "check", "diff")

    def __setattr__(self, name, value):
        if name in self._API and isinstance(value, types.ModuleType):
            return  # the submodule stays in sys.modules, where `from hlofuse.X import ...` finds it
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "Computation", "HloSyntaxError", "HlofuseError", "Instruction", "Module", "Shape",
    "check", "compile_jax", "diff", "dumps", "explain", "load", "loads", "resolve",
]

"""hlofuse: make XLA's operator fusion visible and testable.

Primary API:
    loads(text) -> Module        parse HLO text
    load(path) -> Module         parse a file, a --xla_dump_to folder, or "-" for stdin
    dumps(module) -> str         print HLO text that XLA and hlofuse parse back
    resolve(path, need=...)      what a command works on: module, stages, backend, pipeline, GPU, evidence
"""

from __future__ import annotations

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


__all__ = [
    "Computation", "HloSyntaxError", "HlofuseError", "Instruction", "Module", "Shape",
    "dumps", "load", "loads", "resolve",
]

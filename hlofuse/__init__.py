"""hlofuse: make XLA's operator fusion visible and testable.

Primary API:
    loads(text) -> Module        parse HLO text
    load(path) -> Module         parse a file, a --xla_dump_to folder, or "-" for stdin
    dumps(module) -> str         print HLO text that XLA and hlofuse parse back
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
    """Parse an HLO file, a `--xla_dump_to` folder (choose with `module` and `stage`), or "-" (stdin)."""
    from .dumpdir import read_input

    text, name = read_input(str(path), module=module, stage=stage)
    return loads(text, path=name, strict=strict)


def dumps(module: Module) -> str:
    """HLO text for a module; `loads(dumps(m)) == m`."""
    from .printer import print_module

    return print_module(module)


__all__ = [
    "Computation", "HloSyntaxError", "HlofuseError", "Instruction", "Module", "Shape",
    "dumps", "load", "loads",
]

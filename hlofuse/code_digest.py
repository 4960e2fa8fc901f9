"""A digest of hlofuse's own code: part of the key of every cached result.

A result cached by one checkout must not be served to another whose code computes it
differently, even when both call themselves the same version (a development tree, an edited
install).  The digest covers every file of the package that can change a result (its Python
modules, the data it reads: GPU descriptions, tables) and the grammar, by content, so that
switching branches or editing a rule invalidates the cache at once.  Reading ~150 small files
costs a few milliseconds, once per process."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_SKIPPED_FOLDERS = {"__pycache__"}


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 (hex) of hlofuse's version, the Python version, and the path and content of each
    file of the package and of the grammar."""
    import sys

    from . import __version__

    digest = hashlib.sha256(f"hlofuse {__version__}\0python {sys.version}\0".encode())
    for path in _files():
        digest.update(str(path.relative_to(_PACKAGE.parent)).encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def _files() -> list[Path]:
    # The compiled core (hlofuse/native: extension modules and their manifest) is left out: it
    # is built from the sources digested here and gives their results (a build that does not
    # match them is never used), and its 6 MB would be read at every process's first lookup.
    import importlib.machinery

    skipped = (".pyc", ".pyo", *importlib.machinery.EXTENSION_SUFFIXES)
    files = []
    for folder, dirs, names in os.walk(_PACKAGE):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_FOLDERS)
        files.extend(Path(folder, n) for n in sorted(names) if not n.endswith(skipped))
    files = [f for f in files if f != _PACKAGE / "native" / "built.json"]
    # a source tree keeps the grammar beside the package, a wheel inside it (parse.grammar's
    # grammar_path, not imported here: it would import Lark)
    outside = _PACKAGE.parent / "grammars" / "hlo.lark"
    if not (_PACKAGE / "grammars").exists() and outside.exists():
        files.append(outside)
    return files

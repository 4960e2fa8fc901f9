"""The folder `compile_jax` leaves: XLA's dump without the code it generated, a record of how
it was made (MANIFEST), kept in a folder the user names only when that folder is new, empty,
or written by an earlier compile (whose files are replaced, nothing else)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Sequence

from ..errors import OutputError

#: The record hlofuse writes beside XLA's files: how the dump was made.
MANIFEST = "hlofuse-compile.json"
#: Files of generated code XLA writes beside the HLO (LLVM IR, PTX, objects); hlofuse reads none.
_CODE_SUFFIXES = (".ll", ".ptx", ".o", ".cubin", ".bc", ".fatbin")


def prune(dump: Path) -> list[str]:
    """Drop generated code from the dump; the names kept, sorted."""
    kept = []
    for entry in sorted(dump.iterdir()):
        if entry.name.endswith(_CODE_SUFFIXES):
            entry.unlink()
        else:
            kept.append(entry.name)
    return kept


def check_out(out: Path, inputs: Sequence[str]) -> tuple[str, ...]:
    """Whether `out` may receive the dump: a new folder (its parent exists), an empty one, or
    one an earlier compile wrote (the files its record lists are replaced).  The files to
    replace; OutputError before any work otherwise."""
    if os.path.islink(out):
        raise OutputError(f"{out} is a symbolic link: hlofuse does not write through links (name the folder itself)")
    for given in inputs:
        if os.path.realpath(given) == os.path.realpath(out):
            raise OutputError(f"{out}: -o names the input {given}")
    if not out.exists():
        parent = Path(os.path.abspath(out)).parent
        if not parent.is_dir():
            raise OutputError(f"{out}: the folder {parent} does not exist (hlofuse creates only the dump folder itself)")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise OutputError(f"{out}: cannot write in the folder {parent}")
        return ()
    if not out.is_dir():
        raise OutputError(f"{out} is not a folder: the dump is a folder of files")
    names = sorted(os.listdir(out))
    if not names:
        return ()
    record = out / MANIFEST
    if not record.is_file() or record.is_symlink():
        raise OutputError(f"{out} holds other files: write the dump into a new or empty folder (or one `hlofuse "
                          "compile` wrote, which is replaced)")
    try:
        listed = json.loads(record.read_text()).get("files", [])
    except (OSError, ValueError, AttributeError):
        raise OutputError(f"{out}/{MANIFEST} cannot be read: write the dump into a new or empty folder") from None
    listed = [n for n in listed if isinstance(n, str) and os.sep not in n and n not in (".", "..")]
    extra = [n for n in names if n not in listed and n != MANIFEST]
    if extra:
        raise OutputError(f"{out} holds files the earlier compile did not write ({', '.join(extra[:3])}"
                          f"{', ...' if len(extra) > 3 else ''}): write the dump into a new or empty folder")
    return tuple(n for n in names)


def deliver(dump: Path, out: Path, replaces: tuple[str, ...]) -> None:
    """Move the dump's files into `out` (created; an earlier compile's files removed first)."""
    if not out.exists():
        out.mkdir()
    for name in replaces:
        target = out / name
        if target.is_file() and not target.is_symlink():
            target.unlink()
    for entry in dump.iterdir():
        shutil.move(str(entry), str(out / entry.name))

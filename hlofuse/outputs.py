"""Files the user names for hlofuse to write (-o, --csv, --html): checked right after the
options are read, before any work, and written atomically.

A command refuses, with one line and the input error's exit code, an output whose folder does
not exist (it is not created: a typo should not grow a tree), that is a folder, a link or not
a regular file, or that is one of its inputs — the input file itself, or a file of an input
dump folder that hlofuse would read back as part of the dump.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

from .errors import OutputError


def check_outputs(outputs: Mapping[str, str | None], inputs: Iterable[str | None] = ()) -> None:
    """Check every output a command was given ({option: path}; None when not given) against
    the command's inputs (files, dump folders, "-" for stdin, None)."""
    inputs = [i for i in inputs if i and i != "-"]
    seen: dict[str, str] = {}
    for option, path in outputs.items():
        if not path:
            continue
        check_output(path, inputs, option)
        real = os.path.realpath(path)
        if real in seen:
            raise OutputError(f"{path}: {seen[real]} and {option} name the same file")
        seen[real] = option


def check_output(path: str, inputs: Iterable[str] = (), option: str = "-o") -> None:
    """OutputError unless `path` can be written without creating folders, following a link or
    writing over an input."""
    folder = _folder(path)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: cannot write in the folder {folder}")
    exists = _target(path, option) is not None
    for given in inputs:
        if _same_file(path, given, exists):
            also = f" ({given})" if given != path else ""
            raise OutputError(f"{path}: {option} names the input file{also}; hlofuse does not write over its input")
        if os.path.isdir(given) and _read_with_dump(path, given):
            raise OutputError(f"{path} would be read as part of the dump folder {given}: write it elsewhere")


def write_atomically(path: str, text: str | bytes) -> None:
    """Write `path` through a temporary file beside it, then rename: readers never see half a
    file, and an error leaves the old file as it was.

    The temporary file is created by mkstemp (O_CREAT|O_EXCL|O_NOFOLLOW), so nothing planted at
    its name is followed or reused.  An existing file keeps its permission bits (a new one gets
    those a plain open() would give).  A `path` that is a symbolic link is refused rather than
    written through or replaced: writing through would let a link planted at a predictable
    output name redirect the write to any file the user can write, and replacing it would
    silently break a link the user made; naming the file itself is unambiguous.  A missing
    folder is refused, not created."""
    folder = _folder(path)
    st = _target(path, "the output")
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    except OSError as err:
        raise OutputError(f"{path}: {err.strerror}") from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as fh:
            fh.write(text)
        os.replace(tmp, path)  # a rename never follows a link at `path`
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError):
            raise OutputError(f"{path}: {err.strerror or err}") from None
        raise


def _folder(path: str) -> Path:
    folder = Path(os.path.abspath(path)).parent
    if not folder.is_dir():
        raise OutputError(f"{path}: the folder {folder} does not exist (hlofuse does not create folders)")
    return folder


def _target(path: str, option: str) -> os.stat_result | None:
    """The existing file at `path` (None if there is none); OutputError if it is not a regular
    file or is a link."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise OutputError(f"{path}: {err.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise OutputError(f"{path} is a symbolic link: hlofuse does not write through links "
                          "(remove it, or name the file it points to)")
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path} is a folder: {option} takes a file name")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{path} is not a regular file")
    return st


def _same_file(path: str, given: str, exists: bool) -> bool:
    if exists and os.path.exists(given):
        return os.path.samefile(path, given)  # hard links and links to it too
    return os.path.realpath(path) == os.path.realpath(given)


def _read_with_dump(path: str, folder: str) -> bool:
    """Whether `path` is a file of dump folder `folder` that hlofuse reads (XLA's file names)."""
    from .dumpdir import classify

    target = Path(os.path.realpath(path))
    return target.parent == Path(os.path.realpath(folder)) and classify(target) is not None


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask

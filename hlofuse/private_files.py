"""Folders only this user can write, and files written into them atomically.

hlofuse caches what it loads as code: Lark unpickles the compiled grammar, ctypes loads the
compiled kernels.  Whoever can write those files runs code as the user, so they live in a
folder the user alone can write: `hlofuse/<what>` inside the user's cache folder
($XDG_CACHE_HOME when it is an absolute path, else ~/.cache; $HLOFUSE_CACHE names the
`hlofuse` folder itself).  Every folder of that path we create or reuse is checked with lstat:
a real directory (not a link), owned by us, not writable by group or others.  Where that
cannot be had, `cache_folder` says so once on stderr and returns None: callers then go without
a cache — never to a shared folder such as /tmp, where another user could have planted files.

Files are written to a fresh name made with O_CREAT|O_EXCL|O_NOFOLLOW (mkstemp) in the
folder, then renamed into place, so a reader never sees half a file and no link is followed.
Each entry is sealed by a sidecar `<name>.sha256` holding its digest, written the same way
after the entry: an entry whose seal is missing or differs (a crash mid-write, a truncated
file) is discarded, never loaded.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
from pathlib import Path

#: Names the `hlofuse` cache folder itself (tests, CI); checked like any other.
CACHE_ENV = "HLOFUSE_CACHE"
SEAL_SUFFIX = ".sha256"

_warned: set[str] = set()


class UnsafeFolder(Exception):
    """A folder on the cache path that another user could write (the message says why)."""


def cache_folder(what: str) -> Path | None:
    """`<user cache>/hlofuse/<what>`, created 0700 where missing; None (with a one-line
    warning on stderr, once per process) when no folder of ours can be had there."""
    try:
        if not hasattr(os, "getuid") or not hasattr(os, "O_NOFOLLOW"):
            raise UnsafeFolder("this system cannot tell who owns a folder")
        base, parts = _cache_path()
        folder = base
        for part in (*parts, what):
            folder = folder / part
            _make_private(folder)
        return folder
    except (UnsafeFolder, OSError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        where = f" ({err.filename})" if isinstance(err, OSError) and err.filename else ""
        _warn(what, f"hlofuse: warning: not caching {what}: {reason}{where}; working without a cache")
        return None


def _cache_path() -> tuple[Path, tuple[str, ...]]:
    """The folder the cache path starts from (the user's cache folder, which may be a link and
    may belong to root) and the folders below it that must be ours."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        if not os.path.isabs(explicit):
            raise UnsafeFolder(f"${CACHE_ENV} must be an absolute path, not {explicit!r}")
        return _trusted_base(Path(explicit).parent), (Path(explicit).name,)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):  # the XDG spec: a relative value is invalid and ignored
        return _trusted_base(Path(xdg)), ("hlofuse",)
    home = os.path.expanduser("~")
    if not os.path.isabs(home):
        raise UnsafeFolder("no home folder")
    return _trusted_base(Path(home, ".cache")), ("hlofuse",)


def _trusted_base(path: Path) -> Path:
    """The user's cache folder, created 0700 where missing, links resolved (a ~/.cache that
    links to another disk is common).  It must be owned by us or root and not writable by group
    or others: whoever can write it could swap our folders under us.  The folders above it are
    trusted, as the home folder is."""
    os.makedirs(path, 0o700, exist_ok=True)
    real = Path(os.path.realpath(path))
    st = os.lstat(real)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFolder(f"{real} is not a folder")
    if st.st_uid not in (os.getuid(), 0):
        raise UnsafeFolder(f"{real} is owned by uid {st.st_uid}, not by you (uid {os.getuid()}) or root")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeFolder(f"{real} can be written by other users (mode {stat.S_IMODE(st.st_mode):o})")
    return real


def _make_private(folder: Path) -> None:
    """Create `folder` 0700, or reuse it if it is a real directory of ours that only we can
    write; UnsafeFolder otherwise."""
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    check_private(folder)


def check_private(folder: Path) -> None:
    """UnsafeFolder unless `folder` (not followed if a link) is a directory owned by us that
    group and others cannot write."""
    st = os.lstat(folder)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeFolder(f"{folder} is a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFolder(f"{folder} is not a folder")
    if st.st_uid != os.getuid():
        raise UnsafeFolder(f"{folder} is owned by uid {st.st_uid}, not by you (uid {os.getuid()})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeFolder(f"{folder} can be written by other users (mode {stat.S_IMODE(st.st_mode):o})")


def _warn(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        print(message, file=sys.stderr)


# ------------------------------------------------------------------------------------------
# Entries of a private folder: written atomically, sealed with their digest
# ------------------------------------------------------------------------------------------


def store(folder: Path, name: str, data: bytes) -> Path:
    """Write `folder/name` atomically and seal it; returns its path."""
    _write_atomically(folder, name, data)
    _write_atomically(folder, name + SEAL_SUFFIX, hashlib.sha256(data).hexdigest().encode())
    return folder / name


def adopt(folder: Path, name: str, built: Path) -> Path:
    """Move a file we built inside `folder` (e.g. in a mkdtemp subfolder) to `folder/name` and
    seal it; returns its path."""
    target = folder / name
    os.replace(built, target)
    digest = _digest_of(target)
    if digest is None:
        raise OSError(f"{target} vanished while it was being cached")
    _write_atomically(folder, name + SEAL_SUFFIX, digest.encode())
    return target


def verified(folder: Path, name: str) -> Path | None:
    """`folder/name` if it is a regular file of ours whose digest matches its seal; otherwise
    the entry is discarded and None returned."""
    seal = read_plain(folder, name + SEAL_SUFFIX)
    digest = _digest_of(folder / name)
    if seal is not None and digest is not None and seal.decode("ascii", "replace").strip() == digest:
        return folder / name
    if seal is not None or digest is not None:
        discard(folder, name)
    return None


def read(folder: Path, name: str) -> bytes | None:
    """The bytes of a verified entry (None, the entry discarded, when it does not verify)."""
    data = read_plain(folder, name)
    seal = read_plain(folder, name + SEAL_SUFFIX)
    if data is not None and seal is not None and seal.decode("ascii", "replace").strip() == \
            hashlib.sha256(data).hexdigest():
        return data
    if data is not None or seal is not None:
        discard(folder, name)
    return None


def discard(folder: Path, name: str) -> None:
    """Remove an entry and its seal (missing ones are fine)."""
    for path in (folder / name, folder / (name + SEAL_SUFFIX)):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def read_plain(folder: Path, name: str) -> bytes | None:
    """A file's bytes if it is a regular file owned by us that others cannot write, opened
    without following a link; None otherwise."""
    fd = _open_own(folder / name)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def _digest_of(path: Path) -> str | None:
    fd = _open_own(path)
    if fd is None:
        return None
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _open_own(path: Path) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # missing, a link (ELOOP), unreadable
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        return None
    return fd


def _write_atomically(folder: Path, name: str, data: bytes) -> None:
    # mkstemp opens with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600: a fresh file, never a link's target
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, folder / name)  # rename replaces a link at `name`, it does not follow it
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

"""Results worth keeping between commands: parsed modules and fusion replays.

`explain`, then `render`, then `fuse` of the same dump would each parse the same text and
replay the same pipeline; on a 100k-instruction module that is seconds of parsing and tens of
seconds of replay every time.  Each result is kept under a key made of everything it depends
on: the input's content (sha256 of the text) and its path (modules remember where they came
from), the options, and `code_digest()` (hlofuse's version, Python's, and the content of every
file of the package: a result computed by other code is never served).

Where: the private folder `hlofuse/results` of `private_files.cache_folder` ($HLOFUSE_CACHE,
else $XDG_CACHE_HOME/hlofuse, else ~/.cache/hlofuse): a folder only this user can write, each
entry sealed with its digest; an entry that does not verify (truncated, edited, a link, a
file of another owner, a folder others can write) is discarded and never loaded, and the
command computes the result afresh.  Off for one command with `--no-cache` (`bypassed()`),
for a process and its children with HLOFUSE_NO_CACHE=1.

Why pickle: a module or a replay is a graph of hundreds of thousands of frozen dataclasses;
pickle restores it with the collector paused in about a tenth of the time of parsing and a
twentieth of the replay, and JSON would need a reader per class that could drift from the
classes.  Unpickling runs code named by the data, so it is done only on entries this user
alone could have written (the private folder's guarantee) and whose seal matches (a torn or
tampered file is not loaded).  Entries are zlib-compressed: a 100k replay pickles to ~70 MB,
compressed ~7 MB, faster to read and to seal than to store raw.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import zlib
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Iterator

# hashlib, pickle and private_files (with tempfile) are imported where used: a process that
# parses with the cache off, or a text too short to cache, is spared them (some 5 MB).

#: Set to 1 (or any non-empty value but 0) to turn the cache off for a process and its children.
CACHE_OFF_ENV = "HLOFUSE_NO_CACHE"
FOLDER = "results"
#: Texts shorter than this are parsed again: reading a sealed entry costs more than parsing them.
MIN_PARSE_BYTES = 256 * 1024
#: The folder is trimmed to this size after each store, oldest entries first.
MAX_BYTES = 2 * 1024**3
_SOURCE_KEY = "_hlofuse_source_key"

_bypassed: contextvars.ContextVar[bool] = contextvars.ContextVar("hlofuse_cache_bypassed", default=False)


def enabled() -> bool:
    """Whether results may be read from and written to the cache now."""
    return not _bypassed.get() and os.environ.get(CACHE_OFF_ENV, "") in ("", "0")


@contextlib.contextmanager
def bypassed(really: bool = True) -> Iterator[None]:
    """The cache off for the block (a command's --no-cache)."""
    token = _bypassed.set(really or _bypassed.get())
    try:
        yield
    finally:
        _bypassed.reset(token)


# ------------------------------------------------------------------------------------------
# Parsing
# ------------------------------------------------------------------------------------------


def parse_key(text: str, path: str | None, strict: bool) -> str:
    import hashlib

    return _key("parse", hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(), path, strict)


def cached_parse(text: str, path: str | None, strict: bool, parse) -> Any:
    """`parse()`'s module for this text, from the cache when it holds it; the module remembers
    its key, so that its replays can be cached too."""
    if not enabled() or len(text) < MIN_PARSE_BYTES:
        return parse()
    key = parse_key(text, path, strict)
    module = _load(key)
    if module is None:
        module = parse()
        _store(key, module)
    remember_source(module, key)
    return module


def remember_source(module, key: str) -> None:
    """Tie a parsed module to the key of the text it was parsed from (modules are frozen: the
    key stays true for the module's life; a module derived from it is a new object without one)."""
    object.__setattr__(module, _SOURCE_KEY, key)


def source_key(module) -> str | None:
    return getattr(module, "__dict__", {}).get(_SOURCE_KEY)


# ------------------------------------------------------------------------------------------
# Replays
# ------------------------------------------------------------------------------------------


def replay_key(module, options) -> str | None:
    """The key of `replay(module, options)`, or None for a module that was not parsed from text
    (built by the API, or derived from another): its content has no cheap digest."""
    source = source_key(module)
    if source is None:
        return None
    values = []
    for f in fields(options):
        value = getattr(options, f.name)
        values.append(f"{f.name}={value!r}")
        if f.name == "gpu" and isinstance(value, str) and os.path.isfile(value):
            values.append(_file_digest(value))  # a .txtpb description: its content counts
    return _key("replay", source, *values)


def cached_replay(module, options, progress=None):
    """`hlofuse.pipeline.replay(module, options)`, from the cache when it holds the result."""
    from .pipeline import replay

    key = replay_key(module, options) if enabled() else None
    if key is None:
        return replay(module, options, progress)
    kept = _load(key)
    if kept is not None:
        return replace(kept, input=module)  # the input is the caller's module, not stored twice
    result = replay(module, options, progress)
    _store(key, replace(result, input=None))
    return result


# ------------------------------------------------------------------------------------------
# Entries
# ------------------------------------------------------------------------------------------


def _key(kind: str, *parts) -> str:
    import hashlib

    from .code_digest import code_digest

    digest = hashlib.sha256(f"{kind}\0{code_digest()}".encode())
    for part in parts:
        digest.update(b"\0" + repr(part).encode("utf-8", "surrogatepass"))
    return f"{kind}-{digest.hexdigest()[:40]}"


def _file_digest(path: str) -> str:
    import hashlib

    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _folder() -> Path | None:
    from . import private_files

    return private_files.cache_folder(FOLDER)


def _load(key: str):
    """The object stored under `key`, or None (missing, or discarded: see the module docstring)."""
    import pickle

    from . import private_files
    from .collector import collector_paused

    folder = _folder()
    if folder is None:
        return None
    data = private_files.read(folder, key)  # None unless ours, not a link, and its seal matches
    if data is None:
        return None
    try:
        with collector_paused():  # hundreds of thousands of objects, no cycles
            return pickle.loads(zlib.decompress(data))
    except Exception:  # noqa: BLE001 - sealed but unreadable (another Python, a bug): recompute
        private_files.discard(folder, key)
        return None


def _store(key: str, value) -> None:
    """Keep `value` under `key`; a cache that cannot be written is skipped (the result stands)."""
    import pickle

    from . import private_files

    folder = _folder()
    if folder is None:
        return
    try:
        data = zlib.compress(dumps(value), 1)
        private_files.store(folder, key, data)
        _trim(folder)
    except (OSError, pickle.PicklingError, TypeError, AttributeError, RecursionError):
        private_files.discard(folder, key)


def dumps(value) -> bytes:
    """Pickle `value`, frozen slotted dataclasses (instructions, shapes, layouts) as their field
    values: the `__setstate__` dataclasses give them looks their fields up again for every
    object, which made loading a replay of 100k instructions three times slower."""
    import copyreg
    import io
    import pickle

    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _Reducers(copyreg.dispatch_table)
    pickler.dump(value)
    return buffer.getvalue()


class _Reducers(dict):
    """copyreg's table, and a reducer for each frozen slotted dataclass met while pickling."""

    def __missing__(self, cls):
        params = getattr(cls, "__dataclass_params__", None)
        # (a class with its own __reduce__, as ir's, pickles through it: the same entry then
        # loads whether its classes come compiled, without slots to write, or from source)
        if params is None or not params.frozen or "__slots__" not in cls.__dict__ or "__reduce__" in cls.__dict__:
            raise KeyError(cls)
        names = tuple(f.name for f in fields(cls))

        def reduce(obj):  # (the pickle holds `names` once: later objects refer to it)
            return _rebuild, (cls, names, tuple([getattr(obj, name) for name in names]))

        self[cls] = reduce
        return reduce


def _rebuild(cls, names, values):
    obj = object.__new__(cls)
    for name, value in zip(names, values):
        object.__setattr__(obj, name, value)
    return obj


def _trim(folder: Path) -> None:
    from . import private_files

    entries = []
    for entry in os.scandir(folder):
        if entry.is_file(follow_symlinks=False) and not entry.name.endswith(private_files.SEAL_SUFFIX) \
                and not entry.name.startswith("."):
            st = entry.stat(follow_symlinks=False)
            entries.append((st.st_mtime, st.st_size, entry.name))
    total = sum(size for _, size, _ in entries)
    for _, size, name in sorted(entries):
        if total <= MAX_BYTES:
            break
        private_files.discard(folder, name)
        total -= size


def clear() -> None:
    """Remove every entry (tests; `rm -r ~/.cache/hlofuse/results` does the same)."""
    folder = _folder()
    if folder is None:
        return
    for entry in os.scandir(folder):
        if entry.is_file(follow_symlinks=False) or entry.is_symlink():
            os.unlink(entry.path)

"""The grammar (grammars/hlo.lark) and the parser built from it, once per process: Lark's
LALR tables come from an on-disk cache, and the grammar's terminals are handed out as compiled
patterns, so that the rest of the parser reads the text with the grammar's own definitions.

The cache is a pickle, and unpickling runs code: it is read only from the user's private
cache folder (hlofuse/private_files.py: ours, not writable by others, the entry's digest
checked); where there is none, the grammar is compiled in memory and nothing is cached."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import pickle
import re
import sys
from pathlib import Path

import lark

from .. import private_files

CACHE_FOLDER = "grammar"


def grammar_path() -> Path:
    """grammars/hlo.lark: inside the wheel (hlofuse/grammars) or beside the package (source tree)."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "grammars" / "hlo.lark", package.parent / "grammars" / "hlo.lark"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("grammars/hlo.lark not found beside the hlofuse package")


def cache_name(grammar_text: str) -> str:
    """The cache entry of a grammar, keyed by its text, Lark's version and Python's: a pickle of
    Lark's tables is only valid for those."""
    digest = hashlib.sha256((grammar_text + lark.__version__ + sys.version).encode()).hexdigest()[:16]
    return f"hlo-grammar-{digest}.lark-cache"


def grammar_text(path: Path) -> str:
    """The grammar as this Python's `re` reads it: before 3.11 it has no possessive
    quantifiers, and `*+` (used where it matches the same text as `*`) becomes `*`."""
    text = path.read_text()
    if sys.version_info < (3, 11):
        text = text.replace("*+", "*")
    return text


@functools.lru_cache(maxsize=None)
def parser() -> lark.Lark:
    """The HLO parser: LALR(1), hlofuse's contextual lexer (`Lexer`), callbacks run during
    parsing (no parse tree is built).  Compiling the grammar takes about a second; loading
    Lark's tables from the cache, some 20 ms."""
    text = grammar_text(grammar_path())
    name = cache_name(text)
    folder = private_files.cache_folder(CACHE_FOLDER)
    if folder is not None:
        data = private_files.read(folder, name)
        if data is not None:
            cached = _from_cache(data)
            if cached is not None:
                return cached
            private_files.discard(folder, name)
    built = _compile(text)
    if folder is not None:
        try:
            private_files.store(folder, name, _to_cache(built))
        except (OSError, pickle.PicklingError):  # a full disk, a Lark that cannot save: no cache
            pass
    return built


def _compile(text: str) -> lark.Lark:
    # Imported here: the lexer and the callbacks use the grammar's terminals (terminal_regex).
    from .callbacks import Callbacks
    from .lexer import Lexer

    with _memoized_regexp_width():
        return lark.Lark(
            text,
            parser="lalr",
            lexer=Lexer,
            start=["start", "computation_body", "attribute_value", "token_pieces"],
            transformer=Callbacks(),
            maybe_placeholders=False,
        )


#: Options that hold objects rather than tables: left out of the cache and given again when
#: loading, as Lark's own `cache=` does.
_RUNTIME_OPTIONS = ("transformer", "postlex", "lexer_callbacks", "tree_class", "_plugins")


def _to_cache(built: lark.Lark) -> bytes:
    buffer = io.BytesIO()
    built.save(buffer, exclude_options=_RUNTIME_OPTIONS)
    return buffer.getvalue()


def _from_cache(data: bytes) -> lark.Lark | None:
    """The parser from saved tables, or None when this Lark cannot read them (the entry is then
    built again).  Lark's public `load` takes no transformer; its `_load` does, and is what
    Lark's own `cache=` option calls."""
    from .callbacks import Callbacks

    load = getattr(lark.Lark, "_load", None)
    if load is None:
        return None
    try:
        return load(lark.Lark.__new__(lark.Lark), io.BytesIO(data), transformer=Callbacks())
    except Exception:  # tables saved by another Lark: build them again
        return None


@contextlib.contextmanager
def _memoized_regexp_width():
    """While Lark compiles the grammar (only when the cache is cold), remember the widths of
    regular expressions.  Lark computes the width of every composed terminal at each level it
    is used in, re-parsing the same large patterns about 2000 times; memoised, it parses each
    about once (7 s -> under 2 s).  A pure function of the pattern text, so this is safe."""
    import lark.lexer as lark_lexer
    import lark.utils as lark_utils

    original = getattr(lark_utils, "get_regexp_width", None)
    if original is None or getattr(lark_lexer, "get_regexp_width", None) is not original:
        yield  # a Lark whose internals differ: compile the slow way
        return
    memo = functools.lru_cache(maxsize=None)(original)
    lark_utils.get_regexp_width = lark_lexer.get_regexp_width = memo
    try:
        yield
    finally:
        lark_utils.get_regexp_width = lark_lexer.get_regexp_width = original


@functools.lru_cache(maxsize=None)
def terminal_regex(name: str) -> re.Pattern:
    """The compiled pattern of one terminal of the grammar (anchored with fullmatch by callers)."""
    return re.compile(parser().get_terminal(name).pattern.to_regexp())


def pattern(name: str) -> str:
    """The regular expression of one terminal, to compose larger patterns from."""
    return terminal_regex(name).pattern

"""The grammar (grammars/hlo.lark), its terminals handed out as compiled patterns (so that the
rest of the parser reads the text with the grammar's own definitions), and Lark's parser built
from it.

The terminals and the LALR tables come from hlofuse/parse/lalr_tables.py, written from the
grammar by `make_tables` (`tables()`): reading HLO then imports no Lark, which costs some 7 MB
and 30 ms in every process.  Lark's parser (`parser()`) is built only where those tables do not
fit the grammar (it was edited since, or Python is older than 3.11) and to put a failed parse
in words (diagnostics.py): its LALR tables come from an on-disk cache.

That cache is a pickle, and unpickling runs code: it is read only from the user's private
cache folder (hlofuse/private_files.py: ours, not writable by others, the entry's digest
checked); where there is none, the grammar is compiled in memory and nothing is cached."""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import zlib
from pathlib import Path

CACHE_FOLDER = "grammar"
#: The lexer class Lark's cached parser names (see `cache_name`).
_LEXER = "hlofuse.parse.lark_lexer.Lexer"


def grammar_path() -> Path:
    """grammars/hlo.lark: inside the wheel (hlofuse/grammars) or beside the package (source tree)."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "grammars" / "hlo.lark", package.parent / "grammars" / "hlo.lark"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("grammars/hlo.lark not found beside the hlofuse package")


def cache_name(grammar_text: str) -> str:
    """The cache entry of a grammar, keyed by its text, Lark's version and Python's: a pickle of
    Lark's tables is only valid for those.  It also names the lexer class (`_LEXER`), which
    the pickle refers to: an entry saved by a version of hlofuse whose lexer lived elsewhere
    is not read."""
    import hashlib

    import lark

    key = grammar_text + lark.__version__ + sys.version + _LEXER
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"hlo-grammar-{digest}.lark-cache"


def grammar_text(path: Path) -> str:
    """The grammar as this Python's `re` reads it: before 3.11 it has no possessive
    quantifiers, and `*+` (used where it matches the same text as `*`) becomes `*`."""
    text = path.read_text()
    if sys.version_info < (3, 11):
        text = text.replace("*+", "*")
    return text


def grammar_fingerprint(text: str) -> str:
    """What lalr_tables.py records of the grammar it was written from: a check that the tables
    are not stale (the grammar is ours, not an adversary's, so a CRC is enough)."""
    return f"{len(text)}-{zlib.crc32(text.encode()):08x}"


@functools.lru_cache(maxsize=1)
def tables():
    """hlofuse/parse/lalr_tables.py when it was written from this grammar, else None (Lark's
    parser is then used throughout).  Before Python 3.11 the grammar is rewritten for `re`
    (`grammar_text`), which the tables' patterns are not."""
    if sys.version_info < (3, 11):
        return None
    try:
        from . import lalr_tables
    except Exception:  # noqa: BLE001 - missing or broken (being written): Lark's parser is used
        return None
    if lalr_tables.GRAMMAR_FINGERPRINT != grammar_fingerprint(grammar_text(grammar_path())):
        return None
    return lalr_tables


class TerminalDef:
    """A terminal of the grammar as the lexer reads it (what it uses of Lark's TerminalDef)."""

    __slots__ = ("name", "kind", "regexp", "value", "priority")

    def __init__(self, name: str, kind: str, regexp: str, value: str, priority: int):
        self.name, self.kind, self.regexp, self.value, self.priority = name, kind, regexp, value, priority

    @classmethod
    def from_lark(cls, t) -> TerminalDef:
        return cls(t.name, t.pattern.type, t.pattern.to_regexp(), t.pattern.value, t.priority)


@functools.lru_cache(maxsize=1)
def terminal_defs() -> dict[str, TerminalDef]:
    """The grammar's terminals by name: from the tables, or from Lark's parser."""
    found = tables()
    if found is not None:
        return {row[0]: TerminalDef(*row) for row in found.TERMINALS}
    return {t.name: TerminalDef.from_lark(t) for t in parser().parser.lexer_conf.terminals}


@functools.lru_cache(maxsize=None)
def parser():
    """Lark's HLO parser (a `lark.Lark`): LALR(1), hlofuse's contextual lexer (lark_lexer.py),
    callbacks run during parsing (no parse tree is built).  Compiling the grammar takes about a
    second; loading Lark's tables from the cache, some 20 ms."""
    import pickle

    from .. import private_files

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


def _compile(text: str):
    import lark

    # Imported here: the lexer and the callbacks use the grammar's terminals (terminal_regex).
    from .callbacks import Callbacks
    from .lark_lexer import Lexer

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


def _to_cache(built) -> bytes:
    import io

    buffer = io.BytesIO()
    built.save(buffer, exclude_options=_RUNTIME_OPTIONS)
    return buffer.getvalue()


def _from_cache(data: bytes):
    """The parser from saved tables, or None when this Lark cannot read them (the entry is then
    built again).  Lark's public `load` takes no transformer; its `_load` does, and is what
    Lark's own `cache=` option calls."""
    import io

    import lark

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
    return re.compile(terminal_defs()[name].regexp)


def pattern(name: str) -> str:
    """The regular expression of one terminal, to compose larger patterns from (not compiled:
    most are only ever parts of others)."""
    return terminal_defs()[name].regexp

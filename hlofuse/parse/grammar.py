"""The grammar (grammars/hlo.lark) and the parser built from it, once per process: Lark's
LALR tables come from an on-disk cache, and the grammar's terminals are handed out as compiled
patterns, so that the rest of the parser reads the text with the grammar's own definitions."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import sys
import tempfile
from pathlib import Path

import lark


def grammar_path() -> Path:
    """grammars/hlo.lark: inside the wheel (hlofuse/grammars) or beside the package (source tree)."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "grammars" / "hlo.lark", package.parent / "grammars" / "hlo.lark"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("grammars/hlo.lark not found beside the hlofuse package")


def cache_file(grammar_text: str) -> str:
    """Where Lark keeps the compiled tables (building them takes seconds; loading, milliseconds)."""
    digest = hashlib.sha256((grammar_text + lark.__version__ + sys.version).encode()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "hlofuse")
    try:
        os.makedirs(folder, exist_ok=True)
        probe = os.path.join(folder, ".write-test")
        with open(probe, "w"):
            pass
        os.unlink(probe)
    except OSError:
        folder = tempfile.gettempdir()
    return os.path.join(folder, f"hlo-grammar-{digest}.lark-cache")


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
    parsing (no parse tree is built)."""
    # Imported here: the lexer and the callbacks use the grammar's terminals (terminal_regex).
    from .callbacks import Callbacks
    from .lexer import Lexer

    path = grammar_path()
    text = grammar_text(path)
    with _memoized_regexp_width():
        return lark.Lark(
            text,
            parser="lalr",
            lexer=Lexer,
            start=["start", "computation_body", "attribute_value", "token_pieces"],
            transformer=Callbacks(),
            cache=cache_file(text),
            maybe_placeholders=False,
        )


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

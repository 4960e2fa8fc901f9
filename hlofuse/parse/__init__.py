"""HLO text → `ir.Module`: the Lark grammar (grammars/hlo.lark), callbacks applied while
parsing (no parse tree is built), and the checks XLA's own parser makes while it reads.

One module per stage, so tests can enter anywhere; data flows one way:
  1. `grammar`     grammars/hlo.lark; `terminal_regex(name)` hands out its terminals, from which
                   every other pattern is composed.  `lalr` parses with the LALR tables Lark
                   computes for it (`lalr_tables`, written by `make_tables`), without Lark;
                   Lark's own parser (`grammar.parser`) words failures and stands in where the
                   tables are stale.
  2. `lexer`       Lark's contextual lexer rebuilt for speed; `reader` reads a whole computation
                   of common instructions as one token (the fast path).
  3. `callbacks`   run at each reduction; they and the reader make raw records (`records`),
                   with shapes from `shapes` and the header's tables from `sections`.
  4. `assemble`    raw records → ir.Module, with XLA's structural checks.
  5. `hlofuse.validate.check_module` — per-instruction checks (opcodes, attributes, literals).
`diagnostics` turns any failure into one HloSyntaxError (found X, expected Y, with a caret);
`parallel` reads large inputs in two processes.
"""

from __future__ import annotations

import re

from .. import ir
from ..collector import collector_paused
from ..errors import HloSyntaxError
from .assemble import assemble
from .diagnostics import run_parser
from .grammar import grammar_path, parser, terminal_regex
from .parallel import PARALLEL_MIN_BYTES, jobs, parse_in_two
from .shapes import parse_shape, split_top_level
from .sniff import binary_message, binary_text, empty_input, empty_message

__all__ = ["PARALLEL_MIN_BYTES", "grammar_path", "parse_shape", "parse_text", "parser", "split_top_level",
           "terminal_regex"]


_LONE_CR_RE = re.compile(r"\r(?!\n)")


def parse_text(text: str, path: str | None = None, *, strict: bool = False) -> ir.Module:
    """Parse HLO text (a module, bare computations or one lone instruction)."""
    from ..validate import check_module

    if not isinstance(text, str):
        raise TypeError("HLO text must be str")
    if empty_input(text):
        raise HloSyntaxError(empty_message(path, text), path=path)
    binary = binary_text(text)
    if binary is not None:
        raise HloSyntaxError(binary_message(binary), path=path)
    if "\r" in text:
        # A lone CR ends a line too (old Mac files; XLA's lexer takes it so).  Replaced one for
        # one, so offsets stay those of the text, and lines and columns come out right.
        text = _LONE_CR_RE.sub("\n", text)
    from ..result_cache import cached_parse

    def parse() -> ir.Module:
        with collector_paused():
            module = parse_in_two(text, path, strict) if jobs(text) > 1 else None
            if module is None:
                module = assemble(run_parser(text, "start"), text, path)  # the raw records go here
                module = check_module(module, text, strict=strict)
        return module

    try:
        module = cached_parse(text, path, strict, parse)
    except HloSyntaxError as err:
        raise err.located(path) from None
    except RecursionError:
        raise HloSyntaxError("input is nested too deeply", path=path) from None
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, ZeroDivisionError) as err:
        # A bug of ours that input reached (the fuzz tests look for these): still an
        # HlofuseError for callers, with what is needed to report it.
        raise HloSyntaxError(f"internal error while reading HLO, please report it: {type(err).__name__}: {err}",
                             path=path) from err
    return module


"""Parse failures → one clear HloSyntaxError: `found X, expected Y` at a line and column, with
the source line for the caret.  Lark's errors (an unexpected character or token, an early end)
are put in the words of HLO; errors raised inside callbacks are unwrapped from Lark's
VisitError; a broken instruction head or attribute is searched for the piece that breaks it."""

from __future__ import annotations

import re

from ..errors import HloSyntaxError
from .grammar import parser, terminal_regex
from .records import LocatedError, token_text


def run_parser(text: str, start: str):
    """Parse with one of the grammar's start symbols; any failure becomes an HloSyntaxError.

    lalr.py's parser reads the text; where it fails, Lark's parser reads it again: the same
    tables, lexer and callbacks, so it fails at the same place, and its errors say what was
    expected there.  (Whatever goes wrong, Lark's parser has the last word.)"""
    from . import lalr
    from .reader import forget_long_values

    try:
        fast = lalr.parser()
        if fast is not None:
            try:
                return fast.parse(text, start)
            except Exception:  # noqa: BLE001 - worded below, by Lark's parser
                pass
        return run_lark_parser(text, start)
    finally:
        forget_long_values()


def run_lark_parser(text: str, start: str):
    """`run_parser` with Lark's parser alone."""
    from lark.exceptions import UnexpectedInput, VisitError

    try:
        return parser().parse(text, start=start)
    except LocatedError as err:
        raise error_at(text, err.message, err.line, err.column) from None
    except VisitError as err:  # a callback failed: report its own error, not lark's wrapper
        inner = err.orig_exc
        if isinstance(inner, LocatedError):
            raise error_at(text, inner.message, inner.line, inner.column) from None
        raise error_at(text, f"cannot read this: {inner}", None, None) from None
    except UnexpectedInput as err:
        raise convert_lark_error(text, err) from None
    except ValueError as err:  # shape text that matched the grammar but names nothing real
        raise error_at(text, str(err), None, None) from None


def error_at(text: str, message: str, line: int | None, column: int | None, **kw) -> HloSyntaxError:
    """An HloSyntaxError at a line and column, carrying the source line for the caret."""
    source_line = None
    if line is not None:
        lines = text.splitlines()
        if 0 < line <= len(lines):
            source_line = lines[line - 1]
    return HloSyntaxError(message, line=line, column=column, source_line=source_line, **kw)


_FRIENDLY = {
    "INSTRUCTION": "an instruction (name = shape opcode(operands))",
    "COMPUTATION_HEAD": "a computation (name (parameters) -> shape {)",
    "NAME_EQ": "an instruction name followed by '='",
    "ROOT": "ROOT",
    "ATTR": "', attribute=value'",
    "SHAPE": "a shape such as f32[2,3]{1,0}",
    "NAME": "a name",
    "PARAM_NAME": "a parameter such as 'p0: f32[2]'",
    "MODULE_NAME": "the module name",
    "HLOMODULE": "'HloModule'",
    "ENTRY": "ENTRY",
    "OPCODE_OPEN": "an opcode followed by '('",
    "LITERAL_ATOM": "a literal",
    "LITERAL_NAN_PAYLOAD": "a literal",
    "BRACED": "a braced literal",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "__ANON_0": "'->'",
    "SECTION_STRING_ENTRY": "an entry such as '1 \"file.py\"'",
    "SECTION_BRACE_ENTRY": "an entry such as '1 {...}'",
    "FILE_NAMES": "FileNames",
    "FUNCTION_NAMES": "FunctionNames",
    "FILE_LOCATIONS": "FileLocations",
    "STACK_FRAMES": "StackFrames",
    "$END": "the end of the input",
}

_HIDDEN = {"WHITESPACE", "BLOCK_COMMENT", "LINE_COMMENT"}


def _expected_words(names) -> tuple[str, ...]:
    words = []
    for name in sorted(names or ()):
        if name in _HIDDEN:
            continue
        word = _FRIENDLY.get(name, name.lower())
        if word not in words:
            words.append(word)
    return tuple(words)


def _describe(text: str, pos: int) -> str:
    if pos >= len(text):
        return "the end of the input"
    m = terminal_regex("SHAPE").match(text, pos) or re.compile(r"[A-Za-z0-9_%.\-]+|\S").match(text, pos)
    found = m.group(0) if m else text[pos]
    if len(found) > 40:
        found = found[:37] + "..."
    return repr(found)


def convert_lark_error(text: str, err) -> HloSyntaxError:
    """A `lark.exceptions.UnexpectedInput` in the words of HLO."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

    if isinstance(err, UnexpectedCharacters):
        pos = err.pos_in_stream
        allowed = set(err.allowed or ())
        if text.startswith("/*", pos):
            return error_at(text, "unterminated comment: expected '*/'", err.line, err.column, found="'/*'")
        if "INSTRUCTION" in allowed or "NAME_EQ" in allowed:
            found = _diagnose_instruction(text, pos)
            if found is not None:
                return found
        if "ATTR" in allowed and text.startswith(",", pos):
            return _malformed_attribute(text, pos, err.line, err.column)
        expected = _expected_words(allowed)
        found = _describe(text, pos)
        return error_at(text, f"found {found}, expected {_join(expected)}", err.line, err.column,
                        found=found, expected=expected)
    if isinstance(err, UnexpectedEOF):
        return _unexpected_end(text, _expected_words(err.expected))
    if isinstance(err, UnexpectedToken):
        tok = err.token
        expected_names = set(err.expected or ())
        expected = _expected_words(expected_names)
        if tok.type == "$END":
            return _unexpected_end(text, expected)
        pos = getattr(tok, "start_pos", None)
        if pos is not None and ("INSTRUCTION" in expected_names or "NAME_EQ" in expected_names):
            found = _diagnose_instruction(text, pos)
            if found is not None:
                return found
        value = token_text(tok)
        if pos is not None and "ATTR" in expected_names and value.startswith(","):
            return _malformed_attribute(text, pos, tok.line, tok.column)
        found = _describe(text, pos) if pos is not None else repr(value[:40])
        message = f"found {found}, expected {_join(expected)}"
        if tok.type == "INSTRUCTION" and not expected:
            message = f"found {found}, expected nothing more (a lone instruction ends here)"
        return error_at(text, message, tok.line, tok.column, found=found, expected=expected)
    return error_at(text, str(err), getattr(err, "line", None), getattr(err, "column", None))


def _line_col(text: str, pos: int) -> tuple[int, int]:
    return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _unexpected_end(text: str, expected: tuple[str, ...]) -> HloSyntaxError:
    """The input ended early.  The usual cause is a bracket left open in an attribute value,
    which then swallows the rest of the text: point at that bracket when there is one."""
    for m in _ATTR_START_RE.finditer(text):
        found = _diagnose_attribute(text, m.start())
        if found is not None:
            return found
    line, column = _line_col(text, len(text))
    return error_at(text, f"found the end of the input, expected {_join(expected)}", line, column,
                    found="end of input", expected=expected)


_ATTR_START_RE = re.compile(r",[ \t]*([A-Za-z_][\w.\-]*)[ \t]*=[ \t]*")
_CLOSER = {"{": "}", "(": ")", "[": "]"}


def _malformed_attribute(text: str, pos: int, line: int, column: int) -> HloSyntaxError:
    found = _diagnose_attribute(text, pos)
    if found is not None:
        return found
    return error_at(
        text, "found a malformed attribute, expected ', name=value' with balanced brackets and quotes",
        line, column, found=_describe(text, pos),
    )


def _diagnose_attribute(text: str, pos: int) -> HloSyntaxError | None:
    """`, name=value` at `pos` did not lex as one attribute: find the bracket or quote of the
    value (on its line) that breaks it.  None when the value looks balanced."""
    m = _ATTR_START_RE.match(text, pos)
    if m is None:
        return None
    name = m.group(1)
    end = text.find("\n", m.end())
    end = len(text) if end < 0 else end
    stack: list[tuple[str, int]] = []
    i = m.end()
    while i < end:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < end and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= end:
                line, col = _line_col(text, i)
                return error_at(text, f"unterminated string in the value of attribute {name}", line, col,
                                found="'\"'")
            i = j + 1
            continue
        if ch in _CLOSER:
            stack.append((ch, i))
        elif ch in ")]}":
            if not stack:
                break  # closes the enclosing group: the value ended before it
            opener, at = stack.pop()
            if _CLOSER[opener] != ch:
                line, col = _line_col(text, i)
                return error_at(
                    text, f"found {ch!r}, expected {_CLOSER[opener]!r} to close the {opener!r} at column "
                          f"{_line_col(text, at)[1]} in the value of attribute {name}", line, col, found=repr(ch))
        elif not stack and ch in ", \t":
            break
        i += 1
    if stack:
        opener, at = stack[0]
        line, col = _line_col(text, at)
        return error_at(text, f"unbalanced {opener!r} in the value of attribute {name}: it is not closed on "
                              f"its line", line, col, found=repr(opener))
    return None


def _join(words: tuple[str, ...]) -> str:
    if not words:
        return "nothing more"
    if len(words) == 1:
        return words[0]
    return "one of: " + ", ".join(words)


def _diagnose_instruction(text: str, pos: int) -> HloSyntaxError | None:
    """The instruction head is one token; when it does not match, find the first piece that
    breaks it, so the error points at the right column."""
    name_re = terminal_regex("NAME")
    shape_re = terminal_regex("SHAPE")

    def at(p):
        line = text.count("\n", 0, p) + 1
        col = p - (text.rfind("\n", 0, p) + 1) + 1
        return line, col

    def fail(p, expected):
        line, col = at(p)
        found = _describe(text, p)
        return error_at(text, f"found {found}, expected {expected}", line, col, found=found, expected=(expected,))

    ws = re.compile(r"[ \t\r\n\f]*")
    p = ws.match(text, pos).end()
    m = re.compile(r"ROOT\b").match(text, p)
    if m:
        p = ws.match(text, m.end()).end()
    m = shape_re.match(text, p)
    if m and re.compile(r"[ \t]+[a-z][a-z0-9\-]*[ \t]*\(").match(text, m.end()):
        return fail(p, "an instruction name followed by '=' (only a lone instruction may omit it)")
    m = name_re.match(text, p)
    if not m:
        if shape_re.match(text, p):
            return fail(p, "an instruction name followed by '=' (only a lone instruction may omit it)")
        return None  # not an instruction at all; let the generic message speak
    p = ws.match(text, m.end()).end()
    if not text.startswith("=", p):
        return None
    p = ws.match(text, p + 1).end()
    m = shape_re.match(text, p)
    if not m:
        word = re.match(r"[a-z0-9]+\[", text[p:])
        if word:
            return fail(p, "a shape with a known element type (pred, s8..s64, u8..u64, f16, bf16, f32, f64, c64, ...)")
        m_op = re.compile(r"[a-z][a-z0-9\-]*\s*\(").match(text, p)
        if m_op:
            return None  # shape left out: the general rule handles (and may infer) it
        return fail(p, "a shape such as f32[2,3]{1,0}")
    p = ws.match(text, m.end()).end()
    m = re.compile(r"[a-z][a-z0-9\-]*").match(text, p)
    if not m:
        return fail(p, "an opcode")
    p = ws.match(text, m.end()).end()
    if not text.startswith("(", p):
        return fail(p, "'(' after the opcode")
    return None  # the operand list itself: the general rule reports it precisely


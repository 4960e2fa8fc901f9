"""HLO text → `ir.Module`: the Lark grammar (grammars/hlo.lark), a transformer applied while
parsing (no parse tree is built), and the checks XLA's own parser makes while it reads.

Stages, so tests can enter anywhere:
  1. `parser()` — the cached LALR parser; its callbacks (`_Callbacks`) turn tokens into raw records.
  2. `_assemble()` — raw records → `ir.Module`: names resolved, roots and entry chosen, inline
     bodies and nested instructions hoisted, structural errors raised with line and column.
  3. `hlofuse.validate.check_module()` — per-instruction checks (opcodes, attributes, literals).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from . import ir
from .errors import HloSyntaxError

# ------------------------------------------------------------------------------------------
# 1. The parser
# ------------------------------------------------------------------------------------------


def grammar_path() -> Path:
    """grammars/hlo.lark: inside the wheel (hlofuse/grammars) or beside the package (source tree)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "grammars" / "hlo.lark", here.parent / "grammars" / "hlo.lark"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("grammars/hlo.lark not found beside the hlofuse package")


def _cache_file(grammar_text: str) -> str:
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


@functools.lru_cache(maxsize=None)
def parser() -> lark.Lark:
    """The HLO parser: LALR(1), hlofuse's contextual lexer (`_Lexer`), callbacks run during
    parsing (no parse tree is built)."""
    path = grammar_path()
    text = path.read_text()
    with _memoized_regexp_width():
        return lark.Lark(
            text,
            parser="lalr",
            lexer=_Lexer,
            start=["start", "computation_body", "attribute_value", "token_pieces"],
            transformer=_Callbacks(),
            cache=_cache_file(text),
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


# ------------------------------------------------------------------------------------------
# The lexer: Lark's contextual lexer, rebuilt for speed
# ------------------------------------------------------------------------------------------
#
# Like Lark's contextual lexer, it matches only the terminals the parser accepts in its
# current state, tried in Lark's order (priority, then regular expressions before literal
# strings), and keywords (`ROOT`, `ENTRY`, ...) that a regular expression also matches are
# told apart by a dictionary.  What differs is the cost per token: one regular expression per
# parser state holds every terminal as a named group *and* the ignored text before it
# (whitespace, comments), so one C-level match yields the next token; lines are counted with
# str.count over the skipped text instead of per character.


class _Scanner:
    __slots__ = ("regex", "keywords", "allowed", "readers")

    def __init__(self, regex, keywords, allowed, readers):
        self.regex, self.keywords, self.allowed, self.readers = regex, keywords, allowed, readers


class _Lexer(lark.lexer.Lexer):
    __future_interface__ = 2

    def __init__(self, lexer_conf):
        self.terminals = {t.name: t for t in lexer_conf.terminals}
        ignored = "|".join(self.terminals[name].pattern.to_regexp() for name in sorted(lexer_conf.ignore))
        # Atomic (a lookahead, then a back reference to what it matched): once skipped, ignored
        # text is never backtracked into, or a token could start inside a comment.
        self.skip = f"(?=(?P<_skipped>(?:{ignored})*))(?P=_skipped)" if ignored else ""
        self.skip_re = re.compile(self.skip)
        self.ignore = frozenset(lexer_conf.ignore)
        self.by_state: dict = {}  # parser state -> _Scanner
        self.by_accepts: dict = {}  # frozenset of terminal names -> _Scanner (states share them)

    def scanner(self, state: int, accepts) -> _Scanner:
        key = frozenset(accepts)
        found = self.by_accepts.get(key)
        if found is None:
            found = self.by_accepts[key] = self._build(key)
        self.by_state[state] = found
        return found

    def _build(self, accepts) -> _Scanner:
        terms = [self.terminals[n] for n in accepts if n in self.terminals and n not in self.ignore]
        regexps = [t for t in terms if t.pattern.type == "re"]
        keywords, alternatives = {}, []
        readers = tuple((t.name, _READERS[t.name]) for t in terms if t.name in _READERS)
        terms = [t for t in terms if t.name not in _READERS]
        for t in terms:
            if t.pattern.type == "str" and any(re.fullmatch(r.pattern.to_regexp(), t.pattern.value) for r in regexps):
                keywords[t.pattern.value] = t.name  # matched by a regexp, then retyped (Lark's `unless`)
            else:
                alternatives.append(t)
        alternatives.sort(key=lambda t: (-t.priority, t.pattern.type != "re", -len(t.pattern.to_regexp()), t.name))
        body = "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in alternatives)
        regex = re.compile(f"{self.skip}(?:{body})") if body else None
        return _Scanner(regex, keywords, frozenset(t.name for t in terms) | {n for n, _ in readers}, readers)

    def lex(self, lexer_state, parser_state):
        text_slice = lexer_state.text
        text, pos, end = text_slice.text, text_slice.start, text_slice.end
        states = parser_state.parse_conf.parse_table.states
        by_state = self.by_state
        Token = lark.Token
        line = text.count("\n", 0, pos) + 1
        line_start = text.rfind("\n", 0, pos) + 1
        count, rfind = text.count, text.rfind
        while True:
            state = parser_state.position
            scanner = by_state.get(state) or self.scanner(state, states[state])
            if scanner.readers:
                at = self.skip_re.match(text, pos, end).end() if self.skip else pos
                n = count("\n", pos, at)
                if n:
                    line += n
                    line_start = rfind("\n", pos, at) + 1
                pos = at
                token = None
                for kind, reader in scanner.readers:
                    found = reader(text, pos, end, line, line_start)
                    if found is not None:
                        value, stop = found
                        nl = text.find("\n", pos, stop)
                        token = Token(kind, text[pos:stop if nl < 0 else nl], pos, line, pos - line_start + 1,
                                      None, None, stop)
                        token.value = value  # what the reader made of it; the text is only for messages
                        n = count("\n", pos, stop)
                        if n:
                            line += n
                            line_start = rfind("\n", pos, stop) + 1
                        pos = stop
                        break
                if token is not None:
                    yield token
                    continue
            m = scanner.regex.match(text, pos, end) if scanner.regex is not None else None
            if m is None:
                at = self.skip_re.match(text, pos, end).end() if self.skip else pos
                if at >= end:
                    return
                n = count("\n", pos, at)
                if n:
                    line += n
                    line_start = rfind("\n", pos, at) + 1
                raise UnexpectedCharacters(text, at, line, at - line_start + 1, allowed=scanner.allowed,
                                           state=parser_state)
            kind = m.lastgroup
            start = m.start(kind)
            n = count("\n", pos, start)
            if n:
                line += n
                line_start = rfind("\n", pos, start) + 1
            value = m.group(kind)
            pos = m.end()
            token = Token(scanner.keywords.get(value, kind), value, start, line, start - line_start + 1,
                          None, None, pos)
            n = count("\n", start, pos)
            if n:
                line += n
                line_start = rfind("\n", start, pos) + 1
            yield token


# ------------------------------------------------------------------------------------------
# Raw records produced by the callbacks
# ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _RawInstr:
    name: str | None
    opcode: str
    shape: ir.Shape | None
    operands: list  # names (str) or nested _RawInstr / _AnonOperand
    attrs: list[tuple[str, str]]  # (name, value); the instruction's line and column locate them
    literal: str | None
    is_root: bool
    line: int
    column: int
    operand_shapes: list | None = None  # declared shape text per operand (long form), or None
    plain: bool = False  # every operand is a name (no nested instructions, no anonymous operands)
    built: object = None  # the ir.Instruction, when the reader could make it at once


@dataclass(slots=True)
class _AnonOperand:
    """An operand written as a bare shape (lone-instruction syntax): becomes a parameter."""

    shape: ir.Shape
    line: int
    column: int


@dataclass(slots=True)
class _RawComputation:
    name: str
    is_entry: bool
    params: list[tuple[str, str, int, int]] | None  # (name, shape text, line, col) from the signature
    result_shape: str | None
    attrs: list[tuple[str, str, int, int]]
    instrs: list[_RawInstr]
    line: int
    column: int


@dataclass(slots=True)
class _RawModule:
    form: str
    name: str
    attrs: list[tuple[str, str, int, int]] = field(default_factory=list)
    sections: list[tuple[str, list]] = field(default_factory=list)
    computations: list[_RawComputation] = field(default_factory=list)
    lone: _RawInstr | None = None
    line: int = 1
    column: int = 1


# ------------------------------------------------------------------------------------------
# Shapes (text → ir.Shape, memoised: dumps repeat the same few hundred shapes)
# ------------------------------------------------------------------------------------------

_COMMENT_RE = re.compile(r"/\*.*?\*/", re.S)
_ARRAY_RE = re.compile(r"\s*([a-z0-9]+)\[([^\]]*)\](\{.*\})?\s*$", re.S)


@functools.lru_cache(maxsize=65536)
def parse_shape(text: str) -> ir.Shape:
    """`f32[2,3]{1,0}` / `(f32[2], s32[])` → ir.Shape.  The text has already matched SHAPE."""
    if "/*" in text:
        text = _COMMENT_RE.sub("", text)
    text = text.strip()
    if text.startswith("("):
        inner = text[1:-1].strip()
        if not inner:
            return ir.Shape("tuple")
        return ir.Shape("tuple", tuple_shapes=tuple(parse_shape(p) for p in _split_top_level(inner)))
    m = _ARRAY_RE.match(text)
    if m is None:
        raise ValueError(f"not a shape: {text!r}")
    etype, dims_text, layout_text = m.groups()
    if etype not in ir.ELEMENT_BITS:
        raise ValueError(f"unknown element type {etype!r}")
    dims: list[int] = []
    dynamic: list[bool] = []
    any_dynamic = False
    for part in dims_text.split(","):
        part = part.strip()
        if not part:
            continue
        if part == "?":
            dims.append(-1)
            dynamic.append(True)
            any_dynamic = True
        elif part.startswith("<="):
            dims.append(int(part[2:]))
            dynamic.append(True)
            any_dynamic = True
        else:
            dims.append(int(part))
            dynamic.append(False)
    layout = None
    if layout_text is not None:
        body = layout_text[1:-1]
        m2m_text, _, extra = body.partition(":")
        m2m = tuple(int(x) for x in m2m_text.split(",") if x.strip())
        layout = ir.Layout(m2m, extra) if (m2m or extra) else None  # a scalar's `{}` says nothing
    return ir.Shape(etype, tuple(dims), layout, (), tuple(dynamic) if any_dynamic else ())


def _split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at separators outside (), [], {} and strings."""
    parts: list[str] = []
    depth = 0
    start = 0
    in_string = False
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


# ------------------------------------------------------------------------------------------
# Callbacks (run by Lark at each reduction)
# ------------------------------------------------------------------------------------------


def _val(tok) -> str:
    """A token's text.  (A COMPUTATION token's value is what the lexer read; its text is the head.)"""
    value = getattr(tok, "value", None)
    return value if isinstance(value, str) else str(tok)


def _attr(tok) -> tuple[str, str, int, int]:
    text = _val(tok)
    eq = text.index("=")
    return (sys.intern(text[1:eq].strip()), text[eq + 1 :].strip(), tok.line, tok.column)


def _pattern(name: str) -> str:
    return terminal_regex(name).pattern


@functools.lru_cache(maxsize=1)
def _head_regex() -> re.Pattern:
    """Splits the head of an INSTRUCTION token (the grammar's INSTR_HEAD): root, name, shape,
    opcode, operand list; the attributes follow it."""
    return re.compile(r"(ROOT\s+)?(" + _pattern("NAME") + r")\s*=\s*(" + _pattern("SHAPE") + r")\s+("
                      + _pattern("OPCODE") + r")\s*(" + _pattern("OPERAND_LIST") + ")")


@functools.lru_cache(maxsize=1)
def _attr_regex() -> re.Pattern:
    """One `, name=value` (the grammar's ATTR), with the name and the value as groups."""
    return re.compile(r"\s*,\s*(" + _pattern("ATTR_NAME") + r")\s*=\s*(" + _pattern("ATTR_VALUE") + ")")


@functools.lru_cache(maxsize=1)
def _computation_head_regex() -> re.Pattern:
    """Splits a COMPUTATION_HEAD token: ENTRY, name, parameter text, result shape."""
    return re.compile(r"(ENTRY\s+)?(" + _pattern("NAME") + r")\s*(?:\(([\s\S]*)\)\s*->\s*("
                      + _pattern("SHAPE") + r"))?\s*\{\Z")


@functools.lru_cache(maxsize=1)
def _param_regex() -> re.Pattern:
    return re.compile(r"\s*(" + _pattern("NAME") + r")\s*:\s*(" + _pattern("SHAPE") + r")\s*(?:,|\Z)")


@functools.lru_cache(maxsize=1)
def _names_regex() -> re.Pattern:
    """A comma-separated list of operand names (the common operand list, after index marks)."""
    name = _pattern("NAME")
    return re.compile(r"\s*" + name + r"\s*(?:,\s*" + name + r"\s*)*")


@functools.lru_cache(maxsize=1)
def _operand_item_regex() -> re.Pattern:
    name = terminal_regex("NAME").pattern
    shape = terminal_regex("SHAPE").pattern
    return re.compile(r"\s*(?:(" + shape + r")\s+)?(" + name + r")\s*(?:,|\Z)")


_INDEX_COMMENT_RE = re.compile(r"/\*index=[0-9]+\*/")
_LITERAL_OPCODES = frozenset({"constant", "parameter"})


def _raw_instruction(text: str, root, name: str, shape_text: str, opcode: str, operand_list: str,
                     attrs_start: int, attrs_end: int, line: int, column: int) -> "_RawInstr":
    """The record of one instruction in the common form, from the pieces of its text: the
    head's groups, and text[attrs_start:attrs_end] holding its `, name=value` attributes."""
    fast = _FAST or _bind_fast()
    intern = sys.intern
    attrs = []
    rewritten = False
    if attrs_start < attrs_end:
        for a in fast.attrs(text, attrs_start, attrs_end):
            key, value = a.group(1, 2)
            # Short values (dimensions={1}, kind=kLoop, index=0, calls=...) repeat: share them.
            attrs.append((intern(key), intern(value) if len(value) < 48 else value))
            rewritten = rewritten or key in _REWRITTEN_ATTRS
    opcode = intern(opcode)
    operand_text = operand_list[1:-1]
    literal = None
    operands: list = []
    operand_shapes = None
    if opcode in _LITERAL_OPCODES:
        literal = operand_text.strip()
    elif operand_text and not operand_text.isspace():
        if "/*" in operand_text:
            operand_text = _INDEX_COMMENT_RE.sub("", operand_text)
        if "[" not in operand_text and "(" not in operand_text and "{" not in operand_text and \
                fast.names(operand_text):
            operands = list(map(intern, _BARE_NAME_RE.findall(operand_text)))
        else:
            operand_shapes = []
            pos = 0
            item_re = _operand_item_regex()
            while pos < len(operand_text):
                m_item = item_re.match(operand_text, pos)
                if m_item is None or m_item.end() == pos:
                    raise _located_error(
                        "expects an operand name (an operand that is a literal is only valid in constant(...))",
                        line, column)
                operand_shapes.append(m_item.group(1))
                operands.append(_strip_percent(m_item.group(2)))
                pos = m_item.end()
            if all(s is None for s in operand_shapes):
                operand_shapes = None
            if any(not _is_name(o) for o in operands):
                raise _located_error("expects an operand name (a literal is only valid in constant(...))",
                                     line, column)
    name = intern(name[1:] if name[0] == "%" else name)
    shape = parse_shape(shape_text)
    built = None
    if not rewritten and operand_shapes is None:  # nothing for assembly to resolve: make it now
        built = fast.instruction(name, opcode, shape, tuple(operands), tuple(attrs), literal, (),
                                 fast.span(line, column))
    return _RawInstr(name, opcode, shape, operands, attrs, literal, root is not None, line, column,
                     operand_shapes, True, built)


class _Fast:
    """The compiled patterns and constructors _raw_instruction uses, bound once."""

    __slots__ = ("attrs", "names", "instruction", "span")


_FAST: _Fast | None = None


def _bind_fast() -> _Fast:
    global _FAST
    fast = _Fast()
    fast.attrs = _attr_regex().finditer
    fast.names = _names_regex().fullmatch
    fast.instruction, fast.span = ir.Instruction, ir.Span
    _FAST = fast
    return fast


_WS = r"[ \t\f\r\n]"
# The names of an operand list that _names_regex has matched, without their `%`.
_BARE_NAME_RE = re.compile(r"%?([^\s,%]+)")


@functools.lru_cache(maxsize=1)
def _instruction_regex() -> re.Pattern:
    """The grammar's INSTRUCTION (INSTR_HEAD (_WS0 ATTR)*, INSTR_HEAD being
    (ROOT _WS1)? NAME _WS0 "=" _WS0 SHAPE _WS1 OPCODE _WS0 OPERAND_LIST), composed from the same
    terminals, with the pieces as groups and the whitespace before it skipped.  Groups: 1 the
    instruction, 2 ROOT, 3 name, 4 shape, 5 opcode, 6 operand list, 7 attributes.
    tests/test_parse_lexer.py checks it matches what the grammar's INSTRUCTION matches."""
    ws = _WS
    return re.compile(
        f"{ws}*((?:(ROOT){ws}+)?({_pattern('NAME')}){ws}*={ws}*({_pattern('SHAPE')}){ws}+({_pattern('OPCODE')})"
        f"{ws}*({_pattern('OPERAND_LIST')})((?:{ws}*{_pattern('ATTR')})*))")


_CLOSE_RE = re.compile(_WS + r"*\}")


def _read_computation(text: str, pos: int, end: int, line: int, line_start: int):
    """The COMPUTATION terminal (COMPUTATION_HEAD (_WS0 INSTRUCTION)* _WS0 "}"), read one
    instruction at a time: (raw computation, end offset), or None when the computation holds
    anything else, so that the parser reads it token by token."""
    head = terminal_regex("COMPUTATION_HEAD").match(text, pos, end)
    if head is None:
        return None
    instrs = []
    match = _instruction_regex().match
    count, rfind = text.count, text.rfind
    head_line, head_column = line, pos - line_start + 1
    p = head.end()
    while True:
        m = match(text, p, end)
        if m is None:
            break
        start = m.start(1)
        n = count("\n", p, start)
        if n:
            line += n
            line_start = rfind("\n", p, start) + 1
        root, name, shape, opcode, operands = m.group(2, 3, 4, 5, 6)
        attrs_start, attrs_end = m.span(7)
        instrs.append(_raw_instruction(text, root, name, shape, opcode, operands, attrs_start, attrs_end,
                                       line, start - line_start + 1))
        p = m.end()
        n = count("\n", start, p)
        if n:
            line += n
            line_start = rfind("\n", start, p) + 1
    close = _CLOSE_RE.match(text, p, end)
    if close is None:
        return None
    raw = _computation_from_head(text[pos:head.end()], instrs, [], head_line, head_column)
    return raw, close.end()


def _computation_from_head(head_text: str, instrs: list, attrs: list, line: int, column: int) -> "_RawComputation":
    m = _computation_head_regex().match(head_text)
    entry, name, param_text, result = m.groups()
    params = None
    if param_text is not None:
        params = []
        param_match = _param_regex().match
        pos = 0
        while True:
            p = param_match(param_text, pos)
            if p is None:
                break
            params.append((_strip_percent(p.group(1)), p.group(2), line, column))
            pos = p.end()
    return _RawComputation(_strip_percent(name), entry is not None, params, result, attrs, instrs, line, column)


#: Terminals hlofuse's lexer reads with a function instead of one regular expression.
_READERS = {"COMPUTATION": _read_computation}


class _Callbacks(lark.Transformer):
    """Callbacks named after grammar rules; each returns a raw record or plain values."""

    # -- instructions -------------------------------------------------------------------
    def fast_instruction(self, children):
        head = children[0]
        text = _val(head)
        m = _head_regex().match(text)
        root, name, shape_text, opcode, operand_list = m.groups()
        raw = _raw_instruction(text, root, name, shape_text, opcode, operand_list, m.end(), len(text),
                               head.line, head.column)
        if len(children) > 1:  # attributes after a comment
            raw.attrs.extend(_attr(t)[:2] for t in children[1:])
        return raw

    def instruction(self, children):
        is_root = False
        i = 0
        if _type(children[0]) == "ROOT":
            is_root = True
            i = 1
        name_tok = children[i]
        name = _strip_percent(_val(name_tok)[:-1].strip())
        i += 1
        shape = None
        if _type(children[i]) == "SHAPE":
            shape = parse_shape(_val(children[i]))
            i += 1
        call = children[i]
        attrs = [_attr(t)[:2] for t in children[i + 1 :]]
        return self._from_call(name, shape, call, attrs, is_root, name_tok.line, name_tok.column)

    def anonymous_instruction(self, children):
        is_root = False
        i = 0
        if _type(children[0]) == "ROOT":
            is_root = True
            i = 1
        shape_tok = children[i]
        call = children[i + 1]
        attrs = [_attr(t)[:2] for t in children[i + 2 :]]
        return self._from_call(None, parse_shape(_val(shape_tok)), call, attrs, is_root, shape_tok.line, shape_tok.column)

    def lone_instruction(self, children):
        return children[0]

    def call(self, children):
        opcode_tok = children[0]
        opcode = sys.intern(_val(opcode_tok)[:-1].strip())
        return (opcode, children[1:], opcode_tok.line, opcode_tok.column)

    def _from_call(self, name, shape, call, attrs, is_root, line, column):
        opcode, operands, _, _ = call
        literal = None
        operand_shapes: list | None = []
        names: list = []
        if opcode in _LITERAL_OPCODES:
            if len(operands) != 1 or not isinstance(operands[0], _Literal):
                if opcode == "parameter" or operands:
                    raise _located_error(f"expects a literal in {opcode}(...)", line, column)
            literal = operands[0].text if operands else ""
            operand_shapes = None
        else:
            for op in operands:
                if isinstance(op, _Literal):
                    if op.is_name:  # `true`, `inf`: lexed as literals, meant as names
                        names.append(op.text)
                        operand_shapes.append(None)
                        continue
                    raise _located_error(
                        "expects an operand name (a literal is only valid in constant(...))", op.line, op.column
                    )
                if isinstance(op, tuple):  # named operand: (shape text | None, name)
                    operand_shapes.append(op[0])
                    names.append(op[1])
                else:  # nested instruction or anonymous operand
                    operand_shapes.append(None)
                    names.append(op)
            if all(s is None for s in operand_shapes):
                operand_shapes = None
        return _RawInstr(name, opcode, shape, names, attrs, literal, is_root, line, column, operand_shapes)

    # -- operands -----------------------------------------------------------------------
    def named_operand(self, children):
        if len(children) == 2:
            return (_val(children[0]), _strip_percent(_val(children[1])))
        return (None, _strip_percent(_val(children[0])))

    def anonymous_operand(self, children):
        tok = children[0]
        return _AnonOperand(parse_shape(_val(tok)), tok.line, tok.column)

    def nested_instruction(self, children):
        shape = None
        i = 0
        if _type(children[0]) == "SHAPE":
            shape = parse_shape(_val(children[0]))
            i = 1
        call = children[i]
        attrs = [_attr(t)[:2] for t in children[i + 1 :]]
        return self._from_call(None, shape, call, attrs, False, call[2], call[3])

    def literal_operand(self, children):
        return children[0]

    def literal(self, children):
        tok = children[0]
        text = _val(tok)
        return _Literal(text, tok.line, tok.column, is_name=text in ("true", "false", "inf", "nan"))

    def literal_tuple(self, children):
        first = children[0]
        return _Literal("(" + ", ".join(c.text for c in children) + ")", first.line, first.column)

    # -- computations -------------------------------------------------------------------
    def param(self, children):
        name_tok, shape_tok = children
        return (_strip_percent(_val(name_tok)[:-1].strip()), _val(shape_tok), name_tok.line, name_tok.column)

    def signature(self, children):
        return ("signature", children[:-1], _val(children[-1]))

    def computation(self, children):
        if children[0].type == "COMPUTATION_HEAD":
            return self.head_computation(children)
        i = 0
        is_entry = False
        if _type(children[0]) == "ENTRY":
            is_entry = True
            i = 1
        name_tok = children[i]
        i += 1
        params = result = None
        if i < len(children) and isinstance(children[i], tuple) and children[i][0] == "signature":
            _, params, result = children[i]
            i += 1
        attrs = [_attr(c) for c in children[i:] if _type(c) == "ATTR"]
        instrs = [c for c in children[i:] if isinstance(c, _RawInstr)]
        first = children[0]
        return _RawComputation(
            _strip_percent(_val(name_tok)), is_entry, params, result, attrs, instrs, first.line, first.column,
        )

    def fast_computation(self, children):
        """`computation: COMPUTATION ATTR*`: the lexer has read the computation already."""
        raw = children[0].value
        raw.attrs.extend(_attr(t) for t in children[1:])
        return raw

    def head_computation(self, children):
        """`computation: COMPUTATION_HEAD instruction* "}" ATTR*`."""
        head = children[0]
        instrs, attrs = [], []
        for child in children[1:]:
            if isinstance(child, _RawInstr):
                instrs.append(child)
            else:
                attrs.append(_attr(child))
        return _computation_from_head(_val(head), instrs, attrs, head.line, head.column)

    def computation_body(self, children):
        return list(children)

    # -- module -------------------------------------------------------------------------
    def header_section(self, children):
        return (_type(children[0]), [(_val(t), t.line, t.column) for t in children[1:]])

    def hlo_module(self, children):
        name = _val(children[0]).rstrip(":")
        mod = _RawModule("module", name)
        for child in children[1:]:
            if isinstance(child, _RawComputation):
                mod.computations.append(child)
            elif isinstance(child, tuple):
                mod.sections.append(child)
            else:
                mod.attrs.append(_attr(child))
        return mod

    def bare_computations(self, children):
        return _RawModule("computations", "module", computations=list(children))

    def start(self, children):
        child = children[0]
        if isinstance(child, _RawInstr):
            return _RawModule("instruction", "", lone=child, line=child.line, column=child.column)
        return child


@dataclass(slots=True)
class _Literal:
    text: str
    line: int
    column: int
    is_name: bool = False


def _type(obj) -> str | None:
    return getattr(obj, "type", None)


def _strip_percent(name: str) -> str:
    return sys.intern(name[1:] if name.startswith("%") else name)


_NAME_CHARS_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")


def _is_name(text) -> bool:
    return isinstance(text, str) and _NAME_CHARS_RE.match(text) is not None


class _LocatedError(Exception):
    """Raised inside callbacks; becomes an HloSyntaxError once the source text is at hand."""

    def __init__(self, message, line, column):
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


def _located_error(message, line, column) -> _LocatedError:
    return _LocatedError(message, line, column)


# ------------------------------------------------------------------------------------------
# Public entry points
# ------------------------------------------------------------------------------------------


_LONE_CR_RE = re.compile(r"\r(?!\n)")


def parse_text(text: str, path: str | None = None, *, strict: bool = False) -> ir.Module:
    """Parse HLO text (a module, bare computations or one lone instruction)."""
    from .validate import check_module

    if not isinstance(text, str):
        raise TypeError("HLO text must be str")
    if "\r" in text:
        # A lone CR ends a line too (old Mac files; XLA's lexer takes it so).  Replaced one for
        # one, so offsets stay those of the text, and lines and columns come out right.
        text = _LONE_CR_RE.sub("\n", text)
    try:
        module = _parse_in_two(text, path, strict) if _jobs(text) > 1 else None
        if module is None:
            raw = _run_parser(text, "start")
            module = _assemble(raw, text, path)
            module = check_module(module, text, strict=strict)
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


def _run_parser(text: str, start: str):
    try:
        return parser().parse(text, start=start)
    except _LocatedError as err:
        raise _error_at(text, err.message, err.line, err.column) from None
    except VisitError as err:  # a callback failed: report its own error, not lark's wrapper
        inner = err.orig_exc
        if isinstance(inner, _LocatedError):
            raise _error_at(text, inner.message, inner.line, inner.column) from None
        raise _error_at(text, f"cannot read this: {inner}", None, None) from None
    except UnexpectedInput as err:
        raise _convert_lark_error(text, err) from None
    except ValueError as err:  # shape text that matched the grammar but names nothing real
        raise _error_at(text, str(err), None, None) from None


def _error_at(text: str, message: str, line: int | None, column: int | None, **kw) -> HloSyntaxError:
    source_line = None
    if line is not None:
        lines = text.splitlines()
        if 0 < line <= len(lines):
            source_line = lines[line - 1]
    return HloSyntaxError(message, line=line, column=column, source_line=source_line, **kw)


# ------------------------------------------------------------------------------------------
# Lark errors → one clear line: "found X, expected Y"
# ------------------------------------------------------------------------------------------

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


def _convert_lark_error(text: str, err: UnexpectedInput) -> HloSyntaxError:
    if isinstance(err, UnexpectedCharacters):
        pos = err.pos_in_stream
        allowed = set(err.allowed or ())
        if text.startswith("/*", pos):
            return _error_at(text, "unterminated comment: expected '*/'", err.line, err.column, found="'/*'")
        if "INSTRUCTION" in allowed or "NAME_EQ" in allowed:
            found = _diagnose_instruction(text, pos)
            if found is not None:
                return found
        if "ATTR" in allowed and text.startswith(",", pos):
            return _malformed_attribute(text, pos, err.line, err.column)
        expected = _expected_words(allowed)
        found = _describe(text, pos)
        return _error_at(text, f"found {found}, expected {_join(expected)}", err.line, err.column,
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
        value = _val(tok)
        if pos is not None and "ATTR" in expected_names and value.startswith(","):
            return _malformed_attribute(text, pos, tok.line, tok.column)
        found = _describe(text, pos) if pos is not None else repr(value[:40])
        message = f"found {found}, expected {_join(expected)}"
        if tok.type == "INSTRUCTION" and not expected:
            message = f"found {found}, expected nothing more (a lone instruction ends here)"
        return _error_at(text, message, tok.line, tok.column, found=found, expected=expected)
    return _error_at(text, str(err), getattr(err, "line", None), getattr(err, "column", None))


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
    return _error_at(text, f"found the end of the input, expected {_join(expected)}", line, column,
                     found="end of input", expected=expected)


_ATTR_START_RE = re.compile(r",[ \t]*([A-Za-z_][\w.\-]*)[ \t]*=[ \t]*")
_CLOSER = {"{": "}", "(": ")", "[": "]"}


def _malformed_attribute(text: str, pos: int, line: int, column: int) -> HloSyntaxError:
    found = _diagnose_attribute(text, pos)
    if found is not None:
        return found
    return _error_at(
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
                return _error_at(text, f"unterminated string in the value of attribute {name}", line, col,
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
                return _error_at(
                    text, f"found {ch!r}, expected {_CLOSER[opener]!r} to close the {opener!r} at column "
                          f"{_line_col(text, at)[1]} in the value of attribute {name}", line, col, found=repr(ch))
        elif not stack and ch in ", \t":
            break
        i += 1
    if stack:
        opener, at = stack[0]
        line, col = _line_col(text, at)
        return _error_at(text, f"unbalanced {opener!r} in the value of attribute {name}: it is not closed on "
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
        return _error_at(text, f"found {found}, expected {expected}", line, col, found=found, expected=(expected,))

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


# ------------------------------------------------------------------------------------------
# 2. Assembly: raw records → ir.Module, with XLA's structural checks
# ------------------------------------------------------------------------------------------


# An index mark before an operand (`/*index=5*/%v` or `/*index=5*/f32[] %v`), not inside a tuple shape.
_OPERAND_MARK_RE = re.compile(r"/\*index=\d+\*/(?:[^,()\s]+\s+)?%?[A-Za-z_][\w.\-]*\s*[,)]")
_ANY_MARK_RE = re.compile(r"/\*index=\d+\*/")
# With a literal first (not `^`, which makes the search try every position), so it runs at memchr speed.
_CLOSING_COMMENT_RE = re.compile(r"\n\} // %?(\S+)")


#: Attributes whose values assembly rewrites (computation names lose their `%`).
_REWRITTEN_ATTRS = ir.COMPUTATION_ATTRS | {"control-predecessors"}


def _assemble(raw: _RawModule, text: str, path: str | None) -> ir.Module:
    return _Assembler(text).module(raw, path)


class _Assembler:
    """Builds the ir.Module from raw records, raising XLA's structural errors."""

    def __init__(self, text: str):
        self.text = text
        self.extra_computations: list[ir.Computation] = []
        self.warnings: list[str] = []
        self.built: dict[str, ir.Computation] = {}
        self.saw_operand_shapes = False
        self.inline_names: set[str] = set()

    def error(self, message: str, line: int | None, column: int | None) -> HloSyntaxError:
        return _error_at(self.text, message, line, column)

    # -- module -------------------------------------------------------------------------
    def module(self, raw: _RawModule, path: str | None) -> ir.Module:
        if raw.form == "instruction":
            comp = self.lone_computation(raw.lone)
            comps, entry, name = [comp], comp.name, "module"
        else:
            if not raw.computations:
                raise self.error("expects at least one computation (an ENTRY computation)", raw.line, raw.column)
            seen: dict[str, _RawComputation] = {}
            entries = []
            for rc in raw.computations:
                if rc.name in seen:
                    first = seen[rc.name]
                    raise self.error(
                        f"computation {rc.name!r} is already defined (at {first.line}:{first.column})",
                        rc.line, rc.column,
                    )
                seen[rc.name] = rc
                if rc.is_entry:
                    entries.append(rc)
            if len(entries) > 1:
                raise self.error("expects only one ENTRY computation", entries[1].line, entries[1].column)
            entry_raw = entries[0] if entries else raw.computations[-1]
            comps = []
            for rc in raw.computations:
                comp = self.computation(rc, rc is entry_raw)
                self.built[comp.name] = comp
                comps.append(comp)
            entry, name = entry_raw.name, raw.name
        module = ir.Module(
            name=name,
            computations=tuple(self.extra_computations + comps),
            entry_name=entry,
            attrs=tuple((k, v) for k, v, _, _ in raw.attrs),
            stack_frames=_stack_frames(raw.sections),
            form=raw.form,
            path=path,
            warnings=tuple(self.warnings),
            style=self.style(raw),
        )
        for comp in module.computations:
            for instr in comp.instructions:
                for callee in instr.called:
                    if callee not in module.by_name:
                        raise self.missing_callee(instr, callee)
        return module

    def missing_callee(self, instr: ir.Instruction, callee: str) -> HloSyntaxError:
        """A called computation that does not exist, or (as XLA reports it first) an attribute
        that this opcode does not take at all."""
        from .validate import attribute_allowed

        for key, value in instr.attrs:
            if key in ir.COMPUTATION_ATTRS and callee in ir._names_in(value) and \
                    not attribute_allowed(instr.opcode, key):
                return self.error(f'unexpected attribute "{key}" for {instr.opcode}', instr.span.line,
                                  instr.span.column)
        return self.error(f"computation does not exist: {callee} (called by {instr.name})",
                          instr.span.line, instr.span.column)

    def style(self, raw: _RawModule):
        """The spelling of the text: `%` before names, signatures, operand shapes."""
        from .printer import Style

        first = raw.computations[0] if raw.computations else None
        percent = False
        if first is not None and first.instrs:
            line = _line_text(self.text, first.instrs[0].line) if first.instrs[0].line else ""
            percent = "%" in line.split("=", 1)[0]
        signatures = any(rc.params is not None for rc in raw.computations)
        return self.style_of(percent, signatures)

    def style_of(self, percent: bool, signatures: bool):
        from .printer import Style
        operand_marks = _OPERAND_MARK_RE.search(self.text) is not None
        if not operand_marks and not _ANY_MARK_RE.search(self.text):
            operand_marks = percent  # nothing to go by: XLA's dumps mark operands in the long form
        closing = frozenset(_CLOSING_COMMENT_RE.findall(self.text))  # a closing brace never starts the text
        return Style(percent=percent, signatures=signatures, operand_shapes=self.saw_operand_shapes,
                     operand_index_marks=operand_marks, closing_comments=closing)

    # -- computations -------------------------------------------------------------------
    def computation(self, rc: _RawComputation, is_entry: bool) -> ir.Computation:
        built = self.flatten(rc.instrs)
        return self.finish(rc.name, built, is_entry, rc.attrs, rc.line, rc.column, rc.params, rc.result_shape)

    def lone_computation(self, ri: _RawInstr) -> ir.Computation:
        """A lone instruction: its operands that are not defined become parameters, with the
        shapes the text gives them (XLA requires those shapes)."""
        if ri.name is None:
            ri.name = f"{ri.opcode}.anon"
        ri.is_root = True
        built = self.flatten([ri], lone=True)
        defined = {instr.name for instr, _ in built}
        params: list[tuple[ir.Instruction, bool]] = []
        for instr, _ in built:
            declared = self.declared.get(instr.name)
            for idx, op in enumerate(instr.operands):
                if op in defined:
                    continue
                shape_text = declared[idx] if declared else None
                if shape_text is None:
                    raise self.error("Operand had no shape in HLO text; a lone instruction must give "
                                     "each operand's shape", instr.span.line, instr.span.column)
                number = len(params) + self.anon_params
                params.append((ir.Instruction(op, "parameter", parse_shape(shape_text), literal=str(number),
                                              span=instr.span), False))
                defined.add(op)
        top = built[-1][0]
        return self.finish(f"{top.name}.computation", params + built, True, [], ri.line, ri.column, None, None)

    def flatten(self, raws: list[_RawInstr], lone: bool = False) -> list[tuple[ir.Instruction, bool]]:
        """Raw instructions → (ir.Instruction, is_root) in order.  Nested instructions and
        anonymous operands are hoisted before their user with generated names
        (`multiply.anon`, `parameter.anon.1`), as XLA names them."""
        self.declared: dict[str, list] = {}
        self.shapes: dict[str, ir.Shape] = {}
        self.anon_params = 0
        taken: set[str] = set()
        out: list[tuple[ir.Instruction, bool]] = []

        def fresh(base: str) -> str:
            if not taken:
                taken.update(r.name for r in raws if r.name)
            name, k = base, 0
            while name in taken:
                k += 1
                name = f"{base}.{k}"
            taken.add(name)
            return name

        def build(ri: _RawInstr) -> ir.Instruction:
            if ri.plain:
                instr = ri.built or self.instruction(ri, ri.operands)
                self.shapes[instr.name] = instr.shape
                return instr
            names: list[str] = []
            for op in ri.operands:
                if isinstance(op, _RawInstr):
                    op.name = fresh(f"{op.opcode}.anon")
                    child = build(op)
                    out.append((child, False))
                    names.append(child.name)
                elif isinstance(op, _AnonOperand):
                    if not lone:
                        raise self.error("expects name: only a lone instruction may leave its operands "
                                         "unnamed", op.line, op.column)
                    pname = fresh("parameter.anon")
                    param = ir.Instruction(pname, "parameter", op.shape, literal=str(self.anon_params),
                                           span=ir.Span(op.line, op.column))
                    self.anon_params += 1
                    self.shapes[pname] = op.shape
                    out.append((param, False))
                    names.append(pname)
                else:
                    names.append(op)
            instr = self.instruction(ri, names)
            self.shapes[instr.name] = instr.shape
            return instr

        for ri in raws:
            if ri.shape is not None and ri.name:
                self.shapes[ri.name] = ri.shape
        for ri in raws:
            out.append((build(ri), ri.is_root))
        return out

    def instruction(self, ri: _RawInstr, operand_names: list[str]) -> ir.Instruction:
        shape = ri.shape if ri.shape is not None else self.infer_shape(ri, operand_names)
        called: list[str] = []
        attrs = ri.attrs
        for key, _ in attrs:
            if key in _REWRITTEN_ATTRS:
                attrs = []
                for key, value in ri.attrs:
                    if key in ir.COMPUTATION_ATTRS:
                        value = self.computation_refs(ri, key, value, ri.line, ri.column, called)
                    elif key == "control-predecessors":
                        value = "{" + ", ".join(ir._names_in(value)) + "}"
                    attrs.append((key, value))
                break
        if ri.operand_shapes is not None:
            self.declared[ri.name] = ri.operand_shapes
            self.saw_operand_shapes = True
        return ir.Instruction(ri.name, ri.opcode, shape, tuple(operand_names), tuple(attrs), ri.literal,
                              tuple(called), ir.Span(ri.line, ri.column))

    def infer_shape(self, ri: _RawInstr, operand_names: list[str]) -> ir.Shape:
        """XLA infers a left-out shape; hlofuse does so for elementwise instructions whose
        operands' shapes are known (the nested-instruction syntax of XLA's tests)."""
        from .shape_inference import infer

        known = [self.shapes.get(n) for n in operand_names]
        attrs = dict(ri.attrs)
        shape = None
        if all(s is not None for s in known):
            shape = infer(ri.opcode, known, attrs, self.built)
        if shape is None:
            raise self.error(f"expects instruction shape: hlofuse cannot infer the shape of "
                             f"{ri.name or ri.opcode!r} ({ri.opcode})", ri.line, ri.column)
        return shape

    def computation_refs(self, ri: _RawInstr, key: str, value: str, line: int, col: int,
                         called: list[str]) -> str:
        """Names of called computations; an inline body becomes a computation of its own."""
        text = value.strip()
        # A list of names never holds '=' or '('; an inline body always does.
        inline = text.startswith("{") and ("=" in text or "(" in text or text[1:].lstrip().startswith("{"))
        if not inline:
            names = ir._names_in(text)
            called.extend(names)
            # Stored without `%`, so spellings compare equal; the printer adds it back.
            return "{" + ", ".join(names) + "}" if text.startswith("{") else (names[0] if names else value)
        bodies = _split_top_level(text[1:-1]) if key == "branch_computations" else [text]
        names = []
        saved = (self.declared, self.shapes, self.anon_params)
        for k, body in enumerate(bodies):
            cname = f"{ri.name or ri.opcode}.{key}" + (f".{k}" if len(bodies) > 1 else "")
            base, n = cname, 0
            while cname in self.inline_names:
                n += 1
                cname = f"{base}.{n}"
            self.inline_names.add(cname)
            raw_instrs = _run_parser_with_offset(self.text, body)
            built = self.flatten(raw_instrs)
            self.extra_computations.append(self.finish(cname, built, False, [], line, col, None, None))
            names.append(cname)
        self.declared, self.shapes, self.anon_params = saved
        called.extend(names)
        return names[0] if key != "branch_computations" else "{" + ", ".join(names) + "}"

    def check_parameter_number(self, instr: ir.Instruction, numbers: set[int]) -> None:
        try:
            number = int(instr.literal)
        except (TypeError, ValueError):
            raise self.error("parameter number must be an integer", instr.span.line, instr.span.column) from None
        if number < 0:
            raise self.error("parameter number must be >= 0", instr.span.line, instr.span.column)
        if number in numbers:
            raise self.error(f"Duplicate parameter number {number}", instr.span.line, instr.span.column)
        numbers.add(number)

    def finish(self, name, built, is_entry, attrs, line, col, params, result_shape) -> ir.Computation:
        """Checks XLA makes per computation, then the ir.Computation."""
        if not built:
            raise self.error(f"computation {name!r} has no instructions", line, col)
        by_name: dict[str, ir.Instruction] = {}
        roots = []
        numbers: set[int] = set()
        # In text order, as XLA's parser meets them: a name defined twice, then the parameter number.
        for instr, is_root in built:
            if instr.name in by_name:
                raise self.error(f"instruction {instr.name!r} is defined twice in computation {name!r}",
                                 instr.span.line, instr.span.column)
            by_name[instr.name] = instr
            if is_root:
                roots.append(instr)
            if instr.opcode == "parameter":
                self.check_parameter_number(instr, numbers)
        if len(roots) > 1:
            raise self.error("one computation should have only one ROOT", roots[1].span.line, roots[1].span.column)
        root = roots[0] if roots else built[-1][0]
        for instr, _ in built:
            for op in instr.operands:
                if op not in by_name:
                    raise self.error(f"instruction does not exist: {op} (operand of {instr.name})",
                                     instr.span.line, instr.span.column)
            control = instr.attr("control-predecessors")
            if control:
                for pred in ir._names_in(control):
                    if pred not in by_name:
                        raise self.error(f"'{pred}' is not defined (control predecessor of {instr.name})",
                                         instr.span.line, instr.span.column)
            declared = self.declared.get(instr.name)
            if declared is not None:
                for op, text in zip(instr.operands, declared):
                    if text is None:
                        continue
                    dshape, actual = parse_shape(text), by_name[op].shape
                    if not dshape.compatible(actual):
                        raise self.error(
                            f"The declared operand shape {dshape} is not compatible with the shape of the "
                            f"operand instruction {actual}", instr.span.line, instr.span.column)
        if result_shape is not None:
            declared_result = parse_shape(result_shape)
            if not declared_result.compatible(root.shape):
                raise self.error(
                    f"Shape of computation {name}, {declared_result.to_text(False)}, is not compatible with "
                    f"that of its root instruction {root.name}, {root.shape.to_text(False)}", line, col)
        return ir.Computation(
            name=name,
            instructions=tuple(instr for instr, _ in built),
            root_name=root.name,
            is_entry=is_entry,
            attrs=tuple((k, v) for k, v, _, _ in attrs),
            span=ir.Span(line, col),
        )


def _line_text(text: str, line: int) -> str:
    """Line `line` (1-based) of the text, without splitting all of it."""
    pos = 0
    for _ in range(line - 1):
        pos = text.find("\n", pos) + 1
        if pos == 0:
            return ""
    end = text.find("\n", pos)
    return text[pos:] if end < 0 else text[pos:end]


def _run_parser_with_offset(text: str, body: str):
    """Parse an inline computation body; padding keeps line numbers those of the whole text."""
    start = text.find(body)
    if start < 0:
        padded = body
    else:
        before = text[:start]
        padded = "\n" * before.count("\n") + " " * (start - (before.rfind("\n") + 1)) + body
    return _run_parser(padded, "computation_body")


_KV_INT_RE = re.compile(r"([a-z_]+)=(-?[0-9]+)")


def _stack_frames(sections) -> ir.StackFrameIndex:
    if not sections:
        return ir.StackFrameIndex()
    import json

    file_names: dict[int, str] = {}
    function_names: dict[int, str] = {}
    locations: dict[int, tuple[int, int, int, int]] = {}
    frames: dict[int, tuple[int, int]] = {}
    lines: list[str] = []
    titles = {"FILE_NAMES": "FileNames", "FUNCTION_NAMES": "FunctionNames",
              "FILE_LOCATIONS": "FileLocations", "STACK_FRAMES": "StackFrames"}
    for kind, entries in sections:
        lines.append(titles[kind])
        for entry, line, col in entries:
            ident_text, _, rest = entry.partition(" ")
            ident = int(ident_text)
            rest = rest.strip()
            lines.append(f"{ident} {rest}")
            if kind in ("FILE_NAMES", "FUNCTION_NAMES"):
                try:
                    value = json.loads(rest)
                except ValueError:
                    value = rest[1:-1]
                (file_names if kind == "FILE_NAMES" else function_names)[ident] = value
            else:
                fields = dict((k, int(v)) for k, v in _KV_INT_RE.findall(rest))
                if kind == "FILE_LOCATIONS":
                    locations[ident] = (fields.get("file_name_id", 0), fields.get("function_name_id", 0),
                                        fields.get("line", 0), fields.get("column", 0))
                else:
                    # XLA prints parent_frame_id one above the parent's id (a root frame prints
                    # 1): in a JAX 0.10.2 dump the frames of <module> -> main -> f print
                    # `5 {.. parent_frame_id=1}`, `6 {.. parent_frame_id=6}`, `7 {.. parent_frame_id=7}`
                    # (tests/test_stack_frames.py checks it on a real dump).  Store the real id.
                    printed = fields.get("parent_frame_id", 0)
                    frames[ident] = (fields.get("file_location_id", 0), max(printed - 1, 0))
        lines.append("")
    return ir.StackFrameIndex(file_names, function_names, locations, frames, "\n".join(lines))


# ------------------------------------------------------------------------------------------
# 4. Large inputs: two processes, one half of the computations each
# ------------------------------------------------------------------------------------------
#
# Top-level computations are blank-line-separated blocks that start at column 0, so a large
# module splits into two runs of whole computations.  After the parser is built, the process
# forks: the child reads, assembles and checks (per instruction) the second half while the
# parent does the first, then the child sends its computations back pickled.  The parent runs
# the checks across computations (names, ENTRY, called computations, async pairs) on the whole.
# Anything unusual -- an error in either half, a computation that refers across the split in
# a way only the whole module resolves -- and the text is parsed again in one process, which
# gives the same module or the same error as without the split.

#: Inputs smaller than this are parsed in one process (forking costs about 20 ms).
PARALLEL_MIN_BYTES = 4_000_000
_SPLIT_RE = re.compile(r"\n\n+(?=(?:ENTRY[ \t]+)?%?[A-Za-z_][\w.\-]*[ \t]*[({])")


def _jobs(text: str) -> int:
    import threading

    if len(text) < PARALLEL_MIN_BYTES or not hasattr(os, "fork"):
        return 1
    if threading.active_count() > 1:
        return 1  # forking a threaded process can leave the child holding another thread's lock
    wanted = os.environ.get("HLOFUSE_JOBS", "")
    if wanted.isdigit():
        return min(int(wanted), 2)
    cpus = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0] > cpus - 0.5  # no idle core: a second process only competes
    except (AttributeError, OSError):
        busy = False
    return 2 if cpus >= 2 and not busy else 1


class _Part:
    """What one half of a module turns into."""

    __slots__ = ("raw", "computations", "extra", "warnings", "saw_operand_shapes")

    def __init__(self, raw, computations, extra, warnings, saw_operand_shapes):
        self.raw, self.computations, self.extra = raw, computations, extra
        self.warnings, self.saw_operand_shapes = warnings, saw_operand_shapes


def _read_part(text: str, start: int, stop: int, strict: bool) -> _Part:
    from .validate import check_module

    raw = parser().parse(lark.lexer.TextSlice(text, start, stop), start="start")
    if raw.form not in ("module", "computations") or not raw.computations:
        raise _NotSplittable
    assembler = _Assembler(text)
    comps = []
    for rc in raw.computations:
        comp = assembler.computation(rc, rc.is_entry)
        assembler.built[comp.name] = comp
        comps.append(comp)
    partial = ir.Module(name=raw.name, computations=tuple(assembler.extra_computations + comps),
                        entry_name=comps[-1].name)
    checked = check_module(partial, text, strict=strict, module_level=False)
    # The raw instructions are not needed any more; keep what the module-level checks use.
    for rc in raw.computations:
        rc.instrs = rc.instrs[:1]
    return _Part(raw, comps, assembler.extra_computations, list(assembler.warnings) + list(checked.warnings),
                 assembler.saw_operand_shapes)


class _NotSplittable(Exception):
    pass


def _parse_in_two(text: str, path: str | None, strict: bool) -> ir.Module | None:
    """The module, or None when the text does not split (then it is read in one process)."""
    import pickle

    from .validate import check_module

    # The parent also unpickles and rebuilds the child's half, so it reads a little less.
    m = _SPLIT_RE.search(text, len(text) * 9 // 20)
    if m is None:
        return None
    split = m.end()
    parser()  # built before forking, so the child has it
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: read the second half, send it back, leave without cleanup
        code = 0
        try:
            os.close(read_fd)
            try:
                part = _read_part(text, split, len(text), strict)
                part.computations, part.extra = _pack(part.computations), _pack(part.extra)
                payload = pickle.dumps(("ok", part), pickle.HIGHEST_PROTOCOL)
            except BaseException:  # noqa: BLE001 - any failure: the parent reads it all again
                payload = pickle.dumps(("failed", None))
            with os.fdopen(write_fd, "wb") as fh:
                fh.write(payload)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    first = None
    try:
        try:
            first = _read_part(text, 0, split, strict)
        except (HloSyntaxError, _NotSplittable, UnexpectedInput, VisitError, _LocatedError, RecursionError):
            first = None
        with os.fdopen(read_fd, "rb") as fh:
            status, second = pickle.loads(fh.read())
    finally:
        os.waitpid(pid, 0)
    if first is None or status != "ok":
        return None
    second.computations, second.extra = _unpack(second.computations), _unpack(second.extra)
    return _merge(first, second, text, path, strict, check_module)


def _pack(computations: list) -> list:
    """Computations as plain tuples: they pickle and unpickle several times faster than the
    frozen dataclasses (which unpickle through a Python __setstate__ each)."""
    return [(c.name, c.root_name, c.is_entry, c.attrs, c.span.line, c.span.column,
             [(i.name, i.opcode, i.shape, i.operands, i.attrs, i.literal, i.called, i.span.line, i.span.column)
              for i in c.instructions]) for c in computations]


def _unpack(packed: list) -> list:
    instruction, span, computation = ir.Instruction, ir.Span, ir.Computation
    return [computation(name, tuple([instruction(n, o, s, ops, at, lit, called, span(line, col))
                                     for n, o, s, ops, at, lit, called, line, col in instrs]),
                        root, is_entry, attrs, span(c_line, c_col))
            for name, root, is_entry, attrs, c_line, c_col, instrs in packed]


def _merge(first: _Part, second: _Part, text: str, path: str | None, strict: bool, check_module) -> ir.Module | None:
    raws = first.raw.computations + second.raw.computations
    assembler = _Assembler(text)
    seen: dict[str, _RawComputation] = {}
    entries = []
    for rc in raws:  # the same checks, in the same order, as _Assembler.module
        if rc.name in seen:
            return None
        seen[rc.name] = rc
        if rc.is_entry:
            entries.append(rc)
    if len(entries) > 1:
        return None
    comps = first.computations + second.computations
    if not entries:  # the last computation is the entry
        comps[-1] = dataclasses.replace(comps[-1], is_entry=True)
    extra = first.extra + second.extra
    assembler.saw_operand_shapes = first.saw_operand_shapes or second.saw_operand_shapes
    first_instr = raws[0].instrs[0] if raws[0].instrs else None
    percent = bool(first_instr and first_instr.line and
                   "%" in _line_text(text, first_instr.line).split("=", 1)[0])
    module = ir.Module(
        name=first.raw.name,
        computations=tuple(extra + comps),
        entry_name=(entries[0] if entries else raws[-1]).name,
        attrs=tuple((k, v) for k, v, _, _ in first.raw.attrs),
        stack_frames=_stack_frames(first.raw.sections),
        form=first.raw.form,
        path=path,
        warnings=tuple(first.warnings + second.warnings),
        style=assembler.style_of(percent, any(rc.params is not None for rc in raws)),
    )
    by_name = module.by_name
    for comp in module.computations:
        for instr in comp.instructions:
            for callee in instr.called:
                if callee not in by_name:
                    return None
    return check_module(module, text, strict=strict, instructions=False)

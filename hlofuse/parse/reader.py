"""The fast path: a computation of common instructions read in one go, instruction by
instruction, with patterns composed from the grammar's terminals (the grammar's COMPUTATION
and INSTRUCTION).  The lexer hands it the COMPUTATION terminal (`READERS`); the callbacks use
`raw_instruction` for INSTRUCTION tokens met on the token-by-token path."""

from __future__ import annotations

import functools
import re
import sys
from typing import Callable

from .. import ir
from .grammar import grammar_path, grammar_text, pattern, terminal_regex
from .records import (LITERAL_OPCODES, REWRITTEN_ATTRS, LocatedError, RawComputation, RawInstr, is_name,
                      strip_percent)
from .shapes import parse_shape


_WS = r"[ \t\f\r\n]"


@functools.lru_cache(maxsize=1)
def head_regex() -> re.Pattern:
    """`head_pattern` compiled (the token-by-token path's INSTRUCTION tokens)."""
    return re.compile(head_pattern())


@functools.lru_cache(maxsize=1)
def head_pattern() -> str:
    """The grammar's INSTR_HEAD, `(ROOT _WS1)? NAME _WS0 "=" _WS0 SHAPE _WS1 OPCODE _WS0
    OPERAND_LIST`, composed from the same terminals, the whitespace before it skipped.  Groups:
    1 the head, 2 ROOT, 3 name, 4 shape, 5 opcode, 6 operand list.

    SHAPE and OPERAND_LIST are each tried first in the form XLA prints most (`_common_shape`,
    `_common_operand_list`): a part of the terminal's language, read with fewer alternatives
    per character.  Where it matches, the terminal matches the same text, so the groups are
    those of `grammar_head_regex` (tests/test_parse_lexer.py checks this on real and mutated
    lines); where it does not, the terminal itself is tried."""
    ws = _WS
    return (f"{ws}*((?:(ROOT){ws}+)?({pattern('NAME')}){ws}*={ws}*"
            f"((?:{_common_shape()})(?={ws})|{pattern('SHAPE')}){ws}+({pattern('OPCODE')})"
            f"{ws}*((?:{_common_operand_list()})|{pattern('OPERAND_LIST')}))")


@functools.lru_cache(maxsize=1)
def grammar_head_regex() -> re.Pattern:
    """INSTR_HEAD composed from the terminals alone (what `head_regex` must read the same as)."""
    ws = _WS
    return re.compile(
        f"{ws}*((?:(ROOT){ws}+)?({pattern('NAME')}){ws}*={ws}*({pattern('SHAPE')}){ws}+({pattern('OPCODE')})"
        f"{ws}*({pattern('OPERAND_LIST')}))")


def _element_type() -> str:
    """The grammar's ELEMENT_TYPE (Lark inlines it into SHAPE, so it is read from the grammar)."""
    m = re.search(r"^ELEMENT_TYPE: /(.*)/\s*$", grammar_text(grammar_path()), re.M)
    if m is None:
        raise AssertionError("grammars/hlo.lark: ELEMENT_TYPE not found")
    return m.group(1)


def _common_shape() -> str:
    """`f32[512,1024]{1,0:T(8,128)(2,1)}`, `s32[]`, and tuples of such (`/*index=N*/` marks
    allowed): ARRAY_SHAPE with digits for dimensions, a layout of digits and tiles, no spaces;
    TUPLE_SHAPE of those, `, ` between them.  Every text this matches, SHAPE matches whole."""
    return f"{_common_array_shape()}(?![{{\\[(])|{_common_tuple_shape()}"


def _common_array_shape() -> str:
    ints = "[0-9]+(?:,[0-9]+)*"
    return f"{_element_type()}\\[(?:{ints})?\\](?:\\{{{ints}(?::T\\({ints}\\)(?:\\({ints}\\))*)?\\}})?"


def _common_tuple_shape() -> str:
    """The tuple form of `_common_shape` (TUPLE_SHAPE matches whole what it matches)."""
    item = f"(?:/\\*index=[0-9]+\\*/)?{_common_array_shape()}"
    return f"\\((?:{item}(?:, {item})*)?\\)"


def _common_operand_list() -> str:
    """`(%a, %b.1, /*index=2*/%c)`: names, each with an index mark or not, `, ` between them;
    or one literal atom, `(0)` of a parameter or a scalar constant.  Every text this matches,
    OPERAND_LIST matches whole (an _OPERAND is `(_INDEX_COMMENT _WS0)? (SHAPE _WS1)? NAME`, or a
    LITERAL_ATOM)."""
    item = f"(?:/\\*index=[0-9]+\\*/)?{pattern('NAME')}"
    return f"\\((?:{item}(?:, {item})*|{pattern('LITERAL_ATOM')})?\\)"


@functools.lru_cache(maxsize=1)
def attr_regex() -> re.Pattern:
    """`_WS0 ATTR`, ATTR being `"," _WS0 ATTR_NAME _WS0 "=" _WS0 ATTR_VALUE`: groups 1 the name,
    2 the value.  The grammar's INSTRUCTION is `INSTR_HEAD (_WS0 ATTR)*`: a head, then this
    pattern as often as it matches (tests/test_parse_lexer.py checks that both read the same)."""
    ws = _WS
    return re.compile(f"{ws}*,{ws}*({pattern('ATTR_NAME')}){ws}*={ws}*({pattern('ATTR_VALUE')})")


#: How many attributes `instruction_regex` reads with the head: most instructions of real
#: dumps have at most two (metadata, and dimensions or a backend config).
ATTR_SLOTS = 2  # (_read_computation unpacks exactly two)


@functools.lru_cache(maxsize=1)
def instruction_regex() -> re.Pattern:
    """`head_regex`, then up to ATTR_SLOTS `attr_regex`es, each optional: one match reads the
    head and the attributes after it that a match of `attr_regex` at a time would read (an
    optional group after a pattern never changes how the pattern before it matched), and saves
    the C call per attribute, plus the one that finds no more.  Groups 1-6 are head_regex's,
    then a name and a value per slot (None where the slot is empty); when the last slot is
    filled, more attributes may follow."""
    attr = attr_regex().pattern
    regex = head_pattern()
    for _ in range(ATTR_SLOTS):
        regex = f"{regex}(?:{attr}"
    regex += ")?" * ATTR_SLOTS
    compiled = re.compile(regex)
    if compiled.groups != 6 + 2 * ATTR_SLOTS:  # a terminal grew a capturing group: group numbers moved
        raise AssertionError("instruction_regex: unexpected capturing groups in the grammar's terminals")
    return compiled


@functools.lru_cache(maxsize=1)
def _computation_head_regex() -> re.Pattern:
    """Splits a COMPUTATION_HEAD token: ENTRY, name, parameter text, result shape."""
    return re.compile(r"(ENTRY\s+)?(" + pattern("NAME") + r")\s*(?:\(([\s\S]*)\)\s*->\s*("
                      + pattern("SHAPE") + r"))?\s*\{\Z")


@functools.lru_cache(maxsize=1)
def common_head_regex() -> re.Pattern:
    """COMPUTATION_HEAD in the form XLA prints, `[ENTRY ]%name[ (%p: f32[2], ...) -> f32[2]] {`
    (single spaces, `_common_shape`s): groups 1 ENTRY, 2 the name, 3 the parameters' text, 4
    the result shape.  Every text it matches, COMPUTATION_HEAD matches the same (its signature is
    `_SIGNATURE` with one space where `_WS0` allows any), and the parameters split at
    `common_param_regex`; on any other head, the terminal and `computation_from_head` are used
    (tests/test_parse_lexer.py compares both on real and mutated heads)."""
    name, shape = pattern("NAME"), _common_shape()
    param = f"{name}: (?:{shape})"
    return re.compile(f"(?:(ENTRY) )?({name})(?: \\(((?:{param}(?:, {param})*)?)\\) -> ((?:{shape})))? \\{{")


@functools.lru_cache(maxsize=1)
def common_param_regex() -> re.Pattern:
    """One parameter of `common_head_regex`'s group 3: the name, the shape."""
    return re.compile(f"({pattern('NAME')}): ((?:{_common_shape()}))")


@functools.lru_cache(maxsize=1)
def _param_regex() -> re.Pattern:
    return re.compile(r"\s*(" + pattern("NAME") + r")\s*:\s*(" + pattern("SHAPE") + r")\s*(?:,|\Z)")


@functools.lru_cache(maxsize=1)
def _names_regex() -> re.Pattern:
    """A comma-separated list of operand names (the common operand list, after index marks)."""
    name = pattern("NAME")
    return re.compile(r"\s*" + name + r"\s*(?:,\s*" + name + r"\s*)*")


@functools.lru_cache(maxsize=1)
def _operand_item_regex() -> re.Pattern:
    return re.compile(r"\s*(?:(" + pattern("SHAPE") + r")\s+)?(" + pattern("NAME") + r")\s*(?:,|\Z)")


_INDEX_COMMENT_RE = re.compile(r"/\*index=[0-9]+\*/")
# The names of an operand list that _names_regex has matched, without their `%`.
_BARE_NAME_RE = re.compile(r"%?([^\s,%]+)")
_CLOSE_RE = re.compile(_WS + r"*\}")
#: Attribute values shorter than this are interned: short values (dimensions={1}, kind=kLoop,
#: index=0, ...) repeat, and the module then holds each once.
_SHARED_VALUE_LEN = 48
#: (name, value) pairs with a short value, and attribute tuples made of them, as first made:
#: later instructions with equal ones hold the same tuple (bench/parse_speed.py's 12 MB module:
#: 28k such pairs, 7k distinct; 10k attribute tuples without a long value, 7 distinct).
#: Bounded; what they keep are short strings.
_PAIRS: dict = {}
_ATTR_SETS: dict = {}
_SHARED_MAX = 1 << 16


def share_pair(key: str, value: str) -> tuple:
    # (`tuple`, not tuple[str, str], here and below: compiled, a typed pair would be unboxed and
    # boxed anew at each use, and equal pairs would no longer be one object)
    pair: tuple = (sys.intern(key), sys.intern(value))
    if len(_PAIRS) < _SHARED_MAX:
        _PAIRS[pair] = pair
    return pair


#: (name, value) pairs with a long value, and attribute tuples holding one, as first made in
#: the parse under way: an equal one later in the same text is that one.  Backend configs and
#: sharding repeat across instructions, and metadata too where code was unrolled
#: (bench/parse_speed.py's 12 MB module holds 1.4 MB of repeated backend configs; a sample
#: XLA:CPU dump 0.4 of its 0.8 MB as repeated metadata, and 5k attribute tuples, 112 distinct).
#: Emptied after each parse (`forget_long_values`): they hold long strings.  Each attribute name
#: keeps at most _LONG_PER_NAME values, and at most _LONG_SETS tuples are kept: where values
#: do not repeat (metadata naming each instruction's own source line) a table of all of them
#: would be memory the parse frees at its end but the process keeps (the 12 MB module: 30k
#: distinct metadata values, 3 MB of tables).
_LONG_PAIRS: dict = {}
_LONG_COUNTS: dict = {}
_LONG_FULL: set = set()  # names that have kept _LONG_PER_NAME values: misses need no call
_LONG_ATTR_SETS: dict = {}
_LONG_PER_NAME = 2048
_LONG_SETS = 2048


def share_long_pair(pair: tuple) -> tuple:
    kept = _LONG_COUNTS.get(pair[0], 0)
    if kept < _LONG_PER_NAME:
        _LONG_COUNTS[pair[0]] = kept + 1
        _LONG_PAIRS[pair] = pair
    else:
        _LONG_FULL.add(pair[0])
    return pair


def forget_long_values() -> None:
    """Drop the long values kept for sharing (the parser calls this once it has read a text)."""
    _LONG_PAIRS.clear()
    _LONG_COUNTS.clear()
    _LONG_FULL.clear()
    _LONG_ATTR_SETS.clear()


def share_attr_set(attrs: tuple) -> tuple:
    if len(_ATTR_SETS) < _SHARED_MAX:
        _ATTR_SETS[attrs] = attrs
    return attrs


def instruction(root, name: str, shape_text: str, opcode: str, operand_list: str, attrs: list,
                rewritten: bool, line: int, column: int):
    """One instruction of the common form (every operand a name), from the pieces of its text:
    the ir.Instruction itself when nothing is left for assembly to resolve, else a RawInstr
    (`rewritten`: computation names or control predecessors to resolve; operand shapes to
    compare with the operands')."""
    fast = _FAST or _bind_fast()
    intern = sys.intern
    opcode = intern(opcode)
    literal = None
    operands: list | tuple = ()
    operand_shapes = None
    if opcode in LITERAL_OPCODES:
        literal = operand_list[1:-1].strip()
    else:
        operand_text = operand_list[1:-1]
        if "/*" in operand_text:
            operand_text = _INDEX_COMMENT_RE.sub("", operand_text)
        if operand_text and not operand_text.isspace():
            if "[" not in operand_text and "(" not in operand_text and "{" not in operand_text and \
                    fast.names(operand_text):
                operands = tuple(map(intern, _BARE_NAME_RE.findall(operand_text)))
            else:
                operands, operand_shapes = _operands_with_shapes(operand_text, line, column)
    name = intern(name[1:] if name[0] == "%" else name)
    shape = parse_shape(shape_text)
    if rewritten or operand_shapes is not None:
        return RawInstr(name, opcode, shape, list(operands), attrs, literal, root is not None, line, column,
                        operand_shapes, True)
    return fast.instruction(name, opcode, shape, operands, tuple(attrs), literal, (), line, column)


def called_by_name(attrs: tuple | list) -> tuple[list, tuple] | None:
    """Where each attribute that names computations names one alone (`calls=%fused`: no `{`
    list, no inline body) and none names control predecessors: the attributes with those
    names' `%` dropped, and the names called, as assembly makes them (Assembler.instruction,
    computation_refs); else None (assembly resolves them)."""
    out = []
    called = []
    for pair in attrs:
        key = pair[0]
        if key in REWRITTEN_ATTRS:
            value = pair[1]
            callee = value.lstrip("%")
            if key not in ir.COMPUTATION_ATTRS or not callee or "{" in value or "," in value:
                return None
            pair = _PAIRS.get((key, callee)) or share_pair(key, callee)
            called.append(pair[1])
        out.append(pair)
    return out, tuple(called)


def _operands_with_shapes(operand_text: str, line: int, column: int) -> tuple[list, list | None]:
    """`f32[2]{0} %a, %b` → the names, and the shape text written before each (None where none is)."""
    operands, operand_shapes = [], []
    pos = 0
    item_re = _operand_item_regex()
    while pos < len(operand_text):
        m_item = item_re.match(operand_text, pos)
        if m_item is None or m_item.end() == pos:
            raise LocatedError(
                "expects an operand name (an operand that is a literal is only valid in constant(...))",
                line, column)
        operand_shapes.append(m_item.group(1))
        operands.append(strip_percent(m_item.group(2)))
        pos = m_item.end()
    if any(not is_name(o) for o in operands):
        raise LocatedError("expects an operand name (a literal is only valid in constant(...))", line, column)
    return operands, (operand_shapes if any(s is not None for s in operand_shapes) else None)


def raw_instruction(text: str, line: int, column: int, more_attrs=()) -> RawInstr:
    """The record of an INSTRUCTION token (met on the token-by-token path), and of the ATTR
    tokens after it (`more_attrs`, as (name, value): attributes after a comment)."""
    m = head_regex().match(text)
    root, name, shape_text, opcode, operand_list = m.group(2, 3, 4, 5, 6)
    attrs = []
    for a in attr_regex().finditer(text, m.end()):
        key, value = a.group(1, 2)
        attrs.append((sys.intern(key), sys.intern(value) if len(value) < _SHARED_VALUE_LEN else value))
    attrs.extend(more_attrs)
    rewritten = any(key in REWRITTEN_ATTRS for key, _ in attrs)
    made = instruction(root, name, shape_text, opcode, operand_list, attrs, rewritten, line, column)
    if isinstance(made, RawInstr):
        return made
    return RawInstr(made.name, made.opcode, made.shape, list(made.operands), attrs, made.literal, root is not None,
                    line, column, None, True, made)


def _read_computation(text: str, pos: int, end: int, line: int, line_start: int):
    """The COMPUTATION terminal (COMPUTATION_HEAD (_WS0 INSTRUCTION)* _WS0 "}"), read one
    instruction at a time: (raw computation, end offset), or None when the computation holds
    anything else, so that the parser reads it token by token.  Most of the raw computation's
    instructions are ir.Instructions already (see `instruction`); `roots` says which were ROOT."""
    fast = _FAST or _bind_fast()
    head = fast.common_head(text, pos, end)
    common = head is not None
    if not common:
        # (where a header table or anything else that is no computation comes, the terminal
        # itself, some 6k characters, is not compiled or tried)
        head = prefilter("COMPUTATION_HEAD").match(text, pos, end) and \
            terminal_regex("COMPUTATION_HEAD").match(text, pos, end)
        if head is None:
            return None
    match_instruction, match_attr, make = fast.instruction_head, fast.attr, instruction
    intern, rewritten_attrs, literal_opcodes = sys.intern, REWRITTEN_ATTRS, LITERAL_OPCODES
    new_instruction = fast.instruction
    count, rfind = text.count, text.rfind
    share_len, pairs_get, attr_sets_get = _SHARED_VALUE_LEN, _PAIRS.get, _ATTR_SETS.get
    long_get, long_sets, long_sets_get, long_full = _LONG_PAIRS.get, _LONG_ATTR_SETS, _LONG_ATTR_SETS.get, _LONG_FULL
    instrs: list = []
    roots: list[int] = []
    head_line, head_column = line, pos - line_start + 1
    p = counted = head.end()  # `line` is the line of offset `counted`
    while True:
        m = match_instruction(text, p, end)
        if m is None:
            break
        start = m.start(1)
        n = count("\n", counted, start)
        if n:
            line += n
            line_start = rfind("\n", counted, start) + 1
        counted = start
        root, name, shape, opcode, operands, key, value, key2, value2 = m.group(2, 3, 4, 5, 6, 7, 8, 9, 10)
        p = m.end()
        # The attributes read with the head (instruction_regex's slots), then any more: a tuple
        # where the slots held them all (the common case: no list to copy), else a list.
        shareable = True  # every value short: the attribute tuple may be one other instructions have
        if key is None:
            attrs: tuple | list = ()
            rewritten = False
        else:
            if len(value) < share_len:
                first = pairs_get((key, value)) or share_pair(key, value)
            else:
                first = (intern(key), value)
                first = long_get(first) or (first if key in long_full else share_long_pair(first))
                shareable = False
            rewritten = key in rewritten_attrs
            if key2 is None:
                attrs = (first,)
            else:
                if len(value2) < share_len:
                    second = pairs_get((key2, value2)) or share_pair(key2, value2)
                else:
                    second = (intern(key2), value2)
                    second = long_get(second) or (second if key2 in long_full else share_long_pair(second))
                    shareable = False
                if key2 in rewritten_attrs:
                    rewritten = True
                a = match_attr(text, p, end)  # every slot filled: more may follow
                if a is None:
                    attrs = (first, second)
                else:
                    attrs = [first, second]
                    while a is not None:
                        key, value = a.group(1, 2)
                        if len(value) < share_len:
                            attrs.append(pairs_get((key, value)) or share_pair(key, value))
                        else:
                            pair: tuple = (intern(key), value)
                            attrs.append(long_get(pair) or (pair if key in long_full else share_long_pair(pair)))
                            shareable = False
                        if key in rewritten_attrs:
                            rewritten = True
                        p = a.end()
                        a = match_attr(text, p, end)
        if root is not None:
            roots.append(len(instrs))
        # `instruction`'s common case inlined (a call per instruction saved): every operand a
        # bare name, and computations called by name alone.  Anything else goes through
        # `instruction` (`operand_names` None), and what assembly must resolve is a RawInstr.
        opcode = intern(opcode)
        inner = operands[1:-1]
        literal = None
        if opcode in literal_opcodes:
            operand_names: tuple | None = ()
            literal = inner.strip()
        elif "/*" in inner or "[" in inner or "(" in inner or "{" in inner:
            operand_names = None
        elif not inner or inner.isspace():
            operand_names = ()
        elif "," in inner:
            # The grammar's OPERAND_LIST matched, and an operand is `/*index=N*/`? (SHAPE _WS1)?
            # NAME: without `/*`, `[` or `(` no operand has a mark or a shape (each SHAPE holds
            # `[` or `(`), so every operand is a bare name, and the text is names (`%` only
            # before one), commas and whitespace.
            operand_names = tuple(map(intern, inner.replace("%", "").replace(",", " ").split()))
        else:
            only = inner.strip()  # one operand (the same as above, for less)
            operand_names = (intern(only[1:] if only[0] == "%" else only),)
        called: tuple = ()
        if rewritten and operand_names is not None:
            by_name = called_by_name(attrs)
            if by_name is not None:
                attrs, called = by_name
                rewritten = False
        if rewritten or operand_names is None:
            made = make(root, name, shape, opcode, operands, list(attrs), rewritten, line, start - line_start + 1)
        else:
            frozen = tuple(attrs)
            if shareable:
                if frozen:
                    frozen = attr_sets_get(frozen) or share_attr_set(frozen)
            else:  # (made of shared pairs: equal tuples hold the same pairs, hashed once each)
                found = long_sets_get(frozen)
                if found is not None:
                    frozen = found
                elif len(long_sets) < _LONG_SETS:  # (no call: where metadata differs, most miss)
                    long_sets[frozen] = frozen
            made = new_instruction(intern(name[1:] if name[0] == "%" else name), opcode, parse_shape(shape),
                                   operand_names, frozen, literal, called, line, start - line_start + 1)
        instrs.append(made)
    close = _CLOSE_RE.match(text, p, end)
    if close is None:
        return None
    if common:
        entry, name, param_text, result = head.group(1, 2, 3, 4)
        params = None if param_text is None else \
            [(intern(param[1:] if param[0] == "%" else param), param_shape, head_line, head_column)
             for param, param_shape in fast.common_params(param_text)]
        raw = RawComputation(intern(name[1:] if name[0] == "%" else name), entry is not None, params, result, [],
                             instrs, head_line, head_column, roots)
    else:
        raw = computation_from_head(text[pos:head.end()], instrs, [], head_line, head_column)
        raw.roots = roots
    return raw, close.end()


class _Fast:
    """The compiled patterns and constructors the reader uses, bound once."""

    instruction_head: Callable
    attr: Callable
    names: Callable
    instruction: Callable
    common_head: Callable
    common_params: Callable


_FAST: _Fast | None = None


def _bind_fast() -> _Fast:
    global _FAST
    fast = _Fast()
    fast.instruction_head, fast.attr = instruction_regex().match, attr_regex().match
    fast.names = _names_regex().fullmatch
    fast.instruction = _instruction_maker()
    fast.common_head, fast.common_params = common_head_regex().match, common_param_regex().findall
    _FAST = fast
    return fast


_INSTRUCTION_FIELDS: tuple = ("name", "opcode", "shape", "operands", "attrs", "literal", "called", "span")


def _instruction_maker():
    """make(name, opcode, shape, operands, attrs, literal, called, line, column) -> an
    ir.Instruction and its ir.Span.  A module holds one per instruction and the frozen
    dataclasses' __init__ sets each field through object.__setattr__: writing the slots
    directly builds both in half the time (a twentieth of reading a module).  Should the
    classes gain a field, their constructors are used instead."""
    import dataclasses

    if tuple(f.name for f in dataclasses.fields(ir.Instruction)) != _INSTRUCTION_FIELDS or \
            tuple(f.name for f in dataclasses.fields(ir.Span)) != ("line", "column") or \
            not hasattr(ir.Instruction, "__slots__") or not hasattr(ir.Span, "__slots__"):
        instruction, span = ir.Instruction, ir.Span

        def make_by_constructors(name, opcode, shape, operands, attrs, literal, called, line, column):
            return instruction(name, opcode, shape, operands, attrs, literal, called, span(line, column))

        return make_by_constructors
    new, instruction, span = object.__new__, ir.Instruction, ir.Span
    set_name, set_opcode, set_shape, set_operands, set_attrs, set_literal, set_called, set_span = (
        getattr(instruction, f).__set__ for f in _INSTRUCTION_FIELDS)
    set_line, set_column = span.line.__set__, span.column.__set__

    def make(name, opcode, shape, operands, attrs, literal, called, line, column):
        where = new(span)
        set_line(where, line)
        set_column(where, column)
        made = new(instruction)
        set_name(made, name)
        set_opcode(made, opcode)
        set_shape(made, shape)
        set_operands(made, operands)
        set_attrs(made, attrs)
        set_literal(made, literal)
        set_called(made, called)
        set_span(made, where)
        return made

    return make


def computation_from_head(head_text: str, instrs: list, attrs: list, line: int, column: int) -> RawComputation:
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
            params.append((strip_percent(p.group(1)), p.group(2), line, column))
            pos = p.end()
    return RawComputation(strip_percent(name), entry is not None, params, result, attrs, instrs, line, column)


def _section_entry_reader(terminal: str):
    """A reader of one entry of a header table (`3 {file_location_id=2 parent_frame_id=1}`):
    the terminal's own pattern, the entry as (text, line, column).  As a reader, the entries of
    a table are one token (see the lexer), not a token each."""
    match: Callable | None = None

    def read(text: str, pos: int, end: int, line: int, line_start: int):
        nonlocal match
        if match is None:  # (compiled at first use: most texts have no such tables)
            match = terminal_regex(terminal).match
        m = match(text, pos, end)
        if m is None:
            return None
        return (m.group(), line, pos - line_start + 1), m.end()

    return read


@functools.lru_cache(maxsize=None)
def common_value_regex(terminal: str) -> re.Pattern | None:
    """The form XLA prints of a large attribute-value terminal, compiled in a fraction of the
    terminal's time: every value it matches whole, the terminal matches whole (else the
    terminal decides).  PROGRAM_SHAPE_VALUE (`entry_computation_layout={(f32[2]{0},
    /*index=1*/s32[])->f32[2]{0}}`, checked once per module): `_common_shape`s.  None for others."""
    if terminal == "PROGRAM_SHAPE_VALUE":  # "{" _WS0 TUPLE_SHAPE _WS0 "->" _WS0 SHAPE _WS0 "}"
        return re.compile(f"\\{{{_common_tuple_shape()}->(?:{_common_shape()})\\}}")
    return None


@functools.lru_cache(maxsize=None)
def prefilter(terminal: str) -> re.Pattern | None:
    """A small pattern that matches wherever `terminal` could (what the terminal's start
    requires), for the large terminals whose compiled patterns cost milliseconds: the lexer
    tries them one at a time on a module's first tokens (`HloModule`, the header's attributes
    and tables), and none of those can be one.  None for other terminals."""
    ws, name = _WS, pattern("NAME")
    if terminal in ("INSTRUCTION", "INSTR_HEAD"):  # (ROOT _WS1)? NAME _WS0 "=" ...
        return re.compile(f"(?:ROOT{ws}+)?{name}{ws}*=")
    if terminal == "COMPUTATION_HEAD":  # (ENTRY _WS1)? NAME (_WS0 _SIGNATURE)? _WS0 "{", _SIGNATURE: "(" ...
        return re.compile(f"(?:ENTRY{ws}+)?{name}{ws}*[({{]")
    if terminal in ("SHAPE", "TUPLE_SHAPE", "ARRAY_SHAPE"):  # ELEMENT_TYPE "[" ... | "(" ...
        return re.compile(f"{_element_type()}\\[|\\(")
    return None


#: Terminals hlofuse's lexer reads with a function instead of one regular expression.  Where
#: one is met, the parser may take another right after it; the lexer hands a run of them to
#: the parser as one token whose value is the list of what the reader made of each.
READERS = {"COMPUTATION": _read_computation,
           "SECTION_STRING_ENTRY": _section_entry_reader("SECTION_STRING_ENTRY"),
           "SECTION_BRACE_ENTRY": _section_entry_reader("SECTION_BRACE_ENTRY")}

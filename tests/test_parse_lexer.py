"""hlofuse's lexer and the patterns it composes from the grammar's terminals."""

from __future__ import annotations

import os
import random
import re
import sys

import pytest

import hlofuse
from hlofuse import parse
from hlofuse.parse import reader
from hlofuse.parse.records import LocatedError

from conftest import REPO, read_text, shared_dir

sys.path.insert(0, str(REPO / "bench"))
from parse_speed import generate  # noqa: E402


def _instruction_lines() -> list[str]:
    texts = [generate(150_000, seed=5)]
    corpus = shared_dir() / "corpus" / "parser"
    if corpus.is_dir():
        texts += [read_text(p) for p in sorted(corpus.glob("*.hlo"))]
    lines = []
    for text in texts:
        lines += [line.strip() for line in text.splitlines() if " = " in line and not line.startswith("HloModule")]
    return lines


def _read_instruction(line: str):
    """What the COMPUTATION reader takes of `line` as one instruction: a head, then attributes
    one at a time.  The match object of the head, and where the instruction ends."""
    head = reader.head_regex().match(line)
    if head is None:
        return None, None
    end = head.end()
    attr = reader.attr_regex().match(line, end)
    while attr is not None:
        end = attr.end()
        attr = reader.attr_regex().match(line, end)
    return head, end


def test_instruction_patterns_match_what_the_grammar_matches():
    """The COMPUTATION reader's patterns (an instruction head, then `, name=value` as often as
    it matches) read exactly what the grammar's INSTRUCTION terminal matches: on every
    instruction-like line, real and mutated, both accept the same lines and end at the same
    place, and the head's groups are the instruction's pieces."""
    grammar = parse.terminal_regex("INSTRUCTION")
    rng = random.Random(7)
    lines = _instruction_lines()
    mutated = []
    for line in rng.sample(lines, min(2000, len(lines))):
        i = rng.randrange(len(line))
        mutated.append(line[:i] + rng.choice([",", " ", "(", "}", "x", "/*", ", a=b", ""]) + line[i + 1:])
    checked = 0
    for line in lines + mutated:
        # the reader's head pattern also skips the whitespace before the instruction
        expected = grammar.match(line, len(line) - len(line.lstrip(" \t\f\r\n")))
        head, end = _read_instruction(line)
        assert (expected and expected.end()) == end, line
        if head:
            checked += 1
            root, name, shape, opcode, operands = head.group(2, 3, 4, 5, 6)
            assert line.lstrip().startswith(("ROOT " if root else "") + name)
            assert parse.terminal_regex("SHAPE").fullmatch(shape)
            assert parse.terminal_regex("OPERAND_LIST").fullmatch(operands)
    assert checked > 1000


def _sample_dump_lines(limit_per_file: int = 400) -> list[str]:
    lines = []
    for path in sorted((REPO / "sample_dumps").rglob("*.txt")):
        text = read_text(path)
        lines += [line.strip() for line in text.splitlines() if " = " in line][:limit_per_file]
    return lines


def test_head_regex_reads_what_the_grammar_terminals_read():
    """The reader's head pattern tries the forms XLA prints most first (`_common_shape`,
    `_common_operand_list`); it accepts the same lines as INSTR_HEAD composed from the
    terminals alone and takes the same groups, on real lines (generated, corpus, sample dumps)
    and mutated ones, and the common forms are what most real lines take."""
    fast, plain = reader.head_regex(), reader.grammar_head_regex()
    common_shape = re.compile(f"(?:{reader._common_shape()})")
    common_operands = re.compile(f"(?:{reader._common_operand_list()})")
    rng = random.Random(13)
    lines = _instruction_lines() + _sample_dump_lines()
    edits = [",", " ", "(", ")", "}", "{", "[", "]", "x", "/*", "/*index=1*/", ", ", "%", "#1", ":T(2)", "<=", ""]
    mutated = [line[:i] + rng.choice(edits) + line[i + rng.randrange(2):]
               for line in rng.sample(lines, min(4000, len(lines))) for i in [rng.randrange(len(line))]]
    took_common = 0
    for line in lines + mutated:
        a, b = fast.match(line), plain.match(line)
        assert (a is None) == (b is None), line
        if a is None:
            continue
        assert a.groups() == b.groups(), line
        if common_shape.fullmatch(a.group(4)) and common_operands.fullmatch(a.group(6)):
            took_common += 1
    assert took_common > len(lines) // 2


def test_instruction_regex_reads_what_head_then_attributes_read():
    """The reader's one match per instruction (`instruction_regex`: the head and up to
    ATTR_SLOTS attributes) takes the same head groups and the same first attributes, ending
    where the head and those attributes read one match at a time end, on real and mutated lines
    with none to many attributes."""
    rng = random.Random(11)
    lines = _instruction_lines()
    mutated = [line[:i] + rng.choice([",", " ", "(", "}", "x", "/*", ", a=b", ""]) + line[i + 1:]
               for line in rng.sample(lines, min(2000, len(lines))) for i in [rng.randrange(len(line))]]
    extra = [line + ", a=b, c={1}, d=\"x\"" for line in rng.sample(lines, min(300, len(lines)))]
    slots = reader.ATTR_SLOTS
    by_count = [0] * (slots + 2)
    for line in lines + mutated + extra:
        head = reader.head_regex().match(line)
        combined = reader.instruction_regex().match(line)
        assert (head is None) == (combined is None), line
        if head is None:
            continue
        assert combined.group(1, 2, 3, 4, 5, 6) == head.group(1, 2, 3, 4, 5, 6), line
        attrs, end = [], head.end()
        attr = reader.attr_regex().match(line, end)
        while attr is not None and len(attrs) < slots:
            attrs.append(attr.group(1, 2))
            end = attr.end()
            attr = reader.attr_regex().match(line, end)
        got = [combined.group(7 + 2 * k, 8 + 2 * k) for k in range(slots)]
        assert got == attrs + [(None, None)] * (slots - len(attrs)), line
        assert combined.end() == end, line
        by_count[len(attrs) + (attr is not None and len(attrs) == slots)] += 1
    assert all(n > 100 for n in by_count), by_count  # none, some, every slot, and more than the slots


def test_computation_reader_splits_instructions():
    """The COMPUTATION reader, on computations of one real instruction line, reads the whole
    computation, names the instruction as its text does and marks ROOT where it is written."""
    read = reader.READERS["COMPUTATION"]
    checked = refused = 0
    for line in _instruction_lines():
        text = "%c {\n  " + line + "\n}\n"
        try:
            got = read(text, 0, len(text), 1, 0)
        except LocatedError:  # the token is the grammar's, its operands are not names
            refused += 1
            continue
        if got is None:
            continue
        assert got[1] == len(text) - 1, line
        checked += 1
        (instr,) = got[0].instrs
        name = line.lstrip().removeprefix("ROOT").lstrip().split("=")[0].strip().lstrip("%")
        assert instr.name == name, line
        assert (got[0].roots == [0]) == line.lstrip().startswith("ROOT "), line
    assert checked > 1000 and refused < checked / 10


def test_computation_reader_and_token_path_agree():
    """A computation read whole by the lexer and the same computation read token by token
    (a comment inside it makes the reader give up) give the same module."""
    text = generate(60_000, seed=9)
    marked = re.sub(r"(\n  ROOT )", r"\n  // a comment: this computation is read token by token\1", text)
    assert hlofuse.loads(marked) == hlofuse.loads(text)


@pytest.mark.parametrize("source,types", [
    ("ENTRY %e { ROOT %x = f32[] parameter(0) }", ["COMPUTATION"]),
    ("ENTRY %e {\n  ROOT %x = f32[] parameter(0) // c\n}", ["COMPUTATION_HEAD", "INSTRUCTION", "RBRACE"]),
    ("ENTRY e { ROOT x = parameter(0) }", ["COMPUTATION_HEAD", "ROOT", "NAME_EQ", "OPCODE_OPEN", "LITERAL_ATOM",
                                          "RPAR", "RBRACE"]),
])
def test_token_kinds(source, types):
    seen = []
    p = parse.parser()
    interactive = p.parse_interactive(source, start="start")
    for token in interactive.iter_parse():
        seen.append(token.type)
    assert seen == types


def test_lines_and_columns_of_tokens_after_comments_and_crlf():
    text = "HloModule m\r\n/* a\r\nblock */\r\nENTRY %e {\r\n  // line\r\n  ROOT %x = f32[] parameter(0)\r\n}\r\n"
    module = hlofuse.loads(text)
    assert module.entry.span == hlofuse.ir.Span(4, 1)
    assert module.entry["x"].span == hlofuse.ir.Span(6, 3)


def _header_and_line_starts() -> list[tuple[str, int]]:
    """(text, offset) pairs: the start of every line of a generated module (its header, tables,
    computation heads, instructions) and of the corpus files, and of mutated copies."""
    texts = [generate(150_000, seed=5)]
    corpus = shared_dir() / "corpus" / "parser"
    if corpus.is_dir():
        texts += [read_text(p) for p in sorted(corpus.glob("*.hlo"))][:200]
    rng = random.Random(17)
    out = []
    for text in texts:
        for line in text.splitlines():
            stripped = line.strip()
            if not stripped:
                continue
            out.append((stripped, 0))
            i = rng.randrange(len(stripped))
            out.append((stripped[:i] + rng.choice(["(", "{", "=", " ", "x", "ROOT ", "ENTRY "]) + stripped[i:], 0))
            out.append((stripped, rng.randrange(len(stripped))))
    return out


def test_prefilters_match_wherever_their_terminals_match():
    """The lexer skips a large terminal where its prefilter does not match (it is then not
    compiled for nothing): that may only happen where the terminal cannot match."""
    from hlofuse.parse.reader import prefilter

    names = ["INSTRUCTION", "INSTR_HEAD", "COMPUTATION_HEAD", "SHAPE", "TUPLE_SHAPE", "ARRAY_SHAPE"]
    skipped = dict.fromkeys(names, 0)
    for text, at in _header_and_line_starts():
        for name in names:
            if prefilter(name).match(text, at) is None:
                assert parse.terminal_regex(name).match(text, at) is None, (name, text[at:at + 80])
                skipped[name] += 1
    assert all(n > 100 for n in skipped.values()), skipped


def test_reading_a_module_compiles_no_large_terminal_it_does_not_meet():
    """A module in XLA's printed form is read without compiling INSTRUCTION, COMPUTATION_HEAD or
    SHAPE (thousands of characters each: milliseconds of every process's first parse), which
    its header's tokens used to be tried against."""
    import subprocess

    from conftest import CHILD_PYTHONPATH

    code = ("import sys, hlofuse\n"
            "from hlofuse.parse import lalr\n"
            "hlofuse.loads(sys.stdin.read())\n"
            "print(sorted(lalr.parser().lexer.compiled_terminals))\n")
    env = {**os.environ, "PYTHONPATH": CHILD_PYTHONPATH, "HLOFUSE_NO_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", code], input=generate(150_000, seed=3), capture_output=True,
                         text=True, check=True, env=env)
    compiled = eval(out.stdout.strip())  # noqa: S307 - a list of names this test printed
    assert not {"INSTRUCTION", "INSTR_HEAD", "COMPUTATION_HEAD", "SHAPE"} & set(compiled), compiled


def test_program_shapes_of_the_common_form_are_program_shapes():
    """validate checks `entry_computation_layout` with `common_value_regex` first (a fraction
    of PROGRAM_SHAPE_VALUE's compile time): whatever it accepts, the terminal accepts, on the
    values of sample dumps and corpus files and mutated ones; real values take it."""
    from hlofuse.parse.reader import common_value_regex

    common, terminal = common_value_regex("PROGRAM_SHAPE_VALUE"), parse.terminal_regex("PROGRAM_SHAPE_VALUE")
    values = []
    texts = [read_text(p) for p in sorted((REPO / "sample_dumps").rglob("*.txt"))[:150]]
    for text in texts:
        m = re.search(r"entry_computation_layout=(\{.*?\})(?:, [a-z_]+=|\n)", text.split("\n", 1)[0] + "\n")
        if m:
            values.append(m.group(1))
    assert len(values) > 50
    rng = random.Random(5)
    edits = ["(", ")", "{", "}", "[", "]", ",", " ", "->", "/*index=1*/", "f32[2]", ":T(2)", ""]
    mutated = [v[:i] + rng.choice(edits) + v[i + rng.randrange(2):] for v in values * 4
               for i in [rng.randrange(len(v))]]
    took = 0
    for value in values + mutated + ["{f32[2]->f32[2]}", "{()->()}", "{(f32[2]{0})->(s32[], f32[])}"]:
        if common.fullmatch(value):
            assert terminal.fullmatch(value), value
            took += value in values
    assert took > len(values) // 2

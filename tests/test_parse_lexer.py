"""hlofuse's lexer and the patterns it composes from the grammar's terminals."""

from __future__ import annotations

import random
import re
import sys

import pytest

import hlofuse
from hlofuse import parse
from hlofuse.parse import reader

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


def test_grouped_instruction_pattern_matches_what_the_grammar_matches():
    """instruction_regex (used by the COMPUTATION reader) is the grammar's INSTRUCTION with
    groups: on every instruction-like line, and on mutated ones, both match the same text."""
    grammar = parse.terminal_regex("INSTRUCTION")
    grouped = reader.instruction_regex()
    rng = random.Random(7)
    lines = _instruction_lines()
    mutated = []
    for line in rng.sample(lines, min(2000, len(lines))):
        i = rng.randrange(len(line))
        mutated.append(line[:i] + rng.choice([",", " ", "(", "}", "x", "/*", ", a=b", ""]) + line[i + 1:])
    checked = 0
    for line in lines + mutated:
        # the grouped pattern also skips the whitespace before the instruction
        a, b = grammar.match(line, len(line) - len(line.lstrip(" \t\f\r\n"))), grouped.match(line)
        assert (a and a.end()) == (b and b.end()), line
        if b:
            checked += 1
            root, name, shape, opcode, operands = b.group(2, 3, 4, 5, 6)
            assert line.lstrip().startswith(("ROOT " if root else "") + name)
            assert parse.terminal_regex("SHAPE").fullmatch(shape) and parse.terminal_regex("OPERAND_LIST").fullmatch(operands)
    assert checked > 1000


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

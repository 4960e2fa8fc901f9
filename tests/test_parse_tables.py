"""hlofuse reads HLO with Lark's LALR tables written out as Python (hlofuse/parse/lalr_tables.py)
and its own parser loop (lalr.py), without importing Lark: the tables must be those Lark
computes for the grammar now, the loop must read every input as Lark's parser does, and a
failure must be worded as before (Lark's parser reads the text again)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import hlofuse
from hlofuse.errors import HloSyntaxError
from hlofuse.parse import assemble, grammar, lalr, make_tables, reader
from hlofuse.parse.diagnostics import run_lark_parser, run_parser

from conftest import read_text

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="the tables are used from Python 3.11 on")


def test_the_tables_are_those_lark_computes_for_the_grammar_now():
    """Fails when grammars/hlo.lark changed and `python -m hlofuse.parse.make_tables` was not
    run (hlofuse still reads HLO then, with Lark's parser, more slowly)."""
    text = grammar.grammar_text(grammar.grammar_path())
    written = make_tables.TABLES_PATH.read_text()
    assert written == make_tables.render(make_tables.table_data(), grammar.grammar_fingerprint(text)), \
        "hlofuse/parse/lalr_tables.py is stale: run `python -m hlofuse.parse.make_tables`"
    assert grammar.tables() is not None and lalr.parser() is not None


def test_stale_tables_are_not_used():
    assert grammar.grammar_fingerprint("a") != grammar.grammar_fingerprint("b")
    assert grammar.grammar_fingerprint("ab") != grammar.grammar_fingerprint("ba")


def _inputs() -> list[Path]:
    files = sorted((ROOT / "sample_dumps").rglob("*.txt"))[::3]
    corpus = Path("/work/shared/corpus/parser")
    if corpus.is_dir():
        files += sorted(corpus.rglob("*.hlo")) + sorted(corpus.rglob("*.txt"))
    return [f for f in files if f.stat().st_size < 3_000_000]


def _described(module) -> list:
    return [(c.name, c.is_entry, c.root_name, c.attrs, c.span.line if c.span else None,
             [(i.name, i.opcode, i.shape, i.operands, i.attrs, i.literal, i.called,
               i.span.line if i.span else None, i.span.column if i.span else None) for i in c.instructions])
            for c in module.computations]


def test_lalr_parser_reads_every_input_as_larks_parser_does():
    files = _inputs()
    if len(files) < 20:
        pytest.skip("too few sample inputs here")
    fast, slow = lalr.parser(), grammar.parser()
    read = failed = 0
    for path in files:
        text = read_text(path)
        try:
            expected = _described(assemble(slow.parse(text, start="start"), text, None))
        except Exception:  # noqa: BLE001 - Lark's parser (or assembly) rejects it: so must ours
            with pytest.raises(Exception):
                assemble(fast.parse(text, "start"), text, None)
            failed += 1
            continue
        assert _described(assemble(fast.parse(text, "start"), text, None)) == expected, path
        reader.forget_long_values()
        read += 1
    assert read > 10


@pytest.mark.parametrize("text", [
    "HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n",      # ends early
    "HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0) ]\n}\n",  # a character nothing takes
    "HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT q = f32[] negate(p),, foo=1\n}\n",
    "HloModule m\nENTRY e {\n  ROOT c = f32[] constant(1), metadata={op_name=\"x\"\n}\n",
])
def test_a_failure_is_worded_by_larks_parser(text):
    with pytest.raises(lalr.Failed):
        lalr.parser().parse(text, "start")
    with pytest.raises(HloSyntaxError) as fast_path:
        run_parser(text, "start")
    with pytest.raises(HloSyntaxError) as lark_path:
        run_lark_parser(text, "start")
    assert str(fast_path.value) == str(lark_path.value)


def test_the_other_start_symbols():
    body = "{\n  p = f32[2]{0} parameter(0)\n  ROOT n = f32[2]{0} negate(p)\n}"
    assert [type(x).__name__ for x in run_parser(body, "computation_body")] == \
        [type(x).__name__ for x in run_lark_parser(body, "computation_body")]


def test_reading_hlo_imports_neither_lark_nor_the_cache_machinery():
    """Lark (with logging, pickle, tempfile, hashlib and OpenSSL) cost every process some 7 MB
    and 30 ms; with the cache off, hashlib and pickle are not needed either."""
    code = ("import sys, hlofuse\n"
            "m = hlofuse.loads(open(sys.argv[1]).read())\n"
            "assert m.instruction_count > 0\n"
            "print(sorted(n for n in ('lark', 'hashlib', 'pickle', 'tempfile') if n in sys.modules))\n")
    text = "HloModule m\n\nENTRY %e (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n" \
           "  ROOT %n = f32[2]{0} negate(%p), metadata={op_name=\"x\"}\n}\n"
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"hlofuse-tables-{os.getpid()}.hlo"
    path.write_text(text)
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HLOFUSE_NO_CACHE": "1"}
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env,
                             check=True)
    finally:
        path.unlink()
    assert out.stdout.strip() == "[]"


def test_long_values_are_shared_within_a_parse_and_let_go_after():
    config = 'backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"force_earliest_schedule":false}'
    meta = 'metadata={op_type="negate" op_name="jit(f)/negate" source_file="/a/b.py" source_line=3}'
    lines = "".join(f"  %n{k} = f32[2]{{0}} negate(%n{k - 1}), {meta}, {config}\n" for k in range(1, 4))
    text = ("HloModule m\n\nENTRY %e (n0: f32[2]) -> f32[2] {\n  %n0 = f32[2]{0} parameter(0)\n" + lines
            + "  ROOT %r = f32[2]{0} copy(%n3)\n}\n")
    module = hlofuse.loads(text)
    made = [i for i in module.computations[0].instructions if i.opcode == "negate"]
    assert len(made) == 3
    assert made[0].attrs == made[1].attrs == made[2].attrs
    assert made[0].attrs is made[1].attrs is made[2].attrs  # one tuple, of the same pairs
    assert made[0].attrs[1][1] is made[2].attrs[1][1]
    assert not reader._LONG_PAIRS and not reader._LONG_ATTR_SETS
    assert hlofuse.dumps(module).rstrip("\n") == text.rstrip("\n")


def test_terminals_tried_one_by_one_read_what_the_whole_pattern_reads(monkeypatch):
    """The lexer reads a scanner's first tokens trying its terminals one at a time and compiles
    the pattern that holds them all for the rest (lexer._Scanner): both ways read the same."""
    from hlofuse.parse import lexer
    from hlofuse.parse.callbacks import Callbacks

    files = _inputs()
    if len(files) < 20:
        pytest.skip("too few sample inputs here")
    tables = grammar.tables()
    results = {}
    for tries in (0, 10**9):
        monkeypatch.setattr(lexer, "_TRIES_BEFORE_COMPILING", tries)
        parser = lalr.Parser(tables, Callbacks())
        made = []
        for path in files:
            text = read_text(path)
            try:
                made.append(_described(assemble(parser.parse(text, "start"), text, None)))
            except Exception as err:  # noqa: BLE001 - where it fails, it fails the same way
                made.append(type(err).__name__)
            reader.forget_long_values()
        compiled = [s for s in parser.lexer.by_accepts.values() if s.regex is not None]
        assert bool(compiled) == (tries == 0)
        results[tries] = made
    assert results[0] == results[10**9]


def test_the_end_of_the_input_compiles_nothing():
    from hlofuse.parse.callbacks import Callbacks

    parser = lalr.Parser(grammar.tables(), Callbacks())
    text = "HloModule m\n\nENTRY %e (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n" \
           "  ROOT %n = f32[2]{0} negate(%p)\n}\n\n"
    parser.parse(text, "start")
    assert all(s.regex is None for s in parser.lexer.by_accepts.values())


def test_the_grammar_cache_is_keyed_by_the_lexer_class_it_names():
    from hlofuse.parse import lark_lexer

    assert grammar._LEXER == f"{lark_lexer.Lexer.__module__}.{lark_lexer.Lexer.__qualname__}"


def test_stale_tables_leave_the_reading_to_larks_parser():
    """Where lalr_tables.py does not fit the grammar (edited since), hlofuse reads with Lark's
    parser, and reads the same."""
    code = ("import sys\n"
            "import hlofuse.parse.lalr_tables as tables\n"
            "if sys.argv[2] == 'stale':\n"
            "    tables.GRAMMAR_FINGERPRINT = 'another grammar'\n"
            "import hlofuse\n"
            "m = hlofuse.loads(open(sys.argv[1]).read())\n"
            "print('lark' in sys.modules, [(i.name, i.opcode, i.operands, i.attrs, i.span.line)\n"
            "                              for c in m.computations for i in c.instructions])\n")
    sample = min((ROOT / "sample_dumps").rglob("*after_optimizations*.txt"), key=lambda p: p.stat().st_size,
                 default=None)
    if sample is None:
        pytest.skip("no sample dump here")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HLOFUSE_NO_CACHE": "1"}
    fresh, stale = (subprocess.run([sys.executable, "-c", code, str(sample), which], capture_output=True, text=True,
                                   env=env, check=True).stdout for which in ("fresh", "stale"))
    assert fresh.startswith("False ") and stale.startswith("True ")
    assert fresh[6:] == stale[5:]

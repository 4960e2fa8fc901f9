"""Fuzzing the parser: mutated HLO (truncated, tokens inserted or deleted, lines dropped or
duplicated, numbers changed, brackets unbalanced, random bytes, operands renamed into cycles,
dimensions made enormous) must either parse or raise an HlofuseError, never anything else, and
never hang.  What parses must hold no cycle and print back to text that parses to the same
module.

Two drivers over the same mutations: a seeded loop (deterministic, the same cases on every run)
and hypothesis (new cases each run, shrunk to a small reproducer when one fails).  Both are
bounded to a few seconds; FUZZ_CASES=5000 runs a longer seeded session locally.
"""

from __future__ import annotations

import os
import random
import re
import signal
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hlofuse
from hlofuse import HlofuseError
from hlofuse.cycles import cycle_error

from conftest import read_text, shared_dir

SEED_CASES = int(os.environ.get("FUZZ_CASES", "400"))
TIMEOUT_S = 10  # per case; a parse of these small texts takes milliseconds

_INLINE_SEEDS = [
    "HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[2,3]{1,0}}\n\n"
    "%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
    "  ROOT %s = f32[] add(%a, %b)\n}\n\n"
    "ENTRY %e (p: f32[2,3]) -> f32[2,3] {\n  %p = f32[2,3]{1,0} parameter(0)\n"
    "  %c = f32[] constant(0)\n  %r = f32[2]{0} reduce(%p, %c), dimensions={1}, to_apply=%add, "
    'metadata={op_name="jit(f)/reduce" source_file="f.py" source_line=3}\n'
    "  %t = (f32[2,3]{1,0}, f32[2]{0}) tuple(%p, %r), sharding={{replicated}, {maximal device=0}}\n"
    '  ROOT %g = f32[2,3]{1,0:T(8,128)} get-tuple-element(%t), index=0, backend_config={"x":[1,{"y":"}"}]}\n}\n\n',
    'f32[2] add(f32[2] %a, f32[2] %b), metadata={op_name="lone"}',
]

_TOKENS = ["(", ")", "{", "}", "[", "]", ",", "=", ":", "->", "%x", "f32[2]", "(f32[], s32[])", "ROOT", "ENTRY",
           "HloModule", "/*", "*/", "//", '"', "\\", "0", "-1", "1e999", "nan", "-inf", "\n", "parameter(0)",
           "constant({...})", "calls=", "to_apply=%x", "index=99", "dimensions={9}", "{1,0:T(8,128)}", "<=",
           "/*index=5*/", "fusion", "while", "metadata={", "FileNames", "StackFrames\n1 {parent_frame_id=1}",
           "\x00", "\u00e9", "\r", "\t", "?", "#", "$", ";", "'", "..."]
_WORD_RE = re.compile(r"%?[A-Za-z0-9_.\-]+|\S")


def _seeds() -> list[str]:
    seeds = list(_INLINE_SEEDS)
    corpus = shared_dir() / "corpus"
    if corpus.is_dir():
        files = sorted((corpus / "parser").glob("*.hlo")) + sorted((corpus / "fusion").glob("*.hlo"))
        rng = random.Random(1)
        for path in rng.sample(files, min(60, len(files))):
            if path.stat().st_size < 20_000:
                seeds.append(read_text(path))
    return seeds


SEEDS = _seeds()


@pytest.fixture(scope="module", autouse=True)
def _warm_parser():
    """Build the grammar (and its regular expressions) before any case runs under a time limit."""
    for seed in SEEDS[:3]:
        try:
            hlofuse.loads(seed)
        except HlofuseError:
            pass


def mutate(text: str, rng: random.Random) -> str:
    """One to three random edits of the kinds listed in the module docstring."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(11)
        n = len(text)
        pos = rng.randrange(n + 1)
        if kind == 0:  # truncate
            text = text[:pos]
        elif kind == 1:  # insert a token
            text = text[:pos] + rng.choice(_TOKENS) + text[pos:]
        elif kind == 2:  # delete a token
            words = list(_WORD_RE.finditer(text))
            if words:
                m = rng.choice(words)
                text = text[:m.start()] + text[m.end():]
        elif kind in (3, 4):  # drop or duplicate a line
            lines = text.split("\n")
            i = rng.randrange(len(lines))
            if kind == 3:
                del lines[i]
            else:
                lines.insert(i, lines[i])
            text = "\n".join(lines)
        elif kind == 5:  # change a number
            numbers = list(re.finditer(r"-?\d+", text))
            if numbers:
                m = rng.choice(numbers)
                new = rng.choice(["0", "-1", "1", "7", "65536", "99999999999999999999", "-0", "00"])
                text = text[:m.start()] + new + text[m.end():]
        elif kind == 6:  # unbalance brackets: drop one, or add one
            brackets = [i for i, ch in enumerate(text) if ch in "(){}[]"]
            if brackets and rng.random() < 0.5:
                i = rng.choice(brackets)
                text = text[:i] + text[i + 1:]
            else:
                text = text[:pos] + rng.choice("(){}[]") + text[pos:]
        elif kind == 7:  # random characters
            chars = "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 32), rng.randrange(128, 0x3000)]))
                            for _ in range(rng.randint(1, 8)))
            text = text[:pos] + chars + text[pos:]
        elif kind == 8:  # swap two lines
            lines = text.split("\n")
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif kind == 9:  # an operand renamed to its own instruction or to a later one: a cycle, or a use before definition
            defs = list(_DEFINITION_RE.finditer(text))
            if defs:
                k = rng.randrange(len(defs))
                m, target = defs[k], rng.choice(defs[k:]).group(1)
                text = text[:m.start(2)] + target + text[m.end(2):]
        else:  # dimensions far beyond any memory
            dims = list(re.finditer(r"\[(\d+(?:,\d+)*)\]", text))
            if dims:
                m = rng.choice(dims)
                new = rng.choice(["9223372036854775807", "4294967296,4294967296", "99999999999999999999", "0,1000000000000"])
                text = text[:m.start(1)] + new + text[m.end(1):]
    return text


# An instruction's name (group 1) and its first operand's name (group 2).
_DEFINITION_RE = re.compile(r"(%?[A-Za-z_][\w.\-]*) = [^\n=]*?[a-z][a-z0-9\-]*\((?:[^)%\n]*\s)?(%?[A-Za-z_][\w.\-]*)[,)]")


class _Timeout(Exception):
    pass


@contextmanager
def _time_limit(seconds: int):
    if not hasattr(signal, "SIGALRM"):  # pragma: no cover - Windows: no limit, still checked for errors
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout(f"parsing took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check_one(text: str) -> str:
    """Parse one mutated text; returns 'ok' or 'error', raises on anything else."""
    with _time_limit(TIMEOUT_S):
        try:
            module = hlofuse.loads(text)
        except HlofuseError as err:
            assert "internal error" not in str(err), str(err)  # parse_text's safety net caught a bug
            str(err), err.one_line()  # the message itself must not fail
            if hasattr(err, "context"):
                err.context()
            return "error"
        assert cycle_error(module) is None, "a module with a cycle was accepted"
        printed = hlofuse.dumps(module)
        again = hlofuse.loads(printed)
        assert again == module, "loads(dumps(m)) != m"
        return "ok"


def _report(text: str, err: BaseException) -> str:
    return f"{type(err).__name__}: {err}\n--- input ({len(text)} chars) ---\n{text[:3000]!r}"


def test_seeded_mutations_raise_only_hlofuse_errors():
    rng = random.Random(int(os.environ.get("FUZZ_SEED", "20260101")))
    outcomes = {"ok": 0, "error": 0}
    for case in range(SEED_CASES):
        text = mutate(rng.choice(SEEDS), rng)
        try:
            outcomes[check_one(text)] += 1
        except BaseException as err:  # noqa: BLE001 - report any escape with its input
            if isinstance(err, KeyboardInterrupt):
                raise
            pytest.fail(f"case {case}: {_report(text, err)}")
    print(f"\nfuzz: {SEED_CASES} mutated inputs, {outcomes['ok']} parsed, {outcomes['error']} rejected cleanly")
    assert outcomes["error"] > 0 and sum(outcomes.values()) == SEED_CASES, outcomes


@settings(max_examples=150, deadline=None, derandomize=False, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed_index=st.integers(min_value=0, max_value=len(SEEDS) - 1), mutation_seed=st.integers(0, 2**32 - 1))
def test_hypothesis_mutations_raise_only_hlofuse_errors(seed_index, mutation_seed):
    text = mutate(SEEDS[seed_index], random.Random(mutation_seed))
    check_one(text)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("(){}[],=%: \n\"/*-.>0123456789abfsuENTROYHlo_")), max_size=200))
def test_random_text_raises_only_hlofuse_errors(text):
    check_one(text)


def test_deep_nesting_is_an_error_not_a_crash():
    for text in ["HloModule m\nENTRY e {\n ROOT x = f32[] constant(" + "(" * 5000 + ")" * 5000 + ")\n}\n",
                 "ENTRY e { ROOT x = f32[] add(" + "add(" * 3000 + ")" * 3000 + ") }",
                 "HloModule m, x=" + "{" * 20000 + "}" * 20000,
                 "ENTRY e { ROOT x = " + "(" * 200 + "f32[]" + ")" * 200 + " parameter(0) }"]:
        assert check_one(text) in ("ok", "error")


# Inputs the fuzzers found, each a crash once (kept so they stay fixed).
REGRESSIONS = [
    # a layout that is not a list of dimensions: int() of 'HloModule0' escaped from parse_shape
    "ENTRY e {\n  ROOT p = (f32[10]{HloModule0}) parameter(0)\n}\n",
    # a malformed window where the shape is left out: shape inference read it before validation
    "ENTRY e {\n  p = f32[4] parameter(0)\n  c = f32[] constant(0)\n  ROOT r = reduce-window(p, c), window={size=$1}, to_apply=e\n}\n",
    # a whole-computation token where a module header was expected: the message read its value
    " m, x=1\n\n%add (a: f32[]) -> f32[] {\n  ROOT %a = f32[] parameter(0)\n}\n",
    # a scalar with a one-dimension layout printed back without it: now rejected
    "ENTRY e {\n  ROOT p = f16[]{0} parameter(0)\n}\n",
]


@pytest.mark.parametrize("text", REGRESSIONS)
def test_fuzz_regressions(text):
    assert check_one(text) == "error"

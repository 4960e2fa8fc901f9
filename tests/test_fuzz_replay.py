"""Fuzzing the replay and explain: mutated HLO that parses (XLA's fusion tests and the sample
dumps, with shapes, operands, opcodes, attributes, layouts, loop trip counts and control edges
changed, instructions duplicated, deleted and moved) must, through each of the three pipelines
and through explain, either work or raise an HlofuseError — never anything else, never hang —
and the fused module of every replay must print back to text that parses to it.

The cases are seeded (the same mutants on every run: a failure names its case and input);
HLOFUSE_FUZZ_CASES=20000 (and HLOFUSE_FUZZ_SEED) runs a longer session locally.  Modules too
deep for recursion (1,000 nested calls, loops, fusions) are generated outright.
"""

from __future__ import annotations

import os
import random
import re
import signal
from collections import Counter
from contextlib import contextmanager

import pytest

import hlofuse
from hlofuse import HlofuseError
from hlofuse.cycles import cycle_error
from hlofuse.explain import explain, explain_result
from hlofuse.pipeline import Options, replay
from hlofuse.printer import print_back_error

from conftest import REPO, read_text, shared_dir

CASES = int(os.environ.get("HLOFUSE_FUZZ_CASES", "2500"))
SEED = int(os.environ.get("HLOFUSE_FUZZ_SEED", "20261125"))
TIMEOUT_S = 30  # per case; the largest seeds replay in well under a second
PIPELINES = (("gpu", "legacy"), ("gpu", "priority"), ("cpu", "cpu"))


# ------------------------------------------------------------------------------------------
# Seeds: small real modules, in hlofuse's canonical print (one instruction per line)
# ------------------------------------------------------------------------------------------


def _seeds() -> list[tuple[str, str]]:
    paths = []
    corpus = shared_dir() / "corpus" / "fusion"
    if corpus.is_dir():
        paths += sorted(corpus.glob("*.hlo"))
    for path in sorted(REPO.glob("sample_dumps/*/*/*.txt")):
        if "before_fusion" in path.name or "after_optimizations." in path.name:
            paths.append(path)
    out = []
    for path in paths:
        if path.stat().st_size > 16_000:
            continue
        try:
            out.append((path.name, hlofuse.dumps(hlofuse.loads(read_text(path)))))
        except HlofuseError:
            continue
    return out


SEEDS = _seeds()


# ------------------------------------------------------------------------------------------
# Mutations
# ------------------------------------------------------------------------------------------

_INSTR = re.compile(r"^(\s+)(ROOT )?(%?[\w.\-]+) = (.+?) ([a-z][a-z0-9\-]*)\((.*?)\)(.*)$")
_BINARY = ["add", "multiply", "subtract", "maximum", "minimum", "divide", "power", "atan2", "remainder"]
_UNARY = ["exponential", "log", "negate", "abs", "tanh", "sqrt", "rsqrt", "copy", "sine", "cosine", "floor",
          "logistic", "exponential-minus-one", "cbrt", "sign"]
_STRUCTURAL = ["broadcast", "reshape", "bitcast", "transpose", "slice", "reverse", "copy", "reduce",
               "concatenate", "pad", "dynamic-slice", "dynamic-update-slice", "gather", "iota", "select",
               "tuple", "get-tuple-element", "fusion", "custom-call", "while", "call", "sort", "dot"]
_TYPES = ["f32", "bf16", "f16", "f64", "s32", "s8", "pred", "u32", "c64"]
_SIZES = [0, 1, 2, 3, 7, 31, 33, 64, 1000, 1 << 20, 1 << 31, 1 << 40]
_ARRAY = re.compile(r"\b([a-z]+\d*)\[([\d,]*)\](\{[^{}]*\})?")


class _Text:
    """The lines of a module and, per instruction line, its parts."""

    def __init__(self, text: str):
        self.lines = text.split("\n")

    def instructions(self) -> list[int]:
        return [i for i, line in enumerate(self.lines) if _INSTR.match(line)]

    def parts(self, i: int):
        return list(_INSTR.match(self.lines[i]).groups())

    def put(self, i: int, parts) -> None:
        indent, root, name, shape, opcode, operands, rest = parts
        self.lines[i] = f"{indent}{root or ''}{name} = {shape} {opcode}({operands}){rest}"

    def computation_of(self, i: int) -> list[int]:
        """Instruction lines of the computation that holds line `i`."""
        start = i
        while start > 0 and not self.lines[start - 1].rstrip().endswith("{"):
            start -= 1
        end = i
        while end + 1 < len(self.lines) and self.lines[end + 1].strip() != "}":
            end += 1
        return [k for k in range(start, end + 1) if _INSTR.match(self.lines[k])]

    def text(self) -> str:
        return "\n".join(self.lines)


def _operands(text: str) -> list[str]:
    return [o.strip() for o in text.split(",")] if text.strip() else []


def mutate(text: str, rng: random.Random) -> str:
    """One to three of the edits below; most keep the module valid HLO, some do not (those the
    verifier must reject cleanly)."""
    t = _Text(text)
    for _ in range(rng.randint(1, 3)):
        rows = t.instructions()
        if not rows:
            break
        i = rng.choice(rows)
        indent, root, name, shape, opcode, operands, rest = parts = t.parts(i)
        kind = rng.randrange(16)
        if kind == 0:  # one dimension of one instruction
            arrays = list(_ARRAY.finditer(shape))
            if arrays:
                m = rng.choice(arrays)
                dims = [int(d) for d in m.group(2).split(",") if d]
                choice = rng.randrange(3)
                if choice == 0 and dims:
                    dims[rng.randrange(len(dims))] = rng.choice(_SIZES)
                elif choice == 1:
                    dims.append(rng.choice([1, 2]))
                elif dims:
                    dims.pop(rng.randrange(len(dims)))
                parts[3] = shape[:m.start()] + f"{m.group(1)}[{','.join(map(str, dims))}]" + shape[m.end():]
                t.put(i, parts)
        elif kind == 1:  # one size everywhere it appears in a shape
            sizes = sorted({d for m in _ARRAY.finditer(t.text()) for d in m.group(2).split(",") if d})
            if sizes:
                old, new = rng.choice(sizes), str(rng.choice(_SIZES))

                def resize(m):
                    dims = ",".join(new if d == old else d for d in m.group(2).split(","))
                    return f"{m.group(1)}[{dims}]" + (m.group(3) or "")
                t = _Text(_ARRAY.sub(resize, t.text()))
        elif kind == 2:  # one element type everywhere
            old, new = rng.choice(_TYPES), rng.choice(_TYPES)
            t = _Text(re.sub(rf"\b{old}\[", f"{new}[", t.text()))
        elif kind == 3:  # swap two operands
            ops = _operands(operands)
            if len(ops) >= 2:
                a, b = rng.sample(range(len(ops)), 2)
                ops[a], ops[b] = ops[b], ops[a]
                parts[5] = ", ".join(ops)
                t.put(i, parts)
        elif kind == 4:  # read another instruction of the same shape
            ops = _operands(operands)
            same = [t.parts(k)[2] for k in t.computation_of(i) if k != i and t.parts(k)[3] == shape]
            if ops and same:
                ops[rng.randrange(len(ops))] = rng.choice(same)
                parts[5] = ", ".join(ops)
                t.put(i, parts)
        elif kind == 5:  # duplicate an instruction under a new name
            copy = list(parts)
            copy[1], copy[2] = None, f"{name}.fz{rng.randrange(1000)}"
            t.lines.insert(i + 1, "")
            t.put(i + 1, copy)
        elif kind == 6:  # delete an instruction; its users read one of the same shape, if any
            same = [t.parts(k)[2] for k in t.computation_of(i) if k != i and t.parts(k)[3] == shape]
            if same:
                other = rng.choice(same)
                t = _Text(re.sub(rf"(?<=[(, ]){re.escape(name)}(?=[,)])", other, t.text()))
            del t.lines[i]
        elif kind == 7:  # another opcode of the same family
            if opcode in _BINARY:
                parts[4] = rng.choice(_BINARY)
            elif opcode in _UNARY:
                parts[4] = rng.choice(_UNARY)
            else:
                parts[4] = rng.choice(_STRUCTURAL)
            t.put(i, parts)
        elif kind == 8:  # a number in the attributes (dimensions=, slice=, index=, padding=...)
            numbers = list(re.finditer(r"-?\d+", rest))
            if numbers:
                m = rng.choice(numbers)
                parts[6] = rest[:m.start()] + str(rng.choice([0, 1, 2, 3, 5, -1, 64, 2**31, 2**63, 10**30])) + rest[m.end():]
                t.put(i, parts)
        elif kind == 9:  # a loop's known trip count, or another backend_config
            if "known_trip_count" in rest:
                n = rng.choice(["0", "1", "3", "1000000", str(2**63 - 1), str(2**64), "-1", "x"])
                parts[6] = re.sub(r'"n":"[^"]*"', f'"n":"{n}"', rest)
            elif "backend_config" in rest:
                parts[6] = re.sub(r"backend_config=(\{.*\}|\"[^\"]*\")", rng.choice(
                    ['backend_config={}', 'backend_config={"known_trip_count":{"n":"5"}}',
                     'backend_config={"fusion_backend_config":{"kind":"__triton"}}']), rest, count=1)
            else:
                parts[6] = rest + ', backend_config={"known_trip_count":{"n":"%d"}}' % rng.choice([0, 2, 10**9])
            t.put(i, parts)
        elif kind == 10:  # a layout
            m = re.search(r"\{([\d,]+)\}", shape)
            if m:
                order = m.group(1).split(",")
                rng.shuffle(order)
                parts[3] = shape[:m.start()] + "{" + ",".join(order) + "}" + shape[m.end():]
                t.put(i, parts)
        elif kind == 11:  # a control edge from an instruction of the same computation
            others = [t.parts(k)[2] for k in t.computation_of(i) if k != i]
            if others and "control-predecessors" not in rest:
                parts[6] = rest + ", control-predecessors={%s}" % rng.choice(others)
                t.put(i, parts)
        elif kind == 12:  # move a line (XLA's text order is not its post order)
            j = rng.choice(t.computation_of(i))
            t.lines[i], t.lines[j] = t.lines[j], t.lines[i]
        elif kind == 13:  # drop an attribute
            attrs = list(re.finditer(r", (metadata|backend_config|frontend_attributes|sharding|kind|"
                                     r"dimensions|index)=", rest))
            if attrs:
                m = rng.choice(attrs)
                end = rest.find(", ", m.end())
                parts[6] = rest[:m.start()] + (rest[end:] if end >= 0 else "")
                t.put(i, parts)
        elif kind == 14:  # another fusion kind
            if "kind=k" in rest:
                parts[6] = re.sub(r"kind=k\w+", "kind=" + rng.choice(["kLoop", "kInput", "kOutput", "kCustom"]), rest)
                t.put(i, parts)
        else:  # the root moves to another instruction
            rows = t.computation_of(i)
            for k in rows:
                p = t.parts(k)
                if p[1]:
                    p[1] = None
                    t.put(k, p)
            parts = t.parts(i)
            parts[1] = "ROOT "
            t.put(i, parts)
    return t.text()


# ------------------------------------------------------------------------------------------
# Running one case
# ------------------------------------------------------------------------------------------


class _Timeout(Exception):
    pass


@contextmanager
def _time_limit(seconds: int):
    if not hasattr(signal, "SIGALRM"):  # pragma: no cover - no limit on Windows
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout(f"a case took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check_one(text: str, outcomes: Counter) -> None:
    """Parse, replay with every pipeline, print back, explain; raises on anything that is not
    an HlofuseError."""
    with _time_limit(TIMEOUT_S):
        try:
            module = hlofuse.loads(text)
        except HlofuseError:
            outcomes["not parsed"] += 1
            return
        assert cycle_error(module) is None, "the parser accepted a cycle"
        for backend, pipeline in PIPELINES:
            try:
                result = replay(module, Options(backend=backend, pipeline=pipeline))
            except HlofuseError as err:
                str(err), err.one_line()
                outcomes["rejected"] += 1
                continue
            outcomes[f"replayed {backend}/{pipeline}"] += 1
            problem = print_back_error(result.module)
            assert problem is None, f"{backend}/{pipeline}: {problem}"
            explain_result(result)
        try:
            explain(module, fused=True)
            outcomes["explained as fused"] += 1
        except HlofuseError:
            pass


def _report(case: int, origin: str, text: str, err: BaseException) -> str:
    return f"case {case} (from {origin}): {type(err).__name__}: {err}\n--- input ---\n{text[:4000]}"


@pytest.mark.skipif(not SEEDS, reason="no seed modules (sample dumps or the shared corpus)")
def test_mutated_modules_replay_explain_and_print_back():
    rng = random.Random(SEED)
    outcomes: Counter = Counter()
    for case in range(CASES):
        origin, seed = rng.choice(SEEDS)
        text = mutate(seed, rng)
        try:
            check_one(text, outcomes)
        except BaseException as err:  # noqa: BLE001 - report any escape with its input
            if isinstance(err, KeyboardInterrupt):
                raise
            pytest.fail(_report(case, origin, text, err))
    print(f"\nreplay fuzz: {CASES} mutants, {dict(sorted(outcomes.items()))}")
    # the mutants must reach the passes, not only the parser and the verifier
    for backend, pipeline in PIPELINES:
        assert outcomes[f"replayed {backend}/{pipeline}"] >= CASES // 5, outcomes


# Inputs the fuzzing found, each a crash, a hang or a module that did not print back once
# (kept so they stay fixed).
REGRESSIONS = {
    # the root fused into a dead user stays the root (it was deleted: the module printed without it)
    'root_fused': """HloModule m

ENTRY main {
  p = f32[32,32]{1,0} parameter(0)
  c = f32[] constant(1)
  b = f32[32,32]{1,0} broadcast(c), dimensions={}
  ROOT add = f32[32,32]{1,0} add(p, b)
  mul = f32[32,32]{1,0} multiply(p, add)
}
""",
    # a fusion that reads its producer twice (the fusion merger asserted the producer still had users)
    'read_twice': """HloModule m

f1 {
  p0 = f32[256] parameter(0)
  ROOT n = f32[256] negate(p0)
}

f2 {
  p0 = f32[256] parameter(0)
  p1 = f32[256] parameter(1)
  ROOT a = f32[256] add(p0, p1)
}

ENTRY e {
  x = f32[256] parameter(0)
  y = f32[256] fusion(x), kind=kLoop, calls=f1
  ROOT z = f32[256] fusion(y, y), kind=kLoop, calls=f2
}
""",
    # zero-sized arrays: reductions and transposes of nothing (ZeroDivisionError in launch sizes)
    'zero_sized': """HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  p = f32[0,1024] parameter(0)
  e = f32[0,1024] exponential(p)
  c = f32[] constant(0)
  r = f32[0] reduce(e, c), dimensions={1}, to_apply=add
  n = f32[0] negate(r)
  q = f16[0,64,32] parameter(1)
  t = f16[32,64,0] transpose(q), dimensions={2,1,0}
  m = f16[32,64,0] negate(t)
  ROOT o = (f32[0], f16[32,64,0]) tuple(n, m)
}
""",
    # a control edge inside a fused computation, to a parameter a pass renames ('p1' is not defined)
    'control_in_body': """HloModule m

fused_add {
  p0 = f32[32] parameter(0)
  p1 = f32[32] parameter(1)
  ROOT add = f32[32] add(p0, p1)
}

fused_reduce {
  p0 = f32[32] parameter(0)
  p1 = f32[64] parameter(1)
  s = f32[32] slice(p1), slice={[0:32]}
  a = f32[32] add(p0, s)
  ROOT n = f32[32] negate(a), control-predecessors={p1}
}

ENTRY e {
  x = f32[32] parameter(0)
  y = f32[64] parameter(1)
  add = f32[32] fusion(x, x), kind=kLoop, calls=fused_add
  ROOT r = f32[32] fusion(add, y), kind=kLoop, calls=fused_reduce
}
""",
    # a loop body returning a bitcast to a tuple type (explain traced it forever)
    'tuple_bitcast_loop': """HloModule m

b {
  a = (s8[]) parameter(0)
  g = s8[] get-tuple-element(a), index=0
  c = s8[] add(g, g)
  ROOT t = (s8[]) bitcast(g)
}

c {
  p = (s8[]) parameter(0)
  ROOT r = pred[] constant(true)
}

ENTRY e {
  p = (s8[]) parameter(0)
  ROOT r = (s8[]) while(p), condition=c, body=b
}
""",
    # a fusion whose computation returns its parameter, fused as a multi-output producer (IndexError)
    'root_parameter': """HloModule test_module

square {
  p = f32[16384]{0} parameter(0)
}

exp {
  p = f32[16384]{0} parameter(0)
  ROOT e = f32[16384]{0} exponential(p)
}

log {
  p = f32[16384]{0} parameter(0)
  ROOT l = f32[16384]{0} log(p)
}

ENTRY main {
  p = f32[16384]{0} parameter(0)
  s = f32[16384]{0} fusion(p), kind=kLoop, calls=square
  l = f32[16384]{0} fusion(s), kind=kInput, calls=log
  ROOT t = (f32[16384], f32[16384]) tuple(l, s)
}

""",
    # a kLoop scatter fusion whose buffer got fused in, then asked about a constant (TypeError)
    'scatter_loop': """HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

fused {
  p0 = f32[64,32] parameter(0)
  p1 = s32[16,1] parameter(1)
  p2 = f32[16,1,32] parameter(2)
  ROOT s = f32[64,32] scatter(p0, p1, p2), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}

ENTRY e {
  c = f32[] constant(0)
  b = f32[64,32] broadcast(c), dimensions={}
  i = s32[16,1] parameter(0)
  u = f32[16,1,32] parameter(1)
  ROOT f = f32[64,32] fusion(b, i, u), kind=kLoop, calls=fused
}
""",
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_fuzz_regressions(name):
    outcomes: Counter = Counter()
    check_one(REGRESSIONS[name], outcomes)
    assert all(outcomes[f"replayed {b}/{p}"] == 1 for b, p in PIPELINES), outcomes


# ------------------------------------------------------------------------------------------
# Deep modules
# ------------------------------------------------------------------------------------------


def nested_calls(depth: int) -> str:
    """`depth` computations, each calling the next (XLA's call graph has no depth limit)."""
    comps = [f"c{depth} {{\n  p = f32[8] parameter(0)\n  ROOT r = f32[8] exponential(p)\n}}\n"]
    for k in range(depth - 1, 0, -1):
        comps.append(f"c{k} {{\n  p = f32[8] parameter(0)\n  n = f32[8] negate(p)\n"
                     f"  ROOT r = f32[8] call(n), to_apply=c{k + 1}\n}}\n")
    entry = "ENTRY e {\n  p = f32[8] parameter(0)\n  ROOT r = f32[8] call(p), to_apply=c1\n}\n"
    return "HloModule deep_calls\n\n" + "\n".join(comps) + "\n" + entry


def nested_loops(depth: int) -> str:
    """`depth` while loops, each body running the next loop."""
    state = "(s32[], f32[8])"
    comps = []
    for k in range(depth, 0, -1):
        inner = (f"  w = {state} while(t), condition=cond{k + 1}, body=body{k + 1}\n" if k < depth else
                 f"  w = {state} tuple(i, x)\n")
        comps.append(
            f"cond{k} {{\n  s = {state} parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
            f"  c = s32[] constant(2)\n  ROOT lt = pred[] compare(i, c), direction=LT\n}}\n")
        comps.append(
            f"body{k} {{\n  s = {state} parameter(0)\n  i0 = s32[] get-tuple-element(s), index=0\n"
            f"  one = s32[] constant(1)\n  i = s32[] add(i0, one)\n  x0 = f32[8] get-tuple-element(s), index=1\n"
            f"  x = f32[8] sine(x0)\n  t = {state} tuple(i, x)\n{inner}"
            f"  wi = s32[] get-tuple-element(w), index=0\n  wx = f32[8] get-tuple-element(w), index=1\n"
            f"  ROOT out = {state} tuple(i, wx)\n}}\n")
    entry = (f"ENTRY e {{\n  p = f32[8] parameter(0)\n  z = s32[] constant(0)\n  t = {state} tuple(z, p)\n"
             f"  ROOT w = {state} while(t), condition=cond1, body=body1\n}}\n")
    return "HloModule deep_loops\n\n" + "\n".join(comps) + "\n" + entry


def long_chain(length: int) -> str:
    """One computation: a chain of `length` elementwise instructions."""
    lines = ["  x0 = f32[8] parameter(0)"]
    ops = ["negate", "exponential", "sine", "tanh"]
    for k in range(1, length):
        lines.append(f"  x{k} = f32[8] {ops[k % 4]}(x{k - 1})")
    lines[-1] = "  ROOT" + lines[-1][1:]
    return "HloModule chain\n\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


@pytest.mark.parametrize("make, size", [(nested_calls, 1000), (nested_loops, 1000), (long_chain, 1200)],
                         ids=["1000 nested calls", "1000 nested loops", "a chain of 1200"])
def test_deep_modules_replay_and_explain_without_recursion(make, size):
    """Deeper than Python's recursion limit.  (A chain fuses into one kernel that grows by one
    instruction per step and is priced anew each time, as XLA prices it: quadratic, so it is
    kept short; explaining 1,000 nested loops traces each value out through every enclosing
    loop, so the replays of that module are explained once, as the fused module.)"""
    module = hlofuse.loads(make(size))
    for backend, pipeline in PIPELINES:
        result = replay(module, Options(backend=backend, pipeline=pipeline))
        assert print_back_error(result.module) is None
        if make is not nested_loops:
            assert explain_result(result).kernels
    assert explain(module, fused=True).kernels

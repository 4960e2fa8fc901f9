"""How many of XLA:CPU's kernels the replay reproduces exactly, per program.

For every program of sample_dumps/cpu and sample_dumps/cpu-noynn (or the dump folders given
on the command line), replay XLA:CPU's `fusion` pass on XLA's before-fusion snapshot and
compare the kernels with XLA's after-fusion snapshot (`...after_fusion.before_fusion-wrapper`).

Kernels are compared by structure, never by name (XLA renames the instructions it clones):
a kernel is its computation, its opcode or fusion kind, its shape, the multiset of fused
instructions (opcode and shape), the multiset of edges between them, and its operand shapes.
A kernel of XLA's module is reproduced when the replay has a kernel with the same signature
(multiset intersection per computation).  With --check, the lead's `hlofuse.check` (which maps
kernels back to before-fusion instructions) is reported beside it when it is importable.

    .venv/bin/python bench/cpu_agreement.py                 # table over sample_dumps
    .venv/bin/python bench/cpu_agreement.py DIR [DIR...]    # other XLA:CPU dump folders
    .venv/bin/python bench/cpu_agreement.py --diff mlp      # the kernels that differ, with decisions
    .venv/bin/python bench/cpu_agreement.py --scaling       # replay time on 1k/10k/100k instructions

Measured (jax 0.10.2 dumps, XLA 5a9e73cb): the 48 sample programs (351 XLA kernels) and 224
further programs compiled for measurement only, 112 with and 112 without YNN library fusion
(1037 XLA kernels): every XLA kernel reproduced (100%), and every fusion and fused-computation
name equal to XLA's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hlofuse import graph as g  # noqa: E402
from hlofuse.parse import parse_text  # noqa: E402
from hlofuse.pipeline import Options, kernels_of, replay  # noqa: E402


def _shape(shape) -> str:
    return shape.to_text(layout=False)


def kernel_signature(node: g.Node) -> tuple:
    """What a kernel computes, independent of instruction names."""
    operands = tuple(sorted(_shape(op.shape) for op in node.operands))
    if node.fused is None:
        return ("op", node.opcode, _shape(node.shape), operands)
    body = node.fused.nodes()
    ops = Counter((n.opcode, _shape(n.shape)) for n in body if n.opcode != "parameter")
    edges = Counter((op.opcode, n.opcode, i) for n in body for i, op in enumerate(n.operands))
    return ("fusion", node.fusion_kind, _shape(node.shape), operands,
            tuple(sorted(ops.items())), tuple(sorted(edges.items())))


def kernel_table(module) -> dict[str, Counter]:
    """Per computation: the multiset of kernel signatures (names of each signature kept aside)."""
    program = g.Program.from_module(module)
    out: dict[str, Counter] = {}
    for kernel in kernels_of(program):
        node = program.graphs[kernel.computation][kernel.name]
        out.setdefault(kernel.computation, Counter())[kernel_signature(node)] += 1
    return out


def kernel_names(module) -> dict[tuple, list[str]]:
    program = g.Program.from_module(module)
    names: dict[tuple, list[str]] = {}
    for kernel in kernels_of(program):
        node = program.graphs[kernel.computation][kernel.name]
        names.setdefault((kernel.computation, kernel_signature(node)), []).append(kernel.name)
    return names


@dataclass
class Agreement:
    program: str
    build: str
    xla_kernels: int
    ours: int
    reproduced: int
    seconds: float
    missing: list = field(default_factory=list)  # (computation, XLA kernel names)
    extra: list = field(default_factory=list)  # (computation, our kernel names)
    result: object = None

    @property
    def fraction(self) -> float:
        return self.reproduced / self.xla_kernels if self.xla_kernels else 1.0


def agreement(before_path: Path, after_path: Path, program: str = "", build: str = "") -> Agreement:
    before = parse_text(before_path.read_text(), str(before_path))
    after = parse_text(after_path.read_text(), str(after_path))
    start = time.perf_counter()
    result = replay(before, Options(backend="cpu", passes=("fusion",)))
    seconds = time.perf_counter() - start
    theirs, ours = kernel_table(after), kernel_table(result.module)
    their_names, our_names = kernel_names(after), kernel_names(result.module)
    total = sum(sum(c.values()) for c in theirs.values())
    mine = sum(sum(c.values()) for c in ours.values())
    same = 0
    missing, extra = [], []
    for comp in sorted(set(theirs) | set(ours)):
        a, b = theirs.get(comp, Counter()), ours.get(comp, Counter())
        same += sum((a & b).values())
        for sig in (a - b):
            missing.append((comp, their_names.get((comp, sig), ["?"])))
        for sig in (b - a):
            extra.append((comp, our_names.get((comp, sig), ["?"])))
    return Agreement(program, build, total, mine, same, seconds, missing, extra, result)


def sample_programs(builds=("cpu", "cpu-noynn")) -> list[tuple[str, str, Path, Path]]:
    """(build, program, before-fusion file, after-fusion file) for each sample program."""
    manifest = json.loads((REPO / "sample_dumps" / "MANIFEST.json").read_text())
    out = []
    for entry in manifest["programs"]:
        if entry.get("build") not in builds:
            continue
        files = entry.get("files") or {}
        if not files.get("before_fusion") or not files.get("after_fusion"):
            continue
        folder = REPO / "sample_dumps" / entry["path"]
        before, after = folder / files["before_fusion"], folder / files["after_fusion"]
        if before.is_file() and after.is_file():
            out.append((entry["build"], entry["program"], before, after))
    return sorted(out)


def folder_programs(folder: Path) -> list[tuple[str, str, Path, Path]]:
    """Pairs of before/after `fusion` snapshots in an XLA:CPU dump folder (recursively)."""
    out = []
    for before in sorted(folder.rglob("*.before_fusion.txt")):
        stem = before.name.split(".")[1] if before.name.startswith("module_") else before.stem
        afters = sorted(before.parent.glob(before.name.split(".")[0] + ".*after_fusion.before_fusion-wrapper.txt"))
        if afters:
            out.append((folder.name, f"{before.parent.name}/{stem}", before, afters[0]))
    return out


def lead_check(before_path: Path, after_path: Path) -> float | None:
    """Agreement by the lead's `hlofuse.check`, when that module is importable."""
    try:
        from hlofuse.check import check
    except Exception:  # not landed yet, or broken while being written
        return None
    try:
        before = parse_text(before_path.read_text(), str(before_path))
        after = parse_text(after_path.read_text(), str(after_path))
        return check(before, after, Options(backend="cpu", passes=("fusion",))).agreement
    except Exception:
        return None


def synthetic_module(blocks: int, seed: int = 0) -> str:
    """A module of `7 * blocks` instructions: chains of add/exp/multiply/reduce/broadcast/
    subtract over f32[64,64] values picked among the last dozen, some of them returned in the
    output tuple (so the do-not-duplicate analysis has long paths and a wide consumer)."""
    import random

    rnd = random.Random(seed)
    lines = ["HloModule synthetic", "sum {", "  a = f32[] parameter(0)", "  b = f32[] parameter(1)",
             "  ROOT c = f32[] add(a, b)", "}", "ENTRY e {"]
    lines += [f"  p{i} = f32[64,64] parameter({i})" for i in range(4)]
    values, outs = [f"p{i}" for i in range(4)], []
    for k in range(blocks):
        a, c = rnd.choice(values[-12:]), rnd.choice(values[-12:])
        lines += [f"  add{k} = f32[64,64] add({a}, {c})", f"  exp{k} = f32[64,64] exponential(add{k})",
                  f"  mul{k} = f32[64,64] multiply(exp{k}, {a})", f"  z{k} = f32[] constant(0)",
                  f"  red{k} = f32[64] reduce(mul{k}, z{k}), dimensions={{1}}, to_apply=sum",
                  f"  bc{k} = f32[64,64] broadcast(red{k}), dimensions={{0}}",
                  f"  sub{k} = f32[64,64] subtract(mul{k}, bc{k})"]
        values += [f"mul{k}", f"sub{k}", f"add{k}"]
        if rnd.random() < 0.05:
            outs.append(f"sub{k}")
    outs.append(values[-1])
    lines += [f"  ROOT t = ({', '.join(['f32[64,64]'] * len(outs))}) tuple({', '.join(outs)})", "}"]
    return "\n".join(lines)


def scaling(sizes=(150, 1500, 14000)) -> None:
    """Replay time of `fusion` on synthetic modules of about 1k, 10k and 100k instructions."""
    print(f"{'instructions':>12} {'kernels':>8} {'parse s':>8} {'replay s (CPU time)':>20}")
    for blocks in sizes:
        text = synthetic_module(blocks)
        start = time.process_time()
        module = parse_text(text, "synthetic")
        parsed = time.process_time() - start
        start = time.process_time()
        result = replay(module, Options(backend="cpu", passes=("fusion",)))
        print(f"{module.instruction_count:12} {len(result.kernels):8} {parsed:8.1f} {time.process_time() - start:20.1f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="XLA:CPU dump folders (default: sample_dumps)")
    parser.add_argument("--diff", metavar="PROGRAM", help="show the differing kernels of these programs")
    parser.add_argument("--check", action="store_true", help="also report hlofuse.check's agreement")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--scaling", action="store_true",
                        help="time the replay on synthetic modules of ~1k, 10k and 100k instructions instead")
    args = parser.parse_args(argv)
    if args.scaling:
        scaling()
        return 0
    programs = [p for f in args.folders for p in folder_programs(f)] if args.folders else sample_programs()
    rows = []
    for build, program, before, after in programs:
        if args.diff and args.diff not in program:
            continue
        a = agreement(before, after, program, build)
        rows.append((a, lead_check(before, after) if args.check else None))
    if args.json:
        print(json.dumps([{"build": a.build, "program": a.program, "xla_kernels": a.xla_kernels, "ours": a.ours,
                           "reproduced": a.reproduced, "agreement": round(a.fraction, 4),
                           "seconds": round(a.seconds, 3), "check": c} for a, c in rows], indent=1))
        return 0
    print(f"{'build':10} {'program':28} {'XLA':>5} {'ours':>5} {'same':>5} {'agree':>7} {'check':>7} {'sec':>6}")
    for a, c in rows:
        check_text = f"{c:7.1%}" if c is not None else "      -"
        print(f"{a.build:10} {a.program:28} {a.xla_kernels:5} {a.ours:5} {a.reproduced:5} {a.fraction:7.1%} "
              f"{check_text} {a.seconds:6.2f}")
        if args.diff:
            for comp, names in a.missing:
                print(f"    missing (XLA has) {comp}: {', '.join(names)}")
            for comp, names in a.extra:
                print(f"    extra   (we have) {comp}: {', '.join(names)}")
    for build in sorted({a.build for a, _ in rows}):
        sel = [a for a, _ in rows if a.build == build]
        mean = sum(a.fraction for a in sel) / len(sel)
        exact = sum(1 for a in sel if a.reproduced == a.xla_kernels == a.ours)
        print(f"{build}: {len(sel)} programs, mean agreement {mean:.1%}, identical kernel sets {exact}/{len(sel)}, "
              f"replay {sum(a.seconds for a in sel):.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

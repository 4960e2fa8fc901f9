#!/usr/bin/env python3
"""Count kernels in the after_optimizations dumps of sample_dumps/ (standard library only).

    python sample_dumps/summarize.py                 # table of every program folder
    python sample_dumps/summarize.py --readme        # also rewrite the table in README.md
    python sample_dumps/summarize.py --json          # the counts as JSON

A deliberately small reader of XLA's HLO text, independent of hlofuse's parser: it splits the
module into computations and instructions with regular expressions, which is enough to count.

What counts as a kernel: every instruction of a computation that launches work on the device,
i.e. fusions, custom calls and any other op except parameter, constant, tuple,
get-tuple-element, bitcast and control flow (while, conditional, call), which are not kernels;
the kernels of a `call`ed computation (legacy command buffers) are counted where it is called.
`copy` instructions are counted apart (XLA:GPU runs them as device-to-device copies).
Per loop iteration: the kernels of the while body plus those of its condition.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent

NOT_KERNELS = {
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "while", "conditional",
    "call", "after-all", "add-dependency", "opt-barrier", "partition-id", "replica-id", "domain",
}

HEADER_RE = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s.*\{\s*$")
INSTR_RE = re.compile(r"^\s+(ROOT\s+)?%?([^\s=]+)\s*=\s*(.*)$")


@dataclass
class Instr:
    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: str
    root: bool


@dataclass
class Comp:
    name: str
    entry: bool
    instrs: list[Instr] = field(default_factory=list)

    def root(self) -> Instr:
        return next((i for i in self.instrs if i.root), self.instrs[-1])

    def users(self, name: str) -> list[Instr]:
        return [i for i in self.instrs if name in i.operands]


def _balanced(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index just past the bracket that closes the one at `start`."""
    depth = 0
    for k in range(start, len(text)):
        if text[k] == open_ch:
            depth += 1
        elif text[k] == close_ch:
            depth -= 1
            if depth == 0:
                return k + 1
    return len(text)


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_instr(line: str) -> Instr | None:
    m = INSTR_RE.match(line)
    if not m:
        return None
    root, name, rest = bool(m[1]), m[2], m[3]
    if rest.startswith("("):  # tuple shape
        pos = _balanced(rest, 0, "(", ")")
    else:
        pos = rest.find(" ")
    shape = re.sub(r"\{[^}]*\}", "", rest[:pos])  # without layouts
    rest = rest[pos:].lstrip()
    om = re.match(r"([a-z][\w\-]*)\(", rest)
    if not om:
        return None
    opcode = om[1]
    close = _balanced(rest, om.end() - 1, "(", ")")
    inner = re.sub(r"/\*.*?\*/", "", rest[om.end():close - 1])  # /*index=5*/ markers
    operands = [p.split()[-1].lstrip("%") for p in _split_top(inner)]
    return Instr(name, shape, opcode, operands, rest[close:], root)


def parse_module(text: str) -> dict[str, Comp]:
    comps: dict[str, Comp] = {}
    cur: Comp | None = None
    for line in text.splitlines():
        if cur is None:
            if line.startswith("HloModule") or line.startswith(" "):
                continue
            m = HEADER_RE.match(line)
            if m:
                cur = Comp(m[2], bool(m[1]))
                comps[cur.name] = cur
            continue
        if line.startswith("}"):
            cur = None
            continue
        ins = parse_instr(line)
        if ins:
            cur.instrs.append(ins)
    return comps


def _attr(ins: Instr, key: str) -> str | None:
    m = re.search(r"\b%s=%%?([\w.\-]+)" % re.escape(key), ins.attrs)
    return m[1] if m else None


def is_kernel(ins: Instr) -> bool:
    return ins.opcode not in NOT_KERNELS and ins.opcode != "copy"


def kernel_names(comp: Comp, comps: dict[str, Comp] | None = None) -> list[Instr]:
    """Kernels of `comp`, including those of computations it `call`s: the legacy build wraps
    runs of kernels in `command_buffer` computations (CUDA graphs) called from the entry."""
    out = []
    for i in comp.instrs:
        if is_kernel(i):
            out.append(i)
        elif i.opcode == "call" and comps is not None:
            callee = _attr(i, "to_apply") or _attr(i, "calls")
            if callee in comps:
                out += kernel_names(comps[callee], comps)
    return out


def copies(comp: Comp, comps: dict[str, Comp]) -> int:
    n = 0
    for i in comp.instrs:
        if i.opcode == "copy":
            n += 1
        elif i.opcode == "call":
            callee = _attr(i, "to_apply") or _attr(i, "calls")
            if callee in comps:
                n += copies(comps[callee], comps)
    return n


def _target(ins: Instr) -> str:
    m = re.search(r'custom_call_target="([^"]+)"', ins.attrs)
    return m[1] if m else ""


def _contains(comps: dict[str, Comp], ins: Instr, opcode: str) -> bool:
    called = _attr(ins, "calls")
    return ins.opcode == opcode or bool(
        called and called in comps and any(i.opcode == opcode for i in comps[called].instrs))


def kernel_readers(comp: Comp, name: str) -> list[str]:
    """Kernels of `comp` that read the value `name` (through get-tuple-element and bitcast)."""
    out, todo, seen = [], [name], set()
    while todo:
        n = todo.pop()
        for u in comp.users(n):
            if u.name in seen:
                continue
            seen.add(u.name)
            if u.opcode in ("get-tuple-element", "bitcast"):
                todo.append(u.name)
            elif is_kernel(u):
                out.append(u.name)
    return sorted(out)


def while_loops(comps: dict[str, Comp]) -> list[tuple[Instr, Comp, Comp]]:
    entry = next(c for c in comps.values() if c.entry)
    return [(w, comps[_attr(w, "body")], comps[_attr(w, "condition")])
            for w in entry.instrs if w.opcode == "while"]


def concat_users_before_fusion(text: str) -> list[list[str]]:
    """Per while loop: the concatenates of its body with several users, before fusion."""
    comps = parse_module(text)
    return [[f"{i.shape} ({len(body.users(i.name))} users)" for i in body.instrs
             if i.opcode == "concatenate" and len(body.users(i.name)) > 1]
            for _, body, _ in while_loops(comps)]


@dataclass
class Summary:
    entry_kernels: int
    entry_copies: int
    loops: list[dict]


def summarize_text(text: str) -> Summary:
    comps = parse_module(text)
    entry = next(c for c in comps.values() if c.entry)
    loops = []
    for w, body, cond in while_loops(comps):
        trip = re.search(r'known_trip_count":\{"n":"(\d+)"', w.attrs)
        bk, ck = kernel_names(body, comps), kernel_names(cond, comps)
        root = body.root()
        concat_kernels = {i.name: kernel_readers(body, i.name) for i in bk
                          if _contains(comps, i, "concatenate")}
        loops.append({
            "while": w.name,
            "trip_count": int(trip[1]) if trip else None,
            "body_kernels": len(bk),
            "cond_kernels": len(ck),
            "per_iteration": len(bk) + len(ck),
            "body_copies": copies(body, comps),
            "fusions": sum(i.opcode == "fusion" for i in bk),
            "custom_calls": sorted(_target(i) for i in bk if i.opcode == "custom-call"),
            "other_ops": sorted(i.opcode for i in bk if i.opcode not in ("fusion",
                                                                          "custom-call")),
            "nested_loops": sum(i.opcode == "while" for i in body.instrs),
            "root_tuple": len(root.operands) if root.opcode == "tuple" else 0,
            "concat_kernels": concat_kernels,
        })
    return Summary(
        entry_kernels=len(kernel_names(entry, comps)),
        entry_copies=copies(entry, comps),
        loops=loops,
    )


def boundaries(loop: dict, concat_before: list[str] | None) -> str:
    out = []
    if loop["root_tuple"]:
        out.append(f"tuple({loop['root_tuple']}) at loop output")
    rng = [t for t in loop["custom_calls"] if "threefry" in t]
    if rng:
        out.append(f"{len(rng)}x custom-call {rng[0]}")
    if concat_before:
        out.append("before fusion, concatenate " + ", ".join(concat_before))
    read = [f"{k} → {', '.join(v)}" for k, v in loop["concat_kernels"].items() if v]
    if read:
        out.append("concatenating kernel read by another: " + "; ".join(read))
    return "; ".join(out)


def collect(root: Path = HERE) -> list[dict]:
    manifest = json.loads((root / "MANIFEST.json").read_text())
    rows = []
    for e in manifest["programs"]:
        folder = root / e["path"]
        s = summarize_text((folder / e["files"]["after_optimizations"]).read_text())
        before = e["files"].get("before_fusion")
        concat = concat_users_before_fusion((folder / before).read_text()) if before else []
        rows.append({"entry": e, "summary": s, "concat_before_fusion": concat})
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| folder | program | variant | entry kernels | loop: trip count | kernels per "
        "iteration (body + cond) | copies per iteration | boundaries in the loop | regenerate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        e, s = r["entry"], r["summary"]
        loops = s.loops
        if loops:
            trip = ", ".join(str(lp["trip_count"]) for lp in loops)
            per = ", ".join(f"{lp['per_iteration']} ({lp['body_kernels']} + "
                            f"{lp['cond_kernels']})" for lp in loops)
            copies = ", ".join(str(lp["body_copies"]) for lp in loops)
            cb = r["concat_before_fusion"]
            bnd = " / ".join(boundaries(lp, cb[k] if k < len(cb) else None)
                             for k, lp in enumerate(loops))
        else:
            trip = per = copies = bnd = "–"
        gpu = f" --gpu {e['gpu']}" if e.get("gpu") else ""
        cmd = f"`generate.py --build {e['build']}{gpu} --program {e['program']}`"
        lines.append(f"| {e['folder']} | {e['program']} | {e.get('variant') or e.get('description', '')} | "
                     f"{s.entry_kernels} | {trip} | {per} | {copies} | {bnd} | {cmd} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--readme", action="store_true", help="rewrite the table in README.md")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    rows = collect()
    if a.json:
        print(json.dumps([{"path": r["entry"]["path"], **r["summary"].__dict__,
                           "concat_users_before_fusion": r["concat_before_fusion"]}
                          for r in rows], indent=1))
        return 0
    t = table(rows)
    print(t)
    if a.readme:
        readme = HERE / "README.md"
        text = readme.read_text()
        start, end = "<!-- counts:start -->", "<!-- counts:end -->"
        i, j = text.index(start) + len(start), text.index(end)
        readme.write_text(text[:i] + "\n" + t + "\n" + text[j:])
    return 0


if __name__ == "__main__":
    sys.exit(main())

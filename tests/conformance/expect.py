"""The MANIFEST.jsonl `expect` format, checked against a replayed module.

Selectors and patterns mirror XLA's pattern matcher as the corpus README describes them
(shared/corpus/README.md, "expect semantics").  They are matched on `hlofuse.graph` nodes, so
user order is XLA's (the order uses were created).  `check_expectations` returns a list of
mismatch descriptions (empty when everything asserted holds).
"""

from __future__ import annotations

import re
from collections import Counter

from hlofuse.attributes import int_list
from hlofuse.graph import Node, Program

_STEP_RE = re.compile(r"\.?(operand|user)\((\d+)\)|\.?(fused_root)|^(ROOT)|^PARAM\((\d+)\)")


class SelectorError(LookupError):
    pass


def select(program: Program, selector: str) -> Node:
    """Resolve `ROOT.operand(0).fused_root`, `PARAM(1).user(0)`, ... in the entry computation."""
    node: Node | None = None
    pos = 0
    while pos < len(selector):
        m = _STEP_RE.match(selector, pos)
        if m is None:
            raise SelectorError(f"cannot parse selector {selector!r} at {selector[pos:]!r}")
        pos = m.end()
        if m.group(4):
            node = program.entry.root
        elif m.group(5) is not None:
            params = program.entry.parameters
            n = int(m.group(5))
            node = next((p for p in params if p.parameter_number == n), None)
        elif m.group(3):
            if node is None or node.fused is None:
                raise SelectorError(f"{selector}: {node and node.name} is not a fusion")
            node = node.fused.root
        else:
            kind, idx = m.group(1), int(m.group(2))
            items = node.operands if kind == "operand" else node.users
            if node is None or idx >= len(items):
                raise SelectorError(f"{selector}: {node and node.name} has no {kind} {idx}")
            node = items[idx]
        if node is None:
            raise SelectorError(f"{selector}: nothing there")
    if node is None:
        raise SelectorError(f"empty selector {selector!r}")
    return node


def match(node: Node, pattern: dict, where: str = "") -> list[str]:
    """Mismatches between `node` and a pattern (empty list when it matches)."""
    out: list[str] = []
    here = where or node.name
    op = pattern.get("op")
    if op not in (None, "*") and node.opcode != op:
        return [f"{here}: expected {op}, found {node.opcode} ({node.name})"]
    if "not_op" in pattern and node.opcode == pattern["not_op"]:
        out.append(f"{here}: must not be {pattern['not_op']}")
    if "kind" in pattern and node.fusion_kind != pattern["kind"]:
        out.append(f"{here}: expected kind {pattern['kind']}, found {node.fusion_kind}")
    if "multi_output" in pattern:
        is_mof = node.opcode == "fusion" and node.fused is not None and node.fused.root.opcode == "tuple"
        if is_mof != bool(pattern["multi_output"]):
            out.append(f"{here}: multi_output expected {pattern['multi_output']}")
    if "param_index" in pattern and (node.opcode != "parameter" or node.parameter_number != pattern["param_index"]):
        out.append(f"{here}: expected parameter({pattern['param_index']})")
    if "tuple_index" in pattern and int(node.attr("index") or -1) != pattern["tuple_index"]:
        out.append(f"{here}: expected tuple index {pattern['tuple_index']}")
    if "num_operands" in pattern and len(node.operands) != pattern["num_operands"]:
        out.append(f"{here}: expected {pattern['num_operands']} operands, found {len(node.operands)}")
    if "user_count" in pattern and len(node.users) != pattern["user_count"]:
        out.append(f"{here}: expected {pattern['user_count']} users, found {len(node.users)}")
    if "fused_instruction_count" in pattern:
        count = len(node.fused) if node.fused is not None else -1
        if count != pattern["fused_instruction_count"]:
            out.append(f"{here}: expected {pattern['fused_instruction_count']} fused instructions, found {count}")
    for key in ("lhs_contracting_dims", "rhs_contracting_dims"):
        if key in pattern and list(int_list(node.attr(key))) != list(pattern[key]):
            out.append(f"{here}: {key} differ")
    if "is_generic_triton_fusion" in pattern:
        is_triton = node.opcode == "fusion" and node.fusion_kind == "kCustom" and \
            '"__triton"' in (node.attr("backend_config") or "")
        if is_triton != bool(pattern["is_generic_triton_fusion"]):
            out.append(f"{here}: generic Triton fusion expected {pattern['is_generic_triton_fusion']}")
    if "fused_root" in pattern:
        if node.fused is None:
            out.append(f"{here}: not a fusion")
        else:
            out += match(node.fused.root, pattern["fused_root"], f"{here}.fused_root")
    if "operands" in pattern:
        want = pattern["operands"]
        if len(want) != len(node.operands):
            out.append(f"{here}: expected {len(want)} operands, found {len(node.operands)}")
        elif pattern.get("any_order") and len(want) == 2:
            straight = match(node.operands[0], want[0]) + match(node.operands[1], want[1])
            swapped = match(node.operands[0], want[1]) + match(node.operands[1], want[0])
            if straight and swapped:
                out += straight
        else:
            for i, (sub, operand) in enumerate(zip(want, node.operands)):
                out += match(operand, sub, f"{here}.operand({i})")
    for idx, sub in (pattern.get("operand_at") or {}).items():
        i = int(idx)
        if i >= len(node.operands):
            out.append(f"{here}: no operand {i}")
        else:
            out += match(node.operands[i], sub, f"{here}.operand({i})")
    return out


def fusion_counts(program: Program) -> dict:
    """The fusion counts the manifest asserts."""
    entry = [n for n in program.entry if n.opcode == "fusion"]
    non_fusion = [g for g in program.graphs.values() if not g.is_fusion_body]
    mof = sum(1 for g in non_fusion for n in g if n.opcode == "fusion" and n.fused is not None
              and n.fused.root.opcode == "tuple")
    return {
        "entry_fusion_count": len(entry),
        "entry_fusion_kind_counts": dict(Counter(n.fusion_kind for n in entry)),
        "fusion_count_all_computations": sum(1 for g in program.graphs.values() for n in g if n.opcode == "fusion"),
        "multi_output_fusion_count": mof,
    }


def check_expectations(expect: dict, program: Program, changed: bool | None) -> list[str]:
    """Everything the manifest's `expect` asserts about a module after a pass."""
    problems: list[str] = []
    if "changed" in expect and changed is not None and bool(changed) != bool(expect["changed"]):
        problems.append(f"changed: expected {expect['changed']}, replay says {changed}")
    if "root" in expect:
        problems += match(program.entry.root, expect["root"], "ROOT")
    for selector, pattern in (expect.get("instructions") or {}).items():
        try:
            problems += match(select(program, selector), pattern, selector)
        except SelectorError as err:
            problems.append(str(err))
    counts = None
    for key in ("entry_fusion_count", "entry_fusion_kind_counts", "fusion_count_all_computations",
                "multi_output_fusion_count"):
        if key in expect:
            counts = counts or fusion_counts(program)
            if counts[key] != expect[key]:
                problems.append(f"{key}: expected {expect[key]}, found {counts[key]}")
    if "fused_opcodes_multiset" in expect:  # CPU's RunFusionAndCheckOpcodesWereFused
        root = program.entry.root
        if root.fused is None:
            problems.append(f"fused_opcodes_multiset: ROOT {root.name} is not a fusion")
        else:
            found = Counter(n.opcode for n in root.fused.nodes())
            if found != Counter(expect["fused_opcodes_multiset"]):
                problems.append(f"fused_opcodes_multiset: expected {sorted(expect['fused_opcodes_multiset'])}, "
                                f"found {sorted(found.elements())}")
    for group in expect.get("distinct_instructions") or []:
        nodes = [select(program, s) for s in group]
        if len({n.uid for n in nodes}) != len(nodes):
            problems.append(f"{group}: expected distinct instructions")
    return problems

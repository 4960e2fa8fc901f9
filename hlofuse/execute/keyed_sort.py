"""Sorts and TopK by keys: a comparator that orders elements by per-element keys, read from
its HLO, turned into stable argsorts of those keys (the library's sort: CUB/Thrust on CuPy)
instead of the reference evaluator's guess of an order checked by evaluating the
comparator on every adjacent pair (execute/arrays.py's `sort`: a hundred array calls and
host synchronisations per call on a GPU).

A comparator is keyed when it is `compare(K(lhs_i), K(rhs_i), LT|GT)` for one function K of
one operand's lhs and rhs parameters that yields integers (JAX's comparators: the float's
IEEE total-order key as s32, after mapping -0 to +0 and every NaN to one NaN), or the
lexicographic form JAX builds for several keys, `select(compare(a<b, b<a, EQ), <next
comparator>, a<b)`.  Integer keys make `LT` a strict weak order, so the stable argsort by the
keys (most significant last sorted first, each later sort stable) is exactly the stable
order the reference produces, XLA's tie order included (ties keep their input order).
Anything else (float keys compared as floats, comparators mixing operands) returns None and
runs through the evaluator as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir

_INTEGER_KEYS = ("pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")


@dataclass(frozen=True)
class SortKey:
    """One key: the operand it is computed from, K as a one-parameter computation, and
    whether the comparator orders it descending (GT)."""

    operand: int
    key: ir.Computation
    descending: bool


def comparator_keys(comp: ir.Computation) -> tuple[SortKey, ...] | None:
    """The keys a comparator orders by, most significant first; None when it is not keyed."""
    return _keys(comp, comp.root, 0)


def _keys(comp: ir.Computation, instr: ir.Instruction, depth: int) -> tuple[SortKey, ...] | None:
    if depth > 8:
        return None
    if instr.opcode == "compare":
        key = _compare_key(comp, instr)
        return None if key is None else (key,)
    if instr.opcode == "select" and len(instr.operands) == 3:
        cond, tie, first = (comp[o] for o in instr.operands)
        head = _compare_key(comp, first) if first.opcode == "compare" else None
        if head is None or cond.opcode != "compare" or cond.attr("direction") != "EQ":
            return None
        u, v = (comp[o] for o in cond.operands)
        reverse = v if u.name == first.name else u if v.name == first.name else None
        if reverse is None or reverse.opcode != "compare" \
                or reverse.attr("direction") != first.attr("direction") \
                or tuple(reverse.operands) != tuple(reversed(first.operands)):
            return None
        rest = _keys(comp, tie, depth + 1)
        return None if rest is None else (head,) + rest
    return None


def _compare_key(comp: ir.Computation, instr: ir.Instruction) -> SortKey | None:
    direction = instr.attr("direction")
    if direction not in ("LT", "GT") or len(instr.operands) != 2:
        return None
    a, b = (comp[o] for o in instr.operands)
    if a.shape.element_type not in _INTEGER_KEYS:
        return None
    pa, pb = _only_parameter(comp, a), _only_parameter(comp, b)
    if pa is None or pb is None or pa.parameter_number % 2 or pb.parameter_number != pa.parameter_number + 1:
        return None
    if not _same_function(comp, a, b, pa.name, pb.name):
        return None
    needed = _ancestors(comp, a.name)
    param = ir.Instruction(pa.name, "parameter", pa.shape, literal="0")
    body = tuple(i for i in comp.instructions if i.name in needed and i.opcode != "parameter")
    key = ir.Computation(f"{comp.name}.key{pa.parameter_number // 2}", (param,) + body, a.name)
    return SortKey(pa.parameter_number // 2, key, direction == "GT")


def _only_parameter(comp: ir.Computation, instr: ir.Instruction) -> ir.Instruction | None:
    params = [comp[n] for n in _ancestors(comp, instr.name) if comp[n].opcode == "parameter"]
    return params[0] if len(params) == 1 else None


def _same_function(comp: ir.Computation, a: ir.Instruction, b: ir.Instruction, pa: str, pb: str) -> bool:
    """Whether `b` computes of parameter `pb` what `a` computes of `pa` (the same opcodes,
    shapes, attributes but metadata, literals, and operands pairwise)."""
    if a.name == pa or b.name == pb:
        return a.name == pa and b.name == pb
    if a.name == b.name:  # a shared constant
        return True
    if (a.opcode, a.shape, a.literal, a.called, len(a.operands)) != (b.opcode, b.shape, b.literal, b.called,
                                                                       len(b.operands)):
        return False
    if [kv for kv in a.attrs if kv[0] != "metadata"] != [kv for kv in b.attrs if kv[0] != "metadata"]:
        return False
    return all(_same_function(comp, comp[x], comp[y], pa, pb) for x, y in zip(a.operands, b.operands))


def _ancestors(comp: ir.Computation, name: str) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(comp[current].operands)
    return seen


def stable_order(lib, ev, keys: tuple[SortKey, ...], operands, axis: int):
    """The permutation (along `axis`, moved last) that stably sorts by `keys`: the least
    significant key sorted first, each more significant one stably after it."""
    order = None
    for sk in reversed(keys):
        key = ev.call(sk.key, [operands[sk.operand]])
        key = lib.broadcast_to(key, operands[sk.operand].shape)
        if sk.descending:
            key = ~key
        key = lib.moveaxis(key, axis, -1)
        if order is None:
            order = _argsort(lib, key)
        else:
            order = lib.take_along_axis(order, _argsort(lib, lib.take_along_axis(key, order, axis=-1)), axis=-1)
    return order


def _argsort(lib, key):
    if getattr(lib, "__name__", "") == "cupy":  # stable is CuPy's only sort
        return lib.argsort(key, axis=-1)
    return lib.argsort(key, axis=-1, kind="stable")

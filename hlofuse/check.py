"""`hlofuse check`: replay a fusion pipeline on XLA's module from right before its fusion passes
and compare the kernels with XLA's module right after them.

Kernels are compared by what they compute, not by name: XLA renames the instructions it clones
into fusions (`add.5` becomes `add.17`), so every instruction of XLA's fused module is first
mapped back to the instruction of the before-fusion module it stands for, by structure — the
same opcode, shape and attributes applied to the same (mapped) operands.  A kernel is then the
set of before-fusion instructions it computes; a kernel is reproduced exactly when the replay
has a kernel with the same set, of the same kind (kLoop, kInput, ... for fusions; the same
kernel computed by another emitter is counted as a difference, status `kind`) and writing the
same values (a multi-output fusion with an output more or less: status `outputs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from . import ir
from .decision import Decision, FusionResult, Verdict
from .kernels import CONTROL
from .opcodes import NON_KERNEL
from .pipeline import Options

#: Attributes that do not change what an instruction computes (ignored when matching).
_IGNORED_ATTRS = frozenset({
    "metadata", "backend_config", "sharding", "frontend_attributes", "control-predecessors",
    "statistics", "origin", "original_value", "calls", "to_apply", "condition", "body",
    "branch_computations", "called_computations", "true_computation", "false_computation",
    "select", "scatter", "result_accuracy", "schedule",
})


# ------------------------------------------------------------------------------------------
# Structural mapping: XLA's fused module → instructions of the before-fusion module
# ------------------------------------------------------------------------------------------


class _Index:
    """Before-fusion instructions of one computation, found by what they compute."""

    def __init__(self, comp: ir.Computation, module: ir.Module | None = None):
        self.comp = comp
        self.by_key: dict[tuple, list[str]] = {}
        self.params: dict[int, str] = {}
        #: Fusions that already exist before fusion (library fusions): name → their members,
        #: spelled as hlofuse.graph spells them (the instructions of the fused computation).
        self.fusion_members: dict[str, tuple[str, ...]] = {}
        #: Operands are compared up to CSE twins, and a single-output fusion of the input stands
        #: for its fused root: when XLA merges it into a bigger fusion (a Triton softmax absorbing
        #: its epilogue), its instructions are found inside by structure (see _cse_classes).
        self.same = _cse_classes(module) if module is not None else {}
        #: get-tuple-element of a tuple built in this computation → the element it reads: the
        #: same value, and passes after fusion (tuple simplification) replace one by the other.
        self.forward: dict[str, str] = {}
        for instr in comp.instructions:
            if instr.opcode == "get-tuple-element" and instr.operands and instr.operands[0] in comp:
                tup = comp[instr.operands[0]]
                index = int(instr.attr("index") or 0)
                if tup.opcode == "tuple" and index < len(tup.operands):
                    self.forward[instr.name] = tup.operands[index]
        bodies = []
        for instr in comp.instructions:
            if instr.opcode == "fusion" and module is not None and instr.fused_computation in module.by_name:
                body = module.by_name[instr.fused_computation]
                self.fusion_members[instr.name] = tuple(
                    i.name for i in body.instructions if i.opcode != "parameter")
                if body.root.opcode not in ("tuple", "parameter"):
                    bodies.append((instr, body))
        #: Layout-only views (transpose, reshape, bitcast, copy) by their shape with layout and
        #: operand: later passes turn such a transpose into a bitcast, which is found here.
        self.views: dict[tuple[str, str], str] = {}
        for instr in comp.instructions:
            if instr.opcode == "parameter":
                self.params[instr.parameter_number] = instr.name
            key = _key(instr.opcode, instr.shape, self._aliased(instr.operands), instr)
            self.by_key.setdefault(key, []).append(instr.name)
            if instr.opcode in ("transpose", "reshape", "bitcast", "copy") and instr.operands:
                self.views.setdefault((instr.shape.to_text(), self._aliased(instr.operands[:1])[0]), instr.name)
        for fusion, body in bodies:
            outside = {p.name: fusion.operands[p.parameter_number] for p in body.parameters
                       if p.parameter_number < len(fusion.operands)}
            for inner in body.instructions:
                if inner.opcode == "parameter":
                    continue
                operands = self._aliased(tuple(outside.get(op, op) for op in inner.operands))
                self.by_key.setdefault(_key(inner.opcode, inner.shape, operands, inner), []).append(inner.name)

    def _aliased(self, operands) -> tuple[str, ...]:
        return tuple(self.same.get(self._forwarded(op), self._forwarded(op)) for op in operands)

    def _forwarded(self, name: str) -> str:
        for _ in range(8):
            if name not in self.forward:
                break
            name = self.forward[name]
        return name

    def find(self, opcode: str, shape: ir.Shape, operands: tuple[str, ...], instr: ir.Instruction,
             name: str) -> str | None:
        operands = self._aliased(operands)
        if name in self.comp.by_name:  # same name and same structure: take it
            same = self.comp.by_name[name]
            if same.opcode == opcode and self._aliased(same.operands) == operands:
                return name
        names = self.by_key.get(_key(opcode, shape, operands, instr))
        return names[0] if names else None


def _key(opcode: str, shape: ir.Shape, operands: tuple[str, ...], instr: ir.Instruction) -> tuple:
    attrs = tuple((k, v) for k, v in instr.attrs if k not in _IGNORED_ATTRS)
    return (opcode, shape.to_text(layout=False), operands, attrs, instr.literal if opcode == "constant" else None)


def map_fused_module(after: ir.Module, before: ir.Module,
                     values: dict[tuple[str, str], str] | None = None) -> dict[str, dict[str, tuple[str, ...]]]:
    """Per computation of `after` that also exists in `before` (by name; the entry always):
    kernel-launching instruction → the before-fusion instructions it computes.  With `values`,
    also fills it with (computation, instruction) → the before-fusion instruction it stands
    for, for every instruction of `after` that stands for one (those inside a fusion keyed by
    the fused computation's name)."""
    return members_of(map_module(after, before, values))


def members_of(mapped: dict[str, dict[str, tuple[tuple, tuple]]]) -> dict[str, dict[str, tuple[str, ...]]]:
    """map_module's answer without the values each instruction writes."""
    return {comp: {k: members for k, (members, _) in kernels.items()} for comp, kernels in mapped.items()}


def map_module(after: ir.Module, before: ir.Module,
               values: dict[tuple[str, str], str] | None = None) -> dict[str, dict[str, tuple[tuple, tuple]]]:
    """map_fused_module with, per instruction, also the before-fusion values it writes (its
    outputs; None where an output maps to no instruction)."""
    out: dict[str, dict[str, tuple[tuple, tuple]]] = {}
    for comp in after.computations:
        if comp.name in after.fusion_computations:
            continue
        if comp.name == after.entry_name:
            target = before.entry
        elif comp.name in before.by_name:
            target = before.by_name[comp.name]
        else:
            continue
        out[comp.name] = _map_computation(after, comp, _Index(target, before), values)
    return out


def _map_computation(module: ir.Module, comp: ir.Computation, index: _Index,
                     values: dict[tuple[str, str], str] | None = None) -> dict[str, tuple[tuple, tuple]]:
    value: dict[str, object] = {}  # name → before name, or a tuple of them for tuple values
    members: dict[str, tuple[str, ...]] = {}
    outputs: dict[str, tuple] = {}
    for instr in comp.post_order:
        mapped_ops = tuple(value.get(op) for op in instr.operands)
        if instr.opcode == "parameter":
            value[instr.name] = index.params.get(instr.parameter_number)
            continue
        if instr.opcode == "fusion" and instr.fused_computation in module.by_name:
            existing = None
            if all(isinstance(op, str) for op in mapped_ops):
                existing = index.find("fusion", instr.shape, tuple(mapped_ops), instr, instr.name)
            body_size = sum(1 for i in module.by_name[instr.fused_computation].instructions
                            if i.opcode != "parameter")
            if (existing is not None and existing in index.fusion_members
                    and len(index.fusion_members[existing]) == body_size):
                # a fusion the input already had (e.g. an XLA:CPU library fusion): same kernel
                value[instr.name] = existing
                members[instr.name] = index.fusion_members[existing]
                outputs[instr.name] = (existing,)
                continue
            body = module.by_name[instr.fused_computation]
            result, inside, written = _map_fusion(module, body, mapped_ops, index, values)
            value[instr.name] = result
            members[instr.name] = inside
            outputs[instr.name] = written
            continue
        if instr.opcode == "get-tuple-element":
            source = mapped_ops[0]
            idx = int(instr.attr("index") or 0)
            if isinstance(source, tuple) and idx < len(source):
                value[instr.name] = source[idx]
                continue
        found = _find(index, instr, mapped_ops)
        value[instr.name] = found
        members[instr.name] = (found,) if isinstance(found, str) else ()
        outputs[instr.name] = tuple(_leaves(found))
    if values is not None:
        values.update(((comp.name, name), v) for name, v in value.items() if isinstance(v, str))
    return {name: (members[name], outputs[name]) for name in members}


def _leaves(value) -> list:
    """The before-fusion values a mapped value holds (a tuple's, flattened)."""
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _find(index: _Index, instr: ir.Instruction, mapped_ops: tuple) -> object:
    if any(not isinstance(op, str) for op in mapped_ops):
        if instr.opcode == "tuple":
            return tuple(mapped_ops)
        if instr.opcode == "bitcast" and mapped_ops:
            return mapped_ops[0]
        return None
    found = index.find(instr.opcode, instr.shape, tuple(mapped_ops), instr, instr.name)
    if found is None and instr.opcode == "bitcast" and mapped_ops:
        # a transpose or reshape that only changed the layout, made a bitcast after fusion
        found = index.views.get((instr.shape.to_text(), index._aliased(mapped_ops[:1])[0]))
    if found is None and instr.opcode in ("bitcast", "copy", "reshape") and mapped_ops:
        # XLA's layout passes add and remove bitcasts and copies; see through them.
        return mapped_ops[0]
    if found is None and instr.opcode == "tuple":
        return tuple(mapped_ops)
    return found


def _map_fusion(module: ir.Module, body: ir.Computation, operands: tuple, index: _Index,
                values: dict[tuple[str, str], str] | None = None):
    """Map a fused computation's instructions given what its parameters stand for: (the value
    of its root, the instructions inside, the values it writes)."""
    value: dict[str, object] = {}
    inside: list[str] = []
    for instr in body.post_order:
        if instr.opcode == "parameter":
            n = instr.parameter_number
            value[instr.name] = operands[n] if n < len(operands) else None
            continue
        mapped_ops = tuple(value.get(op) for op in instr.operands)
        if instr.opcode == "fusion" and instr.fused_computation in module.by_name:
            result, nested, _ = _map_fusion(module, module.by_name[instr.fused_computation], mapped_ops, index,
                                            values)
            value[instr.name] = result
            inside.extend(n for n in nested if n not in inside)
            continue
        if instr.opcode == "get-tuple-element" and isinstance(mapped_ops[0], tuple):
            idx = int(instr.attr("index") or 0)
            value[instr.name] = mapped_ops[0][idx] if idx < len(mapped_ops[0]) else None
            continue
        found = _find(index, instr, mapped_ops)
        value[instr.name] = found
        if isinstance(found, str) and found not in inside and instr.opcode not in ("tuple",):
            if not (instr.opcode == "bitcast" and found in mapped_ops):
                inside.append(found)
    if values is not None:
        values.update(((body.name, name), v) for name, v in value.items() if isinstance(v, str))
    root = body.root
    # what the kernel writes: each element of a root tuple (mapped on its own: a tuple of the
    # same values in the input is another instruction), else the root's value
    written = [value.get(op) for op in root.operands] if root.opcode == "tuple" else [value.get(body.root_name)]
    return value.get(body.root_name), tuple(inside), tuple(leaf for w in written for leaf in _leaves(w))


# ------------------------------------------------------------------------------------------
# Comparison
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelMatch:
    computation: str
    xla_kernel: str | None
    ours: str | None
    members: tuple[str, ...]
    #: exact | kind (same instructions, another fusion kind) | outputs (same instructions,
    #: other values written) | missing | extra
    status: str
    #: (XLA's kind, ours) where the status is `kind`.
    kinds: tuple[str, str] | None = None
    #: (the values XLA's kernel writes, the values ours writes) where the status is `outputs`.
    outputs: tuple[tuple[str, ...], tuple[str, ...]] | None = None


@dataclass(frozen=True)
class CheckResult:
    module: str
    backend: str
    pipeline: str
    gpu: str | None
    xla_kernels: int
    reproduced: int
    matches: tuple[KernelMatch, ...]
    #: For each missing / extra kernel: the decisions of the replay that formed its boundaries.
    decisions: dict
    replay: FusionResult
    before_path: str | None = None
    after_path: str | None = None

    @property
    def agreement(self) -> float:
        return self.reproduced / self.xla_kernels if self.xla_kernels else 1.0

    def to_dict(self) -> dict:
        return {
            "module": self.module, "backend": self.backend, "pipeline": self.pipeline, "gpu": self.gpu,
            "before": self.before_path, "after": self.after_path,
            "xla_kernels": self.xla_kernels, "reproduced": self.reproduced,
            "agreement": round(self.agreement, 4),
            "kernels": [
                {"computation": m.computation, "xla": m.xla_kernel, "ours": m.ours, "status": m.status,
                 **({"kinds": {"xla": m.kinds[0], "ours": m.kinds[1]}} if m.kinds else {}),
                 **({"outputs": {"xla": list(m.outputs[0]), "ours": list(m.outputs[1])}} if m.outputs else {}),
                 "instructions": list(m.members),
                 "decisions": [d.to_dict() for d in self.decisions.get((m.computation, m.xla_kernel, m.ours), ())]}
                for m in self.matches
            ],
        }


def xla_kernels(after: ir.Module, before: ir.Module, mapped=None) -> dict[str, dict[str, tuple[str, ...]]]:
    """XLA's kernels per computation: kernel name → before-fusion instructions it computes
    (from `mapped`, map_module's answer, when the caller has it)."""
    return members_of(_kernels_and_outputs(after, before, mapped))


def _kernels_and_outputs(after: ir.Module, before: ir.Module, mapped=None) -> dict[str, dict[str, tuple[tuple, tuple]]]:
    """xla_kernels with the before-fusion values each kernel writes."""
    from .kernels import executed_computations

    if mapped is None:
        mapped = map_module(after, before)
    # Reducers, comparators and other called bodies run inside kernels: only the entry, loop
    # bodies and conditions, branches and called computations launch kernels.
    executed = {c.name for c in executed_computations(after)}
    out: dict[str, dict[str, tuple[tuple, tuple]]] = {}
    for comp_name, found in mapped.items():
        if comp_name not in executed:
            continue
        comp = after.by_name[comp_name]
        kernels = {}
        for instr in comp.instructions:
            if instr.opcode in NON_KERNEL or instr.opcode in CONTROL:
                continue
            kernels[instr.name] = found.get(instr.name, ((), ()))
        out[comp_name] = kernels
    return out


def _cse_classes(module: ir.Module) -> dict[str, str]:
    """Before-fusion instruction → the first instruction computing the same value (same opcode,
    shape, attributes and equivalent operands; fused parameters stand for the fusion's
    operands).  XLA's CSE inside fusions keeps one of such twins — a constant fused from two
    places, the two copies of a scale factor when two Triton fusions merge — and either side
    may keep the other twin, so kernels are compared up to these classes."""
    cached = _CSE_CACHE.get(id(module))
    if cached is not None and cached[0] is module:
        return cached[1]
    out: dict[str, str] = {}
    first: dict[tuple, str] = {}

    def visit(comp: ir.Computation, params: dict[int, str]) -> None:
        for instr in comp.post_order:
            if instr.opcode == "parameter":
                out.setdefault(instr.name, params.get(instr.parameter_number, instr.name))
                continue
            operands = tuple(out.get(op, op) for op in instr.operands)
            if instr.opcode == "fusion" and instr.fused_computation in module.by_name:
                body = module.by_name[instr.fused_computation]
                visit(body, {k: op for k, op in enumerate(operands)})
            k = _key(instr.opcode, instr.shape, operands, instr)
            out.setdefault(instr.name, first.setdefault(k, instr.name))
            if instr.opcode == "fusion" and instr.fused_computation in module.by_name:
                root = module.by_name[instr.fused_computation].root
                if root.opcode not in ("tuple", "parameter"):
                    out[instr.name] = out.get(root.name, root.name)

    for comp in module.computations:
        if comp.name not in module.fusion_computations:
            visit(comp, {})
    _CSE_CACHE[id(module)] = (module, out)
    return out


_CSE_CACHE: dict[int, tuple] = {}


def compare(result: FusionResult, after: ir.Module, *, mapped=None, with_decisions: bool = True) -> CheckResult:
    """Compare a replay's kernels with XLA's fused module `after` (`mapped`: map_module's
    answer when the caller has it; without `with_decisions`, the decisions behind each
    difference are not looked up)."""
    found = _kernels_and_outputs(after, result.input, mapped)
    theirs = {comp: {k: members for k, (members, _) in kernels.items()} for comp, kernels in found.items()}
    ours: dict[str, dict[str, tuple[str, ...]]] = {}
    our_kind: dict[tuple[str, str], str] = {}
    our_outputs: dict[tuple[str, str], tuple[str, ...]] = {}
    for k in result.kernels:
        ours.setdefault(k.computation, {})[k.name] = k.instructions
        our_kind[(k.computation, k.name)] = k.kind
        our_outputs[(k.computation, k.name)] = k.outputs
    matches: list[KernelMatch] = []
    decisions: dict = {}
    total = reproduced = 0
    same = _cse_classes(result.input)

    def key(members) -> frozenset:
        return frozenset(same.get(m, m) for m in members)

    for comp in sorted(set(theirs) | set(ours)):
        x_by_set = {key(m): n for n, m in theirs.get(comp, {}).items() if m}
        o_by_set = {key(m): n for n, m in ours.get(comp, {}).items() if m}
        for members, name in x_by_set.items():
            total += 1
            if members in o_by_set:
                mine = o_by_set[members]
                kinds = (_kernel_kind(after.by_name[comp], name), our_kind[(comp, mine)])
                written = (found[comp][name][1], our_outputs[(comp, mine)])
                if kinds[0] != kinds[1]:
                    matches.append(KernelMatch(comp, name, mine, tuple(sorted(members)), "kind", kinds))
                elif _outputs_differ(*written, same):
                    matches.append(KernelMatch(comp, name, mine, tuple(sorted(members)), "outputs",
                                               outputs=(tuple(map(str, written[0])), written[1])))
                else:
                    reproduced += 1
                    matches.append(KernelMatch(comp, name, mine, tuple(sorted(members)), "exact"))
            else:
                matches.append(KernelMatch(comp, name, None, tuple(sorted(members)), "missing"))
                if with_decisions:
                    decisions[(comp, name, None)] = _involved(result.decisions, members, want_fused=False)
        for members, name in o_by_set.items():
            if members not in x_by_set:
                matches.append(KernelMatch(comp, None, name, tuple(sorted(members)), "extra"))
                if with_decisions:
                    decisions[(comp, None, name)] = _involved(result.decisions, members, want_fused=True)
    return CheckResult(result.input.name, result.backend, result.pipeline, result.gpu, total, reproduced,
                       tuple(matches), decisions, result)


def _outputs_differ(xla: tuple, ours: tuple[str, ...], same: dict[str, str]) -> bool:
    """Whether two kernels of the same instructions write different values (compared up to
    CSE twins; not compared where an output of XLA's maps to no instruction, or where the
    replay's kernel does not say what it writes)."""
    if not ours or any(o is None for o in xla):
        return False
    return {same.get(o, o) for o in xla} != {same.get(o, o) for o in ours}


def _kernel_kind(comp: ir.Computation, name: str) -> str:
    """The kind of XLA's kernel `name`, named as the replay's kernels are (decision.Kernel)."""
    instr = comp[name]
    if instr.opcode == "fusion":
        return instr.fusion_kind or "kLoop"
    return "library" if instr.opcode == "custom-call" else instr.opcode


def _involved(all_decisions: Iterable[Decision], members: frozenset, want_fused: bool) -> tuple[Decision, ...]:
    """Decisions about pairs inside `members` (XLA fused them; we did not: blocked ones), or
    about pairs our kernel joined (fused ones), to show why we differ."""
    out = []
    for d in all_decisions:
        producer = set(d.producer_members or (d.producer,))
        consumer = set(d.consumer_members or (d.consumer,))
        if not producer or not consumer:
            continue
        inside = producer <= members and consumer <= members if not want_fused else \
            (producer & members and consumer & members)
        if not inside:
            continue
        if want_fused and d.verdict != Verdict.BLOCKED:
            out.append(d)
        elif not want_fused and d.verdict == Verdict.BLOCKED:
            out.append(d)
    return tuple(out)


def check(before: ir.Module, after: ir.Module, options: Options,
          progress: Callable[[str], None] | None = None) -> CheckResult:
    """Replay `options`'s pipeline on `before` and compare with XLA's `after`."""
    from .result_cache import cached_replay

    result = cached_replay(before, options, progress)
    checked = compare(result, after)
    return CheckResult(**{**checked.__dict__, "before_path": before.path, "after_path": after.path})

"""Evidence about a fused module, gathered once before any boundary is classified.

  * the replay: the fusion pipeline run on the module before fusion — the dump's snapshot
    before fusion when the folder has one, else a module rebuilt by inlining the fused
    module's fusions (`unfused`), or the input itself when the user gave a module before
    fusion — with every decision it recorded, indexed by the instructions on each side;
  * the mapping of the explained module's kernels (and the instructions inside them) onto the
    instructions of that module before fusion, by what they compute (hlofuse/check.py), and
    which of those kernels the replay reproduced exactly;
  * XLA's own fusion log (`*.priority_fusion_dump.txt`) when the dump has one;
  * the copies copy insertion added after fusion, and why each was needed.

Nothing here decides a boundary's reason (classify.py does); nothing changes the module.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from .. import attributes, ir
from ..decision import Decision, FusionResult, Verdict
from ..kernels import executed_computations
from .detect import Detected
from .dumpctx import DumpContext
from .xlalog import LogIndex, load_xla_log

#: Passes whose decisions pair two siblings (kernels reading a common value), not a producer
#: and its consumer: such a decision may concern an edge in either direction.
SIBLING_PASSES = frozenset({"multi_output_fusion", "horizontal_loop_fusion", "horizontal_input_fusion"})


# ------------------------------------------------------------------------------------------
# The replay's decisions, by the instructions on each side
# ------------------------------------------------------------------------------------------


class DecisionIndex:
    """Every decision of a replay, found by the before-fusion instructions on its producer
    and consumer sides (a sibling pass's decisions both ways)."""

    def __init__(self, decisions: tuple[Decision, ...]):
        self.decisions = decisions
        self.by_producer: dict[str, list[int]] = {}
        self.by_consumer: dict[str, list[int]] = {}
        #: (pass, computation, producer) → the decision carrying the reason the pass logs for
        #: that producer (PriorityFusion logs one per producer: its first refusing user's).
        self._logged: dict[tuple, Decision] = {}
        self._by_producer_node: dict[tuple, list[Decision]] = {}
        for i, d in enumerate(decisions):
            if d.facts.get("logged_for_producer"):
                self._logged[(d.pass_name, d.computation, d.producer)] = d
            if d.verdict == Verdict.BLOCKED:
                self._by_producer_node.setdefault((d.pass_name, d.computation, d.producer), []).append(d)
            sides = [(d.producer_members or (d.producer,), d.consumer_members or (d.consumer,))]
            if d.pass_name in SIBLING_PASSES:
                sides.append(sides[0][::-1])
            for producer_side, consumer_side in sides:
                for member in set(producer_side):
                    self.by_producer.setdefault(member, []).append(i)
                for member in set(consumer_side):
                    self.by_consumer.setdefault(member, []).append(i)

    def between(self, producers, consumers) -> list[int]:
        """Indices (in the order made) of decisions with a producer-side instruction in
        `producers` and a consumer-side one in `consumers`."""
        found: set[int] = set()
        for m in producers:
            found.update(self.by_producer.get(m, ()))
        if not found:
            return []
        other: set[int] = set()
        for m in consumers:
            other.update(self.by_consumer.get(m, ()))
        return sorted(found & other)

    def logged_for(self, decision: Decision) -> Decision | None:
        """The decision whose reason the pass logged for `decision`'s producer."""
        return self._logged.get((decision.pass_name, decision.computation, decision.producer))

    def same_producer(self, decision: Decision) -> list[Decision]:
        """The pass's refusals of `decision`'s producer, for every user, the logged one first."""
        key = (decision.pass_name, decision.computation, decision.producer)
        found = list(self._by_producer_node.get(key, ()))
        logged = self._logged.get(key)
        if logged is not None and logged in found:
            found.remove(logged)
            found.insert(0, logged)
        return found


@dataclass(frozen=True)
class ReplayEvidence:
    """The replay, and how the explained module's kernels map onto its instructions."""

    result: FusionResult
    #: Where the replay started: "snapshot" (the dump's module before fusion), "unfused" (the
    #: fused module with its fusions inlined) or "input" (the user's module before fusion).
    source: str
    source_path: str | None
    #: Kernel (computation, name) of the explained module → the before-fusion instructions it
    #: computes.
    members: Mapping[tuple[str, str], frozenset[str]]
    #: The same, without instructions that several kernels compute (a duplicated broadcast
    #: would tie every decision about it to every kernel holding it).
    own: Mapping[tuple[str, str], frozenset[str]]
    #: (computation, instruction) of the explained module, a fused computation's instructions
    #: included → the before-fusion instruction it stands for.
    values: Mapping[tuple[str, str], str]
    #: Kernels of the explained module the replay made with exactly the same instructions.
    reproduced: frozenset[tuple[str, str]]
    #: Before-fusion instruction → the replay's kernels computing it.
    replay_kernels: Mapping[str, tuple[str, ...]]
    index: DecisionIndex
    #: Kernel of the explained module → the multi_output_fusion decision that made it a
    #: multi-output fusion (its two sides both inside the kernel).
    made_multi_output: Mapping[tuple[str, str], Decision] = field(default_factory=dict)

    def kernel_members(self, comp: str, name: str) -> frozenset[str]:
        return self.own.get((comp, name)) or self.members.get((comp, name)) or frozenset()

    def views_between(self, value: str | None, reader: str | None) -> tuple[str, ...]:
        """The instructions through which `reader` read `value` when fusion ran (tuples,
        get-tuple-elements, bitcasts that passes after fusion may have removed); () when it
        read `value` directly or the path is not found."""
        if not value or not reader:
            return ()
        if self._instructions is None:
            object.__setattr__(self, "_instructions", {
                i.name: (c, i) for c in self.result.input.computations for i in c.instructions})
        found = self._instructions.get(reader)
        if found is None:
            return ()
        comp, instr = found
        for operand in instr.operands:
            path: list[str] = []
            name = operand
            for _ in range(8):
                if name == value:
                    return tuple(path)
                current = comp.by_name.get(name)
                if current is None or current.opcode not in _VIEWS or not current.operands:
                    break
                path.append(name)
                if current.opcode == "get-tuple-element":
                    tup = comp.by_name.get(current.operands[0])
                    if tup is not None and tup.opcode == "tuple":
                        index = int(current.attr("index") or 0)
                        path.append(tup.name)
                        name = tup.operands[index] if index < len(tup.operands) else ""
                        continue
                name = current.operands[0]
        return ()

    _instructions: dict | None = field(default=None, compare=False, repr=False)


#: Instructions a value passes through unchanged, which fusion sees but later passes remove.
_VIEWS = frozenset({"get-tuple-element", "tuple", "bitcast", "reshape"})


@dataclass(frozen=True)
class Evidence:
    replay: ReplayEvidence | None
    xla_log: LogIndex | None
    #: Unfused copies that copy insertion added after fusion (see BND-COPY-INSERTED).
    inserted_copies: frozenset[str]
    copy_reasons: Mapping[str, str]
    notes: tuple[str, ...] = field(default=())


# ------------------------------------------------------------------------------------------
# Gathering
# ------------------------------------------------------------------------------------------


def gather(module: ir.Module, detected: Detected, dump: DumpContext | None, stage: str,
           replayed: FusionResult | None = None, xla_flags: tuple[str, ...] = ()) -> Evidence:
    """All the evidence `explain` uses about `module` (explained as `stage`: "fused", or
    "replayed" when `replayed` is the replay that made it)."""
    notes: list[str] = []
    if replayed is not None:
        replay = _replay_evidence(module, replayed, "input", None, notes)
    else:
        replay = _replay_fused(module, detected, dump, xla_flags, notes)
    log = None
    xla_log = dump.xla_log() if dump is not None else None
    if xla_log is not None:
        log = load_xla_log(xla_log.path, notes)
    inserted, reasons = _inserted_copies(module, dump, stage)
    return Evidence(replay, log, inserted, reasons, tuple(notes))


def _replay_fused(module: ir.Module, detected: Detected, dump: DumpContext | None,
                  xla_flags: tuple[str, ...], notes: list[str]) -> ReplayEvidence | None:
    """Replay the pipeline from the module before fusion: the dump's snapshot, else the fused
    module with its fusions inlined."""
    from ..errors import HlofuseError
    from ..pipeline import Options, get_pipeline
    from ..result_cache import cached_replay

    try:
        get_pipeline(detected.backend, detected.pipeline)
    except HlofuseError:
        return None  # a backend hlofuse does not replay (XLA:TPU): explain() says so once
    before, source, path = _module_before_fusion(module, dump, detected, notes)
    if before is None:
        return None
    try:
        result = cached_replay(before, Options(backend=detected.backend, pipeline=detected.pipeline, gpu=detected.gpu,
                                        xla_flags=tuple(xla_flags)))
    except HlofuseError as err:
        notes.append(f"could not replay the fusion passes ({err}); boundaries are explained on the fused "
                     "module alone")
        return None
    if source == "unfused":
        notes.append("no snapshot before fusion in the dump: the replay starts from this module with its "
                     "fusions inlined, so passes before fusion are not replayed and copies added after "
                     "fusion are replayed as if fusion saw them (dump with --xla_dump_hlo_pass_re for the "
                     "exact decisions)")
    return _replay_evidence(module, result, source, path, notes, _after_fusion(module, dump, detected))


@dataclass(frozen=True)
class AfterFusion:
    """XLA's snapshot right after fusion: what the replay's kernels are measured against (the
    final module also holds what later passes added: copies, wrapped instructions)."""

    module: ir.Module
    name: str
    #: The snapshot was taken before the pipeline's last passes (XLA:CPU's is taken before
    #: fusion-wrapper, which wraps lone instructions into fusions): a kernel of the same
    #: instructions in a fusion of another kind is then the same kernel.
    early: bool


def _after_fusion(module: ir.Module, dump: DumpContext | None, detected: Detected) -> AfterFusion | None:
    """The dump's snapshot right after fusion, when it has one and it is not the module explained."""
    from ..pipeline import get_pipeline

    snap = dump.after_fusion_snapshot(detected.pipeline) if dump is not None else None
    if snap is None or str(snap.path) == module.path:
        return None
    from ..parse import parse_text

    try:
        after = parse_text(snap.path.read_text(encoding="utf-8", errors="replace"), str(snap.path))
    except Exception:  # noqa: BLE001 - the note is then made against the explained module
        return None
    names = [n for n, _ in get_pipeline(detected.backend, detected.pipeline).passes]
    early = snap.before_pass in names and snap.after_pass != names[-1]
    return AfterFusion(after, snap.path.name, early)


def _module_before_fusion(module: ir.Module, dump: DumpContext | None, detected: Detected,
                          notes: list[str]) -> tuple[ir.Module | None, str, str | None]:
    snap = dump.before_fusion_snapshot(detected.pipeline) if dump is not None else None
    if snap is not None:
        from ..parse import parse_text

        try:
            text = snap.path.read_text(encoding="utf-8", errors="replace")
            return parse_text(text, str(snap.path)), "snapshot", str(snap.path)
        except Exception as err:  # noqa: BLE001 - fall back to the inlined module
            notes.append(f"could not read the snapshot before fusion {snap.path.name}: {err}")
    from .unfused import inline_fusions

    return inline_fusions(module), "unfused", None


def _replay_evidence(module: ir.Module, result: FusionResult, source: str, path: str | None,
                     notes: list[str], after_fusion: AfterFusion | None = None) -> ReplayEvidence:
    from ..check import compare, map_module, members_of

    values: dict[tuple[str, str], str] = {}
    full = map_module(module, result.input, values)
    mapped = members_of(full)
    members: dict[tuple[str, str], frozenset[str]] = {}
    if source == "input":
        # the explained module is the replay's own result: its kernels are known exactly
        members = {(k.computation, k.name): frozenset(k.instructions) for k in result.kernels}
        reproduced = frozenset(members)
    else:
        opcodes = {i.name: i.opcode for _, i in result.input.instructions()}
        for comp, kernels in mapped.items():
            computation = module[comp]
            for name, inside in kernels.items():
                if not _same_kind(module, computation[name], inside, opcodes):
                    continue
                members[(comp, name)] = frozenset(inside)
        checked = compare(result, module, mapped=full, with_decisions=False)
        reproduced = frozenset((m.computation, m.xla_kernel) for m in checked.matches if m.status == "exact")
        against, what, same = checked, "kernels", {"exact"}
        if after_fusion is not None:
            against = compare(result, after_fusion.module, with_decisions=False)
            what = f"kernels right after fusion ({after_fusion.name})"
            if after_fusion.early:
                same = {"exact", "kind"}
        found = sum(1 for m in against.matches if m.status in same)
        if found < against.xla_kernels:
            notes.append(f"the replay reproduces {found} of XLA's {against.xla_kernels} {what}; "
                         "boundaries at the others say so (fact replay_kernels_differ)")
    executed = {c.name for c in executed_computations(module)}
    members = {k: v for k, v in members.items() if k[0] in executed}
    copies = Counter(m for inside in members.values() for m in inside)
    own = {k: frozenset(m for m in v if copies[m] == 1) for k, v in members.items()}
    replay_kernels: dict[str, list[tuple[str, str]]] = {}
    for k in result.kernels:
        for m in k.instructions:
            replay_kernels.setdefault(m, []).append((k.computation, k.name))
    kernels_of: dict[str, list[tuple[str, str]]] = {}
    for key, inside in members.items():
        for m in inside:
            kernels_of.setdefault(m, []).append(key)
    made: dict[tuple[str, str], Decision] = {}
    for d in result.decisions:
        if d.pass_name != "multi_output_fusion" or d.verdict == Verdict.BLOCKED:
            continue
        sides = set(d.producer_members or (d.producer,)) | set(d.consumer_members or (d.consumer,))
        first = next(iter(sides))
        for key in kernels_of.get(first, ()):
            if sides <= members[key]:
                made.setdefault(key, d)
    return ReplayEvidence(result, source, path, members, own, values, reproduced,
                          {m: tuple(v) for m, v in replay_kernels.items()}, DecisionIndex(result.decisions), made)


def _same_kind(module: ir.Module, kernel: ir.Instruction, inside, opcodes: Mapping[str, str]) -> bool:
    """Whether a kernel of one instruction stands for what it was mapped to: the mapping sees
    through copies and bitcasts that later passes added, so a copy made by copy insertion (or
    wrapped into a fusion of its own) maps to the value it copies — not an instruction
    fusion ever saw."""
    if len(inside) != 1:
        return True
    opcode = kernel.opcode
    if opcode == "fusion":
        body = module.by_name.get(kernel.fused_computation or "")
        if body is None:
            return True
        work = {i.opcode for i in body.instructions} - {"parameter", "bitcast", "tuple", "get-tuple-element"}
        if len(work) != 1:
            return True
        opcode = next(iter(work))
    return opcodes.get(next(iter(inside))) == opcode


# ------------------------------------------------------------------------------------------
# Copies added after fusion
# ------------------------------------------------------------------------------------------


def _inserted_copies(module: ir.Module, dump: DumpContext | None, stage: str) -> tuple[frozenset[str], dict]:
    """Unfused copies that copy insertion added after fusion, and why each was needed."""
    copies = [(comp, instr) for comp in executed_computations(module) for instr in comp.instructions
              if instr.opcode == "copy" or _wrapped_copy(module, instr) is not None]
    reasons = {instr.name: copy_reason(module, comp, instr) for comp, instr in copies}
    if stage == "replayed":
        return frozenset(), reasons  # the replay's input already had every copy fusion saw
    snapshot_names = _after_fusion_copy_names(dump)
    out = set()
    for comp, instr in copies:
        wrapped = _wrapped_copy(module, instr)
        if snapshot_names is not None:
            if (wrapped.name if wrapped is not None else instr.name) not in snapshot_names:
                out.add(instr.name)
        elif wrapped is None and looks_inserted(module, comp, instr):
            out.add(instr.name)
    return frozenset(out), reasons


def _wrapped_copy(module: ir.Module, instr: ir.Instruction) -> ir.Instruction | None:
    """The copy inside a fusion that holds nothing else (a `wrapped_copy` of XLA's
    fusion-wrapper, which wraps what fusion left unfused), else None."""
    if instr.opcode != "fusion" or instr.fusion_kind == "kCustom":
        return None
    body = module.by_name.get(instr.fused_computation or "")
    if body is None:
        return None
    work = [i for i in body.instructions if i.opcode not in ("parameter", "bitcast")]
    return work[0] if len(work) == 1 and work[0].opcode == "copy" else None


def looks_inserted(module: ir.Module, comp: ir.Computation, instr: ir.Instruction) -> bool:
    """Without a snapshot after fusion to compare with: whether a copy has the shape of the
    copies CopyInsertion adds (AddCopiesForWhile, AddSpecialCaseCopies) rather than a user's
    or a layout copy — no op_name of its own, an order imposed on it (control predecessors:
    swapped loop state), a copy of a copy, a copy of the loop state in a while body, or of a
    constant or parameter that initialises a loop."""
    if not attributes.metadata(instr).op_name or instr.attr("control-predecessors"):
        return True
    if not instr.operands or instr.operands[0] not in comp:
        return False
    operand = comp[instr.operands[0]]
    if operand.opcode == "copy":
        return True
    if instr.shape.to_text(layout=True) != operand.shape.to_text(layout=True):
        return False  # a layout change: layout assignment's copy, made before fusion
    if module.role(comp.name) == "while_body" and (
            operand.opcode == "parameter" or (operand.opcode == "get-tuple-element" and operand.operands
                                              and comp[operand.operands[0]].opcode == "parameter")):
        return True
    if operand.opcode in ("constant", "parameter"):
        return any(comp[u].opcode == "tuple" and any(comp[w].opcode == "while" for w in comp.users.get(u, ()))
                   for u in comp.users.get(instr.name, ()))
    return False


def _after_fusion_copy_names(dump: DumpContext | None) -> set[str] | None:
    if dump is None or dump.chosen.stage != "after_optimizations":
        return None
    snap = dump.after_fusion_snapshot()
    if snap is None:
        return None
    from ..parse import parse_text

    try:
        text = snap.path.read_text(encoding="utf-8", errors="replace")
        snapshot = parse_text(text, str(snap.path))
    except Exception:  # noqa: BLE001 - fall back to the metadata test
        return None
    return {i.name for _, i in snapshot.instructions() if i.opcode == "copy"}


def copy_reason(module: ir.Module, comp: ir.Computation, instr: ir.Instruction) -> str:
    """Why copy insertion put this copy here (the cases of CopyInsertion::AddCopiesForWhile and
    AddSpecialCaseCopies)."""
    role = module.role(comp.name)
    users = comp.users.get(instr.name, ())
    operand = comp.by_name.get(instr.operands[0]) if instr.operands else None
    wrapped = _wrapped_copy(module, instr)
    if wrapped is not None:
        body = module[instr.fused_computation]
        source = body.by_name.get(wrapped.operands[0]) if wrapped.operands else None
        if source is not None and source.shape.minor_to_major != wrapped.shape.minor_to_major:
            return (f"it changes the layout from {{{','.join(map(str, source.shape.minor_to_major))}}} to "
                    f"{{{','.join(map(str, wrapped.shape.minor_to_major))}}}, a layout the fused module's "
                    "result or user needs")
    if operand is not None and operand.shape.is_array and instr.shape.is_array \
            and operand.shape.minor_to_major != instr.shape.minor_to_major:
        return (f"it changes the layout from {{{','.join(map(str, operand.shape.minor_to_major))}}} to "
                f"{{{','.join(map(str, instr.shape.minor_to_major))}}}")
    if role == "while_body" and (instr.attr("control-predecessors") or
                                 (operand is not None and operand.opcode == "copy")):
        return ("the loop moves values between elements of its state (a swap or rotation): each is copied "
                "out before its buffer is overwritten, in an order copy insertion imposes")
    for user in users:
        u = comp[user]
        if u.opcode == "tuple" and u.name == comp.root_name and role == "while_body":
            return "the loop state is updated in place while its old value may still be read"
        if u.opcode == "tuple" and any(comp[x].opcode == "while" for x in comp.users.get(u.name, ())):
            operand = comp[instr.operands[0]] if instr.operands else None
            what = {"parameter": "an entry parameter", "constant": "a constant"}.get(
                operand.opcode if operand is not None else "", "a value still used elsewhere")
            return f"the loop's initial state must not overwrite {what}"
    if instr.operands and comp[instr.operands[0]].opcode in ("get-tuple-element", "parameter") \
            and role == "while_body":
        return "the loop state is read after the next state is written"
    return "a buffer must not be shared"


def blocked(decision: Decision) -> bool:
    return decision.verdict == Verdict.BLOCKED

"""The explainer: kernels, edges, one boundary per edge with its reason, the summaries.

The flow, one step each: evidence (evidence.py: the replay, XLA's log, dump stages, copies)
is gathered once; each edge is classified by a pure function of the edge and that evidence
(classify.py), the boundary rules and the fused graph answering where the replay does not;
hints come last, from the finished boundaries (hints.py).  The module is only read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from .. import attributes, ir
from ..kernels import CONTROL, executed_computations, is_kernel
from .classify import Answer, EdgeView, classify, in_module_names
from .detect import Detected
from .dumpctx import DumpContext
from .evidence import Evidence, gather
from .fused_graph import FusedGraphRules
from .loops import LoopCounts
from .records import UNKNOWN, Boundary, ComputationSummary, Explanation, KernelInfo, LoopSummary, SourceRef
from .trace import (Edge, Source, Tracer, display, instruction_finder, kind_of, label_kind, label_of, loop_words,
                    concatenates_in, op_name_in, opcode_in, opcodes_of, reader, subshape, value_instruction)
from .xlalog import agrees as agrees_with_xla, rule_from_xla_reason, xla_log_verdict


class Explainer:
    def __init__(self, module: ir.Module, detected: Detected, dump: DumpContext | None, stage: str,
                 replay=None, xla_flags: tuple[str, ...] = ()):
        from ..cycles import require_acyclic

        require_acyclic(module)  # a module built in memory has not met the parser's check
        self.m = module
        self.detected = detected
        self.dump = dump
        self.stage = stage
        self.replay = replay
        self.xla_flags = tuple(xla_flags)
        self.notes: list[str] = []
        self.tracer = Tracer(module)
        self.executed = executed_computations(module)
        self.fused_graph = FusedGraphRules(module, detected, self.notes)
        self._find = None  # trace.instruction_finder of the module, built on first use
        self._final_names: dict[str, str] | None = None
        self.evidence: Evidence | None = None

    # -- driver ----------------------------------------------------------------------------
    def run(self) -> Explanation:
        from ..hints import hint_for
        from ..rules import load_all

        load_all()
        # 1. evidence, gathered once
        self.evidence = gather(self.m, self.detected, self.dump, self.stage, self.replay, self.xla_flags)
        self.notes.extend(self.evidence.notes)
        kernels = self._kernels()
        self.loops = LoopCounts(self.m, self.executed, self._source)
        computations = self._computation_summaries()
        # 2. one classified boundary per edge
        rows = [self._boundary(edge) for edge in self._edges()]
        # 3. hints, from the finished boundaries (the triage adds what each would gain)
        boundaries = sorted((_with_hint(b, hint_for(h)) for b, h in rows), key=self._order())
        log = self.dump.xla_log() if self.dump is not None else None
        replay = self.evidence.replay
        return Explanation(
            module=self.m.name, backend=self.detected.backend, pipeline=self.detected.pipeline,
            gpu=self.detected.gpu, input=str(self.dump.chosen.path) if self.dump is not None else self.m.path,
            stage=self.stage, kernels=tuple(kernels), boundaries=tuple(boundaries),
            computations=tuple(computations), loops=tuple(self.loops.loops), detected=self.detected.why,
            notes=tuple(dict.fromkeys(self.notes)), xla_log=str(log.path) if log is not None else None,
            fused_module=self.m, replayed_from=_replayed_from(replay),
            replay_result=replay.result if replay is not None else None,
            fused_program=self.fused_graph.program_if_built())

    def _order(self):
        """Boundaries by computation, then what users ask about first: kernel-to-kernel
        boundaries inside a computation, then buffers and control flow, then loop crossings;
        within each, in the order the consumers run."""
        comp_index = {c.name: i for i, c in enumerate(self.executed)}
        position = {(c.name, instr.name): i for c in self.executed for i, instr in enumerate(c.post_order)}

        def key(b: Boundary):
            if b.crossing:
                group = 2 if "loop-carried" in b.crossing else 3
            else:
                group = 0 if b.consumer_kernel is not None else 1
            consumer = b.consumer_kernel or b.consumer
            return (comp_index.get(b.consumer_computation, 0), group,
                    position.get((b.consumer_computation, consumer), 0), b.producer_kernel, b.output)

        return key

    # -- kernels ---------------------------------------------------------------------------
    def _kernels(self) -> list[KernelInfo]:
        from ..rules.boundaries import library_of

        members = {}
        if self.replay is not None:
            members = {(k.computation, k.name): k.instructions for k in self.replay.kernels}
        out = []
        for comp in self.executed:
            role = self.m.role(comp.name)
            for instr in comp.post_order:
                if not is_kernel(instr):
                    continue
                node = self._node(comp.name, instr.name)
                lib = library_of(node) if node is not None else None
                body = self.m.by_name.get(instr.fused_computation or "")
                if instr.opcode == "fusion" and body is not None:
                    inside = tuple(i.name for i in body.post_order if i.opcode != "parameter")
                    root = body.root_name
                else:
                    inside = (instr.name,)
                    root = instr.name
                inside = members.get((comp.name, instr.name), inside)
                out.append(KernelInfo(
                    name=instr.name, kind=kind_of(instr), label=label_of(instr, lib), computation=comp.name,
                    role=role, instructions=tuple(inside), root=root, library=lib[1] if lib else None,
                    bytes_out=instr.shape.byte_size, source=self._source(comp.name, instr.name)))
        return out

    # -- edges -----------------------------------------------------------------------------
    def _edges(self) -> list[Edge]:
        edges: list[Edge] = []
        seen: set = set()

        def add(src: Source, comp: str, consumer: str, index: int) -> None:
            if not src.crossing and src.comp == comp and src.name == consumer:
                return
            key = (src.comp, src.name, src.path, comp, consumer, src.crossing)
            if key in seen:
                return
            seen.add(key)
            edges.append(Edge(src, comp, consumer, index))

        for comp in self.executed:
            for instr in comp.post_order:
                if is_kernel(instr):
                    for index, operand in enumerate(instr.operands):
                        for src in self.tracer.sources(comp.name, operand):
                            add(src, comp.name, instr.name, index)
                elif instr.opcode == "tuple":
                    for index, operand in enumerate(instr.operands):
                        for src in self.tracer.sources(comp.name, operand, local=True):
                            add(src, comp.name, instr.name, index)
                elif instr.opcode in CONTROL:
                    for index, operand in enumerate(instr.operands):
                        if comp[operand].opcode == "tuple":
                            continue  # the tuple's own edges cover it
                        for src in self.tracer.sources(comp.name, operand, local=True):
                            add(src, comp.name, instr.name, index)
        return edges

    # -- one boundary ----------------------------------------------------------------------
    def _boundary(self, edge: Edge):
        """The edge's Boundary (without its hint) and what the hint step needs."""
        from ..hints import HintInput
        from ..rules import REGISTRY

        src = edge.source
        producer_kernel = self.m[src.comp][src.name]
        consumer_instr = self.m[edge.consumer_comp][edge.consumer]
        producer = value_instruction(self.m, producer_kernel, src.path)
        consumer_is_kernel = is_kernel(consumer_instr)
        consumer = reader(self.m, consumer_instr, edge.operand_index) if consumer_is_kernel else consumer_instr.name
        nbytes = subshape(producer_kernel.shape, src.path).byte_size
        loop = self.loops.by_name.get(src.loop) if src.loop else None
        facts: dict[str, Any] = {
            "crossing": src.crossing, "bytes": nbytes,
            "producer_name": display(producer, src.name, src.path if producer == src.name else ()),
            "consumer_name": display(consumer, edge.consumer),
            "loop": loop_words(loop) if loop else "the while loop",
            "tuple_role": self._tuple_role(edge.consumer_comp, consumer_instr),
            "inserted_copies": self.evidence.inserted_copies, "copy_reasons": self.evidence.copy_reasons,
            "pipeline": self.detected.pipeline,
        }
        pnode = self._node(src.comp, producer_kernel.name)
        cnode = self._node(edge.consumer_comp, consumer_instr.name)
        structure = self._structure(pnode, cnode, facts)
        view = self._edge_view(edge, producer_kernel, consumer_instr, producer, consumer, consumer_is_kernel)
        answer = classify(view, self.evidence, structure, self.detected.pipeline,
                          lambda: self._fallback(edge, pnode, cnode, consumer_is_kernel))
        answer = in_module_names(answer, view, self._final_name)
        rule = REGISTRY.get(answer.rule)
        tags = tuple(sorted(set(rule.tags if rule is not None else ()) | self._extra_tags(src, edge)))
        verdict = self._xla_verdict(edge, view, answer)
        xla_reason = verdict.reason if verdict is not None else None
        others = ()
        if answer.decision is not None and self.evidence.replay is not None:
            others = self.evidence.replay.index.same_producer(answer.decision)
        agrees, other = agrees_with_xla(answer, rule, verdict, self.detected.pipeline, others) \
            if verdict is not None else (None, None)
        rule_facts = {k: v for k, v in dict(answer.facts).items()
                      if k not in ("inserted_copies", "copy_reasons", "pipeline", "dominant_words")
                      and not callable(v)}
        if other is not None:
            # XLA logs one reason per producer, its first refusing user's: ours for that user
            rule_facts["xla_logged_for_user"] = other.consumer
            rule_facts["xla_logged_rule"] = other.rule
        if verdict is not None and verdict.status == "unprofitable":
            rule_facts.update(xla_us_fused=verdict.us_fused, xla_us_unfused=verdict.us_unfused)
        source = self._source(src.comp, producer) or self._source(src.comp, src.name) \
            or self._source(edge.consumer_comp, consumer) or self._context_source(edge, loop)
        consumer_source = self._source(edge.consumer_comp, consumer) or self._source(edge.consumer_comp, edge.consumer)
        boundary = Boundary(
            producer=producer, consumer=consumer, producer_kernel=src.name,
            consumer_kernel=edge.consumer if consumer_is_kernel else None,
            producer_computation=src.comp, consumer_computation=edge.consumer_comp, crossing=src.crossing,
            rule=answer.rule, tags=tags, reason=answer.reason, relaxable=rule.relaxable if rule is not None else None,
            bytes=nbytes, source=source, hint=None, xla_reason=xla_reason, agrees_with_xla=agrees,
            explained_by=answer.explained_by, facts=rule_facts, via=src.via, consumer_source=consumer_source,
            output=src.path, decided_in=answer.decided_in, rule_xla_reason=answer.xla_string,
            then=answer.then)
        hint_input = HintInput(
            rule=answer.rule, tags=tags, crossing=src.crossing,
            producer_opcode=opcode_in(self.m, producer_kernel, producer),
            producer_op_name=op_name_in(self.m, producer_kernel, producer),
            producer_library=self._library_tag(src.comp, src.name),
            consumer_library=self._library_tag(edge.consumer_comp, edge.consumer) if consumer_is_kernel else None,
            producer_kernel_opcodes=opcodes_of(self.m, producer_kernel),
            consumer_kernel_opcodes=opcodes_of(self.m, consumer_instr) if consumer_is_kernel else frozenset(),
            in_loop=self.loops.enclosing(edge.consumer_comp) or self.loops.enclosing(src.comp),
            consumer_is_buffer=not consumer_is_kernel,
            producer_loop=self.loops.enclosing(src.comp),
            consumer_loop=self.loops.enclosing(edge.consumer_comp),
            producer_element_type=subshape(producer_kernel.shape, src.path).element_type or "",
            producer_concatenates=concatenates_in(self.m, producer_kernel),
            producer_enters_loop=_enters_loop(self.m[src.comp], src.name),
            pipeline=self.detected.pipeline, facts=rule_facts,
        )
        return boundary, hint_input

    def _structure(self, pnode, cnode, facts: dict) -> Answer | None:
        """The boundary rules' answer (loops, calls, tuples, control flow, library calls,
        copies added after fusion), or None when none objects."""
        from ..rules import evaluate
        from ..rules.boundaries import ORDER
        from ..rules.candidates import BoundaryCandidate

        if pnode is None or cnode is None:
            return None
        outcome = evaluate(ORDER, BoundaryCandidate(pnode, cnode, self, **facts))
        if outcome.blocked_by is None:
            return None
        r = outcome.blocked_by
        return Answer(r.id, r.reason(outcome.facts), dict(outcome.facts), "boundary-rule",
                      "copy-insertion" if r.id == "BND-COPY-INSERTED" else None)

    def _edge_view(self, edge: Edge, producer_kernel: ir.Instruction, consumer_instr: ir.Instruction,
                   producer: str, consumer: str, consumer_is_kernel: bool) -> EdgeView:
        """The edge in the before-fusion instructions the replay knows."""
        src = edge.source
        values = self.evidence.replay.values if self.evidence.replay is not None else {}

        def before(comp: str, kernel: ir.Instruction, name: str) -> str | None:
            inside = kernel.fused_computation if kernel.opcode == "fusion" and name != kernel.name else comp
            return values.get((inside, name))

        views = tuple(v for v in (values.get((edge.consumer_comp, name)) for name in src.via
                                  if name in self.m[edge.consumer_comp]) if v) if not src.crossing else ()
        value = before(src.comp, producer_kernel, producer)
        read_by = before(edge.consumer_comp, consumer_instr, consumer) if consumer_is_kernel \
            else values.get((edge.consumer_comp, consumer)) or (consumer if consumer in self._before_names() else None)
        if not src.crossing and self.evidence.replay is not None:
            views += self.evidence.replay.views_between(value, read_by)
        return EdgeView(
            producer_comp=src.comp, producer_kernel=src.name, consumer_comp=edge.consumer_comp,
            consumer=edge.consumer, consumer_is_kernel=consumer_is_kernel, crossing=src.crossing,
            value=value, reader=read_by,
            views=tuple(dict.fromkeys(views)), producer_multi_output=_multi_output(self.m, producer_kernel),
            consumer_multi_output=consumer_is_kernel and _multi_output(self.m, consumer_instr))

    def _final_name(self, comp: str, name: str, kernel: str) -> str | None:
        """This module's name for an instruction of the module the replay started from (the
        instruction mapped onto it), or the kernel's for a fusion the replay made."""
        if self._find_instr(comp, name) is not None:
            return None
        if name not in self._before_names():
            return kernel  # a fusion the replay made: the kernel standing for it here
        if self._final_names is None:
            self._final_names = {}
            for (_, final), before in self.evidence.replay.values.items():
                self._final_names.setdefault(before, final)
        return self._final_names.get(name)

    def _find_instr(self, comp: str, name: str):
        if self._find is None:
            self._find = instruction_finder(self.m)
        return self._find(comp, name)

    def _before_names(self) -> frozenset[str]:
        replay = self.evidence.replay
        if replay is None:
            return frozenset()
        if not hasattr(self, "_before_name_set"):
            self._before_name_set = frozenset(i.name for _, i in replay.result.input.instructions())
        return self._before_name_set

    def _fallback(self, edge: Edge, pnode, cnode, consumer_is_kernel: bool) -> Answer:
        """For edges the replay does not explain: the pipeline's rules on the fused graph, then
        XLA's own log, else unknown."""
        if not edge.source.crossing and consumer_is_kernel:
            decision = self.fused_graph.decision(pnode, cnode)
            if decision is not None and decision.rule:
                return Answer(decision.rule, decision.reason, dict(decision.facts), "pipeline", None,
                              decision.xla_reason)
            verdict = self._xla_verdict(edge, None, None)
            found = rule_from_xla_reason(verdict.reason if verdict is not None else None, self.detected.pipeline)
            if found is not None:
                return found
        return Answer(UNKNOWN, "no rule explains this boundary", {}, "none")

    def _xla_verdict(self, edge: Edge, view: EdgeView | None, answer: Answer | None):
        """XLA's logged refusal for the pair (an xla_log.XlaVerdict with a reason), or None.
        Matched by the instructions the replay's decision names (the kernels as XLA's log knew
        them), else those of the two kernels."""
        log = self.evidence.xla_log
        if log is None or edge.source.crossing:
            return None
        sides = None
        if answer is not None and answer.decision is not None:
            d = answer.decision
            sides = (d.producer_members or (d.producer,), d.consumer_members or (d.consumer,))
        elif view is not None and self.evidence.replay is not None:
            replay = self.evidence.replay
            p = replay.members.get((view.producer_comp, view.producer_kernel))
            c = replay.members.get((view.consumer_comp, view.consumer)) if view.consumer_is_kernel else \
                ({view.reader} if view.reader else None)
            if p and c:
                sides = (p, c)
        return xla_log_verdict(log, self.m, edge.source, edge, self.notes, sides)

    # -- graph nodes for the rules ---------------------------------------------------------
    def _node(self, comp: str, name: str):
        return self.fused_graph.node(comp, name)

    # -- how often each computation runs ----------------------------------------------------
    def _computation_summaries(self) -> list[ComputationSummary]:
        out = []
        for comp in reversed(self.m.computation_post_order):
            self.loops.runs(comp.name)  # callers first: a long call chain needs no deep recursion
        for comp in self.executed:
            kinds: Counter = Counter()
            for instr in comp.instructions:
                if is_kernel(instr):
                    kinds[label_kind(instr)] += 1
            out.append(ComputationSummary(comp.name, self.m.role(comp.name), sum(kinds.values()),
                                          dict(kinds), self.loops.runs(comp.name)))
        return out

    def _context_source(self, edge: Edge, loop: LoopSummary | None) -> SourceRef | None:
        """For values without metadata of their own (copies XLA added, tuples): the source of
        the loop they belong to (the crossed loop, the loop a tuple initialises, the loop whose
        body holds the edge)."""
        if loop is not None and loop.source is not None:
            return loop.source
        comp = self.m[edge.consumer_comp]
        for user in comp.users.get(edge.consumer, ()):
            if comp[user].opcode in ("while", "conditional", "call"):
                found = self._source(edge.consumer_comp, user)
                if found is not None:
                    return found
        enclosing = self.loops.enclosing(edge.consumer_comp) or self.loops.enclosing(edge.source.comp)
        return enclosing.source if enclosing is not None else None

    # -- small helpers -----------------------------------------------------------------------
    def _tuple_role(self, comp_name: str, instr: ir.Instruction) -> str:
        if instr.opcode != "tuple":
            return ""
        comp = self.m[comp_name]
        role = self.m.role(comp_name)
        if instr.name == comp.root_name:
            if role == "while_body":
                loop = self.loops.enclosing(comp_name)
                return f"the state {loop.name if loop else 'the loop'} carries to its next iteration"
            if role == "entry":
                return "the program's outputs"
            if role == "branch":
                return "the branch's result"
            return "the computation's result"
        for user in comp.users.get(instr.name, ()):
            if comp[user].opcode == "while":
                return f"the initial state of {user}"
            if comp[user].opcode in ("conditional", "call"):
                return f"the arguments of {user}"
        return "a tuple"

    def _extra_tags(self, src: Source, edge: Edge) -> set[str]:
        tags = set()
        for comp, name in ((src.comp, src.name), (edge.consumer_comp, edge.consumer)):
            tag = self._library_tag(comp, name)
            if tag:
                tags.add(tag)
        return tags

    def _library_tag(self, comp: str, name: str) -> str | None:
        from ..rules.boundaries import library_of

        node = self._node(comp, name)
        lib = library_of(node) if node is not None else None
        return lib[2] if lib else None

    def _source(self, comp: str, name: str) -> SourceRef | None:
        """The user's source of an instruction: its own metadata, else (for copies and views)
        that of the value it copies, else None.  Names inside fusions are looked up in the
        fused computations of the kernel's module."""
        if self._find is None:
            self._find = instruction_finder(self.m)
        found = self._find(comp, name)
        hops = 0
        while found is not None and hops < 8:
            c, instr = found
            loc = attributes.source_location(self.m, instr)
            meta = attributes.metadata(instr)
            if loc is not None and (loc.file or loc.line):
                return SourceRef(loc.file, loc.line, meta.op_name, loc.function)
            if instr.opcode in ("copy", "bitcast", "get-tuple-element", "reshape") and instr.operands:
                found = (c, c[instr.operands[0]])
                hops += 1
                continue
            if instr.opcode == "fusion":
                body = self.m.by_name.get(instr.fused_computation or "")
                if body is not None:
                    found = (body, body.root)
                    hops += 1
                    continue
            return None
        return None


def _with_hint(boundary: Boundary, hint) -> Boundary:
    """The boundary with its hint: the hint's words without a prediction (the triage adds one)."""
    if hint is None:
        return boundary
    return replace(boundary, hint=hint.words(), hint_kind=hint.kind, hint_detail=hint)


def _enters_loop(comp: ir.Computation, name: str) -> bool:
    """Whether the value of `name` becomes part of a while loop's state in `comp` (through the
    tuple that initialises it, views and copies)."""
    frontier, seen = [name], {name}
    for _ in range(6):
        following = []
        for value in frontier:
            for user in comp.users.get(value, ()):
                opcode = comp[user].opcode
                if opcode == "while":
                    return True
                if opcode in ("tuple", "get-tuple-element", "bitcast", "copy", "reshape") and user not in seen:
                    seen.add(user)
                    following.append(user)
        frontier = following
    return False


def _multi_output(module: ir.Module, kernel: ir.Instruction) -> bool:
    if kernel.opcode != "fusion" or kernel.fusion_kind == "kCustom":
        return False
    body = module.by_name.get(kernel.fused_computation or "")
    return body is not None and body.root.opcode == "tuple"


def _replayed_from(replay) -> str | None:
    if replay is None:
        return None
    if replay.source == "snapshot":
        return f"snapshot before fusion: {replay.source_path}"
    if replay.source == "unfused":
        return "this module with its fusions inlined (no snapshot before fusion)"
    return "the input module"

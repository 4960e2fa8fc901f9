"""The explainer: kernels, edges, one boundary per edge with its rule, and the summaries."""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from .. import attributes, ir
from ..kernels import CONTROL, executed_computations, is_kernel
from .detect import Detected
from .dumpctx import DumpContext
from .loops import trip_count
from .records import UNKNOWN, Boundary, ComputationSummary, Explanation, KernelInfo, LoopSummary, SourceRef
from .trace import (Edge, Source, Tracer, display, instruction_finder, kind_of, label_kind, label_of, loop_words,
                    op_name_in, opcode_in, opcodes_of, reader, subshape, value_instruction)
from .xlalog import agrees as agrees_with_xla, load_xla_log, xla_log_verdict



#: Passes whose decisions pair two siblings (kernels reading a common value), not a producer
#: and its consumer: such a refusal may explain an edge in either direction.
_SIBLING_PASSES = frozenset({"multi_output_fusion", "horizontal_loop_fusion", "horizontal_input_fusion"})


class Explainer:
    def __init__(self, module: ir.Module, detected: Detected, dump: DumpContext | None, stage: str,
                 replay=None):
        self.m = module
        self.detected = detected
        self.dump = dump
        self.stage = stage
        self.replay = replay
        self.notes: list[str] = []
        self.tracer = Tracer(module)
        self.executed = executed_computations(module)
        self._program = None
        self._pipeline_ctx = None
        self._pipeline_spec = None
        self._pipeline_ready = False
        self._loops: dict[str, LoopSummary] = {}
        self._loop_by_comp: dict[str, LoopSummary] | None = None
        self._runs: dict[str, float | None] = {}
        self._xla_log = None
        self._xla_log_ready = False
        self._refusals: tuple[dict, dict, dict] | None = None
        self._find = None  # trace.instruction_finder of the module, built on first use

    # -- driver ----------------------------------------------------------------------------
    def run(self) -> Explanation:
        from ..rules import load_all

        load_all()
        kernels = self._kernels()
        self._kernel_index = {(k.computation, k.name): k for k in kernels}
        loops = self._loop_summaries()
        computations = self._computation_summaries()
        self._inserted = self._inserted_copies()
        boundaries = sorted((self._boundary(edge) for edge in self._edges()), key=self._order())
        log = self.dump.xla_log() if self.dump is not None else None
        return Explanation(
            module=self.m.name, backend=self.detected.backend, pipeline=self.detected.pipeline,
            gpu=self.detected.gpu, input=str(self.dump.chosen.path) if self.dump is not None else self.m.path,
            stage=self.stage, kernels=tuple(kernels), boundaries=tuple(boundaries),
            computations=tuple(computations), loops=tuple(loops), detected=self.detected.why,
            notes=tuple(dict.fromkeys(self.notes)), xla_log=str(log.path) if log is not None else None,
            fused_module=self.m)

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
    def _boundary(self, edge: Edge) -> Boundary:
        from ..hints import HintInput, hint_for
        from ..rules import REGISTRY

        src = edge.source
        producer_kernel = self.m[src.comp][src.name]
        consumer_instr = self.m[edge.consumer_comp][edge.consumer]
        producer = value_instruction(self.m, producer_kernel, src.path)
        consumer_is_kernel = is_kernel(consumer_instr)
        consumer = reader(self.m, consumer_instr, edge.operand_index) if consumer_is_kernel else consumer_instr.name
        nbytes = subshape(producer_kernel.shape, src.path).byte_size
        loop = self._loop_of(edge)
        facts: dict[str, Any] = {
            "crossing": src.crossing, "bytes": nbytes,
            "producer_name": display(producer, src.name, src.path if producer == src.name else ()),
            "consumer_name": display(consumer, edge.consumer),
            "loop": loop_words(loop) if loop else "the while loop",
            "tuple_role": self._tuple_role(edge.consumer_comp, consumer_instr),
            "inserted_copies": self._inserted, "copy_reasons": self._copy_reasons,
            "pipeline": self.detected.pipeline,
        }
        outcome = self._ask(edge, facts, producer_kernel, consumer_instr)
        rule_id, reason, rule_facts, explained_by = outcome
        rule = REGISTRY.get(rule_id)
        tags = tuple(sorted(rule.tags)) if rule is not None else ()
        extra_tags = self._extra_tags(src, edge)
        tags = tuple(sorted(set(tags) | extra_tags))
        verdict = self._xla_verdict(src, edge)
        xla_reason = verdict.reason if verdict is not None else None
        agrees = agrees_with_xla(rule, verdict, self.detected.pipeline) if verdict is not None else None
        source = self._source(src.comp, producer) or self._source(src.comp, src.name) \
            or self._source(edge.consumer_comp, consumer) or self._context_source(edge, loop)
        consumer_source = self._source(edge.consumer_comp, consumer) or self._source(edge.consumer_comp, edge.consumer)
        hint = hint_for(HintInput(
            rule=rule_id, tags=tags, crossing=src.crossing,
            producer_opcode=opcode_in(self.m, producer_kernel, producer),
            producer_op_name=op_name_in(self.m, producer_kernel, producer),
            producer_library=self._library_tag(src.comp, src.name),
            consumer_library=self._library_tag(edge.consumer_comp, edge.consumer) if consumer_is_kernel else None,
            producer_kernel_opcodes=opcodes_of(self.m, producer_kernel),
            consumer_kernel_opcodes=opcodes_of(self.m, consumer_instr) if consumer_is_kernel else frozenset(),
            in_loop=self._enclosing_loop(edge.consumer_comp) or self._enclosing_loop(src.comp),
            consumer_is_buffer=not consumer_is_kernel,
        ))
        clean_facts = {k: v for k, v in dict(rule_facts).items()
                       if k not in ("inserted_copies", "copy_reasons", "pipeline") and not callable(v)}
        return Boundary(
            producer=producer, consumer=consumer, producer_kernel=src.name,
            consumer_kernel=edge.consumer if consumer_is_kernel else None,
            producer_computation=src.comp, consumer_computation=edge.consumer_comp, crossing=src.crossing,
            rule=rule_id, tags=tags, reason=reason, relaxable=rule.relaxable if rule is not None else None,
            bytes=nbytes, source=source, hint=hint, xla_reason=xla_reason, agrees_with_xla=agrees,
            explained_by=explained_by, facts=clean_facts, via=src.via, consumer_source=consumer_source,
            output=src.path)

    def _ask(self, edge: Edge, facts: dict, producer_kernel: ir.Instruction,
             consumer_instr: ir.Instruction) -> tuple[str, str, Mapping, str]:
        """(rule id, reason, facts, who explained it), first match wins."""
        from ..rules import Candidate, evaluate
        from ..rules.boundaries import ORDER

        pnode = self._node(edge.source.comp, producer_kernel.name)
        cnode = self._node(edge.consumer_comp, consumer_instr.name)
        if pnode is not None and cnode is not None:
            outcome = evaluate(ORDER, Candidate(pnode, cnode, self, dict(facts)))
            if outcome.blocked_by is not None:
                r = outcome.blocked_by
                return r.id, r.reason(outcome.facts), outcome.facts, "boundary-rule"
        if edge.source.crossing or not is_kernel(consumer_instr):
            return UNKNOWN, "no rule explains this boundary", {}, "none"
        decisions = self._replay_decisions(edge)
        if decisions:
            decision = decisions[-1]  # the last pass that considered the pair has the final word
            facts = dict(decision.facts)
            if len(decisions) > 1:
                facts["history"] = [f"{d.pass_name}: {d.rule}: {d.reason}" for d in decisions]
            return decision.rule or UNKNOWN, decision.reason, facts, "replay"
        decision = self._pipeline_decision(pnode, cnode)
        if decision is not None and decision.rule:
            return decision.rule, decision.reason, dict(decision.facts), "pipeline"
        from_log = self._rule_from_xla_log(edge)
        if from_log is not None:
            return from_log
        return UNKNOWN, "no rule explains this boundary", {}, "none"

    # -- the replay's decisions, the pipeline, XLA's log ------------------------------------
    def _replay_decisions(self, edge: Edge) -> list:
        """The replay's refusals between the two kernels' instructions, in the order made."""
        if self.replay is None:
            return []
        kernels, by_producer, by_consumer = self._refusal_index()

        def members(name: str) -> set[str]:
            for comp in (edge.source.comp, edge.consumer_comp):
                if (comp, name) in kernels:
                    return kernels[(comp, name)]
            return {name}  # not a kernel of the replay: the instruction itself

        pm, cm = members(edge.source.name), members(edge.consumer)
        # refusals with a producer member in one kernel and a consumer member in the other
        found = set().union(*(by_producer.get(m, ()) for m in pm))
        found &= set().union(*(by_consumer.get(m, ()) for m in cm))
        decisions = self.replay.decisions
        return [decisions[i] for i in sorted(found)]

    def _refusal_index(self) -> tuple[dict, dict, dict]:
        """Built once: each kernel's members by (computation, name), and for every member the
        refusals whose producer (consumer) side holds it.  A scan of every decision per
        boundary was quadratic: minutes on a 10k-instruction module."""
        if self._refusals is None:
            from ..decision import Verdict

            # A kernel is known by the members only it holds: an instruction duplicated into
            # many kernels (a broadcast constant, after XLA's CSE, sits in nearly every one)
            # would tie refusals made anywhere in the model to every boundary.
            copies = Counter(m for k in self.replay.kernels for m in set(k.instructions))
            kernels = {}
            for k in self.replay.kernels:
                own = {m for m in k.instructions if copies[m] == 1}
                kernels[(k.computation, k.name)] = own or set(k.instructions)
            by_producer: dict[str, list[int]] = {}
            by_consumer: dict[str, list[int]] = {}
            for i, d in enumerate(self.replay.decisions):
                if d.verdict != Verdict.BLOCKED:
                    continue
                sides = [(d.producer_members or (d.producer,), d.consumer_members or (d.consumer,))]
                if d.pass_name in _SIBLING_PASSES:  # siblings: either may be the edge's producer
                    sides.append(sides[0][::-1])
                for producer_side, consumer_side in sides:
                    for member in set(producer_side):
                        by_producer.setdefault(member, []).append(i)
                    for member in set(consumer_side):
                        by_consumer.setdefault(member, []).append(i)
            self._refusals = (kernels, by_producer, by_consumer)
        return self._refusals

    def _pipeline_decision(self, pnode, cnode):
        if pnode is None or cnode is None:
            return None
        spec, ctx = self._pipeline()
        if spec is None or spec.explain_boundary is None:
            return None
        try:
            return spec.explain_boundary(pnode, cnode, ctx)
        except Exception as err:  # noqa: BLE001 - a pipeline bug must not stop the explanation
            self.notes.append(f"the {spec.backend}/{spec.name} pipeline's explain_boundary failed "
                              f"({type(err).__name__}: {err}); such boundaries are left unknown")
            return None

    def _pipeline(self):
        if not self._pipeline_ready:
            self._pipeline_ready = True
            from ..errors import HlofuseError
            from ..pipeline import Options, get_pipeline, make_context

            d = self.detected
            try:
                spec = get_pipeline(d.backend, d.pipeline)
                ctx = make_context(Options(backend=d.backend, pipeline=spec.name, gpu=d.gpu))
                ctx.pipeline = spec.name
                ctx.pass_name = "explain"
                self._pipeline_spec, self._pipeline_ctx = spec, ctx
                if spec.explain_boundary is None:
                    self.notes.append(f"the {d.backend}/{spec.name} pipeline has no explain_boundary yet; "
                                      "boundaries decided by its passes are left unknown")
            except HlofuseError as err:
                self.notes.append(f"{err}; boundaries decided by fusion passes are left unknown")
        return self._pipeline_spec, self._pipeline_ctx

    def _log(self):
        if not self._xla_log_ready:
            self._xla_log_ready = True
            log = self.dump.xla_log() if self.dump is not None else None
            if log is not None:
                self._xla_log = load_xla_log(log.path, self.notes)
        return self._xla_log

    def _xla_verdict(self, src: Source, edge: Edge):
        """XLA's logged refusal for the pair (an xla_log.XlaVerdict with a reason), or None."""
        log = self._log()
        if log is None or src.crossing:
            return None
        return xla_log_verdict(log, self.m, src, edge, self.notes)

    def _rule_from_xla_log(self, edge: Edge):
        """A rule of the registry whose XLA string is the one XLA's log gives for this pair."""
        from ..rules import REGISTRY

        verdict = self._xla_verdict(edge.source, edge)
        reason = verdict.reason if verdict is not None else None
        if not reason:
            return None
        pipeline = self.detected.pipeline
        for r in REGISTRY.values():
            if r.xla.message and r.xla.message.strip() == reason.strip() and \
                    (pipeline is None or pipeline in r.pipelines):
                return r.id, f"XLA's fusion log: {reason}", {"xla_log": reason}, "xla-log"
        return None

    # -- graph nodes for the rules ---------------------------------------------------------
    def _node(self, comp: str, name: str):
        if self._program is None:
            from ..graph import Program

            self._program = Program.from_module(self.m)
        graph = self._program.graphs.get(comp)
        return graph.get(name) if graph is not None else None

    # -- copies added after fusion -----------------------------------------------------------
    def _inserted_copies(self) -> frozenset[str]:
        """Unfused copies that copy insertion added after fusion (see BND-COPY-INSERTED)."""
        copies = [(comp, instr) for comp in self.executed for instr in comp.instructions if instr.opcode == "copy"]
        self._copy_reasons = {instr.name: self._copy_reason(comp, instr) for comp, instr in copies}
        if self.stage == "replayed":
            return frozenset()  # the replay's input already had every copy fusion saw
        snapshot_names = self._after_fusion_copy_names()
        out = set()
        for comp, instr in copies:
            if snapshot_names is not None:
                if instr.name not in snapshot_names:
                    out.add(instr.name)
            elif not attributes.metadata(instr).op_name:
                out.add(instr.name)
        return frozenset(out)

    def _after_fusion_copy_names(self) -> set[str] | None:
        if self.dump is None or self.dump.chosen.stage != "after_optimizations":
            return None
        snap = self.dump.after_fusion_snapshot()
        if snap is None:
            return None
        from ..parse import parse_text

        try:
            text = snap.path.read_text(encoding="utf-8", errors="replace")
            module = parse_text(text, str(snap.path))
        except Exception:  # noqa: BLE001 - fall back to the metadata test
            return None
        return {i.name for _, i in module.instructions() if i.opcode == "copy"}

    def _copy_reason(self, comp: ir.Computation, instr: ir.Instruction) -> str:
        role = self.m.role(comp.name)
        users = comp.users.get(instr.name, ())
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

    # -- loops and how often each computation runs ------------------------------------------
    def _loop_summaries(self) -> list[LoopSummary]:
        counts = {c.name: sum(1 for i in c.instructions if is_kernel(i)) for c in self.executed}
        out = []
        for comp in self.executed:
            for instr in comp.instructions:
                if instr.opcode != "while":
                    continue
                body = (instr.attr("body") or "").lstrip("%")
                cond = (instr.attr("condition") or "").lstrip("%")
                trip, from_ = trip_count(self.m, comp, instr)
                launched = from_ != "backend_config"
                out.append(LoopSummary(
                    name=instr.name, computation=comp.name, body=body, condition=cond, trip_count=trip,
                    trip_count_from=from_, body_kernels=counts.get(body, 0), condition_kernels=counts.get(cond, 0),
                    condition_launched=launched, kernels_per_iteration=0, kernels_total=None,
                    source=self._source(comp.name, instr.name),
                    max_kernel_bytes=max((i.shape.byte_size for i in self.m[body].instructions
                                          if is_kernel(i)), default=0) if body in self.m.by_name else 0))
        self._loops = {lp.name: lp for lp in out}
        # launches per iteration include loops nested in the body (when their count is known)
        done: dict[str, LoopSummary] = {}
        for lp in out:
            done[lp.name] = self._with_totals(lp, counts, done)
        self._loops = {lp.name: done[lp.name] for lp in out}
        self._loop_by_comp = None
        return [done[lp.name] for lp in out]

    def _with_totals(self, lp: LoopSummary, counts, done) -> LoopSummary:
        from dataclasses import replace

        nested = 0
        nested_known = True
        for comp_name in (lp.body,) + ((lp.condition,) if lp.condition_launched else ()):
            comp = self.m.by_name.get(comp_name)
            if comp is None:
                continue
            for instr in comp.instructions:
                if instr.opcode == "while" and instr.name in self._loops:
                    inner = done.get(instr.name) or self._with_totals(self._loops[instr.name], counts, done)
                    if inner.kernels_total is None:
                        nested_known = False
                    else:
                        nested += inner.kernels_total
        per_iteration = lp.body_kernels + (lp.condition_kernels if lp.condition_launched else 0) + nested
        total = None
        if lp.trip_count is not None and nested_known:
            total = lp.trip_count * per_iteration
            if lp.condition_launched:
                total += lp.condition_kernels  # the last test, which ends the loop
        return replace(lp, kernels_per_iteration=per_iteration, kernels_total=total)

    def _computation_summaries(self) -> list[ComputationSummary]:
        out = []
        for comp in reversed(self.m.computation_post_order):
            self._runs_of(comp.name, set())  # callers first: a long call chain needs no deep recursion
        for comp in self.executed:
            kinds: Counter = Counter()
            for instr in comp.instructions:
                if is_kernel(instr):
                    kinds[label_kind(instr)] += 1
            out.append(ComputationSummary(comp.name, self.m.role(comp.name), sum(kinds.values()),
                                          dict(kinds), self._runs_of(comp.name, set())))
        return out

    def _runs_of(self, comp: str, visiting: set) -> float | None:
        if comp in self._runs:
            return self._runs[comp]
        if comp == self.m.entry_name:
            return 1
        if comp in visiting:
            return None
        visiting = visiting | {comp}
        total: float = 0
        callers = self.m.callers.get(comp, ())
        if not callers:
            return None
        for caller_comp, caller_name, key in callers:
            caller = self.m[caller_comp][caller_name]
            runs = self._runs_of(caller_comp, visiting)
            if runs is None:
                self._runs[comp] = None
                return None
            if caller.opcode == "while":
                lp = self._loops.get(caller_name)
                if lp is None or lp.trip_count is None:
                    self._runs[comp] = None
                    return None
                if key == "body":
                    total += runs * lp.trip_count
                elif lp.condition_launched:
                    total += runs * (lp.trip_count + 1)
            else:
                total += runs  # a branch runs at most this often; a call exactly
        self._runs[comp] = total
        return total

    def _loop_of(self, edge: Edge) -> LoopSummary | None:
        name = edge.source.loop
        if name and name in self._loops:
            return self._loops[name]
        return None

    def _enclosing_loop(self, comp: str) -> LoopSummary | None:
        if self._loop_by_comp is None:
            self._loop_by_comp = {}
            for lp in self._loops.values():
                self._loop_by_comp.setdefault(lp.body, lp)
                self._loop_by_comp.setdefault(lp.condition, lp)
        return self._loop_by_comp.get(comp)

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
        enclosing = self._enclosing_loop(edge.consumer_comp) or self._enclosing_loop(edge.source.comp)
        return enclosing.source if enclosing is not None else None

    # -- small helpers -----------------------------------------------------------------------
    def _tuple_role(self, comp_name: str, instr: ir.Instruction) -> str:
        if instr.opcode != "tuple":
            return ""
        comp = self.m[comp_name]
        role = self.m.role(comp_name)
        if instr.name == comp.root_name:
            if role == "while_body":
                loop = self._enclosing_loop(comp_name)
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

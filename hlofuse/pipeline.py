"""Run a fusion pipeline over a module: the only place a FusionResult is built.

A pipeline is an ordered list of passes (`Pass`), each a function `run(program, ctx) -> bool`
(changed) named after XLA's pass as it appears in dump file names; every pipeline is written
out in hlofuse/passes/pipelines.py.  `replay()` runs them over a `graph.Program` copy of the
module and collects the decisions every pass recorded and the kernels of the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from .native import mypyc_attr
from . import ir
from .decision import Decision, FusionResult, Kernel, Verdict
from .collector import collector_paused
from .device import DeviceSpec, load_gpu
from .errors import InputError
from .graph import Graph, Node, Program
from .rules import Outcome, evaluate
from .rules.evaluation import rule_reason
from .verify import verify

if TYPE_CHECKING:
    from .cost.legacy import LegacyPerformanceModel
    from .gpu.config import GpuConfig
    from .passes.instruction_fusion import InstructionFusion
    from .xla_log import FusionLog

PassFn = Callable[[Program, "Context"], bool]


@mypyc_attr(native_class=False)  # public: callers read vars(options)
@dataclass(frozen=True)
class Options:
    """What to replay: `backend` gpu|cpu, `pipeline` legacy|priority|cpu (None: the
    backend's default), `passes` a subset by XLA's names (None: all), `gpu` a description name
    or file, `relax` rule references (ids, names, tags, globs)."""

    backend: str = "gpu"
    pipeline: str | None = None
    passes: Sequence[str] | None = None
    gpu: str | None = None
    relax: Sequence[str] = ()
    #: XLA:CPU only: whether library (YNN) fusion ran before `fusion` (None: as the input shows).
    library_fusion: bool | None = None
    #: XLA flags the program was compiled with (XLA_FLAGS text); GPU replays apply the ones
    #: hlofuse models (gpu.config.MODELLED_FLAGS) over jax's defaults and note the others.
    xla_flags: Sequence[str] = ()


DEFAULT_PIPELINE = {"gpu": "priority", "cpu": "cpu"}


@mypyc_attr(native_class=False)
@dataclass
class Context:
    """Shared state of one replay: device, relaxed rules, the decisions passes record, and
    what passes hand to each other or keep from one run to the next — one typed field per kind
    of state, each saying who sets it and how long it lives.  Every field lives as long as the
    context (one replay, or one explainer's questions about a fused module)."""

    options: Options
    backend: str
    pipeline: str
    device: DeviceSpec | None
    relaxed: frozenset[str]
    decisions: list[Decision] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pass_name: str = ""
    #: The GPU description and XLA settings every GPU pass reads (gpu.config.gpu_config builds
    #: it on first use from `device`, `pipeline` and the options' XLA flags; a caller that
    #: replays with another configuration, as the conformance runner does, sets it first).
    gpu_config: "GpuConfig | None" = None
    #: What PriorityFusion did, step by step, as XLA logs it in *.priority_fusion_dump.txt
    #: (passes/priority_fusion.priority_fusion makes it; every run of the pass appends).
    priority_fusion_log: "FusionLog | None" = None
    #: The cost model MultiOutputFusion asks, as a factory `factory(cfg) -> model` (the
    #: priority pipeline sets its 2026 model before the pass; None: the legacy model).
    mof_model: "Callable[[GpuConfig], object] | None" = None
    #: The legacy GpuPerformanceModel (and its cost analysis) every legacy pass shares
    #: (cost/legacy.shared_model; rebuilt when asked with another GpuConfig).
    legacy_performance_model: "LegacyPerformanceModel | None" = None
    #: The legacy pipeline's two GpuInstructionFusion passes (without and with duplication),
    #: made by the first `fusion` entry (passes/legacy.py): their operand-reuse caches outlive
    #: a pass run, as XLA's pass objects do.
    legacy_instruction_fusion: "tuple[InstructionFusion, InstructionFusion] | None" = None
    #: Per HloPassPipeline of the legacy pipeline (passes/legacy.PassList key): the index in
    #: `decisions` of its first Decision, set by its first pass.
    pass_list_starts: dict[str, int] = field(default_factory=dict)
    #: Per instruction-fusion pass name: consumer uid → {producer uid → index into `decisions`},
    #: shared by the runs of one pass (passes/instruction_fusion.FusionRun).
    fusion_decision_slots: dict[str, dict[int, dict[int, int]]] = field(default_factory=dict)

    def record(self, decision: Decision) -> None:
        self.decisions.append(decision)

    def decide(self, rule_ids, candidate, *, pass_name: str | None = None, record: bool = True):
        """Ask `rule_ids` about `candidate` (XLA's FusionDecision order, relaxation applied) and
        record the one Decision this candidate pair yields; returns the rules' Outcome."""
        outcome = evaluate(rule_ids, candidate, self.relaxed)
        if record:
            self.record(decision_from(pass_name or self.pass_name, candidate.producer, candidate.consumer,
                                      outcome))
        return outcome


def decision_from(pass_name: str, producer: Node, consumer: Node, outcome: Outcome) -> Decision:
    """The Decision for one candidate pair from the rules' Outcome: fused, relaxed (fused only
    because the user relaxed a rule that objected), or blocked with the rule's facts.
    (Built with positional fields: hundreds of thousands are made on a large module.)"""
    graph = consumer.graph if consumer.graph is not None else producer.graph  # (a graph's truth is its size)
    source = _source(producer) or _source(consumer)
    computation = graph.name if graph is not None else None
    relaxed = tuple(outcome.relaxed)
    rule = outcome.blocked_by
    if rule is None:
        verdict = Verdict.RELAXED if relaxed else Verdict.FUSED
        return Decision(pass_name, producer.name, consumer.name, verdict, None, "", None, {}, relaxed,
                        computation, producer.members(), consumer.members(), source)
    reason, xla_reason = _reasons(rule, outcome)
    return Decision(pass_name, producer.name, consumer.name, Verdict.BLOCKED, rule.id, reason, xla_reason,
                    dict(outcome.facts), relaxed, computation, producer.members(), consumer.members(), source)


def _reasons(rule, outcome: Outcome) -> tuple[str, str | None]:
    """Our sentence and XLA's for a refusal; the last outcome's are remembered, since a
    producer refused for all its users (fusion merger) yields one Decision per user."""
    if _last_reasons[0] is outcome:
        return _last_reasons[1]
    xla_reason = rule.xla.message
    if xla_reason and "{" in xla_reason:
        try:
            xla_reason = xla_reason.format(**outcome.facts)
        except (KeyError, IndexError, ValueError):
            pass
    found = (rule_reason(rule.message, outcome.facts), xla_reason)  # (Rule.reason, without the interpreter)
    _last_reasons[:] = [outcome, found]
    return found


_last_reasons: list = [None, None]


def _source(node: Node):
    """Where the user's code made `node` (its metadata, or the module's stack frames)."""
    graph = node.graph
    program = graph.program if graph is not None else None
    if program is None or program.source is None:
        return None
    return program.location(node)


#: Explains, on an already fused graph, why `producer` (a kernel's output) was not fused
#: into `consumer`: returns the Decision (verdict BLOCKED, with rule and facts), or None when
#: the pipeline's rules find no reason.
ExplainFn = Callable[[Node, Node, "Context"], Decision | None]


@dataclass(frozen=True)
class Pass:
    """One pass of a pipeline as XLA runs it."""

    #: XLA's pass name as dump file names spell it (what `--passes` selects).
    name: str
    run: PassFn
    #: Why XLA runs it here, in one line.
    why: str
    #: The XLA source it mirrors (file, and the class or function).
    xla: str


@dataclass(frozen=True)
class PipelineSpec:
    backend: str
    name: str
    steps: tuple[Pass, ...]
    description: str
    explain_boundary: ExplainFn | None = None

    @property
    def passes(self) -> tuple[tuple[str, PassFn], ...]:
        """(name, run) of each pass, in order."""
        return tuple((step.name, step.run) for step in self.steps)


def get_pipeline(backend: str, name: str | None) -> PipelineSpec:
    from .passes.pipelines import PIPELINES  # the passes import this module

    name = name or DEFAULT_PIPELINE.get(backend, "")
    spec = PIPELINES.get((backend, name))
    if spec is None:
        known = ", ".join(f"--backend {b} --pipeline {p}" for b, p in sorted(PIPELINES))
        raise InputError(f"no fusion pipeline {name!r} for backend {backend!r}; available: {known or 'none yet'}")
    return spec


def make_context(options: Options) -> Context:
    from .rules import resolve_relax

    spec_name = options.pipeline or DEFAULT_PIPELINE.get(options.backend)
    device = load_gpu(options.gpu) if options.backend == "gpu" else None
    relaxed = resolve_relax(options.relax, spec_name) if options.relax else frozenset()
    ctx = Context(options, options.backend, spec_name, device, relaxed)
    if options.xla_flags:
        from .gpu.config import parse_xla_flags

        try:
            fields, ignored = parse_xla_flags(options.xla_flags)
        except ValueError as err:
            raise InputError(f"XLA flags: {err}") from None
        if options.backend != "gpu":
            from .passes.cpu import YNN_FLAG, ynn_fusion_types

            ynn_fusion_types(options.xla_flags)  # a value XLA would refuse is an error here too
            ignored = [name for name in dict.fromkeys([*fields, *ignored]) if name != YNN_FLAG]
        if ignored:
            ctx.notes.append(f"XLA flags not modelled by this replay, ignored: {', '.join(ignored)}")
    return ctx


def replay(module: ir.Module, options: Options = Options(), progress: Callable[[str], None] | None = None) -> FusionResult:
    """Replay the fusion pipeline of `options` on `module` (XLA's module right before fusion)."""
    with collector_paused():
        return _replay(module, options, progress)


def _replay(module: ir.Module, options: Options, progress: Callable[[str], None] | None) -> FusionResult:
    spec = get_pipeline(options.backend, options.pipeline)
    verify(module)  # as XLA verifies a module before its passes: a bad one fails here, not in a pass
    ctx = make_context(options)
    ctx.pipeline = spec.name
    names = [n for n, _ in spec.passes]
    if options.passes is not None:
        unknown = [p for p in options.passes if p not in names]
        if unknown:
            raise InputError(f"unknown pass {', '.join(unknown)} for the {spec.name} pipeline; its passes: "
                             f"{', '.join(dict.fromkeys(names))}")
    program = Program.from_module(module)
    ran = []
    for name, fn in spec.passes:
        if options.passes is not None and name not in options.passes:
            continue
        ctx.pass_name = name
        if progress is not None:
            progress(name)
        fn(program, ctx)
        ran.append(name)
    # XLA's pipelines end in an HloDCE: no computation the entry does not reach is left
    program.remove_dead_graphs()
    fused = program.to_module()
    result = FusionResult(
        module=fused,
        input=module,
        backend=options.backend,
        pipeline=spec.name,
        passes=tuple(dict.fromkeys(ran)),
        gpu=ctx.device.name if ctx.device else None,
        relaxed=tuple(sorted(ctx.relaxed)),
        kernels=tuple(kernels_of(program)),
        decisions=tuple(ctx.decisions),
        notes=tuple(ctx.notes),
    )
    program.dispose()  # the result holds names and ir values only, no node of the program
    return result


def kernels_of(program: Program) -> list[Kernel]:
    """The kernels of a (fused) program: every kernel-launching node of every executed graph."""
    from .kernels import CONTROL
    from .opcodes import NON_KERNEL

    out: list[Kernel] = []
    for graph in executed_graphs(program):
        for node in graph.post_order():
            if node.opcode in NON_KERNEL or node.opcode in CONTROL:
                continue
            out.append(Kernel(node.name, kernel_kind(node), graph.name, node.members(),
                              node.fused.root.name if node.fused is not None else node.name,
                              kernel_outputs(node)))
    return out


def kernel_outputs(node: Node) -> tuple[str, ...]:
    """The input-module instructions whose values a kernel writes: a fusion's root, or each
    element of its root tuple (a fused parameter passed straight out: the operand it binds)."""
    if node.fused is None:
        return node.origin[-1:] if node.origin else (node.name,)
    root = node.fused.root
    names = []
    for out in (root.operands if root.opcode == "tuple" else [root]):
        if out.opcode == "parameter" and out.parameter_number < len(node.operands):
            out = node.operands[out.parameter_number]
        names.append(out.origin[-1] if out.origin else out.name)
    return tuple(names)


def kernel_kind(node: Node) -> str:
    if node.opcode == "fusion":
        return node.fusion_kind or "kLoop"
    if node.opcode == "custom-call":
        return "library"
    return node.opcode


def executed_graphs(program: Program) -> list[Graph]:
    """Graphs whose instructions launch: the entry and what while/conditional/call/async run."""
    from .kernels import CONTROL

    out: list[Graph] = []
    seen: set[str] = set()
    stack = [program.entry]
    while stack:
        g = stack.pop()
        if g.name in seen:
            continue
        seen.add(g.name)
        out.append(g)
        for node in g:
            if node.opcode in CONTROL:
                for callee in node.called:
                    if callee in program.graphs:
                        stack.append(program.graphs[callee])
    order = {g.name: i for i, g in enumerate(program.graph_order())}
    return sorted(out, key=lambda g: order.get(g.name, 0))

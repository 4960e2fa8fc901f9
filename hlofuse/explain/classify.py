"""Why one kernel boundary exists: a pure function of the edge and the evidence.

The primary reason is the decision that first kept the two sides apart, in the pass that made
it (the replay's decisions between the instructions of the producer kernel and those of the
consumer kernel, earliest pass first: priority-fusion before multi_output_fusion; legacy
fusion, fusion, fusion_merger, multi_output_fusion, horizontal).  What later passes did to
the same pair — another refusal, a producer turned into a multi-output fusion — and the
structural facts that also hold (a library call, a tuple, a copy added after fusion) follow
in `then`, in order.

A structural boundary rule (hlofuse/rules/boundaries.py) is primary only where no fusion
decision was ever asked (values crossing a loop or a call, copies added after fusion), or
where it names the decision more precisely: PriorityFusion refuses a custom call as "the
consumer is not fusible", and BND-LIBRARY-CONSUMER says which library call it is — the same
decision (XLA_REASONS lists XLA's words for each), reported with the pass that made it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from ..decision import Decision, Verdict
from .evidence import Evidence

#: Boundary rules about what fusion never saw: primary whatever the replay decided.
ALWAYS_STRUCTURAL = frozenset({"BND-COPY-INSERTED", "BND-LOOP-CARRIED", "BND-LOOP-INPUT", "BND-LOOP-OUTPUT",
                               "BND-CALLED-COMPUTATION"})


@dataclass(frozen=True)
class Later:
    """Something that happened to the pair after the primary decision (`then`)."""

    pass_name: str  # the pass, or "structure" for a fact of the compiled program
    rule: str | None
    reason: str

    def to_dict(self) -> dict:
        return {"pass": self.pass_name, "rule": self.rule, "reason": self.reason}

    def text(self) -> str:
        rule = f" {self.rule}" if self.rule else ""
        return f"{self.pass_name}{rule}: {self.reason}"


@dataclass(frozen=True)
class Answer:
    """A boundary's reason: the rule, our sentence, the facts, who answered, the pass that
    decided, the words XLA uses for that decision, and what came after."""

    rule: str
    reason: str
    facts: Mapping[str, Any]
    explained_by: str  # boundary-rule | replay | pipeline | xla-log | none
    decided_in: str | None = None
    xla_string: str | None = None
    then: tuple[Later, ...] = ()
    #: The replay's decision behind the answer (its sides name the instructions XLA's log
    #: knows), when there is one.
    decision: Decision | None = field(default=None, compare=False)


@dataclass(frozen=True)
class EdgeView:
    """One edge as classification sees it: the kernels on each side, and the before-fusion
    instructions standing for the crossing value, its reader and the views between them."""

    producer_comp: str
    producer_kernel: str
    consumer_comp: str
    consumer: str  # the consuming kernel, or the buffer / control-flow instruction
    consumer_is_kernel: bool
    crossing: tuple[str, ...]
    value: str | None = None
    reader: str | None = None
    views: tuple[str, ...] = ()
    producer_multi_output: bool = False
    consumer_multi_output: bool = False


def classify(edge: EdgeView, evidence: Evidence, structure: Answer | None, pipeline: str | None,
             fallback: Callable[[], Answer]) -> Answer:
    """The reason for one edge.  `structure` is the boundary rules' answer (None when none
    objects); `fallback` answers from the fused graph alone (the pipeline's explain_boundary,
    then XLA's log), for edges the replay does not explain."""
    replay = evidence.replay
    if edge.crossing or replay is None or (structure is not None and structure.rule in ALWAYS_STRUCTURAL):
        # no fusion pass ever pairs instructions of two computations, or sees a copy that copy
        # insertion adds after fusion
        return structure if structure is not None else fallback()
    producers = set(replay.kernel_members(edge.producer_comp, edge.producer_kernel))
    producers.update(edge.views)  # a view fusion saw between them may be either side of a decision
    if edge.consumer_is_kernel:
        consumers = set(replay.kernel_members(edge.consumer_comp, edge.consumer))
    else:
        consumers = {edge.reader} if edge.reader else set()
    consumers.update(edge.views)
    decisions = replay.index.decisions
    between = replay.index.between(producers, consumers)
    refusals = [i for i in between if decisions[i].verdict == Verdict.BLOCKED]
    differ = _replay_differs(edge, replay)
    if between:
        # the replay fused them in an earlier pass than any refusal: what a later pass refused
        # about the merged kernel says nothing about XLA's boundary
        first = decisions[between[0]].pass_name
        fused = not any(decisions[i].pass_name == first for i in refusals)
    else:
        fused = _fused_by_replay(edge, replay)
    if not refusals or fused:
        if structure is not None:
            return structure
        answer = fallback()
        if fused:
            answer = replace(answer, facts={**answer.facts, "replay_fused_them": True})
        return _with_difference(answer, differ)
    first_pass = decisions[refusals[0]].pass_name
    same_pass = [i for i in refusals if decisions[i].pass_name == first_pass]
    chosen = max(same_pass, key=lambda i: _closeness(decisions[i], edge, i))
    d = decisions[chosen]
    answer = Answer(d.rule or "unknown", d.reason, dict(d.facts), "replay", d.pass_name, d.xla_reason, (), d)
    later = _later_decisions(decisions, refusals, first_pass, edge)
    if structure is not None:
        if refines(structure.rule, d, pipeline):
            answer = replace(answer, rule=structure.rule, reason=structure.reason,
                             facts={**d.facts, **structure.facts, "decision_rule": d.rule})
        else:
            later.append(Later("structure", structure.rule, structure.reason))
    later.extend(_multi_output(edge, replay))
    return _with_difference(replace(answer, then=tuple(later)), differ)


def in_module_names(answer: Answer, view: EdgeView, final_name: Callable[[str, str, str], str | None]) -> Answer:
    """The answer in the explained module's names.  A replay's decision names instructions as
    the module before fusion did and the fusions the replay made as XLA's pass named them
    (`fusion.70`, as XLA's log does); XLA renames both after its fusion passes.
    `final_name(computation, name, kernel)` gives this module's name for one of them (None:
    the same name)."""
    d = answer.decision
    if d is None:
        return answer
    names = {}
    for side, kernel, comp in ((d.producer, view.producer_kernel, view.producer_comp),
                               (d.consumer, view.consumer, view.consumer_comp)):
        found = final_name(comp, side, kernel) if side else None
        if found and found != side:
            names[side] = found
    if not names:
        return answer

    def rename(text: str) -> str:
        return rename_names(text, names)

    then = tuple(replace(later, reason=rename(later.reason)) for later in answer.then)
    return replace(answer, reason=rename(answer.reason), then=then, facts={**answer.facts, "replay_names": names})


def _name_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def rename_names(text: str, names: dict[str, str]) -> str:
    """`text` with each whole instruction name of `names` replaced by its value, the names
    tried in order at each place: a name counts where it is not part of a longer name — not
    preceded by a name character, `.` or `-`, not followed by a name character, `-` or `.`
    and a digit (`fusion.7` is not `fusion`).  (A regular expression built per boundary did
    the same, compiling thousands of patterns on a large module.)"""
    out: list[str] = []
    done = position = 0
    end = len(text)
    while position < end:
        starts = [(text.find(n, position), i) for i, n in enumerate(names)]
        starts = [(at, i) for at, i in starts if at >= 0]
        if not starts:
            break
        at = min(at for at, _ in starts)
        for name in (n for n in names if text.startswith(n, at)):
            before = text[at - 1] if at else ""
            after = at + len(name)
            if before and (_name_char(before) or before in ".-"):
                continue
            if after < end and (_name_char(text[after]) or text[after] == "-"
                                or (text[after] == "." and after + 1 < end and text[after + 1].isdigit())):
                continue
            out.append(text[done:at])
            out.append(names[name])
            done = position = after
            break
        else:
            position = at + 1
    out.append(text[done:])
    return "".join(out)


def refines(structural_rule: str, decision: Decision, pipeline: str | None) -> bool:
    """Whether a boundary rule states the decision more precisely: the decision is one of the
    general refusals of that structure (SAME_DECISION), or XLA refuses that structure with
    exactly the words the decision carries (XLA_REASONS)."""
    from ..rules.boundaries import SAME_DECISION, XLA_REASONS

    if decision.rule in SAME_DECISION.get(structural_rule, ()):
        return True
    table = XLA_REASONS.get(structural_rule)
    if not table or decision.xla_reason is None:
        return False
    words = table.get(pipeline or "", ()) if pipeline else tuple(x for v in table.values() for x in v)
    # instruction fusion joins its reason and the multi-output fusion's refusal with " ; "
    said = decision.xla_reason.split(" ; ")[0].strip().lower()
    return any(said == w.strip().lower() for w in words)


def _closeness(d: Decision, edge: EdgeView, index: int) -> tuple:
    """Prefer the decision about the crossing value itself and its reader, then the earliest."""
    producer_side = d.producer_members or (d.producer,)
    consumer_side = d.consumer_members or (d.consumer,)
    return (edge.value in producer_side, edge.reader in consumer_side or bool(set(edge.views) & set(consumer_side)),
            -index)


def _later_decisions(decisions, refusals: list[int], first_pass: str, edge: EdgeView) -> list[Later]:
    """One entry per later pass that refused the pair again: its decision closest to the edge."""
    by_pass: dict[str, int] = {}
    for i in refusals:
        d = decisions[i]
        if d.pass_name == first_pass or d.producer in edge.views:
            continue  # (a view between them is not a kernel a later pass could fuse)
        best = by_pass.get(d.pass_name)
        if best is None or _closeness(d, edge, i) > _closeness(decisions[best], edge, best):
            by_pass[d.pass_name] = i
    return [Later(decisions[i].pass_name, decisions[i].rule, decisions[i].reason) for i in sorted(by_pass.values())]


def _multi_output(edge: EdgeView, replay) -> list[Later]:
    """A side that a later pass turned into a multi-output fusion, with the decision that did."""
    out = []
    for flag, comp, kernel, role in ((edge.producer_multi_output, edge.producer_comp, edge.producer_kernel, "producer"),
                                     (edge.consumer_multi_output, edge.consumer_comp, edge.consumer, "consumer")):
        if not flag:
            continue
        d = replay.made_multi_output.get((comp, kernel))
        if d is not None:
            what = (f"{kernel} became a multi-output fusion: {d.producer} and {d.consumer} were fused into one "
                    f"kernel that writes both outputs")
        else:
            what = f"{kernel} is a multi-output fusion (several outputs written by one kernel)"
        if role == "producer":
            what += f"; {edge.consumer} reads one of them"
        out.append(Later("multi_output_fusion", None, what))
    return out


def _replay_differs(edge: EdgeView, replay) -> bool:
    if replay.source == "input":
        return False
    keys = [(edge.producer_comp, edge.producer_kernel)]
    if edge.consumer_is_kernel:
        keys.append((edge.consumer_comp, edge.consumer))
    return any(k in replay.members and k not in replay.reproduced for k in keys)


def _fused_by_replay(edge: EdgeView, replay) -> bool:
    """Whether the replay put the crossing value and its reader in one kernel."""
    if edge.value and edge.reader:
        mine = set(replay.replay_kernels.get(edge.value, ()))
        return bool(mine & set(replay.replay_kernels.get(edge.reader, ())))
    return False


def _with_difference(answer: Answer, differ: bool) -> Answer:
    if not differ:
        return answer
    return replace(answer, facts={**answer.facts, "replay_kernels_differ": True})

"""XLA's own fusion log (`*.priority_fusion_dump.txt`, read by hlofuse/xla_log.py) as explain
uses it: XLA's reason for a pair of kernels of the fused module, and whether our rule agrees."""

from __future__ import annotations

import re

from .. import ir
from .trace import Edge, Source

def agrees(answer, rule, verdict, pipeline: str | None, others=()) -> tuple[bool | None, object]:
    """Whether our reason is the one XLA's log gives.  A cost-model rejection agrees with a
    cost-model verdict of ours; a refusal agrees when the words XLA uses for our decision
    (`answer.xla_string`) are XLA's logged words — else, for a rule answered without a decision,
    when its XLA string (or, for a boundary rule, one of the strings XLA uses for that
    situation in this pipeline) occurs in XLA's reason.  XLA logs one reason per producer, that
    of the first user refusing it in XLA's order of users (which a dump does not keep): where
    our decision for this pair differs from it, we agree when the replay refused the same
    producer for another user (`others`, the logged one first) with XLA's reason.
    Returns (agreement, the other decision that gave XLA's reason, or None); agreement is None
    when there is nothing to compare."""
    from ..rules import REGISTRY
    from ..rules.boundaries import XLA_REASONS

    if rule is None or verdict is None or verdict.reason is None:
        return None, None
    found = _same_verdict(rule, answer.xla_string if answer is not None else None, verdict)
    if found is not None:
        if not found:
            for other in others:
                if other is not getattr(answer, "decision", None) and \
                        _same_verdict(REGISTRY.get(other.rule), other.xla_reason, verdict):
                    return True, other
        return found, None
    text = _words(verdict.reason)
    expected: tuple[str, ...] = ()
    if rule.id in XLA_REASONS:
        table = XLA_REASONS[rule.id]
        expected = table.get(pipeline or "", ()) or tuple(x for v in table.values() for x in v)
    elif rule.xla.message:
        expected = (rule.xla.message,)
    if not expected:
        # XLA named a reason where our rule says only the cost model objected: they differ
        return (False if "cost-model" in rule.tags and rule.xla.message is None else None), None
    return any(_words(e) in text for e in expected), None


def _same_verdict(rule, xla_string: str | None, verdict) -> bool | None:
    """Whether a decision (its rule, the words XLA uses for it) is XLA's logged verdict; None
    when the decision carries no words to compare."""
    if rule is None:
        return None
    if verdict.status == "unprofitable":
        return "profitability" in rule.tags
    if not xla_string:
        return None
    ours, text = _words(xla_string), _words(verdict.reason)
    if bool(ours) and (ours == text or text.startswith(ours) or ours.startswith(text)):
        return True
    # a reason naming an instruction (`for HLO %mul.197.3`): the replay's clone of it carries
    # another clone counter than XLA's, so the names are compared without it
    ours, text = _unsuffixed(ours), _unsuffixed(text)
    return bool(ours) and "%" in ours and (ours == text or text.startswith(ours) or ours.startswith(text))


def _words(text: str) -> str:
    return " ".join(text.strip().lower().split())


_NAMED = re.compile(r"%([\w\-]+?\.\d+)((?:\.clone)?(?:\.\d+)*)\b")


def _unsuffixed(text: str) -> str:
    """`text` with each `%name.N.K` (or `%name.N.clone.K`) written `%name.N`."""
    return _NAMED.sub(lambda m: "%" + m.group(1), text)


def rule_from_xla_reason(reason: str | None, pipeline: str | None):
    """An answer from a rule of the registry whose XLA string is the reason XLA's log gives."""
    from ..rules import REGISTRY
    from .classify import Answer

    if not reason:
        return None
    for r in REGISTRY.values():
        if r.xla.message and _words(r.xla.message) == _words(reason) and \
                (pipeline is None or pipeline in r.pipelines):
            return Answer(r.id, f"XLA's fusion log: {reason}", {"xla_log": reason}, "xla-log", None, reason)
    return None


def load_xla_log(path, notes: list[str]):
    try:
        from .. import xla_log
    except ImportError:
        notes.append("XLA's fusion log is in the dump, but hlofuse.xla_log is not available to read it")
        return None
    try:
        log = xla_log.load(path)
    except Exception as err:  # noqa: BLE001 - the log is an extra; explain goes on without it
        notes.append(f"could not read XLA's fusion log {path}: {type(err).__name__}: {err}")
        return None
    return LogIndex(log)


class LogIndex:
    """XLA's fusion log with the names it knows (the module before PriorityFusion, after XLA's
    rename-instructions pass gave most instructions a `.0` suffix)."""

    _NAME = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=", __import__("re").M)

    def __init__(self, log):
        self.log = log
        text = getattr(log, "module_before_fusion", None) or ""
        self.known = frozenset(self._NAME.findall(text))

    def names(self, names) -> frozenset[str]:
        """The log's names for instructions of a fused module: the same name, or for clones
        XLA made while fusing (`add.23.1`, `x.4.clone.1`) the original `add.23.0`."""
        out = set()
        for name in names:
            for candidate in _log_candidates(name):
                if not self.known or candidate in self.known:
                    out.add(candidate)
                    break
        return frozenset(out)


_CLONE = re.compile(r"(\.clone(\.\d+)?)+$")
_SUFFIX = re.compile(r"\.\d+$")


def _log_candidates(name: str) -> list[str]:
    base = _CLONE.sub("", name)
    out = [name, base]
    stripped = _SUFFIX.sub("", base)
    out += [stripped + ".0", stripped]
    return list(dict.fromkeys(out))


def xla_log_verdict(index: "LogIndex", module: ir.Module, src: Source, edge: Edge, notes: list[str],
                    sides: tuple | None = None):
    """What XLA's log says about keeping the producer kernel apart from the consumer kernel,
    matching both by the instructions they compute (`sides`: the before-fusion instructions
    on each side when the replay knows them, else the kernels' own instructions); None unless
    it gives a reason."""
    producer = module[src.comp][src.name]
    consumer = module[edge.consumer_comp][edge.consumer]
    if sides is not None:
        p, c = index.names(sides[0]), index.names(sides[1])
    else:
        p = index.names(kernel_members(module, producer))
        c = index.names(kernel_members(module, consumer))
    if not p or not c:
        return None
    try:
        verdict = index.log.verdict(p, c)
    except Exception as err:  # noqa: BLE001
        notes.append(f"hlofuse.xla_log could not answer for {producer.name} → {consumer.name}: {err}")
        return None
    if verdict is None or verdict.status not in ("ineligible", "unprofitable") or not verdict.reason:
        return None
    return verdict


def kernel_members(module: ir.Module, kernel: ir.Instruction) -> list[str]:
    if kernel.opcode != "fusion":
        return [kernel.name]
    body = module.by_name.get(kernel.fused_computation or "")
    if body is None:
        return [kernel.name]
    return [i.name for i in body.instructions if i.opcode != "parameter"]

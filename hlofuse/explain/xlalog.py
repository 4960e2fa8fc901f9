"""XLA's own fusion log (`*.priority_fusion_dump.txt`, read by hlofuse/xla_log.py) as explain
uses it: XLA's reason for a pair of kernels of the fused module, and whether our rule agrees."""

from __future__ import annotations

import re

from .. import ir
from .trace import Edge, Source

def agrees(rule, verdict, pipeline: str | None) -> bool | None:
    """Whether our rule says what XLA's log says: for a cost-model rejection, whether our rule
    is a cost-model rule; otherwise whether its XLA string (or, for a boundary rule, one of the
    strings XLA uses for that situation in this pipeline) occurs in XLA's reason."""
    from ..rules.boundaries import XLA_REASONS

    if rule is None or verdict is None or verdict.reason is None:
        return None
    if getattr(verdict, "status", None) == "unprofitable":
        return "cost-model" in rule.tags
    xla_reason = verdict.reason
    expected: tuple[str, ...] = ()
    if rule.id in XLA_REASONS:
        table = XLA_REASONS[rule.id]
        expected = table.get(pipeline or "", ()) or tuple(x for v in table.values() for x in v)
    elif rule.xla.message:
        expected = (rule.xla.message,)
    if not expected:
        # XLA named a reason where our rule says only the cost model objected: they differ
        return False if "cost-model" in rule.tags and rule.xla.message is None else None
    text = xla_reason.strip().lower()
    return any(e.strip().lower() in text for e in expected)


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


def xla_log_verdict(index: "LogIndex", module: ir.Module, src: Source, edge: Edge, notes: list[str]):
    """What XLA's log says about keeping the producer kernel apart from the consumer kernel,
    matching both by the instructions they compute; None unless it gives a reason."""
    producer = module[src.comp][src.name]
    consumer = module[edge.consumer_comp][edge.consumer]
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

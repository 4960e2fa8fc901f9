"""XLA's own log of PriorityFusion: `module_NNNN.<name>.priority_fusion_dump.txt`.

When `--xla_dump_hlo_pass_re` matches `priority-fusion`, XLA:GPU writes, next to the HLO dumps,
the protobuf text of a `FusionProcessDumpProto` (xla/service/gpu/fusion_process_dump.proto;
docs/xla/priority-fusion.md §8.1): every step of the pass in the order it was logged —

    fusion_steps { update_priority { producer_name consumer_names* us_fused us_unfused } }
    fusion_steps { producer_ineligible { producer_name reason } }
    fusion_steps { fusion { fusion_name producer_name consumer_name } }

then `gpu_device_info` and `hlo_module_before_fusion` (the module the pass started from).

This module reads that log and answers the question `explain` and `check` put to it: *what
did XLA itself say about this producer and consumer?*  XLA logs a refusal per producer (the
reason of the first user it could not fuse into), a cost-model rejection only as an
`update_priority` whose `us_unfused` is below `us_fused`, and names producers and consumers as
they were at that step — fusions created earlier in the pass (`fusion.4`) included.  So pairs
are matched by the input-module instructions a name stands for (`members`), which follows the
renames fusion steps make.  Two caveats from XLA: for incremental priority updates the `us_*`
values are deltas, not totals (§4.2, P12); with a thread pool the order of one batch of
priority steps is not deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from .attributes import quoted_end
from .errors import InputError

# ------------------------------------------------------------------------------------------
# Steps
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UpdatePriority:
    """A priority computed by the cost model: `us_unfused - us_fused` (µs) is the priority,
    or its change for an incremental update."""

    index: int
    producer: str
    consumers: tuple[str, ...]
    us_fused: float
    us_unfused: float

    @property
    def priority_us(self) -> float:
        return self.us_unfused - self.us_fused


@dataclass(frozen=True)
class ProducerIneligible:
    """A producer that cannot fuse into all its (non-bitcast) users, with XLA's reason."""

    index: int
    producer: str
    reason: str


@dataclass(frozen=True)
class FusionStep:
    """`producer` fused into `consumer`, giving `fusion` (the consumer's name if it already
    was a fusion)."""

    index: int
    fusion: str
    producer: str
    consumer: str


Step = UpdatePriority | ProducerIneligible | FusionStep


@dataclass(frozen=True)
class XlaVerdict:
    """What XLA's log says about one producer→consumer pair."""

    #: "fused", "ineligible" (a CanFuse reason), "unprofitable" (priority < 0), or "silent"
    #: (the log mentions the producer but says neither).
    status: str
    reason: str | None = None
    us_fused: float | None = None
    us_unfused: float | None = None
    #: The names the log used for producer and consumer.
    producer: str | None = None
    consumer: str | None = None

    def to_dict(self) -> dict:
        return {"status": self.status, "reason": self.reason, "us_fused": self.us_fused,
                "us_unfused": self.us_unfused, "producer": self.producer, "consumer": self.consumer}


@dataclass
class FusionLog:
    """A parsed `*.priority_fusion_dump.txt`."""

    steps: list[Step]
    device_info: dict = field(default_factory=dict)
    module_before_fusion: str | None = None
    path: str | None = None
    _members: dict[str, frozenset[str]] | None = field(default=None, repr=False)
    _index: "_StepIndex | None" = field(default=None, repr=False)

    # -- views ---------------------------------------------------------------------------
    @property
    def fusions(self) -> list[FusionStep]:
        return [s for s in self.steps if isinstance(s, FusionStep)]

    @property
    def ineligible(self) -> list[ProducerIneligible]:
        return [s for s in self.steps if isinstance(s, ProducerIneligible)]

    @property
    def priorities(self) -> list[UpdatePriority]:
        return [s for s in self.steps if isinstance(s, UpdatePriority)]

    def reasons(self) -> dict[str, int]:
        """How often each refusal reason was logged."""
        out: dict[str, int] = {}
        for s in self.ineligible:
            out[s.reason] = out.get(s.reason, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    # -- names -----------------------------------------------------------------------------
    def members(self, name: str) -> frozenset[str]:
        """The input-module instructions a name of the log stands for: itself, or for a fusion
        created during the pass, everything fused into it."""
        if self._members is None:
            self._members = _member_table(self.fusions)
        return self._members.get(name, frozenset({name}))

    # -- the question --------------------------------------------------------------------
    def verdict(self, producer: Iterable[str] | str, consumer: Iterable[str] | str) -> XlaVerdict | None:
        """What XLA logged about fusing `producer` into `consumer`.  Each side is a name or the
        input-module instructions it stands for (a kernel's members); None when the log never
        mentions the producer.  A refusal is the last line XLA logged for the producer as it
        finally stood: PriorityFusion recomputes a producer's priority, logging
        `producer_ineligible` again, whenever one of its users is fused (OnFusingInstruction
        queues the new fusion's operands), so an earlier line may be about a smaller producer
        (a reduce before its input was fused in) and give another reason."""
        p = frozenset([producer]) if isinstance(producer, str) else frozenset(producer)
        c = frozenset([consumer]) if isinstance(consumer, str) else frozenset(consumer)
        index = self._steps_index()
        # only the steps whose producer stands for one of p's instructions can match, in order
        for step in index.steps_of(index.fusions_by_member, p):
            if self.members(step.consumer) & c and not (self.members(step.producer) & c):
                return XlaVerdict("fused", producer=step.producer, consumer=step.consumer)
        # The producer as the log names it: the name standing for the same instructions, else
        # the one sharing most of them (a fusion logged before or after one more fusion step).
        # An instruction on both sides was duplicated into both kernels (PriorityFusion fuses a
        # producer into all its users), so a logged producer holding it is still this producer
        # unless it also holds something only the consumer computes.
        only_p, only_c = p - c, c - p
        best_name, best_score = None, None
        for step in index.steps_of(index.verdicts_by_member, only_p):
            m = self.members(step.producer)
            if m & only_c:
                continue
            score = (m == p, len(m & p) / len(m | p))
            if best_score is None or score >= best_score:
                best_name, best_score = step.producer, score
        if best_name is None:
            return None
        last: Step | None = index.last_verdict[best_name]
        if isinstance(last, ProducerIneligible):
            return XlaVerdict("ineligible", last.reason, producer=last.producer)
        if last.us_unfused < last.us_fused:
            return XlaVerdict("unprofitable", "the cost model found fusion unprofitable (priority < 0)",
                              last.us_fused, last.us_unfused, producer=last.producer)
        return XlaVerdict("silent", None, last.us_fused, last.us_unfused, producer=last.producer)

    def _steps_index(self) -> "_StepIndex":
        if self._index is None:
            self._index = _StepIndex(self)
        return self._index

    def reason(self, producer: Iterable[str] | str, consumer: Iterable[str] | str) -> str | None:
        """XLA's reason for not fusing `producer` into `consumer`, if its log gives one."""
        v = self.verdict(producer, consumer)
        return v.reason if v is not None and v.status in ("ineligible", "unprofitable") else None


class _StepIndex:
    """The log's steps by the input-module instructions their producer stands for, so that a
    question about one pair looks at the few steps that can answer it (a log has thousands)."""

    def __init__(self, log: FusionLog):
        self.steps = log.steps
        self.fusions_by_member: dict[str, list[int]] = {}
        self.verdicts_by_member: dict[str, list[int]] = {}
        self.last_verdict: dict[str, Step] = {}
        for i, step in enumerate(log.steps):
            if isinstance(step, FusionStep):
                table = self.fusions_by_member
            elif isinstance(step, (ProducerIneligible, UpdatePriority)):
                table = self.verdicts_by_member
                self.last_verdict[step.producer] = step
            else:
                continue
            for member in log.members(step.producer):
                table.setdefault(member, []).append(i)

    def steps_of(self, table: dict[str, list[int]], members: frozenset[str]) -> list[Step]:
        """The steps (in log order) whose producer stands for one of `members`."""
        found: set[int] = set()
        for m in members:
            found.update(table.get(m, ()))
        return [self.steps[i] for i in sorted(found)]


def _member_table(fusions: list[FusionStep]) -> dict[str, frozenset[str]]:
    table: dict[str, frozenset[str]] = {}

    def get(name: str) -> frozenset[str]:
        return table.get(name, frozenset({name}))

    for step in fusions:
        table[step.fusion] = get(step.fusion if step.fusion == step.consumer else step.consumer) | get(step.producer)
    return table


# ------------------------------------------------------------------------------------------
# Reading the protobuf text format
# ------------------------------------------------------------------------------------------

# A string token is only its opening quote here: its end is found with str.find (see
# attributes.quoted_end; hlo_module_before_fusion is a whole module in one string).
_TOKEN = re.compile(r'\s*(?:(#[^\n]*)|([A-Za-z_][\w.]*)|(["\'])|'
                    r'([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan)[fF]?)|([{}:<>\[\],;]))')


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            rest = text[pos:].strip()
            if not rest:
                return
            raise InputError(f"priority fusion log: cannot read {rest[:40]!r}")
        pos = m.end()
        comment, ident, quote, number, punct = m.groups()
        if comment is not None:
            continue
        if ident is not None:
            yield "id", ident
        elif quote is not None:
            start = m.start(3)
            pos = quoted_end(text, start)
            if pos < 0:
                raise InputError("priority fusion log: a string is not closed")
            yield "str", _unescape(text[start + 1:pos - 1])
        elif number is not None:
            yield "num", number
        elif punct is not None:
            yield "p", punct


_ESCAPES = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b"a": b"\a", b"b": b"\b", b"f": b"\f", b"v": b"\v"}
_ESCAPE_RE = re.compile(rb"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|([\s\S]))")


def _unescape(body: str) -> str:
    """C-style escapes of protobuf text strings (octal and hex escapes are bytes, decoded as
    UTF-8 with the rest); any other escaped character stands for itself."""
    if "\\" not in body:
        return body
    raw = body.encode("utf-8", errors="surrogatepass")
    out = bytearray()  # grown in place: re.sub would hold two objects per escape until it joins them
    pos = 0
    for m in _ESCAPE_RE.finditer(raw):
        out += raw[pos:m.start()]
        octal, hexadecimal, char = m.groups()
        if octal is not None:
            out.append(int(octal, 8) & 0xFF)
        elif hexadecimal is not None:
            out.append(int(hexadecimal, 16))
        else:
            out += _ESCAPES.get(char, char)
        pos = m.end()
    out += raw[pos:]
    return out.decode("utf-8", errors="replace")


def _parse_message(tokens: list[tuple[str, str]], pos: int, end_punct: str | None) -> tuple[dict, int]:
    """Fields of a message as {name: [values]} (every field repeated, values in order)."""
    fields: dict[str, list] = {}
    while pos < len(tokens):
        kind, value = tokens[pos]
        if kind == "p" and value in ("}", ">") and end_punct is not None:
            return fields, pos + 1
        if kind != "id":
            raise InputError(f"priority fusion log: expected a field name, found {value!r}")
        name = value
        pos += 1
        kind, value = tokens[pos]
        if kind == "p" and value == ":":
            pos += 1
            kind, value = tokens[pos]
        if kind == "p" and value in ("{", "<"):
            sub, pos = _parse_message(tokens, pos + 1, "}" if value == "{" else ">")
            fields.setdefault(name, []).append(sub)
            continue
        if kind == "str":
            # adjacent string literals concatenate
            parts = [value]
            pos += 1
            while pos < len(tokens) and tokens[pos][0] == "str":
                parts.append(tokens[pos][1])
                pos += 1
            fields.setdefault(name, []).append("".join(parts))
            continue
        if kind == "num":
            text = value.rstrip("fF")
            number: float | int = float(text) if any(c in text for c in ".eEn") else int(text)
            fields.setdefault(name, []).append(number)
        else:
            fields.setdefault(name, []).append(value)
        pos += 1
        if pos < len(tokens) and tokens[pos] == ("p", ";"):
            pos += 1
    if end_punct is not None:
        raise InputError("priority fusion log: a message is not closed")
    return fields, pos


def _one(fields: dict, name: str, default=None):
    values = fields.get(name)
    return values[-1] if values else default


def _flatten(fields: dict) -> dict:
    out = {}
    for key, values in fields.items():
        value = values[-1]
        out[key] = _flatten(value) if isinstance(value, dict) else value
    return out


def parse(text: str, path: str | None = None) -> FusionLog:
    """Parse the protobuf text of a FusionProcessDumpProto."""
    tokens = list(_tokens(text))
    try:
        fields, _ = _parse_message(tokens, 0, None)
    except IndexError:
        raise InputError(f"{path or 'priority fusion log'}: the text ends in the middle of a field "
                         "(a truncated dump?)") from None
    steps: list[Step] = []
    for i, step in enumerate(fields.get("fusion_steps", [])):
        if "update_priority" in step:
            s = step["update_priority"][-1]
            steps.append(UpdatePriority(i, _one(s, "producer_name", ""), tuple(s.get("consumer_names", [])),
                                        float(_one(s, "us_fused", 0.0)), float(_one(s, "us_unfused", 0.0))))
        elif "producer_ineligible" in step:
            s = step["producer_ineligible"][-1]
            steps.append(ProducerIneligible(i, _one(s, "producer_name", ""), _one(s, "reason", "")))
        elif "fusion" in step:
            s = step["fusion"][-1]
            steps.append(FusionStep(i, _one(s, "fusion_name", ""), _one(s, "producer_name", ""),
                                    _one(s, "consumer_name", "")))
    device = _flatten(fields["gpu_device_info"][-1]) if fields.get("gpu_device_info") else {}
    return FusionLog(steps, device, _one(fields, "hlo_module_before_fusion"), path)


def load(path: str | Path) -> FusionLog:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise InputError(f"{p}: {err.strerror}") from None
    return parse(text, str(p))


def find(folder: str | Path, module: str | None = None) -> Path | None:
    """The priority fusion log of a dump folder (of `module`, e.g. `jit_f`, when given)."""
    root = Path(folder)
    if root.is_file():
        root = root.parent
    logs = sorted(root.glob("*priority_fusion_dump.txt"))
    if module is not None:
        logs = [p for p in logs if f".{module}." in p.name or p.name.startswith(module)] or logs
    return logs[0] if logs else None


#: The name `hlofuse check` imports.
load_log = load

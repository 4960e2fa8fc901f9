"""What a cost-model refusal is made of: the terms of the model's two sums, and which dominates.

Both of XLA:GPU's models compare a producer P and its users C1..Cn as separate kernels with P
fused into each user:

    unfused = launch · (n + 1) + P + Σ Ci                 (each Ci reads P's result back)
    fused   = launch · n + Σ Ci with P recomputed inside   (each reads P's operands instead)

so fusing saves one launch, P's own kernel and the users' reading P's result back, and costs
P's work recomputed in every user and P's operands read in every user.  `CostTerms` names
those terms in µs, as the model computed them, and says which one decides.  In the 2026 model
(model.py) a kernel's time overlaps compute and memory (exec = compute + memory − 0.95 ·
min), so the terms are the model's own compute and memory times and do not add up exactly to
the totals; in the 2024 model (legacy.py) they are the formula's own terms.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import durations as dur

@dataclass(frozen=True)
class CostTerms:
    """The terms of a cost-model verdict, in µs."""

    users: int
    launch_us: float  # the launch that fusing saves
    producer_us: float  # the producer's own kernel (compute and writing its result)
    read_back_us: float  # the users reading the producer's result back
    recompute_us: float  # the producer's work done again inside every user
    reread_us: float  # the users reading the producer's operands
    side_output_us: float = 0.0  # a multi-output fusion still writes the producer's result
    #: The two totals these terms come from.  A priority XLA updated incrementally, from times
    #: cached while the users were smaller, can differ from them (the terms price the kernels
    #: as they are when the verdict is reported).
    fused_us: float = 0.0
    unfused_us: float = 0.0

    @property
    def saved_us(self) -> float:
        return self.launch_us + self.producer_us + self.read_back_us

    @property
    def added_us(self) -> float:
        return self.recompute_us + self.reread_us + self.side_output_us

    @property
    def dominant(self) -> str:
        """The largest term on the side that decided: a refusal is decided by what fusing adds."""
        return "recompute" if self.recompute_us >= self.reread_us else "reread"

    def facts(self) -> dict:
        return {"launch_us": _r(self.launch_us), "producer_us": _r(self.producer_us),
                "read_back_us": _r(self.read_back_us), "recompute_us": _r(self.recompute_us),
                "reread_us": _r(self.reread_us), "side_output_us": _r(self.side_output_us),
                "dominant": self.dominant, "terms_fused_us": _r(self.fused_us),
                "terms_unfused_us": _r(self.unfused_us)}

    def words(self, producer: str, fused_us: float | None = None, unfused_us: float | None = None) -> str:
        """One sentence: the dominant term, against what fusing would save (and, when the
        verdict's totals are not these terms' own, the totals the terms come from)."""
        if self.dominant == "recompute":
            main = (f"recomputing {producer} in each of its {self.users} user(s), {self.recompute_us:.3f} µs of "
                    f"compute (reading its operands there: {self.reread_us:.3f} µs)")
        else:
            main = (f"reading {producer}'s operands in each of its {self.users} user(s), {self.reread_us:.3f} µs "
                    f"(recomputing it there: {self.recompute_us:.3f} µs of compute)")
        side = f", plus {self.side_output_us:.3f} µs still writing its result" if self.side_output_us else ""
        stale = ""
        if fused_us is not None and unfused_us is not None and not (
                _close(fused_us, self.fused_us) and _close(unfused_us, self.unfused_us)):
            stale = (f" (the terms price the kernels as the pass left them, {self.fused_us:.3f} µs fused vs "
                     f"{self.unfused_us:.3f} µs; the verdict used times cached earlier, as XLA does)")
        return (f"dominant term: {main}{side}; fusing saves {self.producer_us:.3f} µs of its own kernel, "
                f"{self.read_back_us:.3f} µs reading its result back and {self.launch_us:.3f} µs for one "
                f"launch{stale}")


def _r(us: float) -> float:
    return round(us, 4)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= max(0.01, 0.01 * max(abs(a), abs(b)))


def terms_2026(model, producer, consumers, side_output: bool = False) -> CostTerms:
    """The terms of GpuPerformanceModel (2026, model.py) for `producer` fused into `consumers`."""
    from .model import KERNEL_LAUNCH_OVERHEAD, read_time
    from .analysis import shape_size
    from .coalescing import coalescing_rate

    p = model.estimate(producer)
    consumers = list(consumers)
    read_back = recompute = reread = 0
    unfused = KERNEL_LAUNCH_OVERHEAD * (len(consumers) + 1) + p.exec_time
    fused = KERNEL_LAUNCH_OVERHEAD * len(consumers)
    for consumer in consumers:
        c = model.estimate(consumer)
        f = model.fused_runtime(producer, consumer, side_output)
        unfused += c.exec_time
        fused += f.exec_time
        back = 0
        for i, op in enumerate(consumer.operands):
            source = op.operands[0] if op.opcode == "get-tuple-element" and op.operands else op
            if source is not producer:
                continue
            total = model.cost.operand_bytes_accessed(consumer, i)
            size = shape_size(op.shape)
            blocks = c.launch.blocks if c.launch is not None else 1
            back += read_time(model.device, blocks, min(size, total), total,
                              coalescing_rate(op.shape.element_type, c.coalesced))
        read_back += back
        recompute += max(f.compute_time - c.compute_time, 0)
        reread += max(f.read_time - c.read_time + back, 0)
    side = p.write_time if side_output else 0
    return CostTerms(len(consumers), dur.to_us(KERNEL_LAUNCH_OVERHEAD), dur.to_us(p.exec_time),
                     dur.to_us(read_back), dur.to_us(recompute), dur.to_us(reread), dur.to_us(side),
                     dur.to_us(fused), dur.to_us(unfused))


def terms_legacy(model, producer, consumers, side_output: bool = False) -> CostTerms:
    """The terms of the 2024 GpuPerformanceModel (legacy.py), which are its formula's own."""
    return legacy_terms(model.estimate_run_time_terms(producer, list(consumers), multi_output=side_output),
                        side_output)


def legacy_terms(found, side_output: bool = False) -> CostTerms:
    """The terms of a 2024 model's answer already at hand (LegacyPerformanceModel.
    estimate_run_time_terms: the verdict's own sums, so nothing is priced twice)."""
    from .legacy import KERNEL_LAUNCH_OVERHEAD

    data = found.producer
    side = data.write_time if side_output else 0
    return CostTerms(found.consumers, dur.to_us(KERNEL_LAUNCH_OVERHEAD), dur.to_us(data.exec_time),
                     dur.to_us(found.read_back), dur.to_us(found.recompute), dur.to_us(found.reread),
                     dur.to_us(side), found.times.fused_us, found.times.unfused_us)


def terms_for(model, producer, consumers, side_output: bool = False) -> CostTerms | None:
    """The terms for whichever model a pass asked: the 2024 model (its formula's terms), the
    2026 model, or MultiOutputFusion's wrapper of it; None for another model."""
    from .model import GpuPerformanceModel

    consumers = list(consumers)
    if hasattr(model, "fused_consumer_times"):
        return terms_legacy(model, producer, consumers, side_output)
    inner = getattr(model, "model", model)
    if isinstance(inner, GpuPerformanceModel):
        return terms_2026(inner, producer, consumers, side_output)
    return None


def cost_facts(model, producer, consumers, side_output: bool = False, times=None) -> dict:
    """A refusal's facts for the terms: each term, the dominant one, and `dominant_words`, the
    sentence the rules' messages end with ("" when the model is not one of XLA's).  `times`
    (with fused_us / unfused_us) are the verdict's own totals, when they may differ."""
    return terms_facts(terms_for(model, producer, consumers, side_output), producer.name, times)


def terms_facts(found: CostTerms | None, producer: str, times=None) -> dict:
    """cost_facts for terms already at hand (legacy_terms)."""
    if found is None:
        return {"dominant_words": ""}
    words = found.words(producer, getattr(times, "fused_us", None), getattr(times, "unfused_us", None))
    return {**found.facts(), "dominant_words": "; " + words}


#: The rules whose refusal is the model's comparison of the two sums (their facts carry the
#: totals and the terms).
VERDICT_RULES = frozenset({"PF-UNPROFITABLE", "PF-CONCAT-PENALTY", "FM-SLOWER-IF-FUSED", "FM-CONCAT-SLOWER-IF-FUSED",
                           "MOF-SLOWER-IF-FUSED"})

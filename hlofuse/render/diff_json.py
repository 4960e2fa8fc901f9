"""The JSON form of a comparison (`hlofuse diff --json`, `hlofuse.diff(...).to_dict()`): plain
dicts built field by field; one-sided boundaries are explain's boundary objects with the
comparison's fields added.  Bump SCHEMA when a field changes meaning or disappears."""

from __future__ import annotations

from .json import _us, boundary_dict, source_dict

SCHEMA = "hlofuse.diff/1"


def diff_dict(d) -> dict:
    from ..diff import ADDED, REMOVED, SAME

    def matches(statuses):
        return [match_dict(m) for m in d.kernels if m.status in statuses]

    changed = tuple(s for s in _statuses() if s not in (ADDED, REMOVED, SAME))
    return {
        "schema": SCHEMA,
        "a": side_dict(d.a, d.a_totals, d.a_options),
        "b": side_dict(d.b, d.b_totals, d.b_options),
        "kernels": {"added": matches((ADDED,)), "removed": matches((REMOVED,)), "changed": matches(changed),
                    "same": matches((SAME,))},
        "boundaries": {"added": [change_dict(c) for c in d.added], "removed": [change_dict(c) for c in d.removed]},
        "summary": summary_dict(d),
        "notes": list(d.notes),
    }


def _statuses():
    from ..diff import STATUSES

    return STATUSES


def side_dict(report, totals, options) -> dict:
    ex = report.explanation
    return {
        "input": ex.input,
        "module": ex.module,
        "backend": ex.backend,
        "pipeline": ex.pipeline,
        "gpu": ex.gpu,
        "stage": ex.stage,
        "replayed_from": ex.replayed_from,
        "relax": list(options.get("relax", ())),
        "xla_flags": list(options.get("xla_flags", ())),
        "detected": ex.detected,
        "totals": totals_dict(totals),
    }


def totals_dict(t) -> dict:
    return {"kernels": t.kernels, "launches_per_run": t.launches_per_run, "boundaries": t.boundaries,
            "bytes_per_run": t.bytes_per_run, "modelled_us_per_run": _us(t.modelled_us_per_run),
            "modelled_by": t.target}


def kernel_ref_dict(r) -> dict:
    return {"name": r.name, "label": r.label, "computation": r.computation, "launches": r.launches,
            "modelled_us": _us(r.modelled_us), "source": source_dict(r.source)}


def match_dict(m) -> dict:
    return {"status": m.status, "a": [kernel_ref_dict(r) for r in m.a], "b": [kernel_ref_dict(r) for r in m.b],
            "shared_instructions": m.shared, "only_a_instructions": m.only_a, "only_b_instructions": m.only_b, "matched_by": "opcode and op name" if m.loose else "source",
            "hosts": m.hosts,
            "launches_a": m.launches("a"), "launches_b": m.launches("b")}


def change_dict(c) -> dict:
    """Explain's boundary object of the side it exists on, with `bytes_per_run` and `other_side`
    (what the other compile did with the same producer and consumer)."""
    out = boundary_dict(c.boundary)
    out["bytes_per_run"] = c.bytes_per_run
    other = c.other
    decision = other.decision
    out["other_side"] = {
        "status": other.status,
        "text": other.text,
        "kernel": other.kernel,
        "decision": decision.to_dict() if decision is not None else None,
        "boundary": boundary_dict(other.boundary) if other.boundary is not None else None,
    }
    return out


def summary_dict(d) -> dict:
    from ..diff import delta

    a, b = d.a_totals, d.b_totals
    modelled = delta(a.modelled_us_per_run, b.modelled_us_per_run)
    return {
        "headline": d.headline,
        "unchanged": d.unchanged,
        "kernels_delta": delta(a.kernels, b.kernels),
        "launches_delta": delta(a.launches_per_run, b.launches_per_run),
        "bytes_delta": delta(a.bytes_per_run, b.bytes_per_run),
        "modelled_us_delta": _us(modelled),
        "boundaries_delta": delta(a.boundaries, b.boundaries),
        "kernel_matches": {s: d.count(s) for s in _statuses() if d.count(s)},
        "boundaries_added": len(d.added),
        "boundaries_removed": len(d.removed),
        "largest": [{"side": c.side, "producer": c.boundary.producer, "producer_kernel": c.boundary.producer_kernel,
                     "consumer": c.boundary.consumer, "consumer_kernel": c.boundary.consumer_kernel,
                     "bytes_per_run": c.bytes_per_run, "rule": c.boundary.rule,
                     "source": source_dict(c.boundary.source), "other_side": c.other.status}
                    for c in d.largest()],
    }

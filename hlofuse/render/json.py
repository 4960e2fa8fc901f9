"""The JSON form of an explanation: plain dicts built field by field, so the schema is explicit
and stable (documented in README.md, "JSON output of explain").  Bump SCHEMA when a field
changes meaning or disappears; adding a field is compatible."""

from __future__ import annotations

import json as _json

SCHEMA = "hlofuse.explain/1"


def explanation_dict(ex) -> dict:
    return {
        "schema": SCHEMA,
        "module": ex.module,
        "backend": ex.backend,
        "pipeline": ex.pipeline,
        "gpu": ex.gpu,
        "input": ex.input,
        "stage": ex.stage,
        "detected": ex.detected,
        "xla_log": ex.xla_log,
        "replayed_from": ex.replayed_from,
        "kernels": [kernel_dict(k) for k in ex.kernels],
        "boundaries": [boundary_dict(b) for b in ex.boundaries],
        "groups": [group_dict(g) for g in ex.groups],
        "summary": ex.summary(),
        "notes": list(ex.notes),
    }


def kernel_dict(k) -> dict:
    return {
        "name": k.name,
        "kind": k.kind,
        "label": k.label,
        "computation": k.computation,
        "role": k.role,
        "instructions": list(k.instructions),
        "root": k.root,
        "library": k.library,
        "bytes_out": k.bytes_out,
        "source": source_dict(k.source),
        "modelled_us": _us(k.modelled_us),
        "launches": k.launches,
        "modelled_us_per_run": _us(k.modelled_us * k.launches if k.modelled_us is not None and k.launches is not None
                                   else None),
        "priced_by": k.priced_by,
    }


def boundary_dict(b) -> dict:
    return {
        "producer": b.producer,
        "consumer": b.consumer,
        "producer_kernel": b.producer_kernel,
        "output": list(b.output),
        "consumer_kernel": b.consumer_kernel,
        "producer_computation": b.producer_computation,
        "consumer_computation": b.consumer_computation,
        "crossing": list(b.crossing),
        "rule": b.rule,
        "tags": list(b.tags),
        "reason": b.reason,
        "relaxable": b.relaxable,
        "bytes": b.bytes,
        "source": source_dict(b.source),
        "consumer_source": source_dict(b.consumer_source),
        "hint": b.hint,
        "xla_reason": b.xla_reason,
        "agrees_with_xla": b.agrees_with_xla,
        "explained_by": b.explained_by,
        "decided_in": b.decided_in,
        "rule_xla_reason": b.rule_xla_reason,
        "then": [later.to_dict() for later in b.then],
        "via": list(b.via),
        "facts": {k: _plain(v) for k, v in b.facts.items()},
        "hint_kind": b.hint_kind,
        "modelled_us": _us(b.modelled_us),
        "cost": b.cost.to_dict() if b.cost is not None else None,
    }


def group_dict(g) -> dict:
    """A group of boundaries with one cause (hlofuse/triage/groups.py): figures per run."""
    return {
        "rule": g.rule,
        "source": source_dict(g.source),
        "count": g.count,
        "bytes": g.bytes,
        "bytes_per_run": g.bytes_per_run,
        "modelled_us": _us(g.modelled_us),
        "share": _us(g.share),
        "relaxable": g.relaxable,
        "tags": list(g.tags),
        "hint": g.hint,
        "hint_kind": g.hint_kind,
        "hint_fix": g.hint_fix.to_dict() if g.hint_fix is not None else None,
        "fix": g.fix.to_dict() if g.fix is not None else None,
        "boundaries": list(g.boundaries),
    }


def _us(value):
    return None if value is None else round(value, 4)


def source_dict(s) -> dict | None:
    if s is None:
        return None
    return {"file": s.file, "line": s.line, "op_name": s.op_name, "function": s.function}


def _plain(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def dumps(ex, indent: int | None = 2) -> str:
    return _json.dumps(explanation_dict(ex), indent=indent)


def dumps_listing(payload: dict) -> str:
    """JSON text for a result with long lists (`fuse --json`: hundreds of thousands of
    decisions on a large module): the top level indented, every element of a top-level list
    on a line of its own.  One decision per line reads and greps well, and Python's json
    writes a compact line at C speed where an indented document is written in Python (a
    quarter of `hlofuse fuse --json` on 100k instructions)."""
    encode = _json.JSONEncoder().encode
    lines = ["{"]
    last = len(payload) - 1
    for i, (key, value) in enumerate(payload.items()):
        comma = "," if i < last else ""
        if isinstance(value, list) and value:
            lines.append(f"  {encode(key)}: [")
            lines.append(",\n".join("    " + encode(item) for item in value))
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {encode(key)}: {encode(value)}{comma}")
    lines.append("}")
    return "\n".join(lines)

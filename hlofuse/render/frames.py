"""An explanation as pandas DataFrames, one row per kernel, boundary or group (what the Python
API's ExplainReport returns as `.kernels`, `.boundaries` and `.groups`, and what the CSV of
`explain --csv` is written from)."""

from __future__ import annotations

#: Columns of boundaries_frame, the CSV's columns (a flat view of render/json.py's boundary dict).
BOUNDARY_COLUMNS = (
    "producer", "consumer", "producer_kernel", "consumer_kernel", "producer_computation",
    "consumer_computation", "crossing", "rule", "tags", "reason", "relaxable", "bytes",
    "source_file", "source_line", "source_op_name", "hint", "xla_reason", "agrees_with_xla",
    "explained_by", "decided_in", "then", "modelled_us",
)
KERNEL_COLUMNS = (
    "computation", "name", "kind", "label", "role", "library", "instructions", "bytes_out", "modelled_us",
    "launches", "modelled_us_per_run", "priced_by", "source_file", "source_line",
)
GROUP_COLUMNS = (
    "rule", "source_file", "source_line", "count", "bytes", "bytes_per_run", "modelled_us", "share", "relaxable",
    "tags", "hint", "hint_kind", "hint_us_delta", "fix_us_delta", "fix_kernels_delta", "fix_launches_delta",
    "fix_worse", "boundaries",
)


def boundaries_frame(ex):
    """One row per boundary (lists joined with ';'); `modelled_us` per run."""
    import pandas as pd

    rows = []
    for b in ex.boundaries:
        s = b.source
        rows.append({
            "producer": b.producer, "consumer": b.consumer, "producer_kernel": b.producer_kernel,
            "consumer_kernel": b.consumer_kernel, "producer_computation": b.producer_computation,
            "consumer_computation": b.consumer_computation, "crossing": ";".join(b.crossing),
            "rule": b.rule, "tags": ";".join(b.tags), "reason": b.reason, "relaxable": b.relaxable,
            "bytes": b.bytes, "source_file": s.file if s else None, "source_line": s.line if s else None,
            "source_op_name": s.op_name if s else None, "hint": b.hint, "xla_reason": b.xla_reason,
            "agrees_with_xla": b.agrees_with_xla, "explained_by": b.explained_by,
            "decided_in": b.decided_in, "then": ";".join(later.text() for later in b.then),
            "modelled_us": b.modelled_us,
        })
    frame = pd.DataFrame(rows, columns=list(BOUNDARY_COLUMNS))
    return frame.astype({"source_line": "Int64", "modelled_us": "float64"})


def kernels_frame(ex):
    """One row per kernel: `modelled_us` per launch, `launches` per run."""
    import pandas as pd

    rows = []
    for k in ex.kernels:
        s = k.source
        per_run = k.modelled_us * k.launches if k.modelled_us is not None and k.launches is not None else None
        rows.append({
            "computation": k.computation, "name": k.name, "kind": k.kind, "label": k.label, "role": k.role,
            "library": k.library, "instructions": len(k.instructions), "bytes_out": k.bytes_out,
            "modelled_us": k.modelled_us, "launches": k.launches, "modelled_us_per_run": per_run,
            "priced_by": k.priced_by, "source_file": s.file if s else None, "source_line": s.line if s else None,
        })
    frame = pd.DataFrame(rows, columns=list(KERNEL_COLUMNS))
    return frame.astype({"source_line": "Int64", "launches": "Int64", "modelled_us": "float64",
                         "modelled_us_per_run": "float64"})


def groups_frame(ex):
    """One row per group of boundaries (rule and source line), most costly first; `boundaries`
    lists the row numbers of boundaries_frame the group holds."""
    import pandas as pd

    rows = []
    for g in ex.groups:
        s = g.source
        fix = g.fix
        rows.append({
            "rule": g.rule, "source_file": s.file if s else None, "source_line": s.line if s else None,
            "count": g.count, "bytes": g.bytes, "bytes_per_run": g.bytes_per_run, "modelled_us": g.modelled_us,
            "share": g.share, "relaxable": g.relaxable, "tags": ";".join(g.tags), "hint": g.hint,
            "hint_kind": g.hint_kind,
            "hint_us_delta": g.hint_fix.modelled_us_delta if g.hint_fix is not None else None,
            "fix_us_delta": fix.modelled_us_delta if fix is not None else None,
            "fix_kernels_delta": fix.kernels_delta if fix is not None else None,
            "fix_launches_delta": fix.launches_delta if fix is not None else None,
            "fix_worse": fix.worse if fix is not None else None, "boundaries": list(g.boundaries),
        })
    frame = pd.DataFrame(rows, columns=list(GROUP_COLUMNS))
    return frame.astype({"source_line": "Int64", "fix_kernels_delta": "Int64", "fix_launches_delta": "Int64",
                         "modelled_us": "float64", "share": "float64", "hint_us_delta": "float64",
                         "fix_us_delta": "float64"})

"""CSV files: the boundaries of an explanation (one row per boundary), and the one writer every
CSV of hlofuse goes through (explain --csv, bench --csv)."""

from __future__ import annotations

#: What a spreadsheet reads as the start of a formula (or, tab and CR, what can hide one).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

#: Column order of the CSV (a flat view of render/json.py's boundary dict).
COLUMNS = (
    "producer", "consumer", "producer_kernel", "consumer_kernel", "producer_computation",
    "consumer_computation", "crossing", "rule", "tags", "reason", "relaxable", "bytes",
    "source_file", "source_line", "source_op_name", "hint", "xla_reason", "agrees_with_xla",
    "explained_by", "decided_in", "then",
)


def boundaries_frame(ex):
    """A pandas DataFrame with one row per boundary (lists joined with ';')."""
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
        })
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return frame.astype({"source_line": "Int64"})


def to_csv(ex) -> str:
    return csv_text(boundaries_frame(ex))


def csv_text(frame) -> str:
    """A DataFrame as CSV text, text cells neutralised (`neutralise`); numeric columns are kept
    as they are, so a negative number stays a number."""
    from pandas.api.types import is_numeric_dtype

    frame = frame.copy()
    for column in frame.columns:
        if not is_numeric_dtype(frame[column]):
            frame[column] = frame[column].map(neutralise)
    return frame.to_csv(index=False)


def neutralise(cell):
    """A text cell that a spreadsheet would run as a formula (a name or source file from a dump
    starting with `=`, `+`, `-`, `@`, tab or CR) gets a leading `'`, as OWASP recommends for
    CSV injection; any other value is returned unchanged."""
    if isinstance(cell, str) and cell.startswith(FORMULA_STARTS):
        return "'" + cell
    return cell

"""CSV files: the boundaries of an explanation (one row per boundary), and the one writer every
CSV of hlofuse goes through (explain --csv, bench --csv)."""

from __future__ import annotations

from .frames import BOUNDARY_COLUMNS as COLUMNS, boundaries_frame  # noqa: F401 (the CSV's rows and columns)

#: What a spreadsheet reads as the start of a formula (or, tab and CR, what can hide one).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


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

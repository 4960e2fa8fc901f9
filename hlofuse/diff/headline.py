"""The sentence a comparison leads with: what B launches and moves more or less than A, and
the largest buffer a boundary materialises on one side only (preferring one the other side
fused), with both sides' decisions."""

from __future__ import annotations

from .boundaries import own_account
from .records import CHANGED, CHANGED_KIND, SAME, BoundaryChange, KernelMatch, Totals, delta


def headline(a: Totals, b: Totals, changes: tuple[BoundaryChange, ...], matches: tuple[KernelMatch, ...]) -> str:
    parts = []
    launches, kernels = delta(a.launches_per_run, b.launches_per_run), delta(a.kernels, b.kernels)
    if launches:
        parts.append(f"launches {_more(launches, 'kernel')} per run")
        if kernels and kernels != launches:
            parts[-1] += f" ({_more(kernels, 'kernel')} in the program)"
    elif kernels:
        parts.append(f"has {_more(kernels, 'kernel')}")
    moved = delta(a.bytes_per_run, b.bytes_per_run)
    if moved:
        parts.append(f"moves {size(abs(moved))} {'more' if moved > 0 else 'less'} per run across kernel boundaries")
    us = delta(a.modelled_us_per_run, b.modelled_us_per_run)
    if us is not None and abs(us) >= 0.005:
        parts.append(f"is modelled {duration(abs(us))} {'slower' if us > 0 else 'faster'} per run")
    differ = [m for m in matches if m.status != SAME]
    if not parts and not changes and not differ:
        return (f"No change: A and B have the same {a.kernels} kernel(s), "
                f"{a.launches_per_run if a.launches_per_run is not None else '?'} launches per run and the same "
                "boundaries.")
    if parts:
        lead = "B " + _join(parts)
    else:
        lead = f"B has as many kernels and launches as A, and moves as many bytes, but {len(differ)} kernel(s) differ"
        if not changes and differ:
            return f"{lead}: {kernel_sentence(differ[0])}."
    if not changes:
        return lead + "."
    return f"{lead}: {change_sentence(leading(changes))}."


def leading(changes: tuple[BoundaryChange, ...]) -> BoundaryChange:
    """The change the headline explains: the largest buffer materialised on one side only
    whose two instructions the other side fused (a decision that differs, the point of a
    comparison), else the largest of all."""
    from .records import FUSED

    return next((c for c in changes if c.other.status == FUSED), changes[0])


def kernel_sentence(m: KernelMatch) -> str:
    """What became of one group of kernels, in words."""
    if m.status == CHANGED_KIND:
        return f"{m.a[0].name} is a kernel of another kind: {m.a[0].label} in A, {m.b[0].label} in B ({m.b[0].name})"
    names_a = ", ".join(r.name for r in m.a) or "nothing"
    names_b = ", ".join(r.name for r in m.b) or "nothing"
    if m.status == CHANGED:
        return (f"{names_a} of A and {names_b} of B share {m.shared} instruction(s); {m.only_a} are only in A's, "
                f"{m.only_b} only in B's")
    return f"{names_a} of A {'are' if len(m.a) > 1 else 'is'} {names_b} of B ({m.status})"


def change_sentence(change: BoundaryChange) -> str:
    """`X (N per run, file:line) crosses a kernel boundary in B only: in A ...; in B ...`."""
    b = change.boundary
    own, other = ("B", "A") if change.side == "b" else ("A", "B")
    what = b.producer
    if b.source is not None and b.source.short():
        what += f" ({b.source.short()})"
    amount = size(change.bytes_per_run if change.bytes_per_run is not None else b.bytes)
    target = b.consumer_kernel or b.consumer
    return (f"{what}, {amount} per run, crosses from {b.producer_kernel} to {target} in {own} only: "
            f"{change.other.text}; in {own} {own_account(b)}")


def duration(us: float) -> str:
    from ..render.table import _us

    return _us(us)


def size(n: int | None) -> str:
    from ..render.table import _bytes

    return _bytes(n)


def _more(n: int, noun: str) -> str:
    return f"{abs(n)} {'more' if n > 0 else 'fewer'} {noun}{'s' if abs(n) != 1 else ''}"


def _join(parts: list[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + " and " + parts[-1]

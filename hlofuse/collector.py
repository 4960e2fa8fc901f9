"""Pausing Python's cyclic garbage collector around the two allocation-heavy jobs: reading a
module and replaying a pipeline.

Both allocate hundreds of thousands of long-lived objects (instructions, nodes, decisions).
With the collector on, its full collections run again and again over everything alive, and
their cost grows with the module: a quarter of the reading time of a 12 MB module, and a
quarter of the replay time of a 20k- or 40k-instruction module (bench/replay_speed.py),
while they find almost nothing to free.  Reading makes no reference cycles; a replay makes
some (the bodies of fusions merged away), which the first collection after it frees: the
peak memory of a 40k-instruction replay grew by 7% with the pause."""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def collector_paused():
    """The cyclic collector off for the block (left alone when the caller turned it off)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()

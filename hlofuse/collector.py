"""Pausing Python's cyclic garbage collector around the two allocation-heavy jobs: reading a
module and replaying a pipeline.

Both allocate hundreds of thousands of long-lived objects (instructions, nodes, decisions).
With the collector on, its full collections run again and again over everything alive, and
their cost grows with the module: a quarter of the reading time of a 12 MB module, and a
quarter of the replay time of a 20k- or 40k-instruction module (bench/replay_speed.py),
while they find almost nothing to free.  Neither job leaves reference cycles behind (a
replay breaks those of its program when done: graph.Program.dispose), so what survives the
block is long-lived data, and it is handed to the oldest generation at once instead of being
traversed by the first young collection after the block (seconds at 100k instructions)."""

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
        if not gc.get_freeze_count():  # (a caller's own frozen objects stay frozen)
            # What the block made lives on (a module, a replay's result, no cycles): move it
            # to the oldest generation at once (freeze, then unfreeze into that generation)
            # instead of having the first young collection after the block traverse all of it.
            gc.freeze()
            gc.unfreeze()
        gc.enable()

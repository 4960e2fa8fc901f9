"""Times as XLA's cost model holds them: `absl::Duration` values and 32-bit floats.

PriorityFusion orders producers by `time_unfused - time_fused`, and many candidates tie (equal
siblings, scalars).  To break ties as XLA does, times here are what absl::Duration stores: an
integer number of quarter nanoseconds ("ticks"), each conversion from a float rounded to the
nearest tick (absl's ScaleDouble rounds the fractional ticks).  The intermediates XLA computes
in `float` (bandwidths, `1.0f * bytes / bandwidth`, `1.0f * flops / rate`) are rounded to
float32 with `f32`.  With both, the µs figures match XLA's fusion log to within a tick or two
(docs/xla/priority-fusion.md §5.9, §13).
"""

from __future__ import annotations

import math
import struct

#: absl::Duration resolution: 4 ticks per nanosecond.
TICKS_PER_NS = 4
TICKS_PER_SECOND = 4_000_000_000
#: Stands for absl::InfiniteDuration().
INFINITE = math.inf


_F32 = struct.Struct("f")
_pack, _unpack = _F32.pack, _F32.unpack


def f32(x: float) -> float:
    """Round a Python float to the nearest float32, as C++ does when it stores a `float`."""
    try:
        return _unpack(_pack(x))[0]
    except OverflowError:  # beyond float32's range: infinite, as in C++
        return math.copysign(math.inf, x)


def from_seconds(seconds: float) -> int | float:
    """absl::Seconds(x): ticks, rounded to the nearest quarter nanosecond."""
    if math.isinf(seconds):
        return INFINITE
    return int(round(seconds * TICKS_PER_SECOND))


def from_nanoseconds(ns: float) -> int | float:
    """absl::Nanoseconds(x)."""
    if math.isinf(ns):
        return INFINITE
    return int(round(ns * TICKS_PER_NS))


def from_microseconds(us: float) -> int | float:
    if math.isinf(us):
        return INFINITE
    return int(round(us * 1000 * TICKS_PER_NS))


def scale(ticks: int | float, factor: float) -> int | float:
    """`duration * factor`, rounded to a tick (absl's operator*(Duration, double))."""
    if math.isinf(ticks):
        return ticks
    return int(round(ticks * factor))


def to_us(ticks: int | float) -> float:
    """absl::ToDoubleMicroseconds."""
    if math.isinf(ticks):
        return ticks
    return ticks / (1000 * TICKS_PER_NS)


def to_ns(ticks: int | float) -> float:
    if math.isinf(ticks):
        return ticks
    return ticks / TICKS_PER_NS


def us_as_logged(ticks: int | float) -> float:
    """A time as XLA's fusion log prints it: microseconds stored in a proto `float`."""
    return f32(to_us(ticks))

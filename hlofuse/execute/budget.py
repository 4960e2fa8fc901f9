"""What running a module may cost, checked before anything is allocated or looped: the bytes
its declared shapes need, and the iterations of its while loops.

A text of a few lines can declare f32[1000000000000] or a loop of 10**18 trips: the
reference evaluator and `hlofuse bench` compute both from the module first and refuse, in
one line, what exceeds the limits:
  memory      half the machine's physical memory, or HLOFUSE_MEMORY_LIMIT (bytes, or with a
              K, M, G or T suffix), or `hlofuse bench --memory-limit`;
  iterations  1,000,000 runs of any one loop's body per run of the module, or
              HLOFUSE_MAX_ITERATIONS, or `hlofuse bench --max-iterations`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from .. import ir
from ..errors import ExecutionError, InputError

MEMORY_ENV = "HLOFUSE_MEMORY_LIMIT"
ITERATIONS_ENV = "HLOFUSE_MAX_ITERATIONS"
DEFAULT_ITERATIONS = 1_000_000

#: Values that name a buffer another instruction made, allocating nothing of their own.
_ALIASES = frozenset({"parameter", "tuple", "get-tuple-element"})


@dataclass(frozen=True, slots=True)
class Limits:
    memory_bytes: int
    iterations: int

    @staticmethod
    def from_environment(memory: str | None = None, iterations: int | None = None) -> "Limits":
        """The limits given (an option's value), else the environment's, else the defaults."""
        memory_text = memory or os.environ.get(MEMORY_ENV)
        memory_bytes = parse_size(memory_text) if memory_text else physical_memory() // 2
        if iterations is None:
            text = os.environ.get(ITERATIONS_ENV, "").strip()
            if text and not text.isdigit():
                raise InputError(f"{ITERATIONS_ENV}={text!r}: expected a number of iterations")
            iterations = int(text) if text else DEFAULT_ITERATIONS
        return Limits(memory_bytes, iterations)


def parse_size(text: str) -> int:
    """`8G`, `512M`, `1.5T`, `1000000` (bytes; K, M, G, T are powers of 1024)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if m is None:
        raise InputError(f"{text!r} is not a size; write bytes, or a number with K, M, G or T")
    number, unit = float(m.group(1)), m.group(2).upper()
    return int(number * 1024 ** ("KMGT".index(unit) + 1)) if unit else int(number)


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a small machine
        return 8 * 2**30


def module_bytes(module: ir.Module) -> tuple[int, ir.Instruction | None]:
    """An upper bound of the bytes running `module` holds at once (the entry's parameters, and
    a buffer for every value of every computation, as the reference evaluator keeps them),
    and the instruction with the largest value."""
    total = sum(p.shape.byte_size for p in module.entry.parameters)
    largest, largest_bytes = None, -1
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode in _ALIASES:
                continue
            size = instr.shape.byte_size
            total += size
            if size > largest_bytes:
                largest, largest_bytes = instr, size
    return total, largest


def loop_iterations(module: ir.Module) -> list[tuple[ir.Instruction, int | None, str | None]]:
    """Each while loop of the executed computations with how often its body runs per run of
    the module (its trip count times the runs of the computation it is in; None when a count
    is unknown) and where its own count came from."""
    from ..explain.loops import trip_count

    runs: dict[str, int | None] = {module.entry_name: 1}
    out = []
    # Callers before callees (the call graph is acyclic: cycles.py), so each run count is
    # complete before a computation it calls is reached.
    for comp in reversed(module.computation_post_order):
        if comp.name not in runs:  # not called from the entry
            continue
        here = runs[comp.name]
        for instr in comp.instructions:
            if instr.opcode == "while":
                trip, source = trip_count(module, comp, instr)
                body_runs = None if here is None or trip is None else here * trip
                out.append((instr, body_runs, source))
                for key in ("body", "condition"):
                    _add_runs(runs, (instr.attr(key) or "").lstrip("%"),
                              None if body_runs is None else body_runs + (here if key == "condition" else 0))
            else:
                for callee in instr.called:
                    _add_runs(runs, callee, here)
    return out


def _add_runs(runs: dict[str, int | None], comp: str, count: int | None) -> None:
    if comp in runs:
        runs[comp] = None if runs[comp] is None or count is None else runs[comp] + count
    else:
        runs[comp] = count


def check(module: ir.Module, limits: Limits, what: str = "the module") -> None:
    """ExecutionError when running `module` would exceed `limits` (see the module docstring)."""
    need, largest = module_bytes(module)
    if need > limits.memory_bytes:
        biggest = f"; the largest value is {largest.name}, {largest.shape.to_text(False)}" if largest else ""
        raise ExecutionError(
            f"{what} needs about {_size(need)} for the values its shapes declare, over the limit of "
            f"{_size(limits.memory_bytes)}{biggest}; refusing to allocate (raise the limit with "
            f"--memory-limit or {MEMORY_ENV})")
    for loop, body_runs, source in loop_iterations(module):
        if body_runs is not None and body_runs > limits.iterations:
            origin = "its known_trip_count" if source == "backend_config" else "its condition"
            raise ExecutionError(
                f"while loop {loop.name} of {what} runs its body {body_runs:,} times (from {origin}), over the "
                f"limit of {limits.iterations:,}; refusing to run it (raise the limit with --max-iterations or "
                f"{ITERATIONS_ENV})")


def _size(n: int) -> str:
    if n >= 10**18:  # dimensions far beyond any memory: their order of magnitude says enough
        return f"10^{len(str(n)) - 1} bytes"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} bytes"

"""Modelled time of every kernel of a fused module and of every kernel boundary, per run.

A kernel costs its launch plus its run time (targets.py), times how often it runs per
execution of the program: the runs of its computation (a while body runs trip-count times,
nested loops multiply; a loop whose trip count is unknown is counted once, and the cost says
so in `unknown_runs`).

A boundary costs what the two kernels pay because they are apart:
  * writing the value: the producer kernel writes it once per run of its computation; the
    write is shared evenly by every boundary that carries the same value (one producer
    kernel, one output), so a value read by three kernels is written once, not three times;
  * reading it back: a consumer kernel reads it once per run of its own computation (a value
    made before a loop and read in its body is read every iteration); a buffer (a tuple, the
    loop state, control flow) reads nothing;
  * the launch it adds: the producer kernel's launch, shared by its boundaries to kernels of
    the same computation (fusing it into all of them would remove that launch).  A value
    crossing a loop or a call adds no launch: fusion never joins kernels across them.
Bytes move at the target's memory bandwidth.  The sum over boundaries is therefore part of
the kernels' modelled time, and `share` relates it to the program's whole modelled time.

`price_module` is the library entry point (also for comparing two fused modules: a relaxed
replay against the plain one, or two compiles of one program).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Mapping

from .. import ir
from .targets import KernelTime


@dataclass(frozen=True)
class KernelCost:
    """One kernel's modelled time: per launch, and how often it is launched per run."""

    computation: str
    name: str
    launch_us: float
    exec_us: float
    flops: float
    bytes: int
    priced_by: str  # cost-model | roofline
    launches: int  # per run of the program (its computation's runs; 1 where unknown)

    @property
    def us(self) -> float:
        """One launch: launch overhead plus run time."""
        return self.launch_us + self.exec_us

    @property
    def us_per_run(self) -> float:
        return self.us * self.launches


@dataclass(frozen=True)
class ModuleCost:  # noqa: PLR0904 - figures asked for often are computed once (cached_property)
    """The modelled time of a fused module on one target."""

    target: str  # the target's description
    target_info: Mapping
    kernels: tuple[KernelCost, ...]
    #: How often each executed computation runs per execution of the program.
    runs: Mapping[str, int]
    #: Computations whose run count is unknown (a loop without a known trip count): counted
    #: as running once.
    unknown_runs: tuple[str, ...] = ()
    #: While loop → (µs per iteration, µs per run of the program): the kernels of its body (and
    #: condition, and the loops and calls inside them).
    loops: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    _index: dict = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def total_us(self) -> float:
        """Modelled µs per run of the program: every kernel launch."""
        return sum(k.us_per_run for k in self.kernels)

    @cached_property
    def launches(self) -> int:
        return sum(k.launches for k in self.kernels)

    def kernel(self, computation: str, name: str) -> KernelCost | None:
        if not self._index:
            self._index.update({(k.computation, k.name): k for k in self.kernels})
        return self._index.get((computation, name))

    def by_computation(self) -> dict[str, float]:
        """µs of one execution of each computation's own kernels (nested loops not included)."""
        out: dict[str, float] = {c: 0.0 for c in self.runs}
        for k in self.kernels:
            out[k.computation] = out.get(k.computation, 0.0) + k.us
        return out

    def summary(self) -> dict:
        return {"target": self.target_info, "modelled_us_per_run": _r(self.total_us),
                "launches_per_run": self.launches, "kernels": len(self.kernels),
                "unknown_runs": list(self.unknown_runs)}


@dataclass(frozen=True)
class BoundaryCost:
    """What one boundary costs per run (µs): its share of writing the value, reading it back,
    and its share of the producer's launch."""

    write_us: float
    read_us: float
    launch_us: float

    @property
    def us(self) -> float:
        return self.write_us + self.read_us + self.launch_us

    def to_dict(self) -> dict:
        return {"write_us": _r(self.write_us), "read_us": _r(self.read_us), "launch_us": _r(self.launch_us)}


# ------------------------------------------------------------------------------------------
# Kernels
# ------------------------------------------------------------------------------------------


def price_module(module: ir.Module, target, program=None) -> ModuleCost:
    """Every kernel of a fused module priced on `target` (targets.target_for); `program`: a
    graph.Program of `module` already built (it is read, not changed or disposed)."""
    from ..explain.loops import LoopCounts
    from ..graph import Program
    from ..kernels import executed_computations
    from ..pipeline import executed_graphs
    from ..kernels import CONTROL
    from ..opcodes import NON_KERNEL

    executed = executed_computations(module)
    loops = LoopCounts(module, executed, lambda comp, name: None)
    runs: dict[str, int] = {}
    unknown: list[str] = []
    for comp in executed:
        r = loops.runs(comp.name)
        if r is None:
            unknown.append(comp.name)
            r = 1
        runs[comp.name] = r
    own = program is None
    if own:
        program = Program.from_module(module)
    try:
        pricer = target.pricer()
        kernels = []
        for graph in executed_graphs(program):
            launches = runs.get(graph.name, 1)
            for node in graph.post_order():
                if node.opcode in NON_KERNEL or node.opcode in CONTROL:
                    continue
                t: KernelTime = pricer.kernel(node)
                kernels.append(KernelCost(graph.name, node.name, t.launch_us, t.exec_us, t.flops, t.bytes,
                                          t.priced_by, launches))
    finally:
        if own:
            program.dispose()
    return ModuleCost(target.description, target.to_dict(), tuple(kernels), runs, tuple(unknown),
                      _loop_costs(module, loops, kernels, runs))


def _loop_costs(module: ir.Module, loops, kernels: list[KernelCost], runs: Mapping[str, int]) -> dict:
    """µs per iteration and per run of each while loop: its body's and condition's kernels and
    those of the computations they run (nested loops, calls, branches)."""
    from ..kernels import CONTROL

    per_comp: dict[str, float] = {}
    for k in kernels:
        per_comp[k.computation] = per_comp.get(k.computation, 0.0) + k.us_per_run
    out = {}
    for lp in loops.loops:
        inside, stack = set(), [lp.body, lp.condition]
        while stack:
            name = stack.pop()
            if name in inside or name not in module.by_name:
                continue
            inside.add(name)
            for instr in module[name].instructions:
                if instr.opcode in CONTROL:
                    stack.extend(c for c in instr.called if c in module.by_name)
        total = sum(per_comp.get(c, 0.0) for c in inside)
        body_runs = runs.get(lp.body, 1) or 1
        out[lp.name] = (total / body_runs, total)
    return out


# ------------------------------------------------------------------------------------------
# Boundaries
# ------------------------------------------------------------------------------------------


def price_boundaries(boundaries: Iterable, cost: ModuleCost, target) -> list[BoundaryCost]:
    """The cost of each boundary (explain.Boundary records), in their order."""
    boundaries = list(boundaries)
    carriers: dict[tuple, int] = {}
    launch_sharers: dict[tuple, int] = {}
    for b in boundaries:
        value = (b.producer_computation, b.producer_kernel, tuple(b.output))
        carriers[value] = carriers.get(value, 0) + 1
        if _adds_launch(b):
            key = (b.producer_computation, b.producer_kernel)
            launch_sharers[key] = launch_sharers.get(key, 0) + 1
    out = []
    for b in boundaries:
        moved = target.transfer_us(b.bytes)
        producer_runs = cost.runs.get(b.producer_computation, 1)
        write = moved * producer_runs / carriers[(b.producer_computation, b.producer_kernel, tuple(b.output))]
        read = moved * cost.runs.get(b.consumer_computation, 1) if b.consumer_kernel is not None else 0.0
        launch = 0.0
        if _adds_launch(b):
            kernel = cost.kernel(b.producer_computation, b.producer_kernel)
            if kernel is not None:
                launch = kernel.launch_us * kernel.launches / launch_sharers[(b.producer_computation,
                                                                              b.producer_kernel)]
        out.append(BoundaryCost(write, read, launch))
    return out


def _adds_launch(b) -> bool:
    return not b.crossing and b.consumer_kernel is not None


def _r(us: float) -> float:
    return round(us, 4)

"""The host side of a lowered program: buffers on a device, the kernels compiled, and the
steps (launches, copies, while loops, conditionals) run in order — counted once, then timed.

A device (execute/cpu.py's CpuDevice, execute/cuda.py's CudaDevice) supplies buffers,
compiled kernels, library calls, copies, scalar reads and a clock; this module is the same
for both, so both run exactly the same launches.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from .. import ir
from ..errors import ExecutionError
from . import numeric
from .lower import Conditional, Copy, Launch, Lowered, Tree, While


class Device(Protocol):
    name: str

    def free_memory(self) -> int: ...
    def allocate(self, shape: ir.Shape): ...
    def upload(self, handle, flat: np.ndarray) -> None: ...
    def download(self, handle) -> np.ndarray: ...
    def compile(self, lowered: Lowered): ...
    def launcher(self, compiled, kernel, handles) -> tuple[Callable[[], None], int]: ...
    def library(self, lowered: Lowered, kernel, handles) -> Callable[[], None]: ...
    def copier(self, dst, src, nbytes: int) -> Callable[[], None]: ...
    def reader(self, handle) -> Callable[[], object]: ...
    def measure(self, run: Callable[[], None]) -> float: ...


@dataclass
class Counts:
    launches: int = 0
    bytes: int = 0
    copies: int = 0


class Runner:
    """A lowered program placed on a device: `run()` executes it once, `count()` counts its
    launches and bytes, `time()` gives per-run seconds."""

    def __init__(self, lowered: Lowered, device: Device, *, on_compiled: Callable[[], None] | None = None):
        self.lowered = lowered
        self.device = device
        need = lowered.nbytes
        free = device.free_memory()
        if need > free:
            raise ExecutionError(f"the plan needs {need / 2**20:.1f} MiB of buffers and the {device.name} has "
                                 f"{free / 2**20:.1f} MiB free; refusing to allocate (use smaller inputs)")
        self.handles = [device.allocate(b.shape) for b in lowered.buffers]
        for b in lowered.buffers:
            if b.data is not None:
                device.upload(self.handles[b.id], b.data)
        self.compiled = device.compile(lowered)
        if on_compiled is not None:
            on_compiled()
        self._launch: dict[int, tuple[Callable[[], None], int]] = {}
        for i, kernel in enumerate(lowered.kernels):
            handles = [self.handles[a] for a in kernel.args]
            if kernel.generated:
                self._launch[i] = device.launcher(self.compiled, kernel, handles)
            else:
                self._launch[i] = (device.library(lowered, kernel, handles), 1)
        self._plain = self._build(lowered.steps, None)
        # a device that runs the whole step list natively (the CPU's host program in C)
        program = getattr(device, "program", None)
        self._native = program(self.compiled, lowered, self.handles, self._launch) if program else None
        # a device that replays the steps' device work as one graph (CUDA graphs)
        graph = getattr(device, "graph", None)
        if self._native is None and graph is not None:
            self._native = graph(lowered, self._plain)

    # -- inputs and outputs ---------------------------------------------------------------
    def set_inputs(self, args: Sequence) -> None:
        params = self.lowered.module.entry.parameters
        if len(args) != len(params):
            raise ExecutionError(f"the module takes {len(params)} inputs, got {len(args)}")
        for p, tree, value in zip(params, self.lowered.inputs, args):
            self._upload_tree(p.shape, tree, value)

    def _upload_tree(self, shape: ir.Shape, tree: Tree, value) -> None:
        if tree is None:
            return
        if isinstance(tree, tuple):
            for s, t, v in zip(shape.tuple_shapes, tree, value):
                self._upload_tree(s, t, v)
            return
        array = np.asarray(value).astype(numeric.np_dtype(shape.element_type), copy=False)
        self.device.upload(self.handles[tree], numeric.to_physical(array, shape))

    def outputs(self) -> list[np.ndarray]:
        """The entry's result leaves as logical arrays."""
        out = []
        shapes = [s for s in self.lowered.module.entry.root.shape.leaves() if s.is_array]
        for b, shape in zip(self.lowered.leaves(self.lowered.output), shapes):
            flat = self.device.download(self.handles[b])[: shape.elements]
            out.append(numeric.from_physical(flat, shape))
        return out

    # -- running --------------------------------------------------------------------------
    @property
    def native(self) -> bool:
        """Whether run() is the device's own run of the steps (the CPU's host program)
        rather than this module's loop over launch closures (which count() always uses)."""
        return self._native is not None

    def run(self) -> None:
        if self._native is not None:
            self._native()
            return
        for step in self._plain:
            step()

    def count(self) -> Counts:
        """Run once, counting launches (copies included) and the bytes they move."""
        counts = Counts()
        for step in self._build(self.lowered.steps, counts):
            step()
        return counts

    def time(self, repeat: int, warmup: int = 1, progress: Callable[[], None] | None = None) -> list[float]:
        for _ in range(warmup):
            self.device.measure(self.run)
        times = []
        for _ in range(repeat):
            times.append(self.device.measure(self.run))
            if progress is not None:
                progress()
        return times

    # -- steps → closures -----------------------------------------------------------------
    def _build(self, steps: list, counts: Counts | None) -> list[Callable[[], None]]:
        out = []
        for step in steps:
            out.append(self._closure(step, counts))
        return out

    def _closure(self, step, counts: Counts | None) -> Callable[[], None]:
        if isinstance(step, Launch):
            fn, launches = self._launch[step.kernel]
            if counts is None:
                return fn
            nbytes = self.lowered.kernels[step.kernel].bytes

            def counted():
                counts.launches += launches
                counts.bytes += nbytes
                fn()
            return counted
        if isinstance(step, Copy):
            nbytes = self.lowered.buffers[step.src].nbytes
            fn = self.device.copier(self.handles[step.dst], self.handles[step.src], nbytes)
            if counts is None:
                return fn

            def counted_copy():
                counts.launches += 1
                counts.copies += 1
                counts.bytes += 2 * nbytes
                fn()
            return counted_copy
        if isinstance(step, While):
            return self._while(step, counts)
        if isinstance(step, Conditional):
            return self._conditional(step, counts)
        raise ExecutionError(f"internal: unknown step {step!r}")

    def _while(self, step: While, counts: Counts | None) -> Callable[[], None]:
        entry = self._build(step.entry, counts)
        cond = self._build(step.cond, counts)
        body = self._build(step.body, counts)
        end = self._build(step.end, counts)
        iteration = body + end
        trip = step.trip_count
        if trip is not None:
            # XLA's WhileThunk: a known trip count runs the body that often, no condition
            def run_known():
                for f in entry:
                    f()
                for _ in range(trip):
                    for f in iteration:
                        f()
            return run_known
        read = self.device.reader(self.handles[step.pred])

        def run_loop():
            for f in entry:
                f()
            while True:
                for f in cond:
                    f()
                if not read():
                    return
                for f in iteration:
                    f()
        return run_loop

    def _conditional(self, step: Conditional, counts: Counts | None) -> Callable[[], None]:
        branches = [self._build(b, counts) for b in step.branches]
        read = self.device.reader(self.handles[step.selector])
        is_pred = self.lowered.buffers[step.selector].shape.element_type == "pred"

        def run():
            value = read()
            if is_pred:
                index = 0 if value else 1
            else:
                index = int(value)
                if not 0 <= index < len(branches):
                    index = len(branches) - 1
            for f in branches[index]:
                f()
        return run


def median(times: list[float]) -> float:
    return statistics.median(times) if times else float("nan")

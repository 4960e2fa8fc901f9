"""The CUDA target: the same kernel bodies as the CPU's, one thread per element (a warp per
element where a reduction of 32 or more elements is split across its lanes), compiled
with NVRTC through CuPy (RawModule) and launched from the same host steps, which replay as
one CUDA graph where the graph policy allows (GRAPH_POLICIES, graph_run); library kernels go to
execute/gpu_library.py (dots and cuBLAS calls as CuPy's matmul, the rest through the
reference evaluator bound to CuPy), and timing uses CUDA events around each run.

CuPy is optional (`pip install 'hlofuse[gpu]'`, or `'hlofuse[gpu-cuda13]'` for a CUDA 13
driver): this module imports it only when a device is created, and `render` /
`compile_ptx` work without it (nvcc alone), which is how the tests check that every
generated kernel compiles on machines without a GPU. Run on an NVIDIA H100 (CuPy 14.2,
CUDA 13): tests/test_execute_kernels.py and tests/test_bench.py's GPU tests pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import numpy as np

from ..errors import BackendUnavailable, ExecutionError
from .emit import EmitError, ctype
from .kernel import KernelBody
from .gpu_library import library_call
from .prelude import prelude

BLOCK = 256
NVRTC_OPTIONS = ("--std=c++14", "-fmad=false")


def kernel_names(body: KernelBody) -> list[str]:
    """One __global__ function per phase (a scatter's copy, then its updates)."""
    return [body.name] if body.phases == 1 else [f"{body.name}_p{p}" for p in range(body.phases)]


def render(bodies: list[KernelBody]) -> str:
    parts = [prelude("cuda")]
    for body in bodies:
        parts += body.functions
        parts.append(render_kernel(body))
    return "\n".join(parts) + "\n"


def render_kernel(body: KernelBody) -> str:
    restrict = " __restrict__" if body.distinct_args else ""
    params = []
    for arg in body.args:
        t = ctype(arg.element_type)
        params.append(f"{t}*{restrict} {arg.name}" if arg.output else f"const {t}*{restrict} {arg.name}")
    out = []
    for phase, name in enumerate(kernel_names(body)):
        lines = [f"/* {body.label} */", f'extern "C" __global__ void {name}({", ".join(params)}) {{',
                 "  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;"]
        for group in body.groups:
            if group.phase != phase:
                continue
            if group.cpu_only:
                raise EmitError(f"kernel {body.label}: a CPU-only loop nest (its op is a library call on CUDA)")
            if group.cuda_body is not None:  # a block's own code (a column reduction's tile)
                lines += ["  {", "  const i64 hf_tx = threadIdx.x % 32, hf_ty = threadIdx.x / 32;",
                          "  const i64 hf_col = (i64)blockIdx.x * 32 + hf_tx;"]
                lines += ["  " + line for line in group.cuda_body] + ["  }"]
                continue
            if group.hoisted:
                lines += _row_group(group)
                continue
            # a group whose reductions are split across a warp gives each element 32 threads
            # (BLOCK is a multiple of 32, so an element's lanes are one warp)
            e = "t" if group.lanes == 1 else "e"
            lines.append("  {")
            if group.lanes > 1:
                lines.append(f"  const i64 e = t / {group.lanes}; const i64 hf_lane = t % {group.lanes}; "
                             f"const i64 hf_lanes = {group.lanes};")
            lines.append(f"  if ({e} < {group.elements}) {{")
            stride = 1
            strides = {}
            for d in reversed(group.order):  # minor to major
                strides[d] = stride
                stride *= group.dims[d]
            for d in group.order:
                size = group.dims[d]
                expr = f"({e} / {strides[d]})" if strides[d] > 1 else e
                if d != group.order[0]:
                    expr = f"{expr} % {size}"
                lines.append(f"    const i64 {group.vars[d]} = {expr if size > 1 else '0'};")
            lines += ["    " + line for line in group.hoisted + group.body] + ["  }", "  }"]
        lines.append("}")
        out.append("\n".join(lines))
    return "\n".join(out)


def _row_group(group) -> list[str]:
    """A group with per-row code (a row's reductions, hoisted out of the element loop): one
    warp per row, as XLA's row-reduction and Triton normalization kernels give a row a block
    of threads: the lanes compute the row's reductions together, then its elements in turn."""
    lanes = group.lanes
    outer, inner = group.order[: group.hoist_depth], group.order[group.hoist_depth:]
    lines = ["  {", f"  const i64 e = t / {lanes}; const i64 hf_lane = t % {lanes}; const i64 hf_lanes = {lanes};",
             f"  if (e < {group.rows}) {{"]
    lines += _decompose("e", outer, group, "    ")
    lines += ["    " + line for line in group.hoisted]
    n = 1
    for d in inner:
        n *= group.dims[d]
    lines.append(f"    for (i64 hf_j = hf_lane; hf_j < {n}; hf_j += hf_lanes) {{")
    lines += _decompose("hf_j", inner, group, "      ")
    lines += ["      " + line for line in group.body]
    return lines + ["    }", "  }", "  }"]


def _decompose(flat: str, dims, group, pad: str) -> list[str]:
    """The index variables of `dims` (major to minor) from their flat position."""
    out, stride, strides = [], 1, {}
    for d in reversed(dims):
        strides[d] = stride
        stride *= group.dims[d]
    for k, d in enumerate(dims):
        size = group.dims[d]
        expr = f"({flat} / {strides[d]})" if strides[d] > 1 else flat
        if k:
            expr = f"{expr} % {size}"
        out.append(f"{pad}const i64 {group.vars[d]} = {expr if size > 1 else '0'};")
    return out


def grid(body: KernelBody, phase: int) -> int:
    n = max((g.threads for g in body.groups if g.phase == phase), default=1)
    return max(1, (n + BLOCK - 1) // BLOCK)


def nvcc() -> str | None:
    return shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(p)), None)


def compile_ptx(source: str, arch: str = "sm_75") -> str:
    """Compile a kernel file to PTX with nvcc (no GPU needed); ExecutionError with nvcc's
    messages when it does not compile."""
    tool = nvcc()
    if tool is None:
        raise BackendUnavailable("nvcc is not installed")
    with tempfile.TemporaryDirectory(prefix="hlofuse-ptx-") as folder:
        src = os.path.join(folder, "kernels.cu")
        ptx = os.path.join(folder, "kernels.ptx")
        with open(src, "w") as fh:
            fh.write(source)
        proc = subprocess.run([tool, "--ptx", "-w", f"-arch={arch}", "-fmad=false", "-o", ptx, src],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise ExecutionError(f"nvcc rejected the generated kernels:\n{proc.stderr[-3000:]}")
        with open(ptx) as fh:
            return fh.read()


def available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device
        return False


class CudaDevice:
    """Buffers are CuPy arrays (elements in physical order); kernels come from one RawModule."""

    name = "cuda"
    split_gemm_fusions = True  # a GEMM fusion's prologue and epilogue generated, its dot cuBLAS

    def __init__(self, graphs: str = "straight"):
        if graphs not in GRAPH_POLICIES:
            raise ValueError(f"graphs={graphs!r}: choose one of {', '.join(GRAPH_POLICIES)}")
        #: which programs replay their steps as one CUDA graph (GRAPH_POLICIES)
        self.graphs = graphs
        try:
            import cupy
        except ImportError:
            raise BackendUnavailable("CuPy is not installed (pip install 'hlofuse[gpu]'); "
                                     "run on the CPU with --device cpu") from None
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as err:
            raise BackendUnavailable(f"no CUDA device ({err}); run on the CPU with --device cpu") from None
        if count == 0:
            raise BackendUnavailable("no CUDA device; run on the CPU with --device cpu")
        self.cp = cupy

    def describe(self) -> str:
        props = self.cp.cuda.runtime.getDeviceProperties(self.cp.cuda.Device().id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return f"cuda ({name})"

    def free_memory(self) -> int:
        free, _ = self.cp.cuda.runtime.memGetInfo()
        return int(free)

    def allocate(self, shape):
        from .numeric import np_dtype

        return self.cp.zeros(max(shape.elements, 1), np_dtype(shape.element_type))

    def upload(self, handle, flat: np.ndarray) -> None:
        handle[: flat.size] = self.cp.asarray(flat.reshape(-1))

    def download(self, handle) -> np.ndarray:
        return self.cp.asnumpy(handle)

    def compile(self, lowered):
        bodies = [k.body for k in lowered.kernels if k.generated]
        if not bodies:
            return None
        return self.cp.RawModule(code=render(bodies), options=NVRTC_OPTIONS)

    def launcher(self, compiled, kernel, handles):
        body = kernel.body
        fns = [(compiled.get_function(n), grid(body, p)) for p, n in enumerate(kernel_names(body))]
        args = tuple(handles)

        def launch():
            for fn, blocks in fns:
                fn((blocks,), (BLOCK,), args)
        return launch, len(fns)

    def library(self, lowered, kernel, handles):
        return library_call(self.cp, lowered, kernel, handles)

    def graph(self, lowered, steps):
        if self.graphs == "off" or (self.graphs == "straight" and has_loops(lowered.steps)):
            return None
        return graph_run(self.cp, lowered, steps)

    def copier(self, dst, src, nbytes: int):
        def copy():
            dst[: src.size] = src
        return copy

    def reader(self, handle):
        # a device-to-host copy of the predicate and a wait, as XLA's WhileThunk does
        def read():
            return handle[:1].get()[0]
        return read

    def measure(self, run) -> float:
        start, stop = self.cp.cuda.Event(), self.cp.cuda.Event()
        start.record()
        run()
        stop.record()
        stop.synchronize()
        return self.cp.cuda.get_elapsed_time(start, stop) / 1e3


#: Which programs replay as one CUDA graph.  "straight" (the default): programs without a
#: while loop or conditional, as XLA:GPU runs a straight sequence of kernels as a command
#: buffer; a loop runs iteration by iteration with a launch per kernel, as XLA's WhileThunk
#: launches its body's kernels (a known trip count without reading the condition), so the
#: plans' ratios keep the launches per iteration that the paper's loop results are about.
#: Launches from Python cost more than XLA's from C++ (about 5-6 µs against 4 on an H100).
#: "loops": known-trip-count loops unrolled into the graph too (launch costs mostly gone:
#: the plan's device work alone); "off": every kernel launched from Python.
GRAPH_POLICIES = ("straight", "loops", "off")


def has_loops(steps) -> bool:
    from .lower import Conditional, While

    return any(isinstance(step, (While, Conditional)) for step in steps)


def reads_the_host(steps) -> bool:
    """Whether running the steps reads a device value on the host (a while loop's condition
    without a known trip count, a conditional's selector): such steps cannot be one graph."""
    from .lower import Conditional, While

    for step in steps:
        if isinstance(step, Conditional):
            return True
        if isinstance(step, While) and (step.trip_count is None or
                                        any(reads_the_host(s) for s in (step.entry, step.body, step.end))):
            return True
    return False


def graph_run(cp, lowered, steps):
    """The steps' device work captured once as a CUDA graph and replayed as one launch, as
    XLA:GPU replays its command buffers: a program of many small kernels (a loop's body run
    a known number of times) then costs one launch from Python instead of one per kernel.
    None when the steps read the device on the host (reads_the_host).  The capture runs on
    its own stream with its own memory pool (the temporaries library calls allocate while
    captured stay that graph's, never handed to another buffer); a capture that fails (a
    library call the graph cannot hold) falls back for good to the steps one by one, noted.
    The first run captures; every run, the first included, replays."""
    if reads_the_host(lowered.steps):
        return None
    state: dict = {}

    def run_steps():
        for step in steps:
            step()

    def capture():
        pool = cp.cuda.MemoryPool()
        stream = cp.cuda.Stream()
        with cp.cuda.using_allocator(pool.malloc), stream:
            run_steps()  # the library calls' first-call decisions and temporaries, before capture
            stream.synchronize()
            stream.begin_capture()
            try:
                run_steps()
            finally:
                graph = stream.end_capture()
        state.update(graph=graph, stream=stream, pool=pool)

    def run():
        if "graph" not in state and "failed" not in state:
            try:
                capture()
            except Exception as err:  # noqa: BLE001 - any failure: the plain steps still run
                state["failed"] = err
                lowered.notes.append(f"the steps run one by one, not as a CUDA graph: its capture failed "
                                     f"with {type(err).__name__}: {str(err)[:160]}")
        if "graph" in state:
            state["graph"].launch(state["stream"])
        else:
            run_steps()
    return run

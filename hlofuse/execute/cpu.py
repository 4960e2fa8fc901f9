"""The CPU target: generated kernels compiled by the machine's C compiler into one shared
library and called through ctypes, so fusion's effect is measured (and tested) without a GPU.

A kernel is one C function `void k(void** buffers)`; each loop nest of the kernel body
(kernel.Group) becomes nested `for` loops in the layout's major-to-minor order (or the
group's own CPU loop nest, execute/nests.py), written for GCC's vectorizer.  A plan's steps
run as one C function beside its kernels (execute/host.py): a launch is a C call, library
kernels are called back into NumPy.  Buffers are NumPy arrays holding elements in physical
layout order.  Runs are timed by the thread's CPU time (see CpuDevice), which a busy shared
machine distorts far less than wall time.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .. import private_files
from ..errors import BackendUnavailable, ExecutionError
from .emit import ctype
from .kernel import KernelBody
from .host import HOST_FUNCTION, host_source
from .prelude import prelude

#: -O3 -march=native: the element loops vectorized for this machine's vector units (AVX2,
#: AVX-512...; the cache key holds the CPU's flags, so a library built for one CPU is not
#: loaded on another).  -ffp-contract=off: no fused multiply-adds, so each operation rounds
#: as the reference's does.  -fno-math-errno and -fno-trapping-math: no errno from sqrt, and
#: no floating-point traps to preserve (none are enabled), so the compiler may if-convert
#: and vectorize; neither changes a result.  Never -ffast-math: it would let the compiler
#: drop NaN and infinity handling (maximum's NaN propagation, the checks in vecmath) and
#: reassociate sums, which the check against the reference relies on.
CFLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-fPIC", "-shared",
          "-w")


def render(bodies: list[KernelBody], host: str = "") -> str:
    """The C file holding every kernel of a plan (and its host program, when given)."""
    parts = [prelude("cpu")]
    for body in bodies:
        parts += body.functions
        parts.append(render_kernel(body))
    if host:
        parts.append(host)
    return "\n".join(parts) + "\n"


def render_kernel(body: KernelBody) -> str:
    lines = [f"/* {body.label} */", f"void {body.name}(void** b) {{"]
    # restrict (no two arguments share memory) lets the compiler hoist and vectorize; a
    # kernel writing over one of its inputs goes without it
    restrict = " restrict" if body.distinct_args else ""
    for i, arg in enumerate(body.args):
        t = ctype(arg.element_type)
        lines.append(f"  {t}*{restrict} {arg.name} = ({t}*)b[{i}];" if arg.output
                     else f"  const {t}*{restrict} {arg.name} = (const {t}*)b[{i}];")
    if any(g.lanes > 1 for g in body.groups):  # reductions split across lanes on CUDA: one lane here
        lines.append("  const i64 hf_lane = 0, hf_lanes = 1;")
    for group in body.groups:  # phases run one after another anyway
        if group.cpu_body is not None:  # the CPU's own loop nest for this group
            lines += ["  {"] + ["    " + line for line in group.cpu_body] + ["  }"]
            continue
        depth = 1
        lines.append("  {")
        inner = [d for d in group.order if group.dims[d] > 1]
        body, opaque = opaque_strides(group.body, group.vars[inner[-1]] if inner else None)
        lines += [f"  i64 hf_s{k} = {k}; __asm__(\"\" : \"+r\"(hf_s{k}));" for k in opaque]
        opened = 0
        for position, d in enumerate(group.order):
            if group.hoisted and position == group.hoist_depth:  # once per outer iteration
                lines += ["  " * (depth + 1) + "{"] + ["  " * (depth + 1) + line for line in group.hoisted]
                opened += 1
            depth += 1
            var, size = group.vars[d], group.dims[d]
            looped = [p for p, e in enumerate(group.order) if group.dims[e] > 1] or [len(group.order) - 1]
            if position == looped[-1] and group.independent:
                # tell GCC the iterations are independent: without restrict (an output written
                # over an input it reads at the same index) it gives up on the run-time alias
                # checks of a dozen pointers, and with it on a row's side outputs stored
                # between the row's loads; either way the loop stayed scalar
                lines.append("#pragma GCC ivdep")
            lines.append("  " * depth + f"for (i64 {var} = 0; {var} < {size}; ++{var})")
        lines += ["  " * (depth + 1) + "{"] + ["  " * (depth + 1) + line for line in body] + \
                 ["  " * (depth + 1) + "}"] + ["  " * (depth + 1) + "}"] * opened + ["  }"]
    lines.append("}")
    return "\n".join(lines)


#: Strides GCC 12's vectorizer refuses as a group of interleaved accesses (it takes 2, 3, 4
#: and 8): rows of 5 random words (threefry's u32[2048,5]) kept the whole loop scalar.
REFUSED_STRIDES = (5, 6, 7)


def opaque_strides(body: list[str], var: str | None) -> tuple[list[str], list[int]]:
    """The loop body with `k*var` (k in REFUSED_STRIDES) read through a variable the compiler
    cannot see through (`hf_sK`, an empty asm keeps it from folding the constant back): a
    stride it does not know it vectorizes by building each vector element by element, where
    the known group of 5 it refuses.  Returns the body and the strides hidden."""
    if var is None:
        return body, []
    pattern = re.compile(rf"\b({'|'.join(map(str, REFUSED_STRIDES))})\*{re.escape(var)}\b")
    used: set[int] = set()

    def hide(match: re.Match) -> str:
        used.add(int(match.group(1)))
        return f"hf_s{match.group(1)}*{var}"

    out = [pattern.sub(hide, line) for line in body]
    return out, sorted(used)


def compiler() -> str:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    raise BackendUnavailable("no C compiler found (set CC, or install gcc): the CPU target compiles its kernels")


def library_name(cc: str, source: str) -> str:
    """The cache entry of a kernel file: keyed by the compiler, its flags, the machine, its
    CPU's features (-march=native) and the source."""
    key = hashlib.sha256((cc + " ".join(CFLAGS) + os.uname().machine + cpu_features() + source).encode()).hexdigest()[:24]
    return f"k{key}.so"


def cpu_features() -> str:
    """The CPU's model and feature flags (what -march=native compiles for)."""
    lines = []
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("model name", "flags", "Features")):
                    lines.append(line.strip())
                elif not line.strip() and lines:
                    break
    except OSError:
        pass
    import platform

    return "\n".join(lines) or platform.processor()


def build_library(cc: str, source: str, folder: Path) -> Path:
    """Compile a kernel file into `folder` (a fresh private one: nothing in it to follow)."""
    src, lib = folder / "kernels.c", folder / "kernels.so"
    src.write_text(source)
    proc = subprocess.run([cc, *CFLAGS, "-o", str(lib), str(src), "-lm"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ExecutionError(f"the C compiler rejected the generated kernels ({src}):\n{proc.stderr[-2000:]}")
    return lib


def load_library(source: str) -> tuple[ctypes.CDLL, Path]:
    """The compiled kernels of a kernel file, loaded, and where they were loaded from.

    A library is code run as the user, so it is cached only in the user's private folder
    (private_files.cache_folder) and loaded only when its digest matches the seal written
    with it; an entry that fails to verify or to load (a truncated file, which would crash the
    process with SIGBUS) is discarded and built again.  Each build happens in a fresh mkdtemp
    folder; without a private cache folder, the library is loaded from there and the folder
    deleted (the loaded library stays mapped)."""
    cc = compiler()
    name = library_name(cc, source)
    folder = private_files.cache_folder("kernels")
    if folder is not None:
        cached = private_files.verified(folder, name)
        if cached is not None:
            try:
                return ctypes.CDLL(str(cached)), cached
            except OSError:  # verified, yet it does not load (another machine's?): build it again
                private_files.discard(folder, name)
    build = Path(tempfile.mkdtemp(prefix=".build-", dir=folder) if folder is not None
                 else tempfile.mkdtemp(prefix="hlofuse-kernels-"))
    try:
        lib = build_library(cc, source, build)
    except ExecutionError:
        raise  # the folder is kept: the message names the source the compiler rejected
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    try:
        if folder is None:
            return _open(lib), lib
        os.replace(build / "kernels.c", folder / (name[:-3] + ".c"))  # kept, to read the kernels
        path = private_files.adopt(folder, name, lib)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return _open(path), path


def _open(lib: Path) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(str(lib))
    except OSError as err:
        raise ExecutionError(f"the compiled kernels do not load ({lib}): {err}") from None


class Library:
    """The compiled kernels of one plan, and its host program when given."""

    def __init__(self, bodies: list[KernelBody], host: str = ""):
        self._lib, self.path = load_library(render(bodies, host))
        self.has_host = bool(host)

    def kernel(self, name: str):
        fn = getattr(self._lib, name)
        fn.argtypes = [ctypes.c_void_p]
        fn.restype = None
        return fn


def launcher(fn, buffers: list[np.ndarray]):
    """A closure launching `fn` on these buffers (their addresses bound once)."""
    array = (ctypes.c_void_p * len(buffers))(*[b.ctypes.data for b in buffers])
    address = ctypes.cast(array, ctypes.c_void_p)

    def launch():
        fn(address)

    launch.keepalive = (array, buffers)
    return launch


# ------------------------------------------------------------------------------------------
# The device the runtime drives
# ------------------------------------------------------------------------------------------


def plain_dot(lowered, kernel):
    """(lhs input, rhs input, the dot) when a library kernel is a dot of two of its inputs (a
    dot instruction, or a library fusion holding only one, as XLA:CPU's YNNPACK dot
    fusions), else None."""
    instr = kernel.instr
    if instr.opcode == "dot":
        return 0, 1, instr
    if instr.opcode != "fusion" or any(s.is_tuple for s in kernel.shapes):
        return None
    comp = lowered.module[instr.fused_computation.lstrip("%")]
    root = comp.root
    if root.opcode != "dot" or len(comp.instructions) != 3:
        return None
    lhs, rhs = (comp[o] for o in root.operands)
    if lhs.opcode != "parameter" or rhs.opcode != "parameter":
        return None
    if len(instr.operands) != kernel.n_inputs:  # an operand is a tuple: inputs are not operands
        return None
    return lhs.parameter_number, rhs.parameter_number, root


def _dot_call(lowered, kernel, handles, spec):
    """A dot run straight by NumPy on views of the buffers bound once (no evaluator, no copy
    of the inputs): Python's share of a call is a few microseconds."""
    from . import arrays, numeric
    from .interp import dot_dims

    lhs, rhs, dot = spec
    n_in = kernel.n_inputs
    shapes = kernel.shapes
    views = [numeric.from_physical(h[: s.elements], s) for h, s in zip(handles[:n_in], shapes[:n_in])]
    a, b = views[lhs], views[rhs]
    out_handle, out_shape = handles[n_in], shapes[n_in]
    dims = dot_dims(dot)
    dtype = numeric.np_dtype(out_shape.element_type)
    plain_out = tuple(out_shape.minor_to_major) == tuple(range(out_shape.rank - 1, -1, -1))
    out_view = out_handle[: out_shape.elements].reshape(out_shape.dims) if plain_out else None

    def call():
        result = arrays.dot_general(a, b, *dims, dtype)
        if out_view is not None:
            out_view[...] = result
        else:
            out_handle[: out_shape.elements] = numeric.to_physical(result, out_shape)

    return call


def library_call(lowered, kernel, handles, target_module=np):
    """A library kernel (dot, convolution, sort, library custom call...) evaluated by the
    reference evaluator's implementation of its instruction, on logical views of the
    buffers; the results are written back in physical order."""
    from .interp import HANDLERS, Evaluator
    from . import numeric

    spec = plain_dot(lowered, kernel) if kernel.shapes else None
    if spec is not None:
        return _dot_call(lowered, kernel, handles, spec)
    instr = kernel.instr
    evaluator = Evaluator(lowered.module)
    n_in = kernel.n_inputs
    shapes = kernel.shapes or [lowered.buffers[a].shape for a in kernel.args]
    in_shapes, out_shapes = shapes[:n_in], shapes[n_in:]
    ins, outs = handles[:n_in], handles[n_in:]
    handler = HANDLERS[instr.opcode]

    def call():
        ops = [numeric.from_physical(h[: s.elements], s) for h, s in zip(ins, in_shapes)]
        with np.errstate(all="ignore"):
            result = handler(evaluator, instr, ops)
        leaves = value_leaves(result)
        for h, s, value in zip(outs, out_shapes, leaves):
            h[: s.elements] = numeric.to_physical(np.asarray(value), s)

    return call


def value_leaves(value) -> list:
    """The arrays of an evaluated value, a tuple's depth first (None, a token, has none)."""
    if isinstance(value, tuple):
        out = []
        for v in value:
            out += value_leaves(v)
        return out
    return [] if value is None else [value]


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


class CpuDevice:
    """Buffers are NumPy arrays; kernels are C functions; time is perf_counter."""

    name = "cpu"
    #: batch elements per loop-kernel call: a block, so each step reads the pool rows together
    loop_tile = 64
    #: dots as generated kernels (a vectorized loop nest), not NumPy called back from C
    generated_dots = True

    def describe(self) -> str:
        return f"cpu ({cpu_name()}, {os.cpu_count()} cores, kernels compiled by {compiler()}, {self.clock} clock)"

    def free_memory(self) -> int:
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
            return 1 << 40

    def allocate(self, shape):
        from .numeric import np_dtype

        return np.zeros(max(shape.elements, 1), np_dtype(shape.element_type))

    def upload(self, handle, flat: np.ndarray) -> None:
        handle[: flat.size] = flat.reshape(-1)

    def download(self, handle) -> np.ndarray:
        return handle.copy()

    def compile(self, lowered):
        bodies = [k.body for k in lowered.kernels if k.generated]
        return Library(bodies, host_source(lowered))

    def program(self, compiled, lowered, handles, launchers):
        """The whole program as one C call (the host program), or None: `launchers` are the
        runtime's launch closures, library kernels among them called back from C."""
        if compiled is None or not compiled.has_host:
            return None
        fn = getattr(compiled._lib, HOST_FUNCTION)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        fn.restype = None
        callback = ctypes.CFUNCTYPE(None)
        kargs = (ctypes.c_void_p * max(len(lowered.kernels), 1))()
        lib = (callback * max(len(lowered.kernels), 1))()
        keep = []
        for i, kernel in enumerate(lowered.kernels):
            launch = launchers[i][0]
            if kernel.generated:
                kargs[i] = ctypes.cast(launch.keepalive[0], ctypes.c_void_p)
            else:
                lib[i] = callback(launch)
        bufs = (ctypes.c_void_p * max(len(handles), 1))(*[h.ctypes.data for h in handles])
        addresses = [ctypes.cast(a, ctypes.c_void_p) for a in (kargs, bufs, lib)]

        def run():
            fn(*addresses)

        run.keepalive = (kargs, bufs, lib, keep, launchers, handles)
        return run

    def launcher(self, compiled, kernel, handles):
        return launcher(compiled.kernel(kernel.name), handles), 1

    def library(self, lowered, kernel, handles):
        return library_call(lowered, kernel, handles)

    def copier(self, dst, src, nbytes: int):
        d, s, n = dst.ctypes.data, src.ctypes.data, nbytes

        def copy():
            ctypes.memmove(d, s, n)
        return copy

    def reader(self, handle):
        def read():
            return handle[0]
        return read

    def __init__(self, clock: str | None = None):
        #: "thread": CPU time of the thread running the (single-threaded) kernels, which other
        #: processes' load does not inflate — on an idle machine it equals the wall time;
        #: "wall": time.perf_counter.  HLOFUSE_CPU_CLOCK chooses when not given.
        self.clock = clock or os.environ.get("HLOFUSE_CPU_CLOCK", "thread")
        if self.clock not in ("thread", "wall"):
            raise ValueError(f"unknown clock {self.clock!r}: thread or wall")

    def measure(self, run) -> float:
        import time

        now = time.thread_time if self.clock == "thread" else time.perf_counter
        start = now()
        run()
        return now() - start

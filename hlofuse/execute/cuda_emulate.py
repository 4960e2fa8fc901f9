"""The CUDA kernels run on the CPU, to check their numbers without a GPU: the very text
execute/cuda.py renders (its thread mapping, its CUDA-only variants such as a column
reduction's tile in shared memory) compiled by the C++ compiler against a small emulation of
CUDA's names, each launch running the grid's threads one after another.

Threads run in descending order within a block, so that a block's first warp, which the
generated kernels use to combine what the others left in shared memory after
__syncthreads(), runs after them; a kernel whose lanes exchange values inside a warp
(shuffles: long row reductions, a row per warp) cannot run one thread at a time, and is
refused with the reason.  Used by the tests; nothing here needs CUDA.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import BackendUnavailable, ExecutionError
from . import cuda
from .cpu import CpuDevice, launcher
from .emit import ctype
from .kernel import KernelBody

SHIM = r"""
#include <math.h>
#include <string.h>
struct hf_dim3 { unsigned int x, y, z; };
static hf_dim3 blockIdx, threadIdx;
static const hf_dim3 blockDim = {%(block)d, 1, 1};
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline unsigned int atomicCAS(unsigned int* a, unsigned int c, unsigned int v) {
  unsigned int old = *a; if (old == c) *a = v; return old; }
static inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long c, unsigned long long v) {
  unsigned long long old = *a; if (old == c) *a = v; return old; }
static inline void __syncthreads() {}
static inline void __syncwarp() {}
"""


def emulatable(body: KernelBody) -> str | None:
    """Why a kernel cannot run one thread at a time, or None."""
    for group in body.groups:
        if group.lanes > 1 and group.cuda_body is None:  # a tile's own code uses no shuffle
            return f"{body.name} exchanges values between the lanes of a warp (shuffles)"
    return None


def source(bodies: list[KernelBody]) -> str:
    """The kernels as cuda.py renders them, the emulation before them, and for each kernel a
    `launch_<name>(void** b)` that runs its grid."""
    parts = [SHIM % {"block": cuda.BLOCK}, cuda.render(bodies)]
    for body in bodies:
        casts = ", ".join(f"({'' if arg.output else 'const '}{ctype(arg.element_type)}*)b[{i}]"
                          for i, arg in enumerate(body.args))
        calls = []
        for phase, name in enumerate(cuda.kernel_names(body)):
            calls.append(f"  for (unsigned int g = 0; g < {cuda.grid(body, phase)}u; ++g) {{ blockIdx.x = g;\n"
                         f"    for (int t = {cuda.BLOCK - 1}; t >= 0; --t) {{ threadIdx.x = (unsigned int)t; "
                         f"{name}({casts}); }} }}")
        parts.append(f'extern "C" void launch_{body.name}(void** b) {{\n' + "\n".join(calls) + "\n}")
    return "\n".join(parts) + "\n"


class EmulatedCudaDevice(CpuDevice):
    """The CPU device with the CUDA kernels' text instead of the CPU's (library calls and the
    host steps as on the CPU)."""

    name = "cuda-emulated"
    loop_tile = 1  # a loop kernel's thread takes one batch element, as on a GPU
    generated_dots = False  # dots stay library calls, as cuBLAS on a GPU

    def compile(self, lowered):
        bodies = [k.body for k in lowered.kernels if k.generated]
        for body in bodies:
            why = emulatable(body)
            if why is not None:
                raise ExecutionError(f"cannot emulate on the CPU: {why}")
        return _build(source(bodies)) if bodies else None

    def launcher(self, compiled, kernel, handles):
        fn = getattr(compiled, f"launch_{kernel.body.name}")
        fn.argtypes = [ctypes.c_void_p]
        fn.restype = None
        return launcher(fn, handles), len(cuda.kernel_names(kernel.body))

    def program(self, compiled, lowered, handles, launchers):
        return None  # the steps from Python, launch by launch


def _build(text: str) -> ctypes.CDLL:
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        raise BackendUnavailable("no C++ compiler: the CUDA emulation compiles the kernels as C++")
    folder = Path(tempfile.mkdtemp(prefix="hlofuse-cuda-emulation-"))
    try:
        (folder / "kernels.cpp").write_text(text)
        lib = folder / "kernels.so"
        proc = subprocess.run([cxx, "-O1", "-fPIC", "-shared", "-w", "-o", str(lib), str(folder / "kernels.cpp")],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise ExecutionError(f"the C++ compiler rejected the emulated CUDA kernels:\n{proc.stderr[-2000:]}")
        return ctypes.CDLL(str(lib))
    finally:
        shutil.rmtree(folder, ignore_errors=True)

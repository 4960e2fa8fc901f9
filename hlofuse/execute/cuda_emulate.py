"""The CUDA kernels run on the CPU, to check their numbers without a GPU: the very text
execute/cuda.py renders (its thread mapping, its CUDA-only variants: a column reduction's tile
in shared memory, reductions split across a warp's lanes and combined by shuffles, a warp per
row) compiled by the C++ compiler against a small emulation of CUDA's names.

Two ways to run a launch's threads: a kernel whose lanes exchange values (shuffles, warp
barriers) runs each warp as 32 threads of the host that meet at every shuffle, warp after
warp; any other runs its threads one after another, in descending order within a block, so
that a block's first warp, which combines what the others left in shared memory after
__syncthreads(), runs after them.  A kernel needing both is refused with the reason.  A
barrier that waits more than a few seconds (lanes that diverge at a shuffle: a generator bug)
gives up and flags the launch, so a wrong kernel fails its check instead of hanging.  Used by
the tests; nothing here needs CUDA.
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
from .gpu_library import library_call
from .kernel import KernelBody

SHIM = r"""
#include <math.h>
#include <string.h>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
struct hf_dim3 { unsigned int x, y, z; };
static thread_local hf_dim3 blockIdx, threadIdx;
static const hf_dim3 blockDim = {HF_BLOCK, 1, 1};
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static std::mutex hf_atomic;
static inline unsigned int atomicCAS(unsigned int* a, unsigned int c, unsigned int v) {
  std::lock_guard<std::mutex> g(hf_atomic); unsigned int old = *a; if (old == c) *a = v; return old; }
static inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long c, unsigned long long v) {
  std::lock_guard<std::mutex> g(hf_atomic); unsigned long long old = *a; if (old == c) *a = v; return old; }
template <class T> static inline T hf_locked(T* a, T v, int op) {
  std::lock_guard<std::mutex> g(hf_atomic); T old = *a;
  *a = op == 0 ? (T)(old + v) : op == 1 ? (old > v ? old : v) : (old < v ? old : v); return old; }
template <class T> static inline T atomicAdd(T* a, T v) { return hf_locked(a, v, 0); }
template <class T> static inline T atomicMax(T* a, T v) { return hf_locked(a, v, 1); }
template <class T> static inline T atomicMin(T* a, T v) { return hf_locked(a, v, 2); }
static inline void __syncthreads() {}
/* a warp's 32 lanes as host threads: a barrier that gives up after a few seconds */
struct hf_barrier {
  std::mutex m; std::condition_variable cv; int waiting = 0; unsigned long long generation = 0; bool failed = false;
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    if (failed) return;
    unsigned long long gen = generation;
    if (++waiting == 32) { waiting = 0; ++generation; cv.notify_all(); return; }
    if (!cv.wait_for(lock, std::chrono::seconds(5), [&] { return generation != gen || failed; })) {
      failed = true; cv.notify_all(); } } };
static hf_barrier* hf_warp;
static unsigned long long hf_slots[32];
template <class T> static T hf_shfl_xor(T x, int o) {
  const int lane = threadIdx.x % 32;
  unsigned long long v = 0; memcpy(&v, &x, sizeof(T));
  hf_slots[lane] = v; hf_warp->wait();
  unsigned long long w = hf_slots[lane ^ o]; hf_warp->wait();
  T r; memcpy(&r, &w, sizeof(T)); return r; }
#define __shfl_xor_sync(mask, x, o) hf_shfl_xor((x), (o))
static inline void __syncwarp() { if (hf_warp) hf_warp->wait(); }
"""


def _lanes(body: KernelBody) -> bool:
    """Whether a kernel's lanes exchange values (a group split across a warp's lanes)."""
    return any(g.lanes > 1 and g.cuda_body is None for g in body.groups)


def emulatable(body: KernelBody) -> str | None:
    """Why a kernel cannot be emulated, or None."""
    if _lanes(body) and any(g.cuda_body is not None for g in body.groups):
        return f"{body.name} needs both a warp's lanes together and a block's threads in turn"
    return None


def source(bodies: list[KernelBody]) -> str:
    """The kernels as cuda.py renders them, the emulation before them, and for each kernel a
    `launch_<name>(void** b)` that runs its grid and returns 0 (1: a warp's lanes diverged)."""
    parts = [f"#define HF_BLOCK {cuda.BLOCK}", SHIM, cuda.render(bodies)]
    for body in bodies:
        casts = ", ".join(f"({'' if arg.output else 'const '}{ctype(arg.element_type)}*)b[{i}]"
                          for i, arg in enumerate(body.args))
        calls = []
        for phase, name in enumerate(cuda.kernel_names(body)):
            grid = cuda.grid(body, phase)
            if _lanes(body):
                warps = cuda.BLOCK // 32
                calls.append(
                    f"  {{ hf_barrier bar; hf_warp = &bar; std::vector<std::thread> lanes;\n"
                    f"    for (int lane = 0; lane < 32; ++lane) lanes.emplace_back([=, &bar]() {{\n"
                    f"      for (unsigned int g = 0; g < {grid}u; ++g) for (int w = 0; w < {warps}; ++w) {{\n"
                    f"        blockIdx.x = g; threadIdx.x = (unsigned int)(w * 32 + lane); {name}({casts});\n"
                    f"        bar.wait(); }} }});\n"
                    f"    for (auto& t : lanes) t.join();\n"
                    f"    hf_warp = 0; if (bar.failed) return 1; }}")
            else:
                calls.append(f"  for (unsigned int g = 0; g < {grid}u; ++g) {{ blockIdx.x = g;\n"
                             f"    for (int t = {cuda.BLOCK - 1}; t >= 0; --t) {{ threadIdx.x = (unsigned int)t; "
                             f"{name}({casts}); }} }}")
        parts.append(f'extern "C" int launch_{body.name}(void** b) {{\n' + "\n".join(calls) + "\n  return 0;\n}")
    return "\n".join(parts) + "\n"


class EmulatedCudaDevice(CpuDevice):
    """The CPU device with the CUDA kernels' text instead of the CPU's, and the GPU's library
    calls (execute/gpu_library.py) with NumPy standing in for CuPy: every array
    operation and host synchronisation they make is counted in `census`, per kernel label in
    `census_by_kernel` (execute/array_census.py). The host steps run as on the CPU."""

    name = "cuda-emulated"
    loop_tile = 1  # a loop kernel's thread takes one batch element, as on a GPU
    generated_dots = False  # dots stay library calls, as cuBLAS on a GPU
    split_gemm_fusions = True  # a GEMM fusion's prologue and epilogue generated, as on a GPU

    def __init__(self):
        super().__init__()
        from .array_census import Census

        self.census = Census()
        self.census_by_kernel: dict[str, tuple[int, int]] = {}

    def library(self, lowered, kernel, handles):
        census = self.census
        call = library_call(census.lib, lowered, kernel, [census.device(h) for h in handles])
        label = kernel.label

        def counted():
            calls, syncs = census.total_calls, census.total_syncs
            call()
            self.census_by_kernel[label] = (census.total_calls - calls, census.total_syncs - syncs)
        return counted

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
        fn.restype = ctypes.c_int
        name = kernel.body.name

        def checked(address):
            if fn(address):
                raise ExecutionError(f"{name}: the lanes of a warp did not meet at a shuffle (emulated)")

        return launcher(checked, handles), len(cuda.kernel_names(kernel.body))

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
        proc = subprocess.run([cxx, "-O1", "-std=c++17", "-pthread", "-fPIC", "-shared", "-w", "-o", str(lib),
                               str(folder / "kernels.cpp")],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise ExecutionError(f"the C++ compiler rejected the emulated CUDA kernels:\n{proc.stderr[-2000:]}")
        return ctypes.CDLL(str(lib))
    finally:
        shutil.rmtree(folder, ignore_errors=True)

"""The process that runs XLA's own compiled program for `bench --compare-xla`: it imports JAX
(and nothing of hlofuse), compiles the program's HLO text with the XLA:CPU of that JAX,
runs it on the inputs the plans run on, and then times calls as the parent asks.

A separate process because the parent often has no JAX (its interpreter is named by
HLOFUSE_JAX_PYTHON then), because XLA reads XLA_FLAGS once per process (single-threaded
runs need them before JAX starts), and so that XLA's thread pools do not share a process
with the kernels timed beside them.

Protocol, one JSON object per line: the parent's first line is the request (HLO file,
inputs .npz, outputs .npz, XLA flags); this process answers with what it compiled, then
answers each {"time": n} with the n calls' seconds (process CPU time and wall time) until
{"quit": true} or the end of its input.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


def _compile(hlo_text: str):
    import jax
    from jax._src.lib import xla_client as xc

    module = xc.hlo.hlo_module_from_text(hlo_text)
    computation = xc.hlo.XlaComputation(module.as_serialized_hlo_module_proto())
    mlir = xc._xla.mlir.xla_computation_to_mlir_module(computation)
    device = jax.devices("cpu")[0]
    executable = device.client.compile_and_load(mlir, xc.DeviceList((device,)), xc.CompileOptions())
    return jax, device, executable


def _leaves(value) -> list:
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out += _leaves(v)
        return out
    return [value]


def serve(request: dict, reply, read_line) -> None:
    import numpy as np

    with open(request["hlo"], encoding="utf-8") as fh:
        text = fh.read()
    started = time.perf_counter()
    jax, device, executable = _compile(text)
    compile_s = time.perf_counter() - started
    data = np.load(request["inputs"])
    args = [jax.device_put(data[f"arr_{i}"], device) for i in range(len(data.files))]

    def call():
        out = executable.execute(args)
        for leaf in _leaves(out):
            leaf.block_until_ready()
        return out

    outputs = [np.asarray(leaf) for leaf in _leaves(call())]
    np.savez(request["outputs"], *outputs)
    hlo = executable.get_hlo_text() if hasattr(executable, "get_hlo_text") else ""
    reply({"ok": True, "jax": jax.__version__, "compile_s": compile_s, "outputs": len(outputs),
           "xla_flags": os.environ.get("XLA_FLAGS", ""), "nproc": os.environ.get("NPROC"),
           "fusions": hlo.count(" fusion("), "cpus": len(os.sched_getaffinity(0))})
    while True:
        line = read_line()
        if not line:
            return
        message = json.loads(line)
        if message.get("quit"):
            return
        cpu, wall = [], []
        for _ in range(int(message.get("time", 1))):
            c, w = time.process_time(), time.perf_counter()
            call()
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - w)
        reply({"cpu": cpu, "wall": wall})


def main() -> int:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # anything JAX or XLA prints must not reach the protocol

    def reply(obj: dict) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    read_line = sys.stdin.readline
    try:
        request = json.loads(read_line())
        serve(request, reply, read_line)
    except ImportError as err:
        reply({"ok": False, "stage": "import", "message": f"{type(err).__name__}: {err}"})
        return 1
    except BaseException as err:  # noqa: BLE001  (reported to the parent, which decides)
        last = traceback.format_exc().strip().splitlines()[-1]
        reply({"ok": False, "stage": "run", "message": str(err).strip().splitlines()[0] if str(err).strip() else last})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

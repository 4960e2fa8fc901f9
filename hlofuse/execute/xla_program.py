"""XLA's own compiled program, run beside hlofuse's plans (`bench --compare-xla`): the same
program (the dump's module before optimizations, which is what `jax.jit` handed XLA),
compiled by the XLA:CPU of an installed JAX and run on the same inputs, so that a user sees
how far hlofuse's kernels are from XLA's own and how far to trust the absolute figures.

XLA runs in a child process (execute/xla_child.py), with the interpreter that has JAX: this
one when JAX is importable here, else the one HLOFUSE_JAX_PYTHON names.  Single-threaded by
default, as hlofuse's kernels are: XLA_FLAGS=--xla_cpu_multi_thread_eigen=false (Eigen's
dots and convolutions on the calling thread) and NPROC=1 (the size of the PjRt CPU client's
intra-op pool), so both sides time one core's work; `threads="xla-default"` leaves XLA its
thread pools (compare wall time then).  Each timed call is `execute` on buffers already on
the device plus the wait for its results: XLA's dispatch is in the figure, Python's jit
wrapper is not.

Anything that keeps XLA from running (no JAX, a program XLA:CPU cannot compile, a child that
dies) is not an error of the benchmark: `XlaProgram.start` raises XlaUnavailable with one
line, which bench prints instead of XLA's row.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

#: The environment variable naming a Python interpreter that has JAX, when this one has not.
JAX_PYTHON_ENV = "HLOFUSE_JAX_PYTHON"
#: XLA's flags for a single-threaded run (added to the user's XLA_FLAGS).
SINGLE_THREAD_FLAGS = ("--xla_cpu_multi_thread_eigen=false",)
THREADS = ("single", "xla-default")


class XlaUnavailable(Exception):
    """XLA's own program cannot run here; the message says why, in one line."""


def jax_python() -> str:
    """The interpreter to run XLA with; XlaUnavailable naming what to install otherwise."""
    named = os.environ.get(JAX_PYTHON_ENV)
    if named:
        path = shutil.which(named) or named
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise XlaUnavailable(f"{JAX_PYTHON_ENV}={named} is not an executable Python interpreter")
        return path
    if importlib.util.find_spec("jax") is not None:
        return sys.executable
    raise XlaUnavailable("JAX is not importable here (pip install 'hlofuse[jax]', or set "
                         f"{JAX_PYTHON_ENV} to a Python that has JAX)")


class XlaProgram:
    """XLA's compiled program in its child process.  `start()` compiles it and runs it once
    (its outputs in `outputs`); `measure(clock)` times one more call ("thread": the child's
    CPU time, "wall": its wall time); `close()` ends the child."""

    def __init__(self, hlo: Path, inputs: Sequence[np.ndarray], *, threads: str = "single"):
        if threads not in THREADS:
            raise ValueError(f"threads {threads!r}: one of {', '.join(THREADS)}")
        self.hlo = Path(hlo)
        self.inputs = [np.asarray(a) for a in inputs]
        self.threads = threads
        self.outputs: list[np.ndarray] = []
        self.info: dict = {}
        self._proc: subprocess.Popen | None = None
        self._folder: str | None = None

    def describe(self) -> str:
        jax = self.info.get("jax", "?")
        how = "single-threaded" if self.threads == "single" else "XLA's default threads"
        return f"XLA:CPU (jax {jax}, {how})"

    def start(self) -> "XlaProgram":
        python = jax_python()
        self._folder = tempfile.mkdtemp(prefix="hlofuse-xla-")  # 0700: ours alone
        inputs = os.path.join(self._folder, "inputs.npz")
        outputs = os.path.join(self._folder, "outputs.npz")
        np.savez(inputs, *self.inputs)
        env = dict(os.environ)
        env["JAX_PLATFORMS"] = "cpu"
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        if self.threads == "single":
            env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", "").strip(), *SINGLE_THREAD_FLAGS]).strip()
            env["NPROC"] = "1"
        self._stderr = open(os.path.join(self._folder, "stderr.txt"), "w+b")
        child = str(Path(__file__).with_name("xla_child.py"))
        try:
            self._proc = subprocess.Popen([python, child], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=self._stderr, env=env, text=True)
        except OSError as err:
            self.close()
            raise XlaUnavailable(f"cannot start {python}: {err}") from None
        reply = self._ask({"hlo": str(self.hlo), "inputs": inputs, "outputs": outputs})
        if not reply.get("ok"):
            self.close()
            what = "JAX does not import" if reply.get("stage") == "import" else "XLA:CPU could not run the program"
            raise XlaUnavailable(f"{what}: {reply.get('message', '')}")
        self.info = reply
        with np.load(outputs) as data:
            self.outputs = [data[f"arr_{i}"] for i in range(len(data.files))]
        return self

    def _ask(self, message: dict) -> dict:
        proc = self._proc
        try:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            self._stderr.seek(0)
            lines = [ln for ln in self._stderr.read().decode("utf-8", "replace").splitlines() if ln.strip()]
            self.close()
            raise XlaUnavailable("XLA's process ended" + (f": {lines[-1].strip()[:200]}" if lines else ""))
        return json.loads(line)

    def measure(self, clock: str = "thread") -> float:
        reply = self._ask({"time": 1})
        return reply["cpu" if clock == "thread" else "wall"][0]

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.stdin.write(json.dumps({"quit": True}) + "\n")
                proc.stdin.close()
            except (BrokenPipeError, OSError, ValueError):
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        if getattr(self, "_stderr", None) is not None:
            self._stderr.close()
            self._stderr = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def __del__(self):
        self.close()

"""Compile a JAX function with the JAX installed here, XLA dumping what hlofuse reads.

One fresh process per compile (`child.py`): XLA reads XLA_FLAGS once per process and numbers
a fresh process's modules from 1, and a deviceless XLA:GPU compile needs JAX started on the
CPU (JAX_PLATFORMS=cpu) whatever the caller's process did.  The function and its example
arguments reach that process by name and as abstract values (shapes and dtypes, never the
data): the function is imported there from its module, or from the caller's script imported
as `__main__` (as multiprocessing's spawn does), so it must be defined at the top level of a
module or script.

XLA dumps with the pass regex of every fusion pipeline of the backend (hlofuse.dumpdir's
FUSION_PASSES), so the folder holds the module before optimizations, the snapshots right
before and after each fusion pass, XLA:GPU's priority-fusion log and the final module
(after_optimizations).  The code XLA generated (LLVM IR, PTX, object files) is not kept.
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
import types
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..errors import BackendUnavailable, InputError, OptionError, UserCodeError, XlaCompileError
from . import install
from .child import CHILD_ENV
from .folder import MANIFEST, check_out, deliver, prune

#: jax.config options that change the program jax.jit traces; carried from the caller's
#: process into the compiling one (a script sets them itself when it is imported there).
TRACE_CONFIG = (
    "jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_rank_promotion", "jax_numpy_dtype_promotion",
    "jax_default_prng_impl", "jax_threefry_partitionable", "jax_enable_custom_prng", "jax_softmax_custom_jvp",
    "jax_hlo_source_file_canonicalization_regex", "jax_use_shardy_partitioner", "jax_threefry_gpu_kernel_lowering",
)


@dataclass(frozen=True)
class JaxDump:
    """A dump folder XLA wrote for one compiled function; usable wherever a path is
    (`os.fspath`), and `hlofuse.explain(dump)` reads its module, GPU and XLA flags from it.

    A temporary folder (no `out`) is removed when this object is garbage collected or the
    interpreter exits: keep the object, or pass `out`, while the files are needed."""

    path: Path
    module: str  # XLA's module key, e.g. module_0001.jit_f
    backend: str  # gpu | cpu
    device: str  # what XLA compiled for, as JAX names it (NVIDIA H100 80GB HBM3, cpu)
    gpu: str | None  # the GPU description compiled for (a name or .txtpb file); None: the GPU here, or cpu
    deviceless: bool
    function: str
    xla_flags: tuple[str, ...] = ()
    versions: Mapping[str, str] = field(default_factory=dict)
    seconds: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    temporary: bool = False

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    @property
    def compile_seconds(self) -> float | None:
        """XLA's compile alone (in the compiling process), without importing JAX or tracing."""
        return self.seconds.get("compile")

    @property
    def target(self) -> str:
        """What was compiled for, in words."""
        if self.backend == "cpu":
            return "XLA:CPU"
        return f"XLA:GPU for {self.gpu} ({self.device}), deviceless" if self.deviceless else \
            f"XLA:GPU for this machine's {self.device}"

    def to_dict(self) -> dict:
        return {"dump": str(self.path), "module": self.module, "backend": self.backend, "device": self.device,
                "gpu": self.gpu, "deviceless": self.deviceless, "function": self.function,
                "xla_flags": list(self.xla_flags), "versions": dict(self.versions), "seconds": dict(self.seconds),
                "notes": list(self.notes), "temporary": self.temporary}


def compile_jax(fn, *example_args, backend: str = "gpu", gpu: str | None = None, xla_flags: str | Sequence[str] | None = None,
                static_argnums: int | Sequence[int] = (), out: str | os.PathLike | None = None) -> JaxDump:
    """Compile `fn` as `jax.jit(fn, static_argnums=...)` would for `example_args` (arrays,
    `jax.ShapeDtypeStruct`s, Python scalars, pytrees of them; the values at static positions
    as they are), with XLA dumping into a folder; returns that folder (a `JaxDump`).

    backend="gpu" with `gpu` (a name of hlofuse/data/gpu_specs, `h100_sxm`, or a .txtpb
    file): XLA:GPU for that GPU, without one (deviceless, JAX's CUDA plugin); without `gpu`:
    for the GPU of this machine.  backend="cpu": XLA:CPU.  `xla_flags` are added to the
    XLA_FLAGS of this process for the compile.  `out`: a new or empty folder to keep the dump
    in (one an earlier compile wrote is replaced); without it the dump is temporary."""
    if os.environ.get(CHILD_ENV):
        raise RuntimeError("hlofuse.compile_jax was called while its compiling process imported this script: "
                           "put the call under `if __name__ == \"__main__\":`")
    static = _argnums(static_argnums)
    plan = _Plan.make(backend, gpu, xla_flags, out)
    payload, main_file, user_files = _pickle_function(fn, _given_args(example_args, static))
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    header = {"sys_path": [p for p in sys.path], "main_file": main_file, "user_files": user_files,
              "args": {"kind": "given"}, "static_argnums": list(static), "jax_config": _jax_config()}
    return plan.run(header, payload, name)


def compile_script(script: str, function: str, args: Sequence | None = None, *, args_from: tuple[str, str] | None = None,
                   backend: str = "gpu", gpu: str | None = None, xla_flags: str | Sequence[str] | None = None,
                   static_argnums: Sequence[int] = (), out: str | os.PathLike | None = None,
                   starting: Callable[[], None] | None = None) -> JaxDump:
    """`hlofuse compile SCRIPT:FUNCTION`: the function of a script (or of an importable module)
    compiled for example arguments written as text (`arguments.parse_args`) or made by
    `args_from` = (script, function name), a function that returns them as a tuple.
    `starting` is called once every option is checked, as the compile starts."""
    from .arguments import ArraySpec

    static = _argnums(static_argnums)
    script_path = _script(script)
    plan = _Plan.make(backend, gpu, xla_flags, out, inputs=[script_path] if script_path else [])
    if args_from is not None:
        other = _script(args_from[0]) or args_from[0]
        spec = {"kind": "from", "script": other, "name": args_from[1]}
    else:
        spec = {"kind": "text", "values": [
            {"shape": list(a.shape), "dtype": a.dtype} if isinstance(a, ArraySpec) else {"value": a.value}
            for a in (args or ())]}
    folder = os.path.dirname(os.path.abspath(script_path)) if script_path else None
    # as `python SCRIPT.py` runs it: the script's folder first on the path, not the current one
    header = {"sys_path": [folder] if folder else [os.getcwd()], "main_file": script_path,
              "user_files": [script_path] if script_path else [],
              "function": {"script": script_path or script, "name": function}, "args": spec,
              "static_argnums": list(static), "jax_config": {}}
    if starting is not None:
        starting()
    return plan.run(header, b"", function)


# ------------------------------------------------------------------------------------------
# What to compile for, and running the compiling process
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    backend: str
    gpu: str | None
    spec_text: str | None
    flags: tuple[str, ...]
    out: Path | None
    replaces: tuple[str, ...]  # files of an earlier compile in `out`
    versions: Mapping[str, str]

    @staticmethod
    def make(backend: str, gpu: str | None, xla_flags, out, inputs: Sequence[str] = ()) -> "_Plan":
        """Check every option before any work (a missing plugin, an unknown GPU, an output
        folder that holds other files)."""
        if backend not in ("gpu", "cpu"):
            raise OptionError(f"backend {backend!r}: choose gpu or cpu")
        if gpu is not None and backend != "gpu":
            raise OptionError(f"gpu={gpu!r} describes a GPU; backend {backend!r} has none")
        spec_text = _spec_text(gpu) if gpu is not None else None
        flags = _flags(xla_flags)
        replaces = check_out(Path(out), inputs) if out is not None else ()
        versions = install.require(backend, deviceless=gpu is not None)
        return _Plan(backend, str(gpu) if gpu is not None else None, spec_text, flags,
                     Path(out) if out is not None else None, replaces, versions)

    def run(self, header: dict, payload: bytes, function: str) -> JaxDump:
        started = time.perf_counter()
        work = Path(tempfile.mkdtemp(prefix="hlofuse-compile-"))  # 0700: ours alone
        try:
            dump = work / "dump"
            dump.mkdir()
            result = self._child(header, payload, dump, work / "result.json", function)
            kept = prune(dump)
            seconds = {k: round(v, 4) for k, v in result.get("seconds", {}).items()}
            seconds["total"] = round(time.perf_counter() - started, 4)
            notes = tuple(n for n in (install.version_note(self.versions),) if n)
            record = JaxDump(self.out or dump, result["module"], self.backend, result["device"], self.gpu,
                             result["deviceless"], function, self.inherited_flags(), dict(self.versions), seconds,
                             notes, temporary=self.out is None)
            (dump / MANIFEST).write_text(json.dumps({**record.to_dict(), "files": kept}, indent=1) + "\n")
            if self.out is None:
                weakref.finalize(record, shutil.rmtree, str(work), True)  # removed with the record
                work = None
            else:
                deliver(dump, self.out, self.replaces)
            return record
        finally:
            if work is not None:
                shutil.rmtree(work, ignore_errors=True)

    def inherited_flags(self) -> tuple[str, ...]:
        """The XLA flags of the compile: this process's XLA_FLAGS, then those given."""
        env = os.environ.get("XLA_FLAGS", "").strip()
        return ((env,) if env else ()) + self.flags

    def _child(self, header: dict, payload: bytes, dump: Path, result_path: Path, function: str) -> dict:
        from ..dumpdir import FUSION_PASSES

        passes = FUSION_PASSES["cpu"] if self.backend == "cpu" else \
            tuple(dict.fromkeys(FUSION_PASSES["priority"] + FUSION_PASSES["legacy"]))
        pass_re = "^(" + "|".join(p.replace(".", r"\.") for p in passes) + ")$"
        header = {**header, "result": str(result_path), "backend": self.backend, "gpu_spec": self.spec_text,
                  "compiler_options": {"xla_dump_to": str(dump), "xla_dump_hlo_pass_re": pass_re}}
        env = dict(os.environ)
        env[CHILD_ENV] = "1"
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        if self.backend == "cpu" or self.spec_text is not None:
            env["JAX_PLATFORMS"] = "cpu"  # XLA:CPU, or the CUDA plugin's compiler without its runtime
        flags = " ".join(self.inherited_flags())
        if flags:
            env["XLA_FLAGS"] = flags
        root = str(Path(__file__).resolve().parents[2])
        code = ("import sys; sys.path[0:1] = [%r]; from hlofuse.from_jax.child import main; "
                "sys.path.remove(%r); sys.exit(main())" % (root, root))
        stdin = json.dumps(header).encode() + b"\n" + payload
        proc = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, env=env)
        if proc.stdout.strip():  # the user's prints while tracing: to stderr, stdout is the command's
            sys.stderr.write(proc.stdout.decode("utf-8", "replace"))
        try:
            result = json.loads(result_path.read_text())
        except (OSError, ValueError):
            raise XlaCompileError(_died(proc)) from None
        if not result.get("ok"):
            raise _error(result, function, self)
        return result

    def words(self) -> str:
        if self.backend == "cpu":
            return "XLA:CPU"
        return f"{self.gpu} (deviceless XLA:GPU)" if self.gpu else "the GPU here"


def _died(proc: subprocess.CompletedProcess) -> str:
    code = proc.returncode
    how = f"signal {-code}" if code < 0 else f"exit code {code}"
    lines = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    last = f": {lines[-1].strip()}" if lines else ""
    return f"the process compiling the function died ({how}){last}"


def _error(result: dict, function: str, plan: _Plan) -> Exception:
    """The child's failure as the error the user should see."""
    stage, kind, message = result.get("stage"), result.get("type"), result.get("message") or ""
    what = f"{kind}: {message}" if kind else message
    if stage == "backend":
        return BackendUnavailable(f"JAX cannot compile for {plan.words()} here: {what} ({install.INSTALL} installs "
                                  "JAX with its CUDA plugin)")
    if stage == "no_gpu":
        from ..device import available

        return BackendUnavailable(f"{message}: name the GPU to compile for without one (--gpu/gpu=, one of "
                                  f"{', '.join(available())}, or a .txtpb file), or compile for the CPU")
    if stage == "lookup":
        return InputError(message)
    if stage == "compile":
        return XlaCompileError(f"XLA could not compile {function} for {plan.words()}: {what}")
    if stage in ("import", "args", "trace", "lower"):
        doing = {"import": "importing the script", "args": "making the example arguments",
                 "trace": f"tracing {function}", "lower": f"lowering {function} for {plan.words()}"}[stage]
        return UserCodeError(f"{doing}: {what}", path=_shown(result.get("file")), line=result.get("line"),
                             function=result.get("function"), details=result.get("traceback"))
    return RuntimeError(f"the compiling process failed: {what}\n{result.get('traceback', '')}")


def _shown(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


# ------------------------------------------------------------------------------------------
# Options
# ------------------------------------------------------------------------------------------


def _argnums(static_argnums) -> tuple[int, ...]:
    if isinstance(static_argnums, int):
        return (static_argnums,)
    return tuple(sorted(set(int(n) for n in static_argnums)))


def _flags(xla_flags) -> tuple[str, ...]:
    if not xla_flags:
        return ()
    flags = (xla_flags,) if isinstance(xla_flags, str) else tuple(xla_flags)
    from ..gpu.config import parse_xla_flags

    try:
        parse_xla_flags(flags)
    except ValueError as err:
        raise OptionError(f"xla_flags: {err}") from None
    return flags


def _spec_text(gpu: str) -> str:
    """The GpuTargetConfigProto text of a GPU name or file (checked by hlofuse.device)."""
    from ..device import SPEC_DIR, load_gpu

    load_gpu(gpu)  # InputError for an unknown name, naming the known ones
    path = Path(gpu)
    if path.suffix in (".txtpb", ".pbtxt", ".txt") and path.exists():
        return path.read_text()
    candidate = SPEC_DIR / f"{gpu}.txtpb"
    return candidate.read_text() if candidate.exists() else path.read_text()


def _script(script: str) -> str | None:
    """A script's path (checked), or None for a module name (`package.module`)."""
    if script.endswith(".py") or os.sep in script or os.path.exists(script):
        if not os.path.isfile(script):
            raise InputError(f"{script}: no such script")
        return os.path.abspath(script)
    return None


# ------------------------------------------------------------------------------------------
# The function and its arguments, for the compiling process
# ------------------------------------------------------------------------------------------


def _given_args(example_args: tuple, static: tuple[int, ...]) -> tuple:
    """The arrays among the arguments as abstract values (shape, dtype); the rest, and the
    static arguments, as they are."""
    if not example_args:
        return ()
    try:
        import jax
    except ImportError:
        install.require("cpu", deviceless=False)
        raise
    from .child import abstract

    return tuple(a if i in static else jax.tree_util.tree_map(abstract, a) for i, a in enumerate(example_args))


class _Pickler(pickle.Pickler):
    """Pickles the function by name (a jitted function too, which pickle cannot) and notes
    whether anything comes from the caller's `__main__`."""

    def __init__(self, file, fn):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.fn = fn
        self.uses_main = False

    def reducer_override(self, obj):
        if getattr(obj, "__module__", None) == "__main__" and (isinstance(obj, type) or callable(obj)):
            self.uses_main = True
        if obj is self.fn and not isinstance(obj, (types.FunctionType, functools.partial, type)):
            module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
            if module and qualname and _find(module, qualname) is obj:
                from .child import named

                return named, (module, qualname)
        return NotImplemented


def _find(module: str, qualname: str):
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


def _pickle_function(fn, args: tuple) -> tuple[bytes, str | None, list[str]]:
    """(the pickle of fn and args, the caller's script when they need it, the user's files)."""
    import io

    if not callable(fn):
        raise InputError(f"compile_jax compiles a function; got a {type(fn).__name__}")
    buffer = io.BytesIO()
    pickler = _Pickler(buffer, fn)
    try:
        pickler.dump({"fn": fn, "args": args})
    except (pickle.PicklingError, AttributeError, TypeError) as err:
        name = getattr(fn, "__qualname__", repr(fn))
        why = ("it is defined inside another function or is a lambda" if "<locals>" in name or "<lambda>" in name
               else str(err))
        raise InputError(f"compile_jax compiles in a fresh Python process, which finds the function and its "
                         f"arguments by module and name: {name} cannot be found that way ({why}); define it at the "
                         "top level of a module or script") from None
    main_file = None
    if pickler.uses_main:
        main = sys.modules.get("__main__")
        main_file = getattr(main, "__file__", None)
        if not main_file:
            raise InputError("compile_jax compiles in a fresh Python process, which imports the function by name: "
                             f"{getattr(fn, '__qualname__', fn)} is defined in an interactive session (its __main__ "
                             "has no file); put it in a module or script and import it from there")
        main_file = os.path.abspath(main_file)
    user_files = [main_file] if main_file else []
    code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
    if code is not None:
        user_files.append(os.path.abspath(code.co_filename))
    return buffer.getvalue(), main_file, user_files


def _jax_config() -> dict:
    """TRACE_CONFIG's values in this process (when it imported JAX)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return {}
    out = {}
    for name in TRACE_CONFIG:
        try:
            value = getattr(jax.config, name)
        except AttributeError:
            continue
        value = getattr(value, "value", value)  # enums travel as their names
        if value is None or isinstance(value, (bool, int, float, str)):
            out[name] = value
    return out

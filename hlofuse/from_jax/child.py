"""The process that compiles: imports the user's code, traces, lowers and compiles with XLA
dumping into a folder, and writes what happened as JSON.  Started by `compile_jax` (one per
compile: XLA reads XLA_FLAGS once per process, and numbers the modules of a fresh process
from 1); it imports nothing of hlofuse but this module, and JAX.

stdin holds one line of JSON (the request's plain part: paths, options) and then a pickle
(the function and the example arguments, when given as Python objects).  The pickle is read
after the user's script is imported as `__main__`, as multiprocessing's spawn does, so that
functions and pytree classes the script defines are found again by name.

Each failure is written with the stage it happened in, so that the parent can tell the
user's errors (importing the script, tracing, lowering: the user's file and line) from
XLA's refusals (compile) and from a JAX that cannot compile for the target (backend).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import pickle
import sys
import sysconfig
import time
import traceback
import types

#: The environment variable set in this process, so that a script importing itself here does
#: not start another compile (its `compile_jax` call not guarded by `if __name__ == "__main__"`).
CHILD_ENV = "HLOFUSE_COMPILE_CHILD"
#: The name the user's script is imported under (and aliased as `__main__`).
MAIN_ALIAS = "__hlofuse_main__"


class Failure(Exception):
    """A failure in a stage, with the exception that caused it."""

    def __init__(self, stage: str, error: BaseException | None = None, message: str | None = None):
        super().__init__(message or (str(error) if error is not None else stage))
        self.stage, self.error, self.message = stage, error, message


def main() -> int:
    header = json.loads(sys.stdin.buffer.readline())
    payload = sys.stdin.buffer.read()
    result_path = header["result"]
    started = time.perf_counter()
    timings: dict[str, float] = {}
    try:
        result = compile_request(header, payload, timings)
        result.update(ok=True)
    except Failure as failure:
        result = {"ok": False, **describe(failure, header)}
    except BaseException as err:  # noqa: BLE001  (anything left is ours, reported as such)
        result = {"ok": False, "stage": "internal", "type": type(err).__name__, "message": str(err),
                  "traceback": traceback.format_exc()}
    result["seconds"] = {**timings, "child": time.perf_counter() - started}
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    return 0


# ------------------------------------------------------------------------------------------
# Stages
# ------------------------------------------------------------------------------------------


def compile_request(header: dict, payload: bytes, timings: dict) -> dict:
    sys.path[:] = list(header["sys_path"]) + [p for p in sys.path if p not in header["sys_path"]]
    t0 = time.perf_counter()
    try:
        import jax
    except BaseException as err:  # noqa: BLE001
        raise Failure("backend", err) from None
    for name, value in header.get("jax_config", {}).items():
        try:
            jax.config.update(name, value)
        except (AttributeError, ValueError, TypeError):
            pass  # an option this JAX lacks: the parent's JAX was another
    timings["import_jax"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    if header.get("main_file"):
        import_main(header["main_file"])
    try:
        objects = pickle.loads(payload) if payload else {}
    except BaseException as err:  # noqa: BLE001
        raise Failure("import", err) from None
    fn = objects.get("fn")
    if fn is None:
        fn = lookup(header["function"]["script"], header["function"]["name"], "function", header.get("main_file"))
    args = arguments(header, objects)
    timings["import"] = time.perf_counter() - t0

    device = target(header)
    static = tuple(header.get("static_argnums", ()))
    args = place(args, static, device.get("sharding"))
    jitted = as_jitted(jax, fn, static)

    t0 = time.perf_counter()
    try:
        traced = jitted.trace(*args)
    except BaseException as err:  # noqa: BLE001
        raise Failure("trace", err) from None
    timings["trace"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        if device["deviceless"]:
            lowered = traced.lower(lowering_platforms=("cuda",))
        else:
            lowered = traced.lower()
    except BaseException as err:  # noqa: BLE001
        raise Failure("lower", err) from None
    timings["lower"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        lowered.compile(compiler_options=header["compiler_options"])
    except BaseException as err:  # noqa: BLE001
        raise Failure("compile", err) from None
    timings["compile"] = time.perf_counter() - t0
    return {"module": dumped_module(header["compiler_options"]["xla_dump_to"]), "device": device["kind"],
            "platform": device["platform"], "deviceless": device["deviceless"], "jax": jax.__version__,
            "function": getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)}


def import_main(path: str) -> types.ModuleType:
    """Import the user's script as `__main__`'s stand-in: `if __name__ == "__main__":` blocks
    do not run, and what it defines is found by pickle under `__main__`."""
    if MAIN_ALIAS in sys.modules:
        return sys.modules[MAIN_ALIAS]
    spec = importlib.util.spec_from_file_location(MAIN_ALIAS, path)
    if spec is None or spec.loader is None:
        raise Failure("lookup", message=f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MAIN_ALIAS] = module
    sys.modules["__main__"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as err:  # noqa: BLE001
        raise Failure("import", err) from None
    return module


def lookup(script: str, name: str, what: str, main_file: str | None):
    """`name` (dotted: `Model.apply`) in a script file or an importable module."""
    if main_file is not None and os.path.abspath(script) == os.path.abspath(main_file):
        module = import_main(main_file)
    elif script.endswith(".py") or os.path.exists(script):
        module = import_file(script)
    else:
        try:
            module = importlib.import_module(script)
        except ModuleNotFoundError as err:
            if err.name and script.startswith(err.name):
                raise Failure("lookup", message=f"no module or script {script!r}") from None
            raise Failure("import", err) from None
        except BaseException as err:  # noqa: BLE001
            raise Failure("import", err) from None
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise Failure("lookup", message=f"{script} has no {what} {name!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise Failure("lookup", message=f"{script}: {name} is a {type(obj).__name__}, not a {what}")
    return obj


def named(module: str, qualname: str):
    """An object found by its module and qualified name (the parent pickles jitted functions,
    which pickle cannot, this way)."""
    obj = sys.modules["__main__"] if module == "__main__" else importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def import_file(path: str) -> types.ModuleType:
    """A script other than the main one (`--args-from other.py:make`), by its path."""
    name = "__hlofuse_script_" + hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise Failure("lookup", message=f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as err:  # noqa: BLE001
        raise Failure("import", err) from None
    return module


def arguments(header: dict, objects: dict) -> tuple:
    """The example arguments: given (abstract values from the parent), written as text
    (`--arg`), or returned by a function of the script (`--args-from`)."""
    import jax
    import jax.numpy as jnp

    spec = header["args"]
    if spec["kind"] == "given":
        return tuple(objects["args"])
    if spec["kind"] == "text":
        static = set(header.get("static_argnums", ()))
        out = []
        for i, arg in enumerate(spec["values"]):
            if "shape" in arg:
                out.append(jax.ShapeDtypeStruct(tuple(arg["shape"]), jnp.dtype(arg["dtype"])))
            elif i in static:
                out.append(arg["value"])
            else:
                out.append(abstract(arg["value"]))
        return tuple(out)
    make = lookup(spec["script"], spec["name"], "function", header.get("main_file"))
    try:
        made = make()
    except BaseException as err:  # noqa: BLE001
        raise Failure("args", err) from None
    if not isinstance(made, (tuple, list)):
        raise Failure("args", message=f"{spec['name']}() returned a {type(made).__name__}; it must return the "
                                      "example arguments as a tuple (one element per argument of the function)")
    static = set(header.get("static_argnums", ()))
    return tuple(a if i in static else jax.tree_util.tree_map(abstract, a) for i, a in enumerate(made))


def abstract(x):
    """An example array as JAX traces it, without its data: its shape and dtype.  Python
    scalars and other values stay as they are: jax.jit traces a Python scalar weakly typed,
    and a function jitted with static_argnums takes its static values as given."""
    import jax

    if isinstance(x, jax.ShapeDtypeStruct):
        return jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=getattr(x, "weak_type", False))
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        return x
    try:
        aval = jax.typeof(x) if hasattr(jax, "typeof") else jax.core.get_aval(x)
    except TypeError:
        return x  # not an array after all: jax.jit says what is wrong when tracing
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def target(header: dict) -> dict:
    """What XLA compiles for: a described GPU (deviceless), the GPU here, or the CPU."""
    import jax

    if header["backend"] == "cpu":
        return {"deviceless": False, "platform": "cpu", "kind": "cpu", "sharding": None}
    if header.get("gpu_spec") is not None:
        try:
            from jax.experimental import topologies

            topo = topologies.get_topology_desc(platform="cuda", target_config=header["gpu_spec"],
                                                topology="1x1x1")
            dev = topo.devices[0]
        except BaseException as err:  # noqa: BLE001
            raise Failure("backend", err) from None
        return {"deviceless": True, "platform": "cuda", "kind": dev.device_kind,
                "sharding": jax.sharding.SingleDeviceSharding(dev)}
    try:
        devices = jax.devices()
    except BaseException as err:  # noqa: BLE001
        raise Failure("no_gpu", err) from None
    if not devices or devices[0].platform != "gpu":
        raise Failure("no_gpu", message=f"JAX found no GPU here (its devices: {', '.join(sorted({d.platform for d in devices}))})")
    return {"deviceless": False, "platform": "gpu", "kind": devices[0].device_kind, "sharding": None}


def place(args: tuple, static: tuple, sharding) -> tuple:
    """The abstract arguments on the described device (deviceless compiles need it)."""
    if sharding is None:
        return args
    import jax

    def on_device(x):
        if isinstance(x, jax.ShapeDtypeStruct):
            return jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=getattr(x, "weak_type", False), sharding=sharding)
        return x

    return tuple(a if i in static else jax.tree_util.tree_map(on_device, a) for i, a in enumerate(args))


def as_jitted(jax, fn, static: tuple):
    """`fn` as jax.jit makes it: a function already jitted keeps its own options unless
    static_argnums are given."""
    if hasattr(fn, "trace") and hasattr(fn, "lower"):
        if not static:
            return fn
        fn = getattr(fn, "__wrapped__", fn)
    return jax.jit(fn, static_argnums=static)


def dumped_module(folder: str) -> str:
    """The dumped module's key (`module_0001.jit_f`): the one with a before_optimizations file."""
    keys = sorted(n[: -len(".before_optimizations.txt")] for n in os.listdir(folder)
                  if n.endswith(".before_optimizations.txt"))
    if len(keys) != 1:
        raise Failure("compile", message=f"expected XLA to dump one module, found {len(keys)}: {', '.join(keys)}")
    return keys[0]


# ------------------------------------------------------------------------------------------
# Failures, described for the parent
# ------------------------------------------------------------------------------------------


def describe(failure: Failure, header: dict) -> dict:
    err = failure.error
    out = {"stage": failure.stage, "type": type(err).__name__ if err is not None else None,
           "message": failure.message or _first_line(err)}
    if err is not None:
        out["traceback"] = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        where = user_frame(err, header)
        if where is not None:
            out.update(where)
    return out


def _first_line(err: BaseException | None) -> str:
    text = str(err) if err is not None else ""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return type(err).__name__ if err is not None else ""


def user_frame(err: BaseException, header: dict) -> dict | None:
    """The line of the user's code the error came from: the innermost frame in the user's
    own files (the script, the function's file), else in any file outside the Python
    installation, JAX and hlofuse."""
    if isinstance(err, SyntaxError) and err.filename and err.lineno:
        return {"file": err.filename, "line": err.lineno, "function": None}
    frames = traceback.extract_tb(err.__traceback__)
    own = {os.path.abspath(p) for p in header.get("user_files", ()) if p}
    installed = _installation_dirs()

    def outside(path: str) -> bool:
        path = os.path.abspath(path)
        return not path.startswith("<") and not any(path.startswith(d) for d in installed)

    for choose in (lambda f: os.path.abspath(f.filename) in own, lambda f: outside(f.filename)):
        for frame in reversed(frames):
            if choose(frame):
                return {"file": frame.filename, "line": frame.lineno, "function": frame.name}
    return None


def _installation_dirs() -> tuple[str, ...]:
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.abspath(path) + os.sep)
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix):
        dirs.add(os.path.join(os.path.abspath(prefix), "lib") + os.sep)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the hlofuse package
    dirs.add(here + os.sep)
    for name in ("jax", "jaxlib"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            dirs.add(os.path.dirname(os.path.abspath(module.__file__)) + os.sep)
    return tuple(dirs)


if __name__ == "__main__":
    sys.exit(main())

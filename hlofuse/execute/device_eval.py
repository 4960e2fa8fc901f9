"""The reference evaluator on a GPU array library (CuPy): library kernels run on the device.

XLA hands some kernels to libraries or to its own Triton emitter: cuBLAS and cuDNN custom
calls, TopK, sorts, and the kCustom fusions of today's XLA:GPU (Triton GEMM fusions with their
prologues and epilogues, Triton softmax and layer-norm fusions, dynamic-slice fusions). hlofuse
generates no kernel code for them. On the CPU they run through the NumPy reference evaluator;
on a GPU that would time two host copies and NumPy instead of the device, so the same
evaluator runs with CuPy as its array library: every operation of the kernel's computation is
one CuPy call on the GPU (several launches where XLA makes one kernel, but on the device).

There is one evaluator to keep faithful, not two: the evaluator's modules (numeric, arrays,
threefry, rng, interp) are written against NumPy's namespace, and `bind(lib)` executes private
copies of them in which `import numpy as np` yields `lib` (CuPy, with NumPy answering for the
host-side helpers CuPy does not have: dtypes, errstate, ndindex). Constants are parsed on the
host and uploaded once per kernel.
"""

from __future__ import annotations

import builtins
import importlib.util
import sys
import types

import numpy

#: the evaluator's modules, each after the ones it imports
_MODULES = ("numeric", "arrays", "threefry", "rng", "interp")
#: NumPy names a GPU library need not (or cannot) answer: dtype helpers and host iteration
_HOST_NAMES = frozenset({"dtype", "errstate", "iinfo", "finfo", "issubdtype", "ndindex", "signedinteger",
                         "unsignedinteger", "integer", "floating", "complexfloating", "number", "generic"})

_BOUND: dict[int, types.ModuleType] = {}


#: functions that make arrays from nothing (or from host data): always the device's
_CREATORS = frozenset({"array", "asarray", "ascontiguousarray", "zeros", "ones", "full", "empty", "arange",
                       "indices", "eye", "identity", "linspace", "frombuffer", "zeros_like", "ones_like",
                       "full_like", "empty_like"})


class ArrayNamespace(types.ModuleType):
    """NumPy's namespace answered by `lib` where it has the name, else by NumPy. A function
    given no device array at all (a shape, a permutation: `argsort(order)`, `prod(dims)`) runs
    on the host, as the evaluator does such bookkeeping; array creators always make device
    arrays; ufuncs, types and submodules are the library's own."""

    def __init__(self, lib):
        super().__init__(f"numpy@{lib.__name__}")
        self._lib = lib
        self._names: dict[str, object] = {}

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        names = self.__dict__["_names"]
        if name not in names:
            names[name] = self._answer(name)
        return names[name]

    def _answer(self, name: str):
        lib = self._lib
        host = getattr(numpy, name, None)
        device = None if name in _HOST_NAMES else getattr(lib, name, None)
        if device is None:
            if host is None:
                raise AttributeError(f"neither {lib.__name__} nor numpy has {name!r}")
            return host
        if type(device).__name__ == "ufunc":
            return DeviceUfunc(lib, device, host)
        if name in _CREATORS or host is None or not callable(device) or isinstance(device, type):
            return device
        array_type = lib.ndarray

        def either(*args, **kwargs):
            on_device = any(_holds(a, array_type) for a in args) or any(_holds(v, array_type) for v in kwargs.values())
            return (device if on_device else host)(*args, **kwargs)
        either.__name__ = name
        return either


#: ufunc reductions a GPU library may lack, as its whole-array reductions
_REDUCTIONS = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min", "logical_or": "any",
               "logical_and": "all"}


class DeviceUfunc:
    """A library's ufunc with NumPy's methods: `reduce` falls back to the library's reduction
    of the same name (CuPy has `maximum.reduce` only as `max`), `accumulate` and `at` to NumPy
    on a host copy (scatter's rare paths), written back into the device array."""

    def __init__(self, lib, ufunc, host):
        self._lib, self._ufunc, self._host = lib, ufunc, host
        self.__name__ = getattr(host, "__name__", None) or ufunc.__name__

    def __call__(self, *args, **kwargs):
        return self._ufunc(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._ufunc, name)

    def reduce(self, array, axis=0, dtype=None, **kwargs):
        try:
            return self._ufunc.reduce(array, axis=axis, dtype=dtype, **kwargs)
        except NotImplementedError:
            whole = _REDUCTIONS.get(self.__name__)
            if whole is None or kwargs:
                raise
            out = getattr(self._lib, whole)(array, axis=axis)
            return out if dtype is None else out.astype(dtype, copy=False)

    def accumulate(self, array, axis=0, **kwargs):
        try:
            return self._ufunc.accumulate(array, axis=axis, **kwargs)
        except (NotImplementedError, AttributeError):
            return self._lib.asarray(self._host.accumulate(self._on_host(array), axis=axis, **kwargs))

    def at(self, array, indices, values=None):
        try:
            return self._ufunc.at(array, indices, values)
        except (NotImplementedError, AttributeError):
            copy = self._on_host(array)
            self._host.at(copy, self._on_host(indices), self._on_host(values))
            array[...] = self._lib.asarray(copy)

    def _on_host(self, value):
        if isinstance(value, tuple):
            return tuple(self._on_host(v) for v in value)
        if isinstance(value, self._lib.ndarray):
            return self._lib.asnumpy(value) if hasattr(self._lib, "asnumpy") else numpy.asarray(value)
        return value


def _holds(value, array_type) -> bool:
    if isinstance(value, array_type):
        return True
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, array_type) for v in value)
    return False


def bind(lib) -> types.ModuleType:
    """The evaluator module (`interp`) running on `lib`'s arrays; built once per library."""
    cached = _BOUND.get(id(lib))
    if cached is not None:
        return cached
    namespace = ArrayNamespace(lib)
    copies: dict[str, types.ModuleType] = {}
    real_import = builtins.__import__

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name == "numpy":
            return namespace
        if level == 1 and name in copies:  # from .threefry import threefry2x32
            return copies[name]
        if level == 1 and not name and fromlist and all(f in copies for f in fromlist):  # from . import arrays
            return types.SimpleNamespace(**{f: copies[f] for f in fromlist})
        return real_import(name, globals, locals, fromlist, level)

    own_builtins = dict(vars(builtins), __import__=import_)
    for short in _MODULES:
        spec = importlib.util.find_spec(f"hlofuse.execute.{short}")
        name = f"hlofuse.execute.{short}@{lib.__name__}"
        module = types.ModuleType(name)
        module.__dict__.update(__builtins__=own_builtins, __package__="hlofuse.execute", __file__=spec.origin)
        sys.modules[name] = module  # dataclasses look their module up by name
        exec(spec.loader.get_code(spec.name), module.__dict__)
        copies[short] = module
    interp = copies["interp"]
    _BOUND[id(lib)] = interp
    return interp


def library_call(lib, lowered, kernel, handles):
    """A library kernel evaluated on the device: the buffers' logical views go through the
    bound evaluator's handler for the instruction; results are written back in physical order."""
    from . import interp as host_interp

    interp = bind(lib)
    numeric = interp.numeric
    instr = kernel.instr
    evaluator = interp.Evaluator(lowered.module)
    constants = evaluator._constants

    def constant(literal_instr):  # parsed on the host (object arrays), uploaded once
        key = id(literal_instr)
        if key not in constants:
            constants[key] = lib.asarray(host_interp.literal_value(literal_instr))
        return constants[key]

    evaluator.constant = constant
    n_in = kernel.n_inputs
    shapes = kernel.shapes or [lowered.buffers[a].shape for a in kernel.args]
    in_shapes, out_shapes = shapes[:n_in], shapes[n_in:]
    ins, outs = handles[:n_in], handles[n_in:]
    handler = interp.HANDLERS[instr.opcode]
    from .cpu import value_leaves

    def call():
        ops = [numeric.from_physical(h[: s.elements], s) for h, s in zip(ins, in_shapes)]
        result = handler(evaluator, instr, ops)
        for h, s, value in zip(outs, out_shapes, value_leaves(result)):
            h[: s.elements] = numeric.to_physical(lib.asarray(value), s)

    return call

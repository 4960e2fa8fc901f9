"""NumPy posing as a GPU array library, counting what a library kernel asks of it: the
array operations it calls (each one a kernel launch, or more, on CuPy) and the host
synchronisations (a device array read as a Python bool, int or float, `.item()`, `.tolist()`,
iteration, `asnumpy`) that would stall the GPU's queue.

Built so that the GPU's library-call paths (execute/device_eval.py, execute/gpu_library.py)
run without a GPU, through exactly the code CuPy would see, and so that bench/gpu_library_census.py
and the tests can say how many calls and stalls each library kernel costs.  `Census.lib` is
the module to hand those paths in place of `cupy`; its arrays are `Census.ndarray`, a NumPy
subclass whose every NumPy function call, ufunc call and copying method is counted.
"""

from __future__ import annotations

import types
from collections import Counter

import numpy

#: NumPy names whose results are device arrays (made from nothing or from host data)
_CREATORS = ("array", "asarray", "ascontiguousarray", "zeros", "ones", "full", "empty", "arange", "indices",
             "eye", "identity", "linspace", "zeros_like", "ones_like", "full_like", "empty_like")
#: array methods that launch work on a GPU (views, reshapes and transposes do not)
_COPYING_METHODS = ("astype", "copy", "fill", "sort", "argsort", "take", "sum", "max", "min", "any", "all")


class Census:
    """One count of calls (by name) and of host synchronisations (by kind)."""

    def __init__(self):
        self.calls: Counter = Counter()
        self.syncs: Counter = Counter()
        census = self

        class DeviceArray(numpy.ndarray):
            """A NumPy array standing for a device array."""

            def __array_function__(self, func, types_, args, kwargs):
                census.calls[func.__name__] += 1
                return _on_device(super().__array_function__(func, types_, args, kwargs))

            def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
                census.calls[ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"] += 1
                plain = [numpy.asarray(x) if isinstance(x, DeviceArray) else x for x in inputs]
                if "out" in kwargs:
                    kwargs["out"] = tuple(numpy.asarray(o) if isinstance(o, DeviceArray) else o
                                          for o in kwargs["out"])
                result = getattr(ufunc, method)(*plain, **kwargs)
                return _on_device(result)

            def __getitem__(self, key):
                if _fancy(key):
                    census.calls["getitem"] += 1
                return _on_device(super().__getitem__(key))

            def __setitem__(self, key, value):
                census.calls["setitem"] += 1
                super().__setitem__(key, value)

            def _sync(self, kind):
                census.syncs[kind] += 1

            def __bool__(self):
                self._sync("bool")
                return bool(numpy.asarray(self))

            def __int__(self):
                self._sync("int")
                return int(numpy.asarray(self))

            def __index__(self):
                self._sync("index")
                return numpy.asarray(self).__index__()

            def __float__(self):
                self._sync("float")
                return float(numpy.asarray(self))

            def item(self, *args):
                self._sync("item")
                return numpy.asarray(self).item(*args)

            def tolist(self):
                self._sync("tolist")
                return numpy.asarray(self).tolist()

            def __iter__(self):
                self._sync("iter")
                return iter(numpy.asarray(self))

            def get(self):  # CuPy's device-to-host copy
                self._sync("get")
                return numpy.array(self)

        for method in _COPYING_METHODS:
            setattr(DeviceArray, method, _counted_method(census, method))

        def _on_device(value):
            if isinstance(value, numpy.ndarray) and not isinstance(value, DeviceArray):
                return value.view(DeviceArray)
            if isinstance(value, numpy.generic):  # CuPy's reductions give 0-d device arrays
                return numpy.asarray(value).view(DeviceArray)
            if isinstance(value, tuple):
                return tuple(_on_device(v) for v in value)
            if isinstance(value, list):
                return [_on_device(v) for v in value]
            return value

        self.ndarray = DeviceArray
        self.lib = _library(census, DeviceArray, _on_device)

    def device(self, host: numpy.ndarray) -> numpy.ndarray:
        """A host array placed 'on the device' (uncounted: the data a kernel starts from)."""
        return numpy.ascontiguousarray(host).view(self.ndarray)

    def reset(self) -> None:
        self.calls.clear()
        self.syncs.clear()

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def total_syncs(self) -> int:
        return sum(self.syncs.values())


def _fancy(key) -> bool:
    """Indexing that gathers (a copy, one launch on a GPU) rather than slicing (a view)."""
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (numpy.ndarray, list)) for k in keys)


def _counted_method(census: Census, name: str):
    plain = getattr(numpy.ndarray, name)

    def method(self, *args, **kwargs):
        census.calls[f".{name}"] += 1
        result = plain(self, *args, **kwargs)
        return result.view(type(self)) if isinstance(result, numpy.ndarray) else result
    method.__name__ = name
    return method


def _library(census: Census, array_type, on_device) -> types.ModuleType:
    """NumPy's namespace with `ndarray` the counted type, creators making counted arrays, and
    CuPy's host copy (`asnumpy`) counted as a synchronisation."""
    lib = types.ModuleType("census_numpy")
    lib.__getattr__ = lambda name: getattr(numpy, name)
    lib.ndarray = array_type

    def creator(name):
        make = getattr(numpy, name)

        def create(*args, **kwargs):
            census.calls[name] += 1
            return on_device(numpy.asarray(make(*args, **kwargs)))
        create.__name__ = name
        return create

    for name in _CREATORS:
        setattr(lib, name, creator(name))

    def asnumpy(value):
        census.syncs["asnumpy"] += 1
        return numpy.array(value)
    lib.asnumpy = asnumpy
    return lib

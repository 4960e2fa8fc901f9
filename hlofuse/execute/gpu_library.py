"""The GPU's library calls: which array-library call (CuPy's, or NumPy's standing in for it)
runs each library kernel of a lowered program.

XLA hands dots to cuBLAS (a `__cublas$gemm` custom call, or the dot of a Triton GEMM fusion,
whose prologue and epilogue execute/lower.py has already cut out as generated kernels):
here a dot is one `matmul` on views of the buffers bound once, written straight into the
output buffer where its layout allows (no evaluator, no copy of the inputs, no host
synchronisation).  Every other library kernel (cuDNN convolutions, sorts, TopK, kCustom
fusions the generator does not write) runs through the reference evaluator bound to the
library (execute/device_eval.py), or on the host where the library cannot run it (said in
the plan's notes).  `lib` is the library module (`cupy`); nothing here imports CuPy, so the
mapping runs and is tested with NumPy (execute/array_census.py).
"""

from __future__ import annotations

import numpy as np

from .. import attributes as attrs
from . import numeric
from .interp import GEMM_TARGETS, dot_dims


def library_call(lib, lowered, kernel, handles):
    """A closure running one library kernel on `handles` (flat device buffers, inputs then
    outputs, elements in physical order)."""
    instr = kernel.instr
    if instr.opcode == "dot" or (instr.opcode == "custom-call" and instr.custom_call_target in GEMM_TARGETS):
        return _dot_call(lib, lowered, kernel, handles)
    return _evaluated(lib, lowered, kernel, handles)


# ------------------------------------------------------------------------------------------
# Dots: cuBLAS through the library's matmul
# ------------------------------------------------------------------------------------------


def _dot_call(lib, lowered, kernel, handles):
    """A dot (or cuBLAS GEMM custom call with its alpha, beta, bias and ReLU epilogue) as one
    batched matmul in the dot's element type (f32 accumulating in f32, as XLA's cuBLAS calls
    do; narrower floats computed in f32), into the output buffer when its logical view, or
    that view with its last two dimensions swapped, is contiguous."""
    instr = kernel.instr
    n_in = kernel.n_inputs
    shapes = kernel.shapes or [lowered.buffers[a].shape for a in kernel.args]
    views = [_logical(h, s) for h, s in zip(handles, shapes)]
    lhs, rhs, extra, out = views[0], views[1], views[2:n_in], views[n_in]
    lc, rc, lb, rb = dot_dims(instr) if instr.opcode == "dot" else _gemm_dims(instr)
    lfree = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    batch = int(np.prod([lhs.shape[d] for d in lb], dtype=np.int64))
    m = int(np.prod([lhs.shape[d] for d in lfree], dtype=np.int64))
    n = int(np.prod([rhs.shape[d] for d in rfree], dtype=np.int64))
    k = int(np.prod([lhs.shape[d] for d in lc], dtype=np.int64))
    lhs_perm, rhs_perm = list(lb) + lfree + list(lc), list(rb) + list(rc) + rfree
    dtype = out.dtype
    compute = np.dtype(np.float32) if dtype.kind == "f" and dtype.itemsize < 4 else dtype
    epilogue = _Epilogue.of(instr, n_in) if instr.opcode == "custom-call" else None
    # the dot's result as (batch, m, n) over the output buffer: written in place when it is
    # contiguous (as C, or as C with m and n swapped: computed then as rhs^T · lhs^T)
    result = out.reshape(batch, m, n) if out.flags.c_contiguous else None
    swapped = None
    if result is None and len(lfree) == 1 and len(rfree) == 1 and out.swapaxes(-1, -2).flags.c_contiguous:
        swapped = out.swapaxes(-1, -2).reshape(batch, n, m)
    in_place = compute == dtype and lhs.dtype == dtype and rhs.dtype == dtype and epilogue is None

    def operands():
        a = lhs.transpose(lhs_perm).reshape(batch, m, k)
        b = rhs.transpose(rhs_perm).reshape(batch, k, n)
        if a.dtype != compute:
            a, b = a.astype(compute), b.astype(compute)
        return a, b

    if in_place and result is not None:
        def call():
            a, b = operands()
            lib.matmul(a, b, out=result)
    elif in_place and swapped is not None:
        def call():
            a, b = operands()
            lib.matmul(b.transpose(0, 2, 1), a.transpose(0, 2, 1), out=swapped)
    else:
        def call():
            a, b = operands()
            value = lib.matmul(a, b).reshape(out.shape)
            if epilogue is not None:
                value = epilogue.apply(lib, value, extra)
            out[...] = value.astype(dtype, copy=False)
    return call


class _Epilogue:
    """A cuBLAS GEMM's alpha · dot (+ bias along the last dimension, + beta · C), then ReLU."""

    def __init__(self, alpha: float, beta: float, bias: bool, relu: bool):
        self.alpha, self.beta, self.bias, self.relu = alpha, beta, bias, relu

    @classmethod
    def of(cls, instr, n_inputs: int) -> "_Epilogue | None":
        """None when the GEMM is the plain dot (alpha 1, no bias, no C added, no ReLU)."""
        config = attrs.backend_config(instr).get("gemm_backend_config", {})
        kind = config.get("epilogue", "DEFAULT")
        epilogue = cls(float(config.get("alpha_real", 1.0)), float(config.get("beta", 0.0)),
                       "BIAS" in kind and n_inputs > 2, "RELU" in kind)
        plain = epilogue.alpha == 1.0 and not epilogue.bias and not (epilogue.beta and n_inputs > 2) \
            and not epilogue.relu
        return None if plain else epilogue

    def apply(self, lib, value, extra):
        extra = list(extra)
        if self.alpha != 1.0:
            value = value * value.dtype.type(self.alpha)
        if self.bias and extra:
            bias = extra.pop(0)
            value = value + bias.reshape((1,) * (value.ndim - bias.ndim) + bias.shape)
        if self.beta and extra:
            value = value + value.dtype.type(self.beta) * extra.pop(0).astype(value.dtype)
        if self.relu:
            value = lib.maximum(value, 0)
        return value


def _gemm_dims(instr):
    d = attrs.backend_config(instr).get("gemm_backend_config", {}).get("dot_dimension_numbers", {})
    return tuple(tuple(int(v) for v in d.get(k, [])) for k in (
        "lhs_contracting_dimensions", "rhs_contracting_dimensions", "lhs_batch_dimensions", "rhs_batch_dimensions"))


def _logical(flat, shape):
    """The logical view of a buffer's first `shape.elements` elements (no copy)."""
    order = numeric.major_to_minor(shape)
    return flat[: shape.elements].reshape(tuple(shape.dims[d] for d in order)).transpose(np.argsort(order))


# ------------------------------------------------------------------------------------------
# Everything else: the evaluator on the device, or on the host
# ------------------------------------------------------------------------------------------


def _evaluated(lib, lowered, kernel, handles):
    """The reference evaluator bound to `lib`; the first call decides for good whether the
    kernel runs there or (an operation the library lacks) on the host, which is noted."""
    from .device_eval import bind
    from .device_eval import library_call as device_call

    _sort_by_keys(bind(lib), lib)
    on_device = device_call(lib, lowered, kernel, handles)
    state = {"run": None}

    def call():
        if state["run"] is not None:
            return state["run"]()
        try:
            on_device()
            state["run"] = on_device
        except Exception as err:  # an operation the library lacks: say so, never fail the plan
            lowered.notes.append(f"{kernel.label} ran on the host (two copies per call): the GPU evaluator "
                                 f"failed with {type(err).__name__}: {str(err)[:160]}")
            state["run"] = host_fallback(lib, lowered, kernel, handles)
            state["run"]()
    return call


def _sort_by_keys(interp, lib) -> None:
    """The bound evaluator's sort and TopK handlers, for comparators that order by integer
    keys (execute/keyed_sort.py), as stable argsorts of the keys: a dozen array calls and no
    host synchronisation instead of the reference's checked guess.  Other comparators keep
    the evaluator's own handlers.  Installed once per bound evaluator."""
    from .keyed_sort import comparator_keys, stable_order

    handlers = interp.HANDLERS
    if getattr(handlers.get("sort"), "keyed", False):
        return
    plain_sort, plain_custom = handlers["sort"], handlers["custom-call"]
    analysed: dict[str, object] = {}

    def keys_of(ev, name):
        if name not in analysed:
            analysed[name] = comparator_keys(ev.module[name])
        return analysed[name]

    def sort(ev, instr, ops):
        keys = keys_of(ev, instr.called[0]) if instr.called else None
        if keys is None or any(k.operand >= len(ops) for k in keys):
            return plain_sort(ev, instr, ops)
        axis = attrs.dimensions(instr)[0]
        order = stable_order(lib, ev, keys, ops, axis)
        out = [lib.moveaxis(lib.take_along_axis(lib.moveaxis(o, axis, -1), order, axis=-1), -1, axis) for o in ops]
        return tuple(out) if instr.shape.is_tuple else out[0]

    def custom_call(ev, instr, ops):
        keys = keys_of(ev, instr.called[0]) if instr.custom_call_target in interp.TOPK_TARGETS and instr.called \
            else None
        if keys is None or any(k.operand != 0 for k in keys):  # operand 1 is TopK's implicit index
            return plain_custom(ev, instr, ops)
        k = instr.shape.tuple_shapes[0].dims[-1]
        x = ops[0]
        index = stable_order(lib, ev, keys, [x], x.ndim - 1)[..., :k].astype(np.int32)
        return lib.take_along_axis(x, index, axis=-1), index

    sort.keyed = True
    handlers["sort"] = sort
    handlers["custom-call"] = custom_call


def host_fallback(lib, lowered, kernel, handles):
    """A library kernel run by the NumPy evaluator: inputs copied to the host, outputs back."""
    from .cpu import library_call as host_call

    n_in = kernel.n_inputs
    ins, outs = handles[:n_in], handles[n_in:]
    host_ins = [np.empty(h.size, h.dtype) for h in ins]
    host_outs = [np.empty(h.size, h.dtype) for h in outs]
    run_host = host_call(lowered, kernel, host_ins + host_outs)

    def call_on_host():
        for d, h in zip(host_ins, ins):
            d[:] = lib.asnumpy(h)
        run_host()
        for h, d in zip(outs, host_outs):
            h[:] = lib.asarray(d)
    return call_on_host

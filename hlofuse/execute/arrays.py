"""The reference evaluator's array operations that are more than one NumPy call: dot,
convolution, gather, scatter, reduce, reduce-window, sort.  Pure functions of NumPy arrays
and the instruction's typed attributes; `interp.py` wires them to opcodes.

A reducer (the `to_apply` of reduce, reduce-window, scatter, sort's comparator) is passed
in as `apply(args) -> results`, a function evaluating the computation on arrays: reducers
are scalar computations of elementwise ops, so one evaluation on arrays combines many
pairs at once.  Reducers XLA users write most (add, max, min, mul, and, or) are recognised
by `reducer_kind` and run as one NumPy reduction instead.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .. import ir
from ..errors import ExecutionError

Apply = Callable[[Sequence[np.ndarray]], list[np.ndarray]]

# ------------------------------------------------------------------------------------------
# Reducers
# ------------------------------------------------------------------------------------------

_UFUNC = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
          "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def reducer_kind(comp: ir.Computation) -> str | None:
    """`add`, `multiply`, `maximum`, `minimum`, `and`, `or`, `xor` when the computation is that
    binary op of its two parameters; `overwrite` when it returns its second parameter; else None."""
    params = comp.parameters
    if len(params) != 2:
        return None
    root = comp.root
    if root.opcode == "parameter":
        return "overwrite" if root.parameter_number == 1 else None
    if root.opcode in _UFUNC and set(root.operands) == {params[0].name, params[1].name}:
        return root.opcode
    return None


def _ufunc(kind: str, dtype: np.dtype):
    if dtype == np.bool_:
        return {"add": np.logical_or, "multiply": np.logical_and, "maximum": np.logical_or,
                "minimum": np.logical_and, "and": np.logical_and, "or": np.logical_or,
                "xor": np.logical_xor}[kind]
    return _UFUNC[kind]


def fold(values: list[np.ndarray], inits: list[np.ndarray], axis: int, apply: Apply,
         kind: str | None) -> list[np.ndarray]:
    """Reduce `values` (one array per reduce operand, same shape) along `axis`."""
    if kind is not None and kind != "overwrite" and len(values) == 1:
        v, init = values[0], inits[0]
        ufunc = _ufunc(kind, v.dtype)
        with np.errstate(all="ignore"):
            reduced = ufunc.reduce(v, axis=axis, dtype=v.dtype) if v.shape[axis] else np.broadcast_to(
                init, v.shape[:axis] + v.shape[axis + 1:])
            return [ufunc(init, reduced).astype(v.dtype)]
    # General reducer: combine halves pairwise (log2(n) evaluations of the computation).
    values = [np.moveaxis(v, axis, -1) for v in values]
    n = values[0].shape[-1]
    if n == 0:
        return [np.broadcast_to(i, values[0].shape[:-1]).astype(i.dtype) for i in inits]
    while n > 1:
        half = n // 2
        left = [v[..., :half] for v in values]
        right = [v[..., half:2 * half] for v in values]
        combined = apply(left + right)
        if n % 2:
            combined = [np.concatenate([c, v[..., 2 * half:]], axis=-1) for c, v in zip(combined, values)]
        values = [np.asarray(c) for c in combined]
        n = values[0].shape[-1]
    reduced = [v[..., 0] for v in values]
    shape = reduced[0].shape
    out = apply([np.broadcast_to(i, shape) for i in inits] + reduced)
    return [np.asarray(o).astype(v.dtype) for o, v in zip(out, values)]


def reduce(operands: list[np.ndarray], inits: list[np.ndarray], dims: Sequence[int], apply: Apply,
           kind: str | None) -> list[np.ndarray]:
    """XLA's reduce over `dims` (all at once: moved to the end and flattened)."""
    rank = operands[0].ndim
    keep = [d for d in range(rank) if d not in dims]
    moved = [np.transpose(v, keep + list(dims)) for v in operands]
    kept_shape = moved[0].shape[:len(keep)]
    flat = [v.reshape(kept_shape + (-1,)) for v in moved]
    return fold(flat, inits, len(keep), apply, kind)


def reduce_window(operands: list[np.ndarray], inits: list[np.ndarray], window, apply: Apply,
                  kind: str | None) -> list[np.ndarray]:
    """XLA's reduce-window: pad with the init value (and dilate), then reduce every window."""
    rank = operands[0].ndim
    if len(window) != rank:
        raise ExecutionError(f"reduce-window: window rank {len(window)} does not match operand rank {rank}")
    views = []
    for v, init in zip(operands, inits):
        base = v
        if any(w.lhs_dilation > 1 for w in window):
            shape = tuple((d - 1) * w.lhs_dilation + 1 if d else 0 for d, w in zip(v.shape, window))
            dilated = np.full(shape, init, v.dtype)
            dilated[tuple(slice(None, None, w.lhs_dilation) for w in window)] = v
            base = dilated
        pads = [(max(w.pad_low, 0), max(w.pad_high, 0)) for w in window]
        padded = np.pad(base, pads, constant_values=init)
        crop = tuple(slice(-min(w.pad_low, 0), padded.shape[i] + min(w.pad_high, 0))
                     for i, w in enumerate(window))
        padded = padded[crop]
        spans = [(w.size - 1) * w.rhs_dilation + 1 for w in window]
        win = np.lib.stride_tricks.sliding_window_view(padded, spans)
        win = win[tuple(slice(None, None, w.stride) for w in window)]
        win = win[(Ellipsis,) + tuple(slice(None, None, w.rhs_dilation) for w in window)]
        views.append(win)
    out_shape = views[0].shape[:rank]
    flat = [w.reshape(out_shape + (-1,)) for w in views]
    return fold(flat, inits, rank, apply, kind)


# ------------------------------------------------------------------------------------------
# Dot and convolution
# ------------------------------------------------------------------------------------------


def dot_general(lhs: np.ndarray, rhs: np.ndarray, lhs_contract, rhs_contract, lhs_batch, rhs_batch,
                out_dtype: np.dtype) -> np.ndarray:
    """Output dims: batch, lhs free, rhs free (XLA's DotGeneral)."""
    lhs_free = [d for d in range(lhs.ndim) if d not in lhs_contract and d not in lhs_batch]
    rhs_free = [d for d in range(rhs.ndim) if d not in rhs_contract and d not in rhs_batch]
    batch_shape = [lhs.shape[d] for d in lhs_batch]
    m_shape = [lhs.shape[d] for d in lhs_free]
    n_shape = [rhs.shape[d] for d in rhs_free]
    k = int(np.prod([lhs.shape[d] for d in lhs_contract], dtype=np.int64))
    b = int(np.prod(batch_shape, dtype=np.int64))
    m = int(np.prod(m_shape, dtype=np.int64))
    n = int(np.prod(n_shape, dtype=np.int64))
    a = np.transpose(lhs, list(lhs_batch) + lhs_free + list(lhs_contract)).reshape(b, m, k)
    c = np.transpose(rhs, list(rhs_batch) + list(rhs_contract) + rhs_free).reshape(b, k, n)
    if out_dtype.kind in "iub":
        acc = np.matmul(a.astype(np.int64), c.astype(np.int64))
    elif out_dtype == np.float64 or out_dtype.kind == "c":
        acc = np.matmul(a.astype(out_dtype), c.astype(out_dtype))
    else:  # f32 and narrower: accumulate in f32, as XLA does by default
        acc = np.matmul(a.astype(np.float32), c.astype(np.float32))
    return acc.reshape(batch_shape + m_shape + n_shape).astype(out_dtype)


def parse_dim_labels(labels: str) -> tuple[tuple[int, int, list[int]], tuple[int, int, list[int]],
                                           tuple[int, int, list[int]]]:
    """`b01f_01io->b01f` → for input, kernel, output: (batch|out-feature dim, feature|in dim,
    spatial dims in order)."""
    try:
        lhs, rest = labels.split("_")
        rhs, out = rest.split("->")
    except ValueError:
        raise ExecutionError(f"cannot read convolution dim_labels {labels!r}") from None

    def spatial(text: str) -> list[int]:
        digits = sorted((c, i) for i, c in enumerate(text) if c.isdigit())
        return [i for _, i in digits]

    return ((lhs.index("b"), lhs.index("f"), spatial(lhs)),
            (rhs.index("o"), rhs.index("i"), spatial(rhs)),
            (out.index("b"), out.index("f"), spatial(out)))


def convolution(x: np.ndarray, w: np.ndarray, window, labels: str, feature_groups: int,
                batch_groups: int, out_dtype: np.dtype) -> np.ndarray:
    """XLA's convolution (cross-correlation) with padding, strides, dilations and groups."""
    (xb, xf, xs), (wo, wi, ws), (ob, of, os_) = parse_dim_labels(labels)
    nsp = len(xs)
    if len(window) != nsp:
        raise ExecutionError(f"convolution: window rank {len(window)} does not match {nsp} spatial dims")
    acc_type = np.float64 if out_dtype == np.float64 else (np.int64 if out_dtype.kind in "iu" else np.float32)
    X = np.transpose(x, [xb, xf] + xs).astype(acc_type)  # N C S...
    W = np.transpose(w, [wo, wi] + ws).astype(acc_type)  # O I K...
    if any(win.reversal for win in window):
        W = W[(slice(None), slice(None)) + tuple(slice(None, None, -1) if win.reversal else slice(None)
                                                for win in window)]
    # base (lhs) dilation, then padding (negative padding crops)
    if any(win.lhs_dilation > 1 for win in window):
        shape = X.shape[:2] + tuple((d - 1) * win.lhs_dilation + 1 if d else 0
                                    for d, win in zip(X.shape[2:], window))
        dil = np.zeros(shape, acc_type)
        dil[(slice(None), slice(None)) + tuple(slice(None, None, win.lhs_dilation) for win in window)] = X
        X = dil
    X = np.pad(X, [(0, 0), (0, 0)] + [(max(win.pad_low, 0), max(win.pad_high, 0)) for win in window])
    X = X[(slice(None), slice(None)) + tuple(
        slice(-min(win.pad_low, 0), X.shape[2 + i] + min(win.pad_high, 0)) for i, win in enumerate(window))]
    n, c = X.shape[:2]
    o, i_per_group = W.shape[:2]
    kernel = W.shape[2:]
    out_sp = [(X.shape[2 + d] - ((kernel[d] - 1) * window[d].rhs_dilation + 1)) // window[d].stride + 1
              for d in range(nsp)]
    out_sp = [max(s, 0) for s in out_sp]
    if batch_groups > 1:
        # batch groups split the batch; each group of output features sees one slice of it
        Xg = X.reshape((batch_groups, n // batch_groups) + X.shape[1:])
        Wg = W.reshape((batch_groups, o // batch_groups) + W.shape[1:])
        parts = [_conv_nchw(Xg[g], Wg[g], window, out_sp, feature_groups, acc_type) for g in range(batch_groups)]
        out = np.concatenate(parts, axis=1)
    else:
        out = _conv_nchw(X, W, window, out_sp, feature_groups, acc_type)
    # back to the output's dimension order
    order = [ob, of] + os_
    return np.transpose(out, np.argsort(order)).astype(out_dtype)


def _conv_nchw(X, W, window, out_sp, groups, acc_type):
    n, c = X.shape[:2]
    o = W.shape[0]
    cg, og = c // groups, o // groups
    if groups == 1:
        # every kernel offset's window of the input side by side (N C K out...), then one
        # contraction over channels and offsets: one matrix product (cuBLAS on a GPU)
        # instead of one per offset
        patches = np.stack([X[(slice(None), slice(None)) + _window_slices(offset, window, out_sp)]
                            for offset in np.ndindex(*W.shape[2:])], axis=2)
        flat_w = W.reshape(o, c, -1)
        out = np.tensordot(patches, flat_w, axes=([1, 2], [1, 2]))  # N out... O
        return np.moveaxis(out, -1, 1).astype(acc_type, copy=False)
    out = np.zeros((n, o) + tuple(out_sp), acc_type)
    for offset in np.ndindex(*W.shape[2:]):
        sl = tuple(slice(off * win.rhs_dilation, off * win.rhs_dilation + (s - 1) * win.stride + 1, win.stride)
                   for off, win, s in zip(offset, window, out_sp))
        patch = X[(slice(None), slice(None)) + sl]  # N C out...
        wk = W[(slice(None), slice(None)) + offset]  # O I
        for g in range(groups):
            pg = patch[:, g * cg:(g + 1) * cg]
            wg = wk[g * og:(g + 1) * og]
            out[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", pg, wg)
    return out


def _window_slices(offset, window, out_sp) -> tuple:
    """The input positions one kernel offset meets at every output position, as slices."""
    return tuple(slice(off * win.rhs_dilation, off * win.rhs_dilation + (s - 1) * win.stride + 1, win.stride)
                 for off, win, s in zip(offset, window, out_sp))


# ------------------------------------------------------------------------------------------
# Gather and scatter
# ------------------------------------------------------------------------------------------


def _start_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """The index tensor with its index vector as the last axis."""
    if index_vector_dim == indices.ndim:
        return indices[..., None]
    return np.moveaxis(indices, index_vector_dim, -1)


def gather(operand: np.ndarray, indices: np.ndarray, out_dims: tuple[int, ...], offset_dims, collapsed,
           start_index_map, index_vector_dim: int, slice_sizes, operand_batching=(),
           indices_batching=()) -> np.ndarray:
    """XLA's gather: for each output index, a start vector from `indices`, clamped so the
    slice stays in bounds, plus the offset within the slice."""
    starts = _start_vectors(indices, index_vector_dim).astype(np.int64)
    batch_dims = [d for d in range(len(out_dims)) if d not in offset_dims]
    grid = np.indices(out_dims, dtype=np.int64) if out_dims else np.zeros((0,), np.int64)
    batch_idx = tuple(grid[d] for d in batch_dims)
    vec = starts[batch_idx] if batch_dims else np.broadcast_to(starts.reshape(-1), out_dims + (starts.shape[-1],))
    window_operand_dims = [d for d in range(operand.ndim) if d not in collapsed and d not in operand_batching]
    operand_idx = []
    # indices' batch dims (all but the index vector dim), in order, name the output batch dims
    idx_batch_axes = [d for d in range(indices.ndim) if d != index_vector_dim]
    for d in range(operand.ndim):
        start = np.zeros(out_dims, np.int64)
        if d in start_index_map:
            start = vec[..., start_index_map.index(d)]
        if d in operand_batching:
            which = operand_batching.index(d)
            axis = idx_batch_axes.index(indices_batching[which])
            start = batch_idx[axis]
        start = np.clip(start, 0, operand.shape[d] - slice_sizes[d])
        if d in window_operand_dims:
            start = start + grid[offset_dims[window_operand_dims.index(d)]]
        operand_idx.append(start)
    return operand[tuple(operand_idx)]


def scatter(operands: list[np.ndarray], indices: np.ndarray, updates: list[np.ndarray], update_window_dims,
            inserted_window_dims, scatter_dims_to_operand_dims, index_vector_dim: int, apply: Apply,
            kind: str | None, input_batching=(), indices_batching=()) -> list[np.ndarray]:
    """XLA's scatter: every update element combined into its operand element; a window whose
    start is out of bounds is skipped whole."""
    outs = [o.copy() for o in operands]
    upd_shape = updates[0].shape
    rank = operands[0].ndim
    starts = _start_vectors(indices, index_vector_dim).astype(np.int64)
    scatter_dims = [d for d in range(len(upd_shape)) if d not in update_window_dims]
    grid = np.indices(upd_shape, dtype=np.int64) if upd_shape else np.zeros((0,), np.int64)
    scatter_idx = tuple(grid[d] for d in scatter_dims)
    vec = starts[scatter_idx] if scatter_dims else np.broadcast_to(starts.reshape(-1), upd_shape + (starts.shape[-1],))
    window_operand_dims = [d for d in range(rank) if d not in inserted_window_dims and d not in input_batching]
    idx_batch_axes = [d for d in range(indices.ndim) if d != index_vector_dim]
    window_sizes = [upd_shape[d] for d in update_window_dims]
    valid = np.ones(upd_shape, bool)
    full_idx = []
    for d in range(rank):
        start = np.zeros(upd_shape, np.int64)
        if d in scatter_dims_to_operand_dims:
            start = vec[..., scatter_dims_to_operand_dims.index(d)]
        if d in input_batching:
            which = input_batching.index(d)
            start = scatter_idx[idx_batch_axes.index(indices_batching[which])]
        size = window_sizes[window_operand_dims.index(d)] if d in window_operand_dims else 1
        valid &= (start >= 0) & (start <= operands[0].shape[d] - size)
        if d in window_operand_dims:
            start = start + grid[update_window_dims[window_operand_dims.index(d)]]
        full_idx.append(start)
    sel = tuple(i[valid] for i in full_idx)
    vals = [u[valid] for u in updates]
    if kind == "overwrite" and len(outs) == 1:
        outs[0][sel] = vals[0]
        return outs
    if kind in _UFUNC and kind != "overwrite" and len(outs) == 1:
        with np.errstate(all="ignore"):
            _ufunc(kind, outs[0].dtype).at(outs[0], sel, vals[0])
        return outs
    # General combiner: apply it in rounds, the r-th update of every target element per round.
    flat_target = np.ravel_multi_index(sel, operands[0].shape) if sel and sel[0].size else np.zeros(0, np.int64)
    order = np.argsort(flat_target, kind="stable")
    targets = flat_target[order]
    vals = [v[order] for v in vals]
    first = np.r_[True, targets[1:] != targets[:-1]] if targets.size else np.zeros(0, bool)
    group_start = np.maximum.accumulate(np.where(first, np.arange(targets.size), 0)) if targets.size else targets
    rank_in_group = np.arange(targets.size) - group_start
    flat_outs = [o.reshape(-1) for o in outs]
    for r in range(int(rank_in_group.max()) + 1 if targets.size else 0):
        pick = rank_in_group == r
        t = targets[pick]
        current = [fo[t] for fo in flat_outs]
        combined = apply(current + [v[pick] for v in vals])
        for fo, c in zip(flat_outs, combined):
            fo[t] = c
    return [fo.reshape(o.shape) for fo, o in zip(flat_outs, outs)]


# ------------------------------------------------------------------------------------------
# Sort
# ------------------------------------------------------------------------------------------


def sort(operands: list[np.ndarray], axis: int, less: Apply, stable: bool) -> list[np.ndarray]:
    """Sort along `axis` with the comparator `less(lhs0, rhs0, lhs1, rhs1, ...)`: a bitonic
    network evaluated on whole arrays (every comparison of a stage at once).  Ties keep
    their original order (stable), which XLA's unstable sort may or may not do."""
    moved = [np.moveaxis(o, axis, -1) for o in operands]
    n = moved[0].shape[-1]
    if n <= 1:
        return [o.copy() for o in operands]
    guessed = _sorted_by_first_key(moved, less)
    if guessed is not None:
        return [np.moveaxis(g, -1, axis).copy() for g in guessed]
    return _bitonic(moved, axis, less)


def _sorted_by_first_key(moved: list[np.ndarray], less: Apply) -> list[np.ndarray] | None:
    """Most comparators order by the first operand, ascending or descending: try NumPy's
    stable argsort both ways and keep the result if the comparator agrees that it is the
    stable sorted order (no adjacent pair out of order, ties in their original order)."""
    first = moved[0]
    if first.dtype.kind not in "biuf":
        return None
    key = numeric_key(first)
    n = first.shape[-1]
    for descending in (False, True):
        order = np.argsort(key[..., ::-1] if descending else key, axis=-1, kind="stable")
        if descending:  # stable descending: reverse the ascending order of the reversed row
            order = (n - 1 - order)[..., ::-1]
        cand = [np.take_along_axis(m, order, axis=-1) for m in moved]
        left = [c[..., :-1] for c in cand]
        right = [c[..., 1:] for c in cand]
        backwards = np.asarray(less(_interleave(right, left))[0], bool)  # right strictly before left
        if np.any(backwards):
            continue
        forwards = np.asarray(less(_interleave(left, right))[0], bool)
        tie = ~forwards
        if np.any(tie & (order[..., 1:] < order[..., :-1])):
            continue
        return cand
    return None


def _interleave(a: list[np.ndarray], b: list[np.ndarray]) -> list[np.ndarray]:
    out = []
    for x, y in zip(a, b):
        out += [x, y]
    return out


def numeric_key(x: np.ndarray) -> np.ndarray:
    """An integer or float key ordering `x` ascending (floats in IEEE total order)."""
    if x.dtype.kind == "f":
        width = x.dtype.itemsize
        bits = x.view(np.dtype(f"i{width}"))
        mask = np.array(np.iinfo(bits.dtype).max, bits.dtype)
        return np.where(bits < 0, bits ^ mask, bits)
    return x


def _bitonic(moved: list[np.ndarray], axis: int, less: Apply) -> list[np.ndarray]:
    n = moved[0].shape[-1]
    size = 1 << (n - 1).bit_length()
    lead = moved[0].shape[:-1]
    # pad to a power of two; padded slots sort after everything (flag `real`)
    padded = [np.concatenate([m, np.zeros(lead + (size - n,), m.dtype)], axis=-1) for m in moved]
    position = np.broadcast_to(np.arange(size), lead + (size,)).copy()
    real = position < n

    def before(i, j):
        """True where element i must come before element j."""
        args = []
        for arr in padded:
            args += [arr[..., i], arr[..., j]]
        lt = np.asarray(less(args)[0], bool)
        args_rev = []
        for arr in padded:
            args_rev += [arr[..., j], arr[..., i]]
        gt = np.asarray(less(args_rev)[0], bool)
        tie = ~lt & ~gt
        lt = lt | (tie & (position[..., i] < position[..., j]))
        ri, rj = real[..., i], real[..., j]
        return np.where(ri & rj, lt, ri & ~rj)

    k = 2
    while k <= size:
        j = k // 2
        while j >= 1:
            idx = np.arange(size)
            partner = idx ^ j
            lo = idx[partner > idx]
            hi = partner[partner > idx]
            ascending = (lo & k) == 0
            first_ok = before(lo, hi)  # lo already before hi
            swap = np.where(ascending, ~first_ok, first_ok)
            for arr in padded + [position, real]:
                a, b = arr[..., lo].copy(), arr[..., hi].copy()
                arr[..., lo] = np.where(swap, b, a)
                arr[..., hi] = np.where(swap, a, b)
            j //= 2
        k *= 2
    return [np.moveaxis(p[..., :n], -1, axis).copy() for p in padded]

"""Kernels whose targets run a loop nest of their own instead of a thread (or a CPU loop
iteration) per output, as XLA's emitters tile them: a column reduction (the CPU sweeps the
input once in its own order into a row of partial results; CUDA gives a block 32 adjacent
outputs by 8 slices of the reduced rows, combined in shared memory) and, on the CPU, a dot (a
row of results per lhs row, the contracting loop outside the vectorized row loop).
execute/kernel.py attaches these as a group's `cpu_body` / `cuda_body`, beside the per-output
code the other target runs.
"""

from __future__ import annotations

from .. import attributes as attrs
from .. import ir
from .emit import Emitter, Frame, Idx, _loops, ctype, linear


def start_group(em: Emitter) -> None:
    """A fresh body: no lines, no values computed yet."""
    em.lines = []
    em.depth = 0
    em.scopes = [{}]
    em.lanes_ok = False
    em.lanes_used = False


#: Outputs of a column reduction kept in one local array of partial results on the CPU.
COLUMN_OUTPUTS = 8192


def column_reduction(comp: ir.Computation, leaves) -> ir.Instruction | None:
    """A kernel whose root is a reduce that keeps the input's contiguous dimension (batch
    norm's mean over [N,H,W] of [N,H,W,C]): outputs adjacent in the input, so the CPU sweeps
    the input once in its own order, adding each row into its outputs at once (XLA's column-
    reduction tiling) instead of one output at a time down a stride."""
    root = comp.root
    if root.opcode != "reduce" or len(root.operands) != 2 or len(leaves) != 1:
        return None
    src = comp[root.operands[0]].shape
    reduced = set(attrs.dimensions(root))
    if not reduced or not src.minor_to_major or src.minor_to_major[0] in reduced:
        return None  # a row reduction: the input's contiguous dimension is reduced
    if root.shape.elements > COLUMN_OUTPUTS or root.shape.element_type not in ("f32", "f64", "s32", "s64", "u32",
                                                                                 "u64"):
        return None
    return root


def columns_on_cpu(em: Emitter, frame: Frame, hero: ir.Instruction, out_shape: ir.Shape, out: str) -> list[str]:
    """The CPU's loop nest of a column reduction: partial results in a local array (indexed
    like the output), the input swept in its own order, the loop over the kept dimensions
    innermost (contiguous: vectorized).  Each output still takes its elements in order, so the
    result is the reference's to the bit."""
    start_group(em)
    comp = frame.comp
    src = comp[hero.operands[0]].shape
    reduced = set(attrs.dimensions(hero))
    kept = [d for d in range(src.rank) if d not in reduced]
    et = out_shape.element_type
    t = ctype(et)
    acc = em.fresh("cols")
    init = em.one(frame, hero.operands[1], [])
    em.line(f"{t} {acc}[{out_shape.elements}];")
    fill = em.loop_var(out_shape.elements, "j")
    em.line(f"for (i64 {fill} = 0; {fill} < {out_shape.elements}; ++{fill}) {acc}[{fill}] = {init};")
    index: list[Idx] = [Idx()] * src.rank
    loops = []
    for d in reversed(src.minor_to_major):  # the input's order, major to minor
        var = em.loop_var(src.dims[d], "c")
        index[d] = Idx.of(var)
        loops.append((var, src.dims[d]))
    with _loops(em, loops):
        value = em.one(frame, hero.operands[0], index)
        out_index = [index[d] for d in kept]
        slot = f"{acc}[{linear(out_index, out_shape.dims, out_shape.minor_to_major).c()}]"
        em.line(f"{slot} = {em.apply(hero.called[0], [[slot], [value]])[0]};")
    store = em.loop_var(out_shape.elements, "j")
    em.line(f"for (i64 {store} = 0; {store} < {out_shape.elements}; ++{store}) {out}[{store}] = {acc}[{store}];")
    return em.lines


def dot_on_cpu(em: Emitter, frame: Frame, dot: ir.Instruction, out_shape: ir.Shape, out: str) -> list[str] | None:
    """A dot's CPU loop nest: for each (batch, lhs row), a local row of results over the rhs's
    free dimensions, each contracting index adding lhs[k] * rhs[k, :] into it (the row loop
    innermost, contiguous in a row-major rhs: vectorized), then the row stored.  Each output
    sums its products in order, in the output type (f32 as XLA accumulates f32 dots).  None
    (the per-element loop then) when a row does not fit a local array."""
    from .interp import dot_dims

    comp = frame.comp
    ls, rs = comp[dot.operands[0]].shape, comp[dot.operands[1]].shape
    lc, rc, lb, rb = dot_dims(dot)
    lfree = [d for d in range(ls.rank) if d not in lc and d not in lb]
    rfree = [d for d in range(rs.rank) if d not in rc and d not in rb]
    row = 1
    for d in rfree:
        row *= rs.dims[d]
    if row > COLUMN_OUTPUTS:
        return None
    start_group(em)
    t = ctype(out_shape.element_type)
    acc = em.fresh("row")
    em.line(f"{t} {acc}[{max(row, 1)}];")
    li, ri = [Idx()] * ls.rank, [Idx()] * rs.rank
    out_index: list[Idx] = []
    outer = []
    for a, b in zip(lb, rb):
        var = em.loop_var(ls.dims[a], "b")
        li[a] = ri[b] = Idx.of(var)
        out_index.append(Idx.of(var))
        outer.append((var, ls.dims[a]))
    for d in lfree:
        var = em.loop_var(ls.dims[d], "m")
        li[d] = Idx.of(var)
        out_index.append(Idx.of(var))
        outer.append((var, ls.dims[d]))
    with _loops(em, outer):
        fill = em.loop_var(row, "j")
        em.line(f"for (i64 {fill} = 0; {fill} < {row}; ++{fill}) {acc}[{fill}] = 0;")
        contract = []
        for a, b in zip(lc, rc):
            var = em.loop_var(ls.dims[a], "k")
            li[a] = ri[b] = Idx.of(var)
            contract.append((var, ls.dims[a]))
        with _loops(em, contract):
            x = em.let(out_shape.element_type, f"({t}){em.one(frame, dot.operands[0], li)}")
            cols = []
            for d in rfree:
                var = em.loop_var(rs.dims[d], "n")
                ri[d] = Idx.of(var)
                cols.append((var, rs.dims[d]))
            with _loops(em, cols):
                y = em.one(frame, dot.operands[1], ri)
                slot = linear([Idx.of(v) for v, _ in cols], tuple(n for _, n in cols),
                              tuple(range(len(cols) - 1, -1, -1))).c()
                em.line(f"{acc}[{slot}] += {x} * ({t}){y};")
        cols = [(em.loop_var(rs.dims[d], "n"), rs.dims[d]) for d in rfree]
        with _loops(em, cols):
            slot = linear([Idx.of(v) for v, _ in cols], tuple(n for _, n in cols),
                          tuple(range(len(cols) - 1, -1, -1))).c()
            index = out_index + [Idx.of(v) for v, _ in cols]
            em.line(f"{out}[{linear(index, out_shape.dims, out_shape.minor_to_major).c()}] = {acc}[{slot}];")
    return em.lines


#: A CUDA column-reduction tile: adjacent outputs (a warp, reading adjacent elements of each
#: input row) by slices of the reduced rows (the warps of a 256-thread block).
COLUMN_TILE = 32
COLUMN_SLICES = 8


def columns_on_cuda(em: Emitter, frame: Frame, hero: ir.Instruction, out_shape: ir.Shape, out: str) -> list[str]:
    """A column reduction tiled as XLA's reduction emitter tiles one: a block takes
    COLUMN_TILE adjacent outputs (hf_tx, coalesced reads along the input's contiguous
    dimension) and COLUMN_SLICES slices of the reduced rows (hf_ty: rows hf_ty, hf_ty + 8,
    ...); each thread reduces its slice, the slices meet in shared memory, and the first
    warp combines them in order and stores.  Outputs with few, long columns (batch norm's 64
    means over 4096 rows) then keep 8x the threads busy."""
    start_group(em)
    comp = frame.comp
    src = comp[hero.operands[0]].shape
    reduced_dims = set(attrs.dimensions(hero))
    kept = [d for d in range(src.rank) if d not in reduced_dims]
    reduced = [d for d in reversed(src.minor_to_major) if d in reduced_dims]  # major to minor
    et = out_shape.element_type
    t = ctype(et)
    n_out = out_shape.elements
    rows = 1
    for d in reduced:
        rows *= src.dims[d]
    part, have = em.fresh("part"), em.fresh("have")
    acc, started = em.fresh("acc"), em.fresh("started")
    em.line(f"__shared__ {t} {part}[{COLUMN_SLICES}][{COLUMN_TILE + 1}];")
    em.line(f"__shared__ pred {have}[{COLUMN_SLICES}][{COLUMN_TILE + 1}];")
    em.line(f"{t} {acc} = 0; pred {started} = 0;")
    em.ranges["hf_col"] = (0, -(-n_out // COLUMN_TILE) * COLUMN_TILE - 1)
    em.ranges["hf_ty"] = (0, COLUMN_SLICES - 1)
    em.ranges["hf_tx"] = (0, COLUMN_TILE - 1)
    out_index: list[Idx] = [Idx()] * out_shape.rank

    def decompose(flat: str, dims: list[int], sizes: list[int]) -> list[Idx]:
        out, stride = [], 1
        strides = []
        for size in reversed(sizes):
            strides.append(stride)
            stride *= size
        strides.reverse()
        for size, st in zip(sizes, strides):
            expr = f"({flat} / {st})" if st > 1 else flat
            out.append(Idx.of(em.var(f"{expr} % {size}" if size > 1 else "0", 0, max(size - 1, 0))))
        return out

    with em.block(f"if (hf_col < {n_out})"):
        # the output's physical order, major to minor: adjacent threads, adjacent outputs
        order = list(reversed(out_shape.minor_to_major))
        for k, ix in zip(order, decompose("hf_col", order, [out_shape.dims[k] for k in order])):
            out_index[k] = ix
        index: list[Idx] = [Idx()] * src.rank
        for k, d in enumerate(kept):
            index[d] = out_index[k]
        row = em.fresh("row")
        em.ranges[row] = (0, rows - 1)
        with em.block(f"for (i64 {row} = hf_ty; {row} < {rows}; {row} += {COLUMN_SLICES})"):
            for d, ix in zip(reduced, decompose(row, reduced, [src.dims[d] for d in reduced])):
                index[d] = ix
            elem = em.one(frame, hero.operands[0], index)
            new = em.let(et, em.apply(hero.called[0], [[acc], [elem]])[0])
            em.line(f"{acc} = {started} ? {new} : {elem}; {started} = 1;")
    em.line(f"{part}[hf_ty][hf_tx] = {acc}; {have}[hf_ty][hf_tx] = {started};")
    em.line("__syncthreads();")
    with em.block(f"if (hf_ty == 0 && hf_col < {n_out})"):
        total = em.fresh("total")
        em.line(f"{t} {total} = {em.one(frame, hero.operands[1], [])};")
        with em.block(f"for (int s = 0; s < {COLUMN_SLICES}; ++s)"):
            combined = em.let(et, em.apply(hero.called[0], [[total], [f"{part}[s][hf_tx]"]])[0])
            em.line(f"if ({have}[s][hf_tx]) {total} = {combined};")
        em.line(f"{out}[hf_col] = {total};")  # hf_col counts outputs in their physical order
    return em.lines

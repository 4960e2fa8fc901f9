"""CPU loop nests for the operations XLA:CPU hands to a library or a runtime routine: a
convolution (XLA:CPU's YNNPACK fusion or Eigen's spatial convolution) and TopK (its
`__xla_cpu_runtime_TopKF32`, a partial sort per row).  Without them these kernels ran in
the reference evaluator (NumPy, called back from C), which measured the evaluator and not
the plan.  CUDA keeps them library calls (cuDNN, XLA:GPU's TopK kernel): these nests are the
CPU's only (kernel.Group.cpu_only).

Both read their operands straight from the kernel's parameter buffers (the operands must be
parameters of the kernel's computation: XLA:CPU's convolution fusion and a wrapped custom
call are), with the layouts' strides as constants, so every layout works and the common
ones (features minor) vectorize.
"""

from __future__ import annotations

from .. import attributes as attrs
from .. import ir
from .emit import Emitter, Frame, ctype
from .nests import COLUMN_OUTPUTS, start_group

#: custom-call targets run as TopK (XLA's `TopK` custom call: the k first elements of each row
#: in the comparator's order, stable, with their s32 indices)
TOPK_TARGETS = frozenset({"TopK"})


def strides(shape: ir.Shape) -> list[int]:
    """Elements between neighbours along each logical dimension, in the physical layout."""
    out = [0] * shape.rank
    n = 1
    for d in shape.minor_to_major:
        out[d] = n
        n *= shape.dims[d]
    return out


def _parameter(comp: ir.Computation, name: str) -> ir.Instruction | None:
    instr = comp[name]
    return instr if instr.opcode == "parameter" and instr.shape.is_array else None


# ------------------------------------------------------------------------------------------
# Convolution
# ------------------------------------------------------------------------------------------


def conv_supported(conv: ir.Instruction, comp: ir.Computation) -> bool:
    """Convolutions the CPU generates: f32 or f64 throughout, no feature or batch groups,
    operands that are the kernel's parameters, at most COLUMN_OUTPUTS output features (one
    local row of sums)."""
    from .arrays import parse_dim_labels

    if conv.opcode != "convolution" or not conv.shape.is_array or len(conv.operands) != 2:
        return False
    et = conv.shape.element_type
    operands = [_parameter(comp, o) for o in conv.operands]
    if et not in ("f32", "f64") or any(p is None or p.shape.element_type != et for p in operands):
        return False
    if attrs.integer(conv, "feature_group_count", 1) != 1 or attrs.integer(conv, "batch_group_count", 1) != 1:
        return False
    try:
        (_, _, xs), (_, _, _), (_, of, _) = parse_dim_labels(conv.attr("dim_labels") or "")
    except Exception:  # noqa: BLE001 - labels the evaluator reads but we do not: stay a library call
        return False
    window = attrs.window(conv)
    return len(window) == len(xs) and conv.shape.dims[of] <= COLUMN_OUTPUTS


#: Output positions along the last spatial dimension one pass of a convolution computes
#: together (each weight row loaded once for all of them), as many as keep the local sums
#: within 32 KB: 8 with 32 output features, 1 past 1024.
def conv_block(features: int) -> int:
    return max(1, min(8, 1024 // max(features, 1)))


def conv_on_cpu(em: Emitter, frame: Frame, conv: ir.Instruction, out_shape: ir.Shape, out: str) -> list[str]:
    """A direct convolution: for each output row (batch, spatial but the last), a block of
    conv_block positions along the last spatial dimension keeps local sums over the output
    features; each window position and input feature add x[p] * w[.., i, :] into each
    position's sums (the feature loop innermost: contiguous when the kernel's output features
    are minor, as in HWIO, so vectorized, each weight row read once for the block), then the
    block is stored.  A window position in the padding or between base-dilated elements reads
    a zero, as the reference evaluator pads (0 x w, so a NaN or infinite weight propagates the
    same).  Sums are fused multiply-adds in the output type, window positions then input
    features in order (XLA's libraries sum in their own order: the check's tolerance covers
    both)."""
    from .arrays import parse_dim_labels

    start_group(em)
    comp = frame.comp
    x_param, w_param = (comp[o] for o in conv.operands)
    xs_, ws_ = x_param.shape, w_param.shape
    (xb, xf, xsp), (wo, wi, wsp), (ob, of, osp) = parse_dim_labels(conv.attr("dim_labels") or "")
    window = attrs.window(conv)
    et = out_shape.element_type
    t = ctype(et)
    fma = "__builtin_fmaf" if et == "f32" else "__builtin_fma"
    x = em.input_arg(("param", x_param.parameter_number), et)
    w = em.input_arg(("param", w_param.parameter_number), et)
    xst, wst, ost = strides(xs_), strides(ws_), strides(out_shape)
    features = out_shape.dims[of]
    channels = xs_.dims[xf]
    nsp = len(window)
    block = conv_block(features) if nsp else 1
    last = out_shape.dims[osp[-1]] if nsp else 1
    acc = em.fresh("conv")
    lines = [f"static const {t} hf_zero = 0;"]
    depth = 0

    def add(text: str) -> None:
        lines.append("  " * depth + text)

    def open_(header: str) -> None:
        nonlocal depth
        add(header + " {")
        depth += 1

    def close(n: int = 1) -> None:
        nonlocal depth
        for _ in range(n):
            depth -= 1
            add("}")

    def position(d: int, y: str) -> tuple[str, str, str]:
        """(the index in the padded, dilated input; whether it is a real element; the
        element's offset) along spatial dimension d for output position y and tap k{d}."""
        win = window[d]
        s = f"({y} * {win.stride} + k{d} * {win.rhs_dilation} - {win.pad_low})"
        extent = (xs_.dims[xsp[d]] - 1) * win.lhs_dilation + 1
        ok = f"{s} >= 0 && {s} < {extent}" + (f" && {s} % {win.lhs_dilation} == 0" if win.lhs_dilation > 1 else "")
        return s, ok, f"({s} / {win.lhs_dilation}) * {xst[xsp[d]]}"

    open_(f"for (i64 n = 0; n < {out_shape.dims[ob]}; ++n)")
    for d in range(nsp - 1):
        open_(f"for (i64 y{d} = 0; y{d} < {out_shape.dims[osp[d]]}; ++y{d})")
    ylast = f"y{nsp - 1}" if nsp else "yl"
    open_(f"for (i64 {ylast} = 0; {ylast} < {last}; {ylast} += {block})")
    add(f"{t} {acc}[{block}][{features}];")
    add(f"for (i64 p = 0; p < {block}; ++p) for (i64 o = 0; o < {features}; ++o) {acc}[p][o] = 0;")
    oks, offsets = [], [f"n * {xst[xb]}"]
    for d, win in enumerate(window):
        open_(f"for (i64 k{d} = 0; k{d} < {win.size}; ++k{d})")
        if d < nsp - 1:
            _, ok, off = position(d, f"y{d}")
            oks.append(ok)
            offsets.append(off)
    add(f"const {t}* xp[{block}]; i64 cs[{block}];")
    open_(f"for (i64 p = 0; p < {block}; ++p)")
    conds = [f"{ylast} + p < {last}"] + oks
    offs = list(offsets)
    if nsp:
        _, ok, off = position(nsp - 1, f"({ylast} + p)")
        conds.append(ok)
        offs.append(off)
    add(f"const int ok = {' && '.join(f'({c})' for c in conds)};")
    add(f"xp[p] = ok ? {x} + {' + '.join(offs)} : &hf_zero;")
    add(f"cs[p] = ok ? {xst[xf]} : 0;")
    close()
    taps = [f"({win.size - 1} - k{d})" if win.reversal else f"k{d}" for d, win in enumerate(window)]
    add(f"const {t}* wp = {w} + {' + '.join(f'{k} * {wst[wsp[d]]}' for d, k in enumerate(taps)) or '0'};")
    open_(f"for (i64 c = 0; c < {channels}; ++c)")
    add(f"const {t}* wr = wp + c * {wst[wi]};")
    add(f"{t} xv[{block}];")
    add(f"for (i64 p = 0; p < {block}; ++p) xv[p] = xp[p][c * cs[p]];")
    open_(f"for (i64 o = 0; o < {features}; ++o)")
    add(f"const {t} wv = wr[o * {wst[wo]}];")
    add(f"for (i64 p = 0; p < {block}; ++p) {acc}[p][o] = {fma}(xv[p], wv, {acc}[p][o]);")
    close(2 + nsp)
    o_offset = " + ".join([f"n * {ost[ob]}"] + [f"y{d} * {ost[osp[d]]}" for d in range(nsp - 1)] +
                          ([f"({ylast} + p) * {ost[osp[-1]]}"] if nsp else []))
    open_(f"for (i64 p = 0; p < {block} && {ylast} + p < {last}; ++p)")
    add(f"for (i64 o = 0; o < {features}; ++o) {out}[{o_offset} + o * {ost[of]}] = {acc}[p][o];")
    close(3 + max(nsp - 1, 0))  # the store, the block, the outer spatial and the batch loops
    return lines


# ------------------------------------------------------------------------------------------
# TopK
# ------------------------------------------------------------------------------------------


def topk_supported(instr: ir.Instruction, comp: ir.Computation) -> bool:
    """XLA's TopK custom call with a comparator, on an array operand that is a parameter:
    outputs (values, s32 indices) along the last dimension."""
    if instr.opcode != "custom-call" or (instr.custom_call_target or "") not in TOPK_TARGETS:
        return False
    if len(instr.operands) != 1 or len(instr.called) != 1 or not instr.shape.is_tuple:
        return False
    x = _parameter(comp, instr.operands[0])
    leaves = instr.shape.tuple_shapes
    if x is None or x.shape.rank == 0 or len(leaves) != 2:
        return False
    values, indices = leaves
    try:
        ctype(x.shape.element_type)
    except Exception:  # noqa: BLE001 - an element type the generator lacks
        return False
    return (values.element_type == x.shape.element_type and indices.element_type == "s32"
            and values.dims == indices.dims and values.dims[:-1] == x.shape.dims[:-1])


def topk_comparator(em: Emitter, instr: ir.Instruction, fn: str, et: str) -> str:
    """The TopK comparator as a C function (a, b, index of a, index of b) -> pred; a
    comparator of two parameters sees the values only."""
    comp = em.module[instr.called[0].lstrip("%")]
    sub = Emitter(em.module, em.kernel)
    sub.depth = 1
    frame = sub.call_frame(comp.name, [["a"], ["b"], ["ia"], ["ib"]])
    result = sub.value(frame, comp.root_name, [])[0]
    t = ctype(et)
    return "\n".join([f"HF_FN pred {fn}({t} a, {t} b, i32 ia, i32 ib) {{"] + sub.lines +
                     [f"  return {result};", "}"])


def topk_on_cpu(em: Emitter, frame: Frame, instr: ir.Instruction, outs: list[str], fn: str) -> list[str]:
    """Each row scanned once, keeping its k first elements in order in a local array: an
    element enters only when the comparator puts it before the k-th kept one, and moves up
    past the kept elements it comes before (a later index never passes an equal one: the
    order of a stable sort, which the reference evaluator and XLA's std::partial_sort with
    its index tie-break both give).  XLA's runtime sorts the row's whole index vector."""
    start_group(em)
    comp = frame.comp
    x_param = comp[instr.operands[0]]
    xs_ = x_param.shape
    values, indices = instr.shape.tuple_shapes
    et = xs_.element_type
    t = ctype(et)
    x = em.input_arg(("param", x_param.parameter_number), et)
    k, n = values.dims[-1], xs_.dims[-1]
    xst, vst, ist = strides(xs_), strides(values), strides(indices)
    rows = xs_.dims[:-1]
    lines = [f"{t} kv[{k}]; i32 ki[{k}];"]
    depth = 0

    def add(text: str) -> None:
        lines.append("  " * depth + text)

    for d, size in enumerate(rows):
        add(f"for (i64 r{d} = 0; r{d} < {size}; ++r{d}) {{")
        depth += 1

    def offset(st: list[int]) -> str:
        return " + ".join([f"r{d} * {st[d]}" for d in range(len(rows))] or ["0"])

    add(f"const {t}* row = {x} + {offset(xst)};")
    add("i64 kept = 0;")
    add(f"for (i64 j = 0; j < {n}; ++j) {{")
    add(f"  const {t} v = row[j * {xst[-1]}];")
    add(f"  if (kept == {k} && !{fn}(v, kv[{k - 1}], (i32)j, ki[{k - 1}])) continue;")
    add(f"  i64 p = kept < {k} ? kept++ : {k - 1};")
    add(f"  while (p > 0 && {fn}(v, kv[p - 1], (i32)j, ki[p - 1])) {{ kv[p] = kv[p - 1]; ki[p] = ki[p - 1]; --p; }}")
    add("  kv[p] = v; ki[p] = (i32)j;")
    add("}")
    add(f"for (i64 q = 0; q < {k}; ++q) {{")
    add(f"  {outs[0]}[{offset(vst)} + q * {vst[-1]}] = kv[q];")
    add(f"  {outs[1]}[{offset(ist)} + q * {ist[-1]}] = ki[q];")
    add("}")
    for _ in rows:
        depth -= 1
        add("}")
    return lines


# ------------------------------------------------------------------------------------------
# Dot, blocked
# ------------------------------------------------------------------------------------------

#: A blocked dot's tile: DOT_ROWS lhs rows by DOT_COLUMNS[et] output columns of sums kept in
#: registers (16 AVX-512 registers of f32), each packed rhs row read once for all rows.
DOT_ROWS = 8
DOT_COLUMNS = {"f32": 32, "f64": 16}
#: The packed rhs panel (contracting size x DOT_COLUMNS) lives on the stack: at most this many
#: elements (128 KB of f32).
DOT_PANEL = 32768


def _dot_dims(dot: ir.Instruction, comp: ir.Computation):
    from .interp import dot_dims

    ls, rs = comp[dot.operands[0]].shape, comp[dot.operands[1]].shape
    lc, rc, lb, rb = dot_dims(dot)
    lfree = [d for d in range(ls.rank) if d not in lc and d not in lb]
    rfree = [d for d in range(rs.rank) if d not in rc and d not in rb]
    return ls, rs, lc, rc, lb, rb, lfree, rfree


def blocked_dot_supported(dot: ir.Instruction, comp: ir.Computation) -> bool:
    """Dots the CPU runs blocked: f32 or f64 throughout, operands that are the kernel's
    parameters, one contracting dimension and at most one free dimension per side (any batch
    dimensions), a contracting size whose panel fits DOT_PANEL."""
    if dot.opcode != "dot" or not dot.shape.is_array or dot.shape.element_type not in DOT_COLUMNS:
        return False
    et = dot.shape.element_type
    if any(_parameter(comp, o) is None or comp[o].shape.element_type != et for o in dot.operands[:2]):
        return False
    ls, rs, lc, rc, lb, rb, lfree, rfree = _dot_dims(dot, comp)
    return (len(lc) == 1 and len(rc) == 1 and len(lfree) <= 1 and len(rfree) <= 1
            and ls.dims[lc[0]] * DOT_COLUMNS[et] <= DOT_PANEL)


def blocked_dot_on_cpu(em: Emitter, frame: Frame, dot: ir.Instruction, out_shape: ir.Shape, out: str,
                       kernel: str, functions: list[str]) -> list[str]:
    """A dot as XLA:CPU's libraries (YNNPACK, Eigen) run one, blocked for registers: for each
    batch and each panel of DOT_COLUMNS output columns, the rhs panel is packed contiguous
    (contracting index major), then each tile of DOT_ROWS lhs rows keeps its DOT_ROWS x
    DOT_COLUMNS sums in registers while the contracting index runs, each step a broadcast
    lhs element times a packed row (vectorized); row and column remainders are tiles of
    their own constant sizes.  Each output sums its products in order with fused
    multiply-adds in the output type (the check's tolerance covers the rounding).  The tiles
    are functions `kernel`_tile_RxC added to `functions`."""
    start_group(em)
    comp = frame.comp
    ls, rs, lc, rc, lb, rb, lfree, rfree = _dot_dims(dot, comp)
    et = out_shape.element_type
    t = ctype(et)
    fma = "__builtin_fmaf" if et == "f32" else "__builtin_fma"
    lhs = em.input_arg(("param", comp[dot.operands[0]].parameter_number), et)
    rhs = em.input_arg(("param", comp[dot.operands[1]].parameter_number), et)
    lst, rst, ost = strides(ls), strides(rs), strides(out_shape)
    k_size = ls.dims[lc[0]]
    rows = ls.dims[lfree[0]] if lfree else 1
    cols = rs.dims[rfree[0]] if rfree else 1
    lsm = lst[lfree[0]] if lfree else 0
    rsn = rst[rfree[0]] if rfree else 0
    nb = len(lb)
    osm = ost[nb] if lfree else 0
    osn = ost[nb + len(lfree)] if rfree else 0
    width = DOT_COLUMNS[et]
    tile_fn = f"{kernel}_tile"

    def tile(p: int, n: int) -> str:
        name = f"{tile_fn}_{p}x{n}"
        functions.append("\n".join([
            f"HF_FN void {name}(const {t}* __restrict__ l, const {t}* __restrict__ panel, {t}* __restrict__ o) {{",
            f"  {t} acc[{p}][{n}];",
            f"  for (i64 r = 0; r < {p}; ++r) for (i64 c = 0; c < {n}; ++c) acc[r][c] = 0;",
            f"  for (i64 k = 0; k < {k_size}; ++k) {{",
            f"    {t} x[{p}];",
            f"    for (i64 r = 0; r < {p}; ++r) x[r] = l[r * {lsm} + k * {lst[lc[0]]}];",
            f"    const {t}* row = panel + k * {n};",
            f"    for (i64 c = 0; c < {n}; ++c) {{",
            f"      const {t} y = row[c];",
            f"      for (i64 r = 0; r < {p}; ++r) acc[r][c] = {fma}(x[r], y, acc[r][c]);",
            "    }",
            "  }",
            f"  for (i64 r = 0; r < {p}; ++r) for (i64 c = 0; c < {n}; ++c) o[r * {osm} + c * {osn}] = acc[r][c];",
            "}"]))
        return name

    lines = [f"{t} panel[{k_size * width}];"]
    depth = 0

    def add(text: str) -> None:
        lines.append("  " * depth + text)

    for d, (a, b) in enumerate(zip(lb, rb)):
        add(f"for (i64 b{d} = 0; b{d} < {ls.dims[a]}; ++b{d}) {{")
        depth += 1
    lbase = " + ".join([f"b{d} * {lst[a]}" for d, a in enumerate(lb)] or ["0"])
    rbase = " + ".join([f"b{d} * {rst[b]}" for d, b in enumerate(rb)] or ["0"])
    obase = " + ".join([f"b{d} * {ost[d]}" for d in range(nb)] or ["0"])
    add(f"const {t}* L = {lhs} + {lbase}; const {t}* R = {rhs} + {rbase}; {t}* O = {out} + {obase};")
    full_cols, col_rest = divmod(cols, width)
    full_rows, row_rest = divmod(rows, DOT_ROWS)
    for n, start, count in ((width, "0", full_cols), (col_rest, f"{full_cols * width}", 1 if col_rest else 0)):
        if not count:
            continue
        add(f"for (i64 n0 = {start}; n0 < {start} + {count * n}; n0 += {n}) {{")
        add(f"  for (i64 k = 0; k < {k_size}; ++k) for (i64 c = 0; c < {n}; ++c) "
            f"panel[k * {n} + c] = R[k * {rst[rc[0]]} + (n0 + c) * {rsn}];")
        if full_rows:
            add(f"  for (i64 m0 = 0; m0 < {full_rows * DOT_ROWS}; m0 += {DOT_ROWS}) "
                f"{tile(DOT_ROWS, n)}(L + m0 * {lsm}, panel, O + m0 * {osm} + n0 * {osn});")
        if row_rest:
            m0 = full_rows * DOT_ROWS
            add(f"  {tile(row_rest, n)}(L + {m0 * lsm}, panel, O + {m0 * osm} + n0 * {osn});")
        add("}")
    for _ in lb:
        depth -= 1
        add("}")
    return lines

"""Graphviz (DOT) drawings of a module, like the paper's Fig. 3: operations as nodes, each
kernel a cluster, every edge between kernels labelled with the rule that keeps them apart and
coloured by its kind of reason, with the full reason and the source line as tooltip.

Computations that run (entry, while bodies and conditions, branches) are outer clusters.
Buffers — parameters, tuples, constants, while/conditional/call — are small plain nodes;
get-tuple-element and bitcast are looked through.  Above `threshold` operations, kernels
collapse to one node each unless `computation` or `focus` narrows the view.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .. import attributes, ir
from ..kernels import executed_computations, is_kernel
from ..terminal import printable

#: Edge colours by rule tag (first match); the table renderer uses the same families.
TAG_COLORS = (
    ("loop", "#8e44ad"), ("tuple", "#2e6fd8"), ("library", "#2a9d3f"), ("custom-call", "#2a9d3f"),
    ("copy", "#c77c02"), ("control-flow", "#138d90"), ("concat", "#1f4fbf"), ("duplication", "#1f4fbf"),
    ("expensive", "#d35400"), ("reduction", "#b03a8e"), ("budget", "#b7950b"),
)
UNKNOWN_COLOR = "#d62728"
DEFAULT_COLOR = "#555555"
PLAIN_EDGE = "#9a9a9a"
THRESHOLD = 300
#: A collapsed drawing of more kernels than this shows only the kernels of the costliest
#: groups of boundaries (DrawOptions.top), unless asked for everything.
MAX_KERNELS = 40


def rule_color(rule: str, tags) -> str:
    if rule == "unknown":
        return UNKNOWN_COLOR
    for tag, color in TAG_COLORS:
        if tag in tags:
            return color
    return DEFAULT_COLOR


@dataclass(frozen=True)
class DrawOptions:
    """What to draw: one `computation`, or the neighbourhood of `focus` (an instruction or
    kernel name) within `radius` edges; `collapse` kernels to single nodes (None: only when
    the drawing would have more than `threshold` operations and nothing narrows it)."""

    computation: str | None = None
    focus: str | None = None
    radius: int = 2
    collapse: bool | None = None
    threshold: int = THRESHOLD
    title: str | None = None
    #: Above `max_kernels` kernels (collapsed, nothing narrowing the view): draw only the
    #: kernels at the ends of the boundaries of the `top` costliest groups; None draws every
    #: kernel.
    top: int | None = 10
    max_kernels: int = MAX_KERNELS
    #: In that view, each group's costliest `per_group` boundaries.
    per_group: int = 3


@dataclass
class _Node:
    id: str
    label: str
    comp: str
    kernel: str | None  # the kernel cluster it belongs to (None: a buffer of the computation)
    shape: str = "box"
    tooltip: str = ""
    fill: str = "white"


@dataclass
class _Edge:
    src: str
    dst: str
    label: str = ""
    color: str = PLAIN_EDGE
    tooltip: str = ""
    dashed: bool = False
    constraint: bool = True
    bold: bool = False
    count: int = 1


@dataclass
class _Drawing:
    nodes: dict[str, _Node] = field(default_factory=dict)
    edges: list[_Edge] = field(default_factory=list)
    kernel_labels: dict[tuple[str, str], str] = field(default_factory=dict)
    comp_labels: dict[str, str] = field(default_factory=dict)
    comp_order: list[str] = field(default_factory=list)


class _Builder:
    def __init__(self, module: ir.Module, ex, collapse: bool, only: str | None,
                 chosen: dict[int, int] | None = None):
        self.m = module
        self.ex = ex
        self.collapse = collapse
        self.d = _Drawing()
        self.ids: dict[tuple, str] = {}
        self.only = only
        #: Boundary index → the rank of its group, when only some groups are drawn.
        self.chosen = chosen
        self.costs = {(k.computation, k.name): k for k in ex.kernels} if ex is not None else {}
        self.loops = {lp.body: lp for lp in ex.loops} if ex is not None else {}
        self.conds = {lp.condition: lp for lp in ex.loops} if ex is not None else {}
        self.kernel_info = {(k.computation, k.name): k for k in ex.kernels} if ex is not None else {}

    # -- ids ---------------------------------------------------------------------------------
    def _id(self, key: tuple) -> str:
        if key not in self.ids:
            self.ids[key] = f"n{len(self.ids)}"
        return self.ids[key]

    # -- building ----------------------------------------------------------------------------
    def build(self) -> _Drawing:
        comps = [c for c in executed_computations(self.m) if self.only is None or c.name == self.only]
        for comp in comps:
            self.d.comp_order.append(comp.name)
            self.d.comp_labels[comp.name] = self._comp_label(comp)
            for instr in comp.post_order:
                if is_kernel(instr):
                    self._kernel(comp, instr)
            for instr in comp.post_order:
                if is_kernel(instr):
                    self._kernel_inputs(comp, instr)
                elif instr.opcode in ("tuple", "while", "conditional", "call"):
                    self._buffer_inputs(comp, instr)
        if self.ex is not None:
            self._boundaries()
        return self.d

    def _comp_label(self, comp: ir.Computation) -> str:
        role = self.m.role(comp.name).replace("_", " ")
        if comp.name in self.loops:
            lp = self.loops[comp.name]
            trip = f", {lp.trip_count} iterations" if lp.trip_count is not None else ""
            return f"{comp.name} ({role} of {lp.name}{trip})"
        if comp.name in self.conds:
            return f"{comp.name} (condition of {self.conds[comp.name].name})"
        return f"{comp.name} ({role})"

    def _kernel(self, comp: ir.Computation, instr: ir.Instruction) -> None:
        info = self.kernel_info.get((comp.name, instr.name))
        kind = info.label if info is not None else (instr.fusion_kind or instr.opcode)
        body = self.m.by_name.get(instr.fused_computation or "") if instr.opcode == "fusion" else None
        ops = [i for i in body.post_order if i.opcode != "parameter"] if body is not None else [instr]
        self.d.kernel_labels[(comp.name, instr.name)] = f"{instr.name} · {kind}" + \
            (f" · {len(ops)} ops" if body is not None else "")
        if self.collapse or body is None:
            label = instr.name if body is None else f"{instr.name}\n{kind}, {len(ops)} ops"
            priced = self.costs.get((comp.name, instr.name))
            if priced is not None and priced.modelled_us is not None and priced.launches:
                label += f"\n{priced.modelled_us * priced.launches:.3g} µs/run"
            self.d.nodes[self._id((comp.name, instr.name, instr.name))] = _Node(
                self._id((comp.name, instr.name, instr.name)), label, comp.name, instr.name,
                tooltip=self._tooltip(instr), fill="#fff7e6" if info is not None and info.library else "white")
            return
        for op in ops:
            nid = self._id((comp.name, instr.name, op.name))
            self.d.nodes[nid] = _Node(nid, op.name, comp.name, instr.name, tooltip=self._tooltip(op),
                                      shape="ellipse" if op.opcode == "constant" else "box")
            for operand in op.operands:
                src = body[operand]
                if src.opcode == "parameter":
                    continue  # drawn as an input of the kernel (below)
                self.d.edges.append(_Edge(self._id((comp.name, instr.name, operand)), nid))

    def _readers(self, comp: ir.Computation, kernel: ir.Instruction, index: int) -> list[str]:
        """Node ids inside a kernel that read its operand `index`."""
        if self.collapse or kernel.opcode != "fusion":
            return [self._id((comp.name, kernel.name, kernel.name))]
        body = self.m.by_name.get(kernel.fused_computation or "")
        if body is None or index >= len(body.parameters):
            return [self._id((comp.name, kernel.name, kernel.name))]
        param = body.parameters[index].name
        out = []
        for user in body.users.get(param, ()):
            out.append(self._id((comp.name, kernel.name, user)))
        return out or [self._id((comp.name, kernel.name, body.root_name))]

    def _kernel_inputs(self, comp: ir.Computation, instr: ir.Instruction) -> None:
        for index, operand in enumerate(instr.operands):
            origin = self._origin(comp, operand)
            if origin is None:
                continue
            for reader in self._readers(comp, instr, index):
                self.d.edges.append(_Edge(origin, reader))

    def _buffer_inputs(self, comp: ir.Computation, instr: ir.Instruction) -> None:
        nid = self._buffer(comp, instr)
        for operand in dict.fromkeys(instr.operands):
            origin = self._origin(comp, operand)
            if origin is not None:
                self.d.edges.append(_Edge(origin, nid))

    def _origin(self, comp: ir.Computation, name: str) -> str | None:
        """The drawn node a value comes from, looking through get-tuple-element and bitcast;
        None when a kernel produced it and the explanation draws that edge as a boundary."""
        instr = comp[name]
        path: list[int] = []
        for _ in range(64):
            if instr.opcode == "get-tuple-element":
                path.insert(0, attributes.integer(instr, "index", 0))
                instr = comp[instr.operands[0]]
            elif instr.opcode == "bitcast" and instr.operands:
                instr = comp[instr.operands[0]]
            elif instr.opcode == "tuple" and path:
                instr = comp[instr.operands[path.pop(0)]]
            else:
                break
        if is_kernel(instr):
            if self.ex is not None:
                return None
            return self._output_node(comp, instr, tuple(path))
        return self._buffer(comp, instr)

    def _output_node(self, comp: ir.Computation, kernel: ir.Instruction, path: tuple[int, ...]) -> str:
        if self.collapse or kernel.opcode != "fusion":
            return self._id((comp.name, kernel.name, kernel.name))
        body = self.m.by_name.get(kernel.fused_computation or "")
        if body is None:
            return self._id((comp.name, kernel.name, kernel.name))
        root = body.root
        for i in path:
            if root.opcode == "tuple" and i < len(root.operands):
                root = body[root.operands[i]]
        return self._id((comp.name, kernel.name, root.name))

    def _buffer(self, comp: ir.Computation, instr: ir.Instruction) -> str:
        nid = self._id((comp.name, None, instr.name))
        if nid not in self.d.nodes:
            shape = {"parameter": "invhouse", "tuple": "box3d", "constant": "ellipse", "while": "hexagon",
                     "conditional": "diamond", "call": "component"}.get(instr.opcode, "ellipse")
            label = instr.name if instr.opcode != "parameter" else f"{instr.name}\n{instr.shape.to_text(False)}"
            self.d.nodes[nid] = _Node(nid, label, comp.name, None, shape=shape, tooltip=self._tooltip(instr),
                                      fill="#f4f4f4")
        return nid

    def _boundaries(self) -> None:
        seen: dict[tuple, _Edge] = {}
        for number, b in enumerate(self.ex.boundaries, 1):
            if self.only is not None and self.only not in (b.producer_computation, b.consumer_computation):
                continue
            if self.chosen is not None and number - 1 not in self.chosen:
                continue
            ends = self._crossing_ends(b) if b.crossing else None
            if ends is not None:
                src, dst = ends
            else:
                src = self._boundary_end(b.producer_computation, b.producer_kernel, b.producer)
                if b.consumer_kernel is not None:
                    dst = self._boundary_end(b.consumer_computation, b.consumer_kernel, b.consumer)
                else:
                    comp = self.m.by_name.get(b.consumer_computation)
                    dst = self._buffer(comp, comp[b.consumer]) if comp is not None and b.consumer in comp else None
            if src is None or dst is None:
                continue
            color = rule_color(b.rule, b.tags)
            where = f"\n{b.source.short()}" + (f" ({b.source.op_name})" if b.source.op_name else "") \
                if b.source is not None else ""
            tip = f"#{number} {b.rule}: {b.reason}{where}"
            if b.xla_reason:
                tip += f"\nXLA: {b.xla_reason}"
            if b.hint:
                tip += f"\nhint: {b.hint}"
            name = b.rule if self.chosen is None else f"#{self.chosen[number - 1]} {b.rule}"
            key = (src, dst, name)
            if key in seen:  # loop crossings and collapsed kernels: one edge per pair and rule
                edge = seen[key]
                edge.count += 1
                edge.label = f"{name} ×{edge.count}"
                if edge.tooltip.count("\n#") < 12:
                    edge.tooltip += "\n" + tip
                continue
            edge = _Edge(src, dst, label=name, color=color, tooltip=tip, bold=True,
                         dashed=bool(b.crossing), constraint="loop-carried" not in b.crossing)
            seen[key] = edge
            self.d.edges.append(edge)

    def _crossing_ends(self, b) -> tuple[str | None, str | None] | None:
        """A value crossing a loop is drawn between the loop's own nodes — the body's root
        (state out), the computation's parameter (state in), the while instruction — once per
        loop and rule, instead of one long edge per reader."""
        loops = self.ex.loops
        kind = next((k for k in b.crossing if k.startswith("loop-")), None)
        if kind is None:
            return None
        consumer_comp = self.m.by_name.get(b.consumer_computation)
        producer_comp = self.m.by_name.get(b.producer_computation)
        if consumer_comp is None or producer_comp is None:
            return None
        if kind == "loop-carried":
            loop = next((lp for lp in loops if b.consumer_computation in (lp.body, lp.condition)), None)
            body = self.m.by_name.get(loop.body) if loop is not None else None
            if body is None or not consumer_comp.parameters:
                return None
            if self.only is not None and body.name != self.only:
                return None
            return self._root_node(body), self._buffer(consumer_comp, consumer_comp.parameters[0])
        if kind == "loop-input":
            loop = next((lp for lp in loops if b.consumer_computation in (lp.body, lp.condition)), None)
            outer = self.m.by_name.get(loop.computation) if loop is not None else None
            if outer is None or not consumer_comp.parameters or self.only is not None:
                return None
            return self._buffer(outer, outer[loop.name]), self._buffer(consumer_comp, consumer_comp.parameters[0])
        loop = next((lp for lp in loops if b.producer_computation == lp.body), None)
        outer = self.m.by_name.get(loop.computation) if loop is not None else None
        if outer is None or self.only is not None:
            return None
        return self._root_node(producer_comp), self._buffer(outer, outer[loop.name])

    def _root_node(self, comp: ir.Computation) -> str:
        root = comp.root
        if is_kernel(root):
            return self._output_node(comp, root, ())
        return self._buffer(comp, root)

    def _boundary_end(self, comp: str, kernel: str, instr: str) -> str | None:
        if self.only is not None and comp != self.only:
            return None
        if self.collapse:
            key = (comp, kernel, kernel)
        else:
            key = (comp, kernel, instr)
            if key not in self.ids:
                key = (comp, kernel, kernel)
        nid = self.ids.get(key)
        return nid if nid in self.d.nodes else None

    def _tooltip(self, instr: ir.Instruction) -> str:
        loc = attributes.source_location(self.m, instr)
        where = ""
        if loc is not None and (loc.file or loc.line):
            where = f"\n{loc.file}:{loc.line}"
        return f"{instr.name} = {instr.shape.to_text(False)} {instr.opcode}{where}"


def _focus(d: _Drawing, module: ir.Module, names: set[str], radius: int, ids: dict) -> _Drawing:
    """Keep the nodes within `radius` edges (either direction) of the focused ones."""
    start = {nid for key, nid in ids.items() if nid in d.nodes and (key[2] in names or key[1] in names)}
    if not start:
        return d
    adjacent: dict[str, set[str]] = {}
    for e in d.edges:
        adjacent.setdefault(e.src, set()).add(e.dst)
        adjacent.setdefault(e.dst, set()).add(e.src)
    keep = set(start)
    frontier = deque((n, 0) for n in start)
    while frontier:
        node, dist = frontier.popleft()
        if dist >= radius:
            continue
        for other in adjacent.get(node, ()):
            if other not in keep:
                keep.add(other)
                frontier.append((other, dist + 1))
    nodes = {k: v for k, v in d.nodes.items() if k in keep}
    for nid in start:
        nodes[nid].fill = "#ffe9a8"
    edges = [e for e in d.edges if e.src in keep and e.dst in keep]
    return _Drawing(nodes, edges, d.kernel_labels, d.comp_labels, d.comp_order)


def op_count(module: ir.Module) -> int:
    """Operations an expanded drawing would show (every op of every executed kernel)."""
    n = 0
    for comp in executed_computations(module):
        for instr in comp.instructions:
            if instr.opcode == "fusion" and instr.fused_computation in module.by_name:
                n += sum(1 for i in module[instr.fused_computation].instructions if i.opcode != "parameter")
            else:
                n += 1
    return n


def to_dot(module: ir.Module, ex=None, options: DrawOptions = DrawOptions()) -> str:
    """DOT source for `module` (the fused module), with `ex` (its Explanation) labelling the
    boundaries; without `ex`, the plain graph (e.g. before fusion)."""
    narrowed = options.computation is not None or options.focus is not None
    collapse = options.collapse
    if collapse is None:
        collapse = not narrowed and op_count(module) > options.threshold
    if options.computation is not None and options.computation not in module.by_name:
        from ..errors import InputError

        names = ", ".join(c.name for c in executed_computations(module))
        raise InputError(f"no computation {options.computation!r} runs in {module.name}; computations: {names}")
    if collapse and not narrowed and ex is not None and ex.groups and options.top is not None \
            and len(ex.kernels) > options.max_kernels:
        return top_groups_dot(module, ex, options)
    chosen = None
    builder = _Builder(module, ex, collapse, options.computation, chosen)
    drawing = builder.build()
    if options.focus is not None:
        if not any(options.focus in (key[1], key[2]) for key in builder.ids):
            from ..errors import InputError

            raise InputError(f"no instruction or kernel {options.focus!r} in the drawn computations of {module.name}")
        drawing = _focus(drawing, module, {options.focus}, max(options.radius, 0), builder.ids)
    title = options.title or module.name
    if collapse:
        title += " (kernels collapsed: use --computation or --focus INSTR to see operations)"
    return _emit(drawing, title)


def top_groups_dot(module: ir.Module, ex, options: DrawOptions) -> str:
    """A large module's drawing: the costliest groups of boundaries (as `explain` ranks them),
    one box each, top to bottom, holding its costliest boundaries as kernel → kernel (or
    buffer) edges labelled with the bytes and modelled time that cross.  A kernel in several
    groups appears in each."""
    groups = ex.groups[:options.top]
    kernels = {(k.computation, k.name): k for k in ex.kernels}
    total = ex.cost.total_us if ex.cost is not None else None
    lines = [
        "digraph hlofuse {",
        f"  graph [label={_q(_top_title(module, ex, options))}, labelloc=t, fontname=\"Helvetica\", fontsize=12, "
        "rankdir=LR, nodesep=0.2, ranksep=0.5];",
        '  node [shape=box, style="rounded,filled,dashed", fillcolor="#eef3fb", color="#4a6fa5", '
        'fontname="Helvetica", fontsize=9, height=0.3, margin="0.08,0.03"];',
        f'  edge [fontname="Helvetica", fontsize=8, color="{PLAIN_EDGE}", arrowsize=0.6];',
    ]
    # Graphviz stacks the components of a left-to-right layout bottom-up: the last is drawn on top
    for rank, g in reversed(list(enumerate(groups, 1))):
        color = rule_color(g.rule, g.tags)
        share = f", {g.share:.1%}" if g.share is not None else ""
        us = f"{g.modelled_us:.3g} µs/run{share}" if g.modelled_us is not None else ""
        head = f"#{rank} {g.rule}  {g.source_words()}\n{g.count} boundaries, {us}"
        if g.fix is not None:
            head += f"\nrelaxing {g.rule} (predicted): {g.fix.words(total)}"
        lines.append(f"  subgraph cluster_{rank} {{")
        lines.append(f'    label={_q(head)}; labeljust=l; style="rounded"; color="{color}"; fontsize=10; '
                     f'fontcolor="{color}";')
        costliest = sorted(g.boundaries, key=lambda i: -(ex.boundaries[i].modelled_us or 0.0))[:options.per_group]
        seen: set[str] = set()
        for i in costliest:
            b = ex.boundaries[i]
            src = _kernel_node(lines, seen, rank, b.producer_computation, b.producer_kernel, kernels, module)
            if b.consumer_kernel is not None:
                dst = _kernel_node(lines, seen, rank, b.consumer_computation, b.consumer_kernel, kernels, module)
            else:
                dst = f"g{rank}_{len(seen)}"
                seen.add(dst)
                lines.append(f'    {dst} [label={_q(b.consumer)}, shape=box3d, style="filled", fillcolor="#f4f4f4", '
                             'color="#888888", fontsize=8];')
            cost = f", {b.modelled_us:.3g} µs" if b.modelled_us is not None else ""
            label = f"{_short_bytes(b.bytes)}{cost}" + (f" ({'/'.join(b.crossing)})" if b.crossing else "")
            tip = f"{b.producer} → {b.consumer}: {b.rule}: {b.reason}"
            if b.hint:
                tip += f"\nhint: {b.hint}"
            lines.append(f"    {src} -> {dst} [label={_q(label)}, color=\"{color}\", fontcolor=\"{color}\", "
                         f"penwidth=1.6, tooltip={_q(tip)}, labeltooltip={_q(tip)}"
                         + (', style="dashed"' if b.crossing else "") + "];")
        if g.count > len(costliest):
            more = f"m{rank}"
            lines.append(f'    {more} [label={_q(f"… {g.count - len(costliest)} more")}, shape=plaintext, '
                         'style="", fontsize=8];')
        lines.append("  }")
    if total is not None:
        lines.append(f'  total [shape=plaintext, style="", fontsize=9, label={_q(_total_words(ex, groups))}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _kernel_node(lines: list[str], seen: set[str], rank: int, comp: str, name: str, kernels, module) -> str:
    nid = f"g{rank}_{_safe_id(comp)}_{_safe_id(name)}"
    if nid in seen:
        return nid
    seen.add(nid)
    k = kernels.get((comp, name))
    label = name
    if k is not None:
        label += f"\n{k.label}"
        if k.modelled_us is not None and k.launches:
            label += f"\n{k.modelled_us * k.launches:.3g} µs/run"
    role = module.role(comp) if comp in module.by_name else ""
    if role and role != "entry":
        label += f"\nin {comp} ({role.replace('_', ' ')})"
    fill = ', fillcolor="#fff7e6"' if k is not None and k.library else ""
    lines.append(f"    {nid} [label={_q(label)}{fill}];")
    return nid


def _top_title(module: ir.Module, ex, options: DrawOptions) -> str:
    shown = min(options.top or 0, len(ex.groups))
    return (f"{module.name}: its {shown} costliest causes of kernel boundaries (of {len(ex.groups)}; "
            f"{len(ex.kernels)} kernels, {len(ex.boundaries)} boundaries), the {options.per_group} costliest "
            f"boundaries of each\n--top N draws more causes, --full every kernel, --focus INSTR or "
            f"--computation NAME the operations around one")


def _total_words(ex, groups) -> str:
    drawn = sum(g.modelled_us or 0.0 for g in groups)
    total = ex.cost.total_us
    return (f"modelled {total:.4g} µs per run ({ex.cost.target});\n"
            f"these causes: {drawn:.4g} µs ({drawn / total:.1%})" if total else "")


def _safe_id(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text)


def _short_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _emit(d: _Drawing, title: str) -> str:
    lines = [
        "digraph hlofuse {",
        f'  graph [label={_q(title)}, labelloc=t, fontname="Helvetica", fontsize=12, rankdir=TB, '
        'newrank=true, nodesep=0.25, ranksep=0.35];',
        '  node [shape=box, style="rounded,filled", fillcolor=white, fontname="Helvetica", fontsize=9, '
        'height=0.3, margin="0.08,0.03"];',
        f'  edge [fontname="Helvetica", fontsize=8, color="{PLAIN_EDGE}", arrowsize=0.6];',
    ]
    by_comp: dict[str, dict[str | None, list[_Node]]] = {}
    for node in d.nodes.values():
        by_comp.setdefault(node.comp, {}).setdefault(node.kernel, []).append(node)
    cluster = 0
    for comp in d.comp_order:
        groups = by_comp.get(comp)
        if not groups:
            continue
        lines.append(f"  subgraph cluster_{cluster} {{")
        cluster += 1
        lines.append(f'    label={_q(d.comp_labels.get(comp, comp))}; style="rounded"; color="#b0b0b0"; '
                     'fontsize=10; fontcolor="#444444";')
        for kernel, nodes in groups.items():
            if kernel is None:
                for node in nodes:
                    lines.append("    " + _node(node))
                continue
            lines.append(f"    subgraph cluster_{cluster} {{")
            cluster += 1
            label = d.kernel_labels.get((comp, kernel), kernel)
            lines.append(f'      label={_q(label)}; style="rounded,filled,dashed"; fillcolor="#eef3fb"; '
                         f'color="#4a6fa5"; fontsize=9; tooltip={_q(label)};')
            for node in nodes:
                lines.append("      " + _node(node))
            lines.append("    }")
        lines.append("  }")
    legend = _legend(d.edges)
    if legend:
        lines.append(legend)
    for e in _dedupe(d.edges):
        if e.src not in d.nodes or e.dst not in d.nodes:
            continue
        attrs = []
        if e.label:
            attrs += [f"label={_q(e.label)}", f'fontcolor="{e.color}"']
        attrs.append(f'color="{e.color}"')
        if e.tooltip:
            attrs += [f"tooltip={_q(e.tooltip)}", f"labeltooltip={_q(e.tooltip)}"]
        if e.dashed:
            attrs.append('style="dashed"')
        if e.bold:
            attrs.append("penwidth=1.6")
        if not e.constraint:
            attrs.append("constraint=false")
        lines.append(f"  {e.src} -> {e.dst} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


#: Names of the colour families in the legend.
_FAMILY = {"#8e44ad": "loop", "#2e6fd8": "tuple (buffer)", "#2a9d3f": "library call", "#c77c02": "copy",
           "#138d90": "control flow", "#1f4fbf": "concatenate / duplication", "#d35400": "expensive",
           "#b03a8e": "reduction", "#b7950b": "budget", UNKNOWN_COLOR: "unknown", DEFAULT_COLOR: "other rule"}


def _legend(edges: list[_Edge]) -> str:
    """A small table of the edge colours the drawing uses (only those)."""
    used = list(dict.fromkeys(e.color for e in edges if e.label))
    if not used:
        return ""
    rows = "".join(f'<tr><td><font color="{c}">━━</font></td><td align="left">{_FAMILY.get(c, c)}</td></tr>'
                   for c in used)
    return ('  legend [shape=plaintext, fontsize=8, label=<<table border="0" cellborder="0" cellspacing="1">'
            f'<tr><td colspan="2"><b>boundaries</b></td></tr>{rows}</table>>];')


def _dedupe(edges: list[_Edge]) -> list[_Edge]:
    seen = set()
    out = []
    for e in edges:
        key = (e.src, e.dst, e.label)
        if key in seen:
            continue
        seen.add(key)
        out.append(e)
    return out


def _node(node: _Node) -> str:
    attrs = [f"label={_q(node.label)}", f"shape={node.shape}"]
    if node.fill != "white":
        attrs.append(f'fillcolor="{node.fill}"')
    if node.tooltip:
        attrs.append(f"tooltip={_q(node.tooltip)}")
    if node.shape in ("invhouse", "box3d", "hexagon", "diamond", "component", "ellipse") and node.kernel is None:
        attrs.append('fontsize=8, style="filled"')
    return f"{node.id} [{', '.join(attrs)}];"


def _q(text: str) -> str:
    """A DOT string literal (newlines become DOT's centred line breaks).  Labels quote the dump:
    quotes and backslashes are escaped so that Graphviz reads them as text, and other control
    characters are shown as `\\xNN` (XML, hence SVG, cannot hold most of them)."""
    text = printable(text, keep_newlines=True)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

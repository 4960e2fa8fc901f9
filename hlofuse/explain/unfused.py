"""An unfused module rebuilt from a fused one: every fusion's instructions inlined back into
the computation that calls it.

`explain` replays the fusion pipeline to learn which decision kept two kernels apart.  It
replays from the dump's snapshot before fusion when the folder has one; without one (a lone
after_optimizations file, a module pasted from a bug report) this module is the next best
start: the instructions XLA fused, as one computation again.  What passes before fusion did
is already in it and is not replayed; what passes after fusion added (copies, bitcasts) stays.

Library fusions (`kind=kCustom`: Triton and cuBLAS GEMM fusions, sort-iota fusions...) are
kept as they are: passes before the fusion pass made them, and fusion treats them as opaque.
"""

from __future__ import annotations

from .. import ir


def inline_fusions(module: ir.Module) -> ir.Module:
    """`module` with every non-library fusion replaced by its fused instructions (a new module;
    `module` is not changed).  Instructions keep their names; a fused instruction whose name
    is taken in the caller gets a `.inlined` suffix."""
    fused = module.fusion_computations
    rebuilt = {c.name: _inline(module, c) for c in module.computations if c.name not in fused}
    # what the entry still calls: rebuilt computations, and the fused computations of library
    # fusions (and what those call); computations nothing calls are left out, as XLA does
    wanted = {module.entry_name}
    stack = [module.entry_name]
    while stack:
        name = stack.pop()
        comp = rebuilt.get(name) or module.by_name.get(name)
        if comp is None:
            continue
        for instr in comp.instructions:
            for callee in instr.called:
                if callee not in wanted:
                    wanted.add(callee)
                    stack.append(callee)
    computations = [rebuilt.get(c.name, c) for c in module.computations if c.name in wanted]
    return ir.Module(name=module.name, computations=tuple(computations), entry_name=module.entry_name,
                     attrs=module.attrs, stack_frames=module.stack_frames, form=module.form,
                     path=module.path, style=module.style)


def _inline(module: ir.Module, comp: ir.Computation) -> ir.Computation:
    taken = {i.name for i in comp.instructions}
    out: list[ir.Instruction] = []
    alias: dict[str, str] = {}  # a name that no longer exists → the instruction standing for it
    tuples: dict[str, tuple[str, ...]] = {}  # an inlined multi-output fusion → its outputs

    def resolve(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    def emit(instr: ir.Instruction, operands: tuple[str, ...]) -> None:
        out.append(instr.replace(operands=operands))

    def inline_fusion(fusion: ir.Instruction, operands: tuple[str, ...]) -> None:
        body = module.by_name[fusion.fused_computation]
        local: dict[str, str] = {}
        local_tuples: dict[str, tuple[str, ...]] = {}
        for inner in body.post_order:
            if inner.opcode == "parameter":
                n = inner.parameter_number
                if n < len(operands):
                    local[inner.name] = operands[n]
                continue
            inner_ops = tuple(local.get(op, op) for op in inner.operands)
            if inner.opcode == "get-tuple-element" and inner_ops and inner_ops[0] in local_tuples:
                index = int(inner.attr("index") or 0)
                local[inner.name] = local_tuples[inner_ops[0]][index]
                continue
            if inner.opcode == "tuple" and inner.name == body.root_name:
                local_tuples[inner.name] = inner_ops
                continue
            if _inlinable(module, inner):
                inline_fusion(inner, inner_ops)
                target = resolve(inner.name)
                if inner.name in tuples:
                    local_tuples[inner.name] = tuples[inner.name]
                else:
                    local[inner.name] = target
                continue
            name = inner.name
            if name in taken:
                name = _fresh(name + ".inlined", taken)
            taken.add(name)
            local[inner.name] = name
            emit(inner.replace(name=name), inner_ops)
        root = body.root_name
        if root in local_tuples:
            tuples[fusion.name] = local_tuples[root]
        else:
            alias[fusion.name] = local.get(root, root)

    built: set[str] = set()

    def whole(name: str) -> None:
        """A multi-output fusion used as a whole (passed on in a tuple, returned): its tuple."""
        if name in tuples and name not in built:
            built.add(name)
            out.append(ir.Instruction(name, "tuple", comp[name].shape, tuple(resolve(x) for x in tuples[name])))

    for instr in comp.post_order:
        operands = tuple(resolve(op) for op in instr.operands)
        if instr.opcode == "get-tuple-element" and instr.operands and instr.operands[0] in tuples:
            index = int(instr.attr("index") or 0)
            alias[instr.name] = resolve(tuples[instr.operands[0]][index])
            continue
        for op in operands:
            whole(op)
        if _inlinable(module, instr):
            inline_fusion(instr, operands)
            continue
        emit(instr, operands)
    root = comp.root_name
    if root in tuples:  # the computation returned a multi-output fusion: keep its tuple
        whole(root)
    else:
        root = resolve(root)
    return _merge_duplicates(ir.Computation(name=comp.name, instructions=tuple(out), root_name=root,
                                            is_entry=comp.is_entry, attrs=comp.attrs))


#: Opcodes whose instructions are never merged: each is its own value or has an effect.
_NOT_MERGED = frozenset({"parameter", "rng", "rng-bit-generator", "custom-call", "send", "recv", "infeed",
                         "outfeed", "after-all", "while", "conditional", "call", "all-reduce", "all-gather"})


def _merge_duplicates(comp: ir.Computation) -> ir.Computation:
    """One instruction per value: fusion clones a producer into every consumer it duplicates
    it into (`add.3`, `add.3.clone`, ...), so inlining gives several copies of one
    instruction; as before fusion, the first stands for all (XLA's CSE would merge them)."""
    first: dict[tuple, str] = {}
    alias: dict[str, str] = {}
    out: list[ir.Instruction] = []
    for instr in comp.instructions:
        operands = tuple(alias.get(op, op) for op in instr.operands)
        if instr.opcode not in _NOT_MERGED and not instr.attr("control-predecessors"):
            attrs = tuple((k, v) for k, v in instr.attrs if k != "metadata")
            key = (instr.opcode, instr.shape.to_text(), operands, attrs, instr.literal)
            if key in first and instr.name != comp.root_name:
                alias[instr.name] = first[key]
                continue
            first.setdefault(key, instr.name)
        out.append(instr.replace(operands=operands) if operands != instr.operands else instr)
    return ir.Computation(name=comp.name, instructions=tuple(out), root_name=comp.root_name,
                          is_entry=comp.is_entry, attrs=comp.attrs)


def _inlinable(module: ir.Module, instr: ir.Instruction) -> bool:
    return (instr.opcode == "fusion" and instr.fusion_kind != "kCustom"
            and instr.fused_computation in module.by_name)


def _fresh(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    n = 1
    while f"{name}.{n}" in taken:
        n += 1
    return f"{name}.{n}"

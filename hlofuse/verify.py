"""XLA's HloVerifier, the part a replay and an explanation rely on: every instruction's shape
agrees with its operands and attributes, and called computations fit their callers.

XLA's parser accepts text its verifier rejects (a transpose whose `dimensions` are not a
permutation, a fusion with fewer operands than its computation has parameters, ...), and XLA
runs the verifier before its passes; so does hlofuse, before a replay (`pipeline.replay`) and
before explaining a fused module.  Each failure is an HloVerifierError naming the instruction,
its line and column, and what is wrong, instead of a crash deep inside a pass.

Written from xla/service/hlo_verifier.cc (ShapeVerifier::Handle*, CheckFusionInstruction,
CheckWhileInstruction, CheckConditionalInstruction) and xla/service/shape_inference.cc
(Infer*Shape), read at openxla/xla 5a9e73cb (the priority pipeline's commit, docs/xla/).
Deliberate leniencies, so no module XLA accepts is refused: floating-point precisions may
differ where XLA's `allow_mixed_precision` option lets them; a bitcast may change the size of
its value (only the layout-sensitive verifier of XLA's compiler pipelines checks it, and XLA's
own fusion tests rely on the layout-insensitive one); opcodes whose shape rules the replay
never reads (convolutions, collectives, custom calls, rng, ...) are not checked.
"""

from __future__ import annotations

from typing import Final

from . import ir
from .attributes import int_list, padding, slice_dims
from .errors import HloVerifierError
from .opcodes import BINARY_ELEMENTWISE, UNARY_ELEMENTWISE

_FLOATS: Final = ir.FLOAT_TYPES
_INT64_MAX: Final = 2**63 - 1
#: Shapes whose size passed, by id (the value keeps the object alive, so its id is not reused).
_SIZED: dict[int, ir.Shape] = {}
_COMPLEX_PART: Final = {"c64": "f32", "c128": "f64"}


def verify(module: ir.Module) -> None:
    """Raise HloVerifierError for the first instruction or computation XLA's verifier rejects."""
    _Verifier(module).run()


class _Verifier:
    def __init__(self, module: ir.Module):
        self.module = module
        self.comps = module.by_name

    def fail(self, instr: ir.Instruction | None, message: str) -> HloVerifierError:
        line = column = None
        if instr is not None and instr.span is not None:
            line, column = instr.span.line, instr.span.column
        return HloVerifierError(message, path=self.module.path, line=line, column=column)

    # -- the module -----------------------------------------------------------------------
    def run(self) -> None:
        self.fusion_callers()
        for comp in self.module.computations:
            self.parameter_numbers(comp)
            by_name = comp.by_name
            for instr in comp.instructions:
                if id(instr.shape) not in _SIZED:
                    self.size(instr)
                opcode = instr.opcode
                check = _CHECKS.get(opcode)
                # (elementwise checks, most instructions, called as methods: compiled, a call
                # through the table goes through Python's calling convention)
                if check is not None:
                    check(self, instr, [by_name[op].shape for op in instr.operands])
                elif opcode in UNARY_ELEMENTWISE:
                    self.unary(instr, [by_name[op].shape for op in instr.operands])
                elif opcode in BINARY_ELEMENTWISE:
                    self.binary(instr, [by_name[op].shape for op in instr.operands])

    def fusion_callers(self) -> None:
        """A fused computation belongs to one fusion instruction and is called by nothing else
        (XLA: "Instruction of fused computation does not match expected instruction")."""
        owner: dict[str, ir.Instruction] = {}
        for comp, instr in self.module.instructions():
            if instr.opcode == "fusion" and instr.fused_computation:
                name = instr.fused_computation
                if name in owner:
                    raise self.fail(instr, f"computation {name} is already the body of fusion "
                                           f"{owner[name].name}; a fused computation has one fusion instruction")
                if name == self.module.entry_name:
                    raise self.fail(instr, f"the entry computation {name} cannot be a fused computation")
                owner[name] = instr
        if not owner:
            return
        for comp, instr in self.module.instructions():
            for callee in instr.called:
                body_of = owner.get(callee)
                if body_of is not None and body_of is not instr:
                    raise self.fail(instr, f"{instr.name} calls {callee}, the fused computation of "
                                           f"{body_of.name}; a fused computation is called by its fusion only")

    def parameter_numbers(self, comp: ir.Computation) -> None:
        numbers = [p.parameter_number for p in comp.parameters]
        if numbers != list(range(len(numbers))):
            missing = min(set(range(len(numbers))) - set(numbers))
            raise self.fail(comp.parameters[-1], f"computation {comp.name} has {len(numbers)} parameters but no "
                                                 f"parameter number {missing}: they must be numbered 0 to "
                                                 f"{len(numbers) - 1}")

    def size(self, instr: ir.Instruction) -> None:
        """XLA's ShapeUtil::ValidateShapeSize: an array's bytes fit an int64."""
        for leaf in instr.shape.leaves():
            if leaf.is_array and (leaf.elements * max(leaf.element_bits, 8) // 8 > _INT64_MAX or
                                  any(d > _INT64_MAX for d in leaf.dims)):
                raise self.fail(instr, f"shape {leaf.to_text(False)} of {instr.name} has more bytes than an "
                                       f"int64 counts (XLA: size may overflow int64_t)")
        if len(_SIZED) < 100_000:
            _SIZED[id(instr.shape)] = instr.shape  # the parser shares one Shape per spelling

    # -- helpers --------------------------------------------------------------------------
    def expect(self, instr: ir.Instruction, dims, element_type: str | None = None, what: str = "") -> None:
        """The instruction is an array with `dims` (and `element_type`, floating-point
        precision aside), or the error says what it should be."""
        shape = instr.shape
        ok = shape.is_array and _dims_equal(shape.dims, dims) and (
            element_type is None or _same_type(shape.element_type, element_type))
        if not ok:
            want = f"{element_type or shape.element_type}[{','.join(map(str, dims))}]"
            raise self.fail(instr, f"{instr.opcode} {instr.name} should have shape {want}{what}, "
                                   f"not {shape.to_text(False)}")

    def expect_shape(self, instr: ir.Instruction, shape: ir.Shape, what: str) -> None:
        if not _compatible(instr.shape, shape):
            raise self.fail(instr, f"{instr.opcode} {instr.name} has shape {instr.shape.to_text(False)}, but "
                                   f"{what} is {shape.to_text(False)}")

    def arrays(self, instr: ir.Instruction, shapes: list[ir.Shape], count: int | None = None) -> None:
        if count is not None and len(shapes) < count:
            raise self.fail(instr, f"{instr.opcode} {instr.name} needs {count} operand(s), has {len(shapes)}")
        for i, s in enumerate(shapes):
            if not s.is_array or s.element_type == "token":
                raise self.fail(instr, f"operand {i} of {instr.opcode} {instr.name} must be an array, "
                                       f"not {s.to_text(False)}")

    def dimension_list(self, instr: ir.Instruction, key: str, rank: int, *, unique: bool = True) -> tuple[int, ...]:
        dims = int_list(instr.attr(key))
        for d in dims:
            if not 0 <= d < rank:
                raise self.fail(instr, f"{key}={{{','.join(map(str, dims))}}} of {instr.name} names dimension {d}, "
                                       f"but the operand has {rank} dimension(s)")
        if unique and len(set(dims)) != len(dims):
            raise self.fail(instr, f"{key}={{{','.join(map(str, dims))}}} of {instr.name} repeats a dimension")
        return dims

    def callee(self, instr: ir.Instruction, key: str) -> ir.Computation | None:
        names = ir._names_in(instr.attr(key) or "")
        return self.comps.get(names[0]) if names else None

    def signature(self, instr: ir.Instruction, comp: ir.Computation | None, operands: list[ir.Shape]) -> None:
        """`comp` takes exactly `operands` (XLA's CheckParameterCount, CheckOperandAndParameter)."""
        if comp is None:
            return
        params = comp.parameters
        if len(params) != len(operands):
            raise self.fail(instr, f"computation {comp.name} called from {instr.name} has {len(params)} "
                                   f"parameter(s), but is passed {len(operands)}")
        for i, (param, shape) in enumerate(zip(params, operands)):
            if not _compatible(param.shape, shape):
                raise self.fail(instr, f"parameter {i} of {comp.name} is {param.shape.to_text(False)}, but "
                                       f"{instr.name} passes {shape.to_text(False)}")

    def reducer(self, instr: ir.Instruction, key: str, count: int) -> None:
        comp = self.callee(instr, key)
        if comp is not None and len(comp.parameters) != count:
            raise self.fail(instr, f"{key} computation {comp.name} of {instr.name} takes "
                                   f"{len(comp.parameters)} parameter(s), {instr.opcode} passes it {count}")

    # -- elementwise (ShapeVerifier::CheckUnaryShape / CheckBinaryShape / CheckTernaryShape) --
    def unary(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 1)
        operand = shapes[0]
        opcode = instr.opcode
        if opcode == "bitcast-convert":
            return self.bitcast_convert(instr, operand)
        result_type: str | None = operand.element_type
        if opcode in ("convert", "reduce-precision"):
            result_type = None if opcode == "convert" else result_type
        elif opcode == "is-finite":
            result_type = "pred"
        elif opcode in ("real", "imag", "abs"):
            result_type = _COMPLEX_PART.get(operand.element_type, operand.element_type)
        self.expect(instr, operand.dims, result_type, " (the shape of its operand)")

    def bitcast_convert(self, instr, operand: ir.Shape) -> None:
        old, new = operand.element_bits, instr.shape.element_bits
        if not instr.shape.is_array or not old or not new or old == new:
            self.expect(instr, operand.dims, None, " (the shape of its operand)")
        elif old > new:
            self.expect(instr, operand.dims + (old // new,), None, " (its operand split into narrower elements)")
        elif operand.dims and operand.dims[-1] * old == new:
            self.expect(instr, operand.dims[:-1], None, " (its operand's last dimension joined into wider elements)")
        else:
            raise self.fail(instr, f"bitcast-convert {instr.name} cannot make {instr.shape.element_type} from "
                                   f"{operand.to_text(False)}: the last dimension must hold one wider element")

    def binary(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 2)
        lhs, rhs = shapes[0], shapes[1]
        if instr.opcode == "stochastic-convert":
            return self.expect(instr, lhs.dims, None, " (the shape of its operand)")
        if not _dims_equal(lhs.dims, rhs.dims) or not _same_type(lhs.element_type, rhs.element_type):
            raise self.fail(instr, f"{instr.opcode} {instr.name} combines operands of different shapes: "
                                   f"{lhs.to_text(False)} and {rhs.to_text(False)}")
        result_type = "pred" if instr.opcode == "compare" else lhs.element_type
        if instr.opcode == "complex":
            result_type = {"f32": "c64", "f64": "c128"}.get(lhs.element_type, instr.shape.element_type)
        self.expect(instr, lhs.dims, result_type, " (the shape of its operands)")

    def op_select(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 3)
        pred, on_true, on_false = shapes[:3]
        if not _dims_equal(on_true.dims, on_false.dims) or not _same_type(on_true.element_type, on_false.element_type):
            raise self.fail(instr, f"select {instr.name} chooses between different shapes: "
                                   f"{on_true.to_text(False)} and {on_false.to_text(False)}")
        if pred.element_type != "pred" or (pred.dims and not _dims_equal(pred.dims, on_true.dims)):
            raise self.fail(instr, f"the predicate of select {instr.name} must be pred[] or "
                                   f"pred[{','.join(map(str, on_true.dims))}], not {pred.to_text(False)}")
        self.expect(instr, on_true.dims, on_true.element_type, " (the shape of its operands)")

    def op_clamp(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 3)
        low, operand, high = shapes[:3]
        for bound in (low, high):
            if bound.dims and not _dims_equal(bound.dims, operand.dims):
                raise self.fail(instr, f"the bounds of clamp {instr.name} must be scalars or have the "
                                       f"operand's shape {operand.to_text(False)}, not {bound.to_text(False)}")
        self.expect(instr, operand.dims, operand.element_type, " (the shape of its operand)")

    def op_map(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 1)
        for s in shapes[1:]:
            if not _dims_equal(s.dims, shapes[0].dims):
                raise self.fail(instr, f"map {instr.name} needs operands of one shape: "
                                       f"{shapes[0].to_text(False)} and {s.to_text(False)}")
        self.expect(instr, shapes[0].dims, None, " (the shape of its operands)")
        self.reducer(instr, "to_apply", len(shapes))

    # -- data movement ----------------------------------------------------------------------
    def op_broadcast(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 1)
        operand, result = shapes[0], instr.shape
        if not result.is_array:
            raise self.fail(instr, f"broadcast {instr.name} must make an array, not {result.to_text(False)}")
        dims = self.dimension_list(instr, "dimensions", result.rank, unique=True)
        if len(dims) != operand.rank:
            raise self.fail(instr, f"broadcast {instr.name} has {len(dims)} dimensions= entries for an operand "
                                   f"of rank {operand.rank}")
        for i, d in enumerate(dims):
            if not _dim_equal(operand.dims[i], result.dims[d]):
                raise self.fail(instr, f"broadcast {instr.name} maps operand dimension {i} (size {operand.dims[i]}) "
                                       f"to result dimension {d} of size {result.dims[d]}")
        if not _same_type(result.element_type, operand.element_type):
            raise self.fail(instr, f"broadcast {instr.name} changes the element type from "
                                   f"{operand.element_type} to {result.element_type}")

    def op_reshape(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 1)
        operand, result = shapes[0], instr.shape
        if not result.is_array or result.elements != operand.elements or \
                not _same_type(result.element_type, operand.element_type):
            raise self.fail(instr, f"reshape {instr.name} must keep the elements of {operand.to_text(False)}, "
                                   f"not make {result.to_text(False)}")

    def op_transpose(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 1)
        operand = shapes[0]
        perm = int_list(instr.attr("dimensions"))
        if sorted(perm) != list(range(operand.rank)):
            raise self.fail(instr, f"dimensions={{{','.join(map(str, perm))}}} of transpose {instr.name} is not a "
                                   f"permutation of the operand's {operand.rank} dimension(s)")
        self.expect(instr, tuple(operand.dims[p] for p in perm), operand.element_type,
                    " (its operand permuted)")

    def op_reverse(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 1)
        self.dimension_list(instr, "dimensions", shapes[0].rank)
        self.expect(instr, shapes[0].dims, shapes[0].element_type, " (the shape of its operand)")

    def op_slice(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 1)
        operand = shapes[0]
        spec = slice_dims(instr)
        if len(spec) != operand.rank:
            raise self.fail(instr, f"slice {instr.name} gives {len(spec)} ranges for an operand of rank {operand.rank}")
        dims = []
        for i, (s, size) in enumerate(zip(spec, operand.dims)):
            if s.stride <= 0 or not 0 <= s.start <= s.limit or (size >= 0 and s.limit > size):
                raise self.fail(instr, f"slice {instr.name} takes [{s.start}:{s.limit}:{s.stride}] of dimension {i}, "
                                       f"which has size {size}")
            dims.append(-(-(s.limit - s.start) // s.stride))
        self.expect(instr, tuple(dims), operand.element_type, " (the slice of its operand)")

    def op_concatenate(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 1)
        first = shapes[0]
        dims = int_list(instr.attr("dimensions"))
        if len(dims) != 1 or not 0 <= dims[0] < first.rank:
            raise self.fail(instr, f"concatenate {instr.name} needs one dimension of its rank-{first.rank} "
                                   f"operands, not dimensions={{{','.join(map(str, dims))}}}")
        axis = dims[0]
        total = 0
        for s in shapes:
            if s.rank != first.rank or not _same_type(s.element_type, first.element_type) or any(
                    not _dim_equal(a, b) for k, (a, b) in enumerate(zip(s.dims, first.dims)) if k != axis):
                raise self.fail(instr, f"concatenate {instr.name} joins {first.to_text(False)} and "
                                       f"{s.to_text(False)}, which differ outside dimension {axis}")
            total += s.dims[axis]
        result = list(first.dims)
        result[axis] = total
        self.expect(instr, tuple(result), first.element_type, " (its operands joined)")

    def op_pad(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 2)
        operand, value = shapes[0], shapes[1]
        if value.rank:
            raise self.fail(instr, f"the padding value of pad {instr.name} must be a scalar, not {value.to_text(False)}")
        config = padding(instr)
        if len(config) != operand.rank and (operand.rank or len(config) > 1):
            raise self.fail(instr, f"pad {instr.name} gives {len(config)} paddings for an operand of rank {operand.rank}")
        dims = []
        for (low, high, interior), size in zip(config, operand.dims):
            padded = low + high + size + max(size - 1, 0) * interior
            if interior < 0 or padded < 0:
                raise self.fail(instr, f"pad {instr.name} pads a dimension of size {size} by {low}_{high}_{interior}")
            dims.append(padded)
        self.expect(instr, tuple(dims), operand.element_type, " (its operand padded)")

    def op_iota(self, instr, shapes) -> None:
        dim = int_list(instr.attr("iota_dimension"))
        if not instr.shape.is_array or not instr.shape.rank or not dim or not 0 <= dim[0] < instr.shape.rank:
            raise self.fail(instr, f"iota {instr.name} counts along dimension {dim[0] if dim else '?'}, which "
                                   f"{instr.shape.to_text(False)} does not have")

    def op_dynamic_slice(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 1)
        operand = shapes[0]
        sizes = int_list(instr.attr("dynamic_slice_sizes"))
        self.start_indices(instr, shapes[1:], operand.rank)
        if len(sizes) != operand.rank or any(s < 0 or (d >= 0 and s > d) for s, d in zip(sizes, operand.dims)):
            raise self.fail(instr, f"dynamic_slice_sizes={{{','.join(map(str, sizes))}}} of {instr.name} do not fit "
                                   f"its operand {operand.to_text(False)}")
        self.expect(instr, sizes, operand.element_type, " (dynamic_slice_sizes)")

    def op_dynamic_update_slice(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 2)
        operand, update = shapes[0], shapes[1]
        self.start_indices(instr, shapes[2:], operand.rank)
        if update.rank != operand.rank or any(u > d >= 0 for u, d in zip(update.dims, operand.dims)) or \
                not _same_type(update.element_type, operand.element_type):
            raise self.fail(instr, f"the update {update.to_text(False)} of {instr.name} does not fit in its operand "
                                   f"{operand.to_text(False)}")
        self.expect(instr, operand.dims, operand.element_type, " (the shape of its operand)")

    def start_indices(self, instr, indices: list[ir.Shape], rank: int) -> None:
        scalars = len(indices) == rank and all(not s.dims for s in indices)
        vector = len(indices) == 1 and indices[0].rank == 1 and indices[0].dims[0] == rank
        if not (scalars or vector) or any(s.element_type not in ir.INTEGRAL_TYPES for s in indices):
            raise self.fail(instr, f"{instr.opcode} {instr.name} needs {rank} integer scalar start indices, "
                                   f"has {', '.join(s.to_text(False) for s in indices) or 'none'}")

    # -- reductions and contractions --------------------------------------------------------
    def op_reduce(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 2)
        if len(shapes) % 2:
            raise self.fail(instr, f"reduce {instr.name} needs as many init values as inputs, has "
                                   f"{len(shapes)} operands")
        n = len(shapes) // 2
        inputs, inits = shapes[:n], shapes[n:]
        for s in inputs[1:]:
            if not _dims_equal(s.dims, inputs[0].dims):
                raise self.fail(instr, f"the inputs of reduce {instr.name} differ: {inputs[0].to_text(False)} and "
                                       f"{s.to_text(False)}")
        for s in inits:
            if s.rank:
                raise self.fail(instr, f"the init values of reduce {instr.name} must be scalars, not {s.to_text(False)}")
        reduced = set(self.dimension_list(instr, "dimensions", inputs[0].rank))
        kept = tuple(d for k, d in enumerate(inputs[0].dims) if k not in reduced)
        outputs = [ir.array_shape(init.element_type, kept) for init in inits]
        self.outputs(instr, outputs, "(its inputs without the reduced dimensions)")
        self.reducer(instr, "to_apply", 2 * n)

    def outputs(self, instr, outputs: list[ir.Shape], what: str) -> None:
        """One array, or a tuple of them, as a variadic reduce or sort makes."""
        shape = instr.shape
        if len(outputs) == 1:
            return self.expect(instr, outputs[0].dims, outputs[0].element_type, " " + what)
        if not shape.is_tuple or len(shape.tuple_shapes) != len(outputs) or any(
                not s.is_array or not _dims_equal(s.dims, o.dims) or not _same_type(s.element_type, o.element_type)
                for s, o in zip(shape.tuple_shapes, outputs)):
            want = ir.tuple_shape(outputs).to_text(False)
            raise self.fail(instr, f"{instr.opcode} {instr.name} should have shape {want} {what}, not "
                                   f"{shape.to_text(False)}")

    def op_reduce_window(self, instr, shapes) -> None:
        from .shape_inference import _reduce_window

        self.arrays(instr, shapes, 2)
        if len(shapes) % 2:
            raise self.fail(instr, f"reduce-window {instr.name} needs as many init values as inputs")
        n = len(shapes) // 2
        expected: ir.Shape | None  # (declared: compiled, a variable keeps its first value's type)
        if not shapes[0].rank and not instr.attr("window"):  # a scalar's window is empty
            expected = ir.tuple_shape([ir.array_shape(s.element_type, ()) for s in shapes[n:]])
            expected = expected.tuple_shapes[0] if n == 1 else expected
        else:
            expected = _reduce_window(shapes, instr.attr("window") or "")
        if expected is None:
            raise self.fail(instr, f"the window of reduce-window {instr.name} does not fit its rank-"
                                   f"{shapes[0].rank} input")
        self.outputs(instr, list(expected.tuple_shapes) if expected.is_tuple else [expected], "(its windows)")
        self.reducer(instr, "to_apply", 2 * n)

    def op_dot(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 2)
        if len(shapes) > 2:
            return  # sparse dots: metadata operands follow
        lhs, rhs = shapes
        lc = self.dimension_list(instr, "lhs_contracting_dims", lhs.rank)
        rc = self.dimension_list(instr, "rhs_contracting_dims", rhs.rank)
        lb = self.dimension_list(instr, "lhs_batch_dims", lhs.rank)
        rb = self.dimension_list(instr, "rhs_batch_dims", rhs.rank)
        if len(lc) != len(rc) or len(lb) != len(rb) or set(lc) & set(lb) or set(rc) & set(rb) or any(
                not _dim_equal(lhs.dims[a], rhs.dims[b]) for a, b in zip(lc + lb, rc + rb)):
            raise self.fail(instr, f"the contracting and batch dimensions of dot {instr.name} do not pair "
                                   f"{lhs.to_text(False)} with {rhs.to_text(False)}")
        # XLA's InferDotOpShape: the batch dimensions (in lhs_batch_dims' order), then the
        # other dimensions of lhs, then those of rhs (shape_inference.infer's rule, here on
        # the dimension lists just read and checked)
        dims = [lhs.dims[d] for d in lb]
        dims += [d for i, d in enumerate(lhs.dims) if i not in lc and i not in lb]
        dims += [d for i, d in enumerate(rhs.dims) if i not in rc and i not in rb]
        self.expect(instr, tuple(dims), None, " (from its operands and dimension numbers)")

    def op_sort(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 1)
        for s in shapes[1:]:
            if not _dims_equal(s.dims, shapes[0].dims):
                raise self.fail(instr, f"the operands of sort {instr.name} differ: {shapes[0].to_text(False)} and "
                                       f"{s.to_text(False)}")
        dims = self.dimension_list(instr, "dimensions", shapes[0].rank)
        if len(dims) != 1:
            raise self.fail(instr, f"sort {instr.name} needs one dimension to sort along")
        self.outputs(instr, list(shapes), "(the shapes of its operands)")
        self.reducer(instr, "to_apply", 2 * len(shapes))

    def op_gather(self, instr, shapes) -> None:
        from .shape_inference import _gather

        self.arrays(instr, shapes, 2)
        operand, indices = shapes[0], shapes[1]
        for key in ("collapsed_slice_dims", "start_index_map", "operand_batching_dims"):
            self.dimension_list(instr, key, operand.rank)
        vector_dim = int_list(instr.attr("index_vector_dim"))
        index_vector_dim = vector_dim[0] if vector_dim else indices.rank
        sizes = int_list(instr.attr("slice_sizes"))
        if not 0 <= index_vector_dim <= indices.rank or len(sizes) != operand.rank or any(
                s < 0 or (d >= 0 and s > d) for s, d in zip(sizes, operand.dims)):
            raise self.fail(instr, f"the slice sizes or index_vector_dim of gather {instr.name} do not fit "
                                   f"{operand.to_text(False)} and {indices.to_text(False)}")
        expected = _gather(operand, indices, dict(instr.attrs))
        if expected is None:
            raise self.fail(instr, f"the dimension numbers of gather {instr.name} do not fit its operands")
        self.expect(instr, expected.dims, operand.element_type, " (from its dimension numbers)")

    def op_scatter(self, instr, shapes) -> None:
        self.arrays(instr, shapes, 3)
        if len(shapes) % 2 == 0:
            raise self.fail(instr, f"scatter {instr.name} needs inputs, indices and as many updates as inputs")
        n = (len(shapes) - 1) // 2
        inputs, indices = shapes[:n], shapes[n]
        for key in ("inserted_window_dims", "scatter_dims_to_operand_dims", "input_batching_dims"):
            self.dimension_list(instr, key, inputs[0].rank)
        vector_dim = int_list(instr.attr("index_vector_dim"))
        if vector_dim and not 0 <= vector_dim[0] <= indices.rank:
            raise self.fail(instr, f"index_vector_dim of scatter {instr.name} is outside its indices "
                                   f"{indices.to_text(False)}")
        self.outputs(instr, list(inputs), "(the shapes of its inputs)")
        self.reducer(instr, "to_apply", 2 * n)

    # -- tuples and calls ---------------------------------------------------------------------
    def op_get_tuple_element(self, instr, shapes) -> None:
        operand = shapes[0]
        index = int_list(instr.attr("index"))
        if not operand.is_tuple or not index or not 0 <= index[0] < len(operand.tuple_shapes):
            raise self.fail(instr, f"get-tuple-element {instr.name} reads element {index[0] if index else '?'} "
                                   f"of {operand.to_text(False)}")
        self.expect_shape(instr, operand.tuple_shapes[index[0]], f"element {index[0]} of its operand")

    def op_tuple(self, instr, shapes) -> None:
        self.expect_shape(instr, ir.tuple_shape(shapes), "the tuple of its operands")

    def op_fusion(self, instr, shapes) -> None:
        body = self.comps.get(instr.fused_computation or "")
        if body is None:
            return
        self.signature(instr, body, shapes)
        self.expect_shape(instr, body.root.shape, f"the root of its computation {body.name}")
        users = body.users
        for inner in body.instructions:
            if inner.name == body.root_name:
                if users[inner.name]:
                    raise self.fail(inner, f"{inner.name}, the root of fused computation {body.name}, has users")
            elif not users[inner.name]:
                raise self.fail(inner, f"{inner.name} in fused computation {body.name} has no users; only the "
                                       f"root of a fused computation may have none")

    def op_call(self, instr, shapes) -> None:
        comp = self.callee(instr, "to_apply")
        self.signature(instr, comp, shapes)
        if comp is not None:
            self.expect_shape(instr, comp.root.shape, f"the root of {comp.name}")

    def op_while(self, instr, shapes) -> None:
        state = shapes[0]
        self.expect_shape(instr, state, "its operand (the loop state)")
        body, cond = self.callee(instr, "body"), self.callee(instr, "condition")
        self.signature(instr, body, [state])
        self.signature(instr, cond, [state])
        if body is not None and not _compatible(body.root.shape, state):
            raise self.fail(instr, f"the body {body.name} of {instr.name} returns {body.root.shape.to_text(False)}, "
                                   f"not the loop state {state.to_text(False)}")
        if cond is not None and (cond.root.shape.element_type != "pred" or cond.root.shape.rank):
            raise self.fail(instr, f"the condition {cond.name} of {instr.name} returns "
                                   f"{cond.root.shape.to_text(False)}, not pred[]")

    def op_conditional(self, instr, shapes) -> None:
        names = ir._names_in(instr.attr("branch_computations") or "") or [
            n for key in ("true_computation", "false_computation") for n in ir._names_in(instr.attr(key) or "")]
        if len(shapes) != len(names) + 1:
            raise self.fail(instr, f"conditional {instr.name} has {len(names)} branches and "
                                   f"{len(shapes) - 1} branch operands")
        for name, shape in zip(names, shapes[1:]):
            branch = self.comps.get(name)
            self.signature(instr, branch, [shape])
            if branch is not None:
                self.expect_shape(instr, branch.root.shape, f"the root of its branch {name}")

    def op_add_dependency(self, instr, shapes) -> None:
        if shapes:
            self.expect_shape(instr, shapes[0], "its first operand")

    def op_opt_barrier(self, instr, shapes) -> None:
        if len(shapes) == 1:
            self.expect_shape(instr, shapes[0], "its operand")


_CHECKS = {name[3:].replace("_", "-"): fn for name, fn in vars(_Verifier).items() if name.startswith("op_")}


def _same_type(a: str, b: str) -> bool:
    """Equal element types; floating-point types of different precision pass (XLA's verifier
    allows mixed precision where its `allow_mixed_precision` option is set)."""
    return a == b or (a in _FLOATS and b in _FLOATS)


def _dim_equal(a: int, b: int) -> bool:
    return a == b or a < 0 or b < 0  # an unbounded dynamic size (`?`) matches any


def _dims_equal(a, b) -> bool:
    return len(a) == len(b) and all(_dim_equal(x, y) for x, y in zip(a, b))


def _compatible(a: ir.Shape, b: ir.Shape) -> bool:
    """XLA's ShapeUtil::Compatible (layouts and dynamic sizes aside)."""
    if a.is_tuple or b.is_tuple:
        return a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes) and all(
            _compatible(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes))
    return a.element_type == b.element_type and _dims_equal(a.dims, b.dims)

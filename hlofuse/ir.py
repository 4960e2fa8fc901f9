"""The parsed HLO module: Module → Computations → Instructions, immutable.

This is what `hlofuse.loads` returns and what every later stage reads.  It holds no parsing
and no fusion logic.  Instructions refer to their operands by name, so the IR is hashable,
comparable (`parse(print(m)) == m`) and cheap to build for 100k-instruction dumps; the lookups
a graph needs (by name, users, post order) are built once per computation on first use.

Fusion passes need to rewrite graphs; they work on `hlofuse.graph`, a mutable copy.

Compiled with the replay's core when it is built (hlofuse.native): the passes read shapes and
instructions millions of times, and a compiled Shape answers `is_array` or `rank` without
entering the interpreter.  Shapes, layouts, spans, instructions and source locations are then
native classes (no __slots__ to write, so they pickle through their own `__reduce__`, by
value); computations and modules stay Python classes (their cached lookups live in a dict,
through `_remembered`).
Those classes write their own `__init__`: the one dataclasses generates for a frozen class is
Python code (a compiled constructor would call it), the written one compiles to direct stores
and, from source, does what the generated one does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from math import prod
from typing import Any, Final, Iterator, Mapping

from .native import mypyc_attr

#: functools.cached_property behind a variable (annotated, so not a type alias mypy would
#: follow): mypy reads `@cached_property` as `@property`, and a compiled class would compute a
#: lookup at every use (validation rebuilt Computation.by_name per instruction); through this
#: name it stays a decorator applied when the class is made, as from source.
_remembered: Any = cached_property

# ------------------------------------------------------------------------------------------
# Element types
# ------------------------------------------------------------------------------------------

#: Bits per element of every primitive type XLA prints (xla_data.proto PrimitiveType).
ELEMENT_BITS: Final[Mapping[str, int]] = {
    "pred": 8,
    "s1": 1, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "u1": 1, "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f4e2m1fn": 4,
    "f8e3m4": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e4m3fnuz": 8,
    "f8e5m2": 8, "f8e5m2fnuz": 8, "f8e8m0fnu": 8,
    "bf16": 16, "f16": 16, "f32": 32, "f64": 64,
    "c64": 64, "c128": 128,
    "token": 0, "opaque": 0,
}

FLOAT_TYPES: Final = frozenset(
    t for t in ELEMENT_BITS if t.startswith(("f", "bf"))
)
COMPLEX_TYPES: Final = frozenset({"c64", "c128"})
SIGNED_TYPES: Final = frozenset(t for t in ELEMENT_BITS if t.startswith("s"))
UNSIGNED_TYPES: Final = frozenset(t for t in ELEMENT_BITS if t.startswith("u"))
INTEGRAL_TYPES: Final = SIGNED_TYPES | UNSIGNED_TYPES


# ------------------------------------------------------------------------------------------
# Shapes
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class Layout:
    """A dense layout: `minor_to_major`, plus XLA's extra layout fields kept verbatim
    (tiles `T(8,128)`, memory space `S(1)`, element size `E(4)`, ...), as printed after ':'."""

    minor_to_major: tuple[int, ...]
    extra: str = ""

    def __init__(self, minor_to_major: tuple[int, ...], extra: str = "") -> None:
        object.__setattr__(self, "minor_to_major", minor_to_major)
        object.__setattr__(self, "extra", extra)

    def __reduce__(self) -> tuple:
        return Layout, (self.minor_to_major, self.extra)

    def __str__(self) -> str:
        body = ",".join(map(str, self.minor_to_major))
        return "{" + body + (":" + self.extra if self.extra else "") + "}"


@dataclass(frozen=True, slots=True, init=False)
class Shape:
    """An array shape (`f32[8,128]{1,0}`) or a tuple of shapes (`(f32[2], s32[])`).

    `dims` holds the (upper bound of the) size of each dimension; `dynamic[i]` is True for a
    dynamic dimension (`<=N`, or `?` which has no bound and size -1).
    """

    element_type: str  # a key of ELEMENT_BITS, or "tuple"
    dims: tuple[int, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple["Shape", ...] = ()
    dynamic: tuple[bool, ...] = ()
    #: The hash, computed on the first __hash__ (-1 until then: CPython never returns -1 as a
    #: hash).  Shapes key caches and structure keys throughout a replay, and a hash over the
    #: fields (dims, layout, nested shapes) costs far more than reading a slot.  Not a field
    #: of the value: left out of equality, repr and pickling (a str's hash differs between
    #: processes, so a pickled hash would be wrong in the next one).
    _hash: int = field(default=-1, init=False, compare=False, repr=False)

    def __init__(self, element_type: str, dims: tuple[int, ...] = (), layout: Layout | None = None,
                 tuple_shapes: tuple[Shape, ...] = (), dynamic: tuple[bool, ...] = ()) -> None:
        object.__setattr__(self, "element_type", element_type)
        object.__setattr__(self, "dims", dims)
        object.__setattr__(self, "layout", layout)
        object.__setattr__(self, "tuple_shapes", tuple_shapes)
        object.__setattr__(self, "dynamic", dynamic)
        object.__setattr__(self, "_hash", -1)

    def __hash__(self) -> int:
        # The same value as the dataclass hash it replaces (a hash of the compared fields'
        # tuple), so sets and dicts of shapes keep their order.
        found = self._hash
        if found == -1:
            found = hash((self.element_type, self.dims, self.layout, self.tuple_shapes, self.dynamic))
            object.__setattr__(self, "_hash", found)
        return found

    def __reduce__(self) -> tuple:
        return Shape, (self.element_type, self.dims, self.layout, self.tuple_shapes, self.dynamic)

    # -- what kind of shape -------------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.element_type == "tuple"

    @property
    def is_array(self) -> bool:
        return self.element_type not in ("tuple", "token", "opaque")

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_scalar(self) -> bool:
        return self.is_array and not self.dims

    @property
    def is_effective_scalar(self) -> bool:
        """An array with exactly one element (every dimension of size 1)."""
        return self.is_array and all(d == 1 for d in self.dims)

    @property
    def true_rank(self) -> int:
        """Number of dimensions whose size is not 1 (XLA's TrueRank)."""
        return sum(1 for d in self.dims if d != 1)

    # -- sizes --------------------------------------------------------------------------
    @property
    def elements(self) -> int:
        """Elements of an array shape (0 for tuples and tokens)."""
        if not self.is_array:
            return 0
        return prod(max(d, 0) for d in self.dims)

    @property
    def element_bits(self) -> int:
        return ELEMENT_BITS.get(self.element_type, 0)

    @property
    def byte_size(self) -> int:
        """Bytes of the array, or of all array leaves of a tuple."""
        if self.is_tuple:
            return sum(s.byte_size for s in self.tuple_shapes)
        return (self.elements * self.element_bits + 7) // 8

    def leaves(self) -> Iterator["Shape"]:
        """The non-tuple shapes inside, depth first (the shape itself if it is no tuple)."""
        if self.is_tuple:
            for s in self.tuple_shapes:
                yield from s.leaves()
        else:
            yield self

    @property
    def minor_to_major(self) -> tuple[int, ...]:
        """The layout's minor-to-major order, or XLA's default (major-to-minor) layout."""
        if self.layout is not None and len(self.layout.minor_to_major) == self.rank:
            return self.layout.minor_to_major
        return tuple(range(self.rank - 1, -1, -1))

    # -- comparisons XLA makes ----------------------------------------------------------
    def same_dims(self, other: "Shape") -> bool:
        """Equal ignoring element type and layout (XLA's SameDimensions / CompatibleIgnoringElementType)."""
        if self.is_tuple or other.is_tuple:
            return (
                self.is_tuple
                and other.is_tuple
                and len(self.tuple_shapes) == len(other.tuple_shapes)
                and all(a.same_dims(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes))
            )
        return self.dims == other.dims

    def compatible(self, other: "Shape") -> bool:
        """Equal ignoring layouts (XLA's ShapeUtil::Compatible)."""
        if self.is_tuple or other.is_tuple:
            return (
                self.is_tuple
                and other.is_tuple
                and len(self.tuple_shapes) == len(other.tuple_shapes)
                and all(a.compatible(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes))
            )
        return self.element_type == other.element_type and self.dims == other.dims

    def without_layout(self) -> "Shape":
        if self.is_tuple:
            return Shape("tuple", tuple_shapes=tuple(s.without_layout() for s in self.tuple_shapes))
        return Shape(self.element_type, self.dims, None, (), self.dynamic)

    def with_element_type(self, element_type: str) -> "Shape":
        return Shape(element_type, self.dims, self.layout, (), self.dynamic)

    # -- printing -----------------------------------------------------------------------
    def to_text(self, layout: bool = True) -> str:
        """HLO spelling: `f32[8,128]{1,0}` (layouts omitted for scalars, as XLA does)."""
        if self.is_tuple:
            return "(" + ", ".join(s.to_text(layout) for s in self.tuple_shapes) + ")"
        parts = []
        for i, d in enumerate(self.dims):
            if self.dynamic and self.dynamic[i]:
                parts.append("?" if d < 0 else f"<={d}")
            else:
                parts.append(str(d))
        text = f"{self.element_type}[{','.join(parts)}]"
        if layout and self.layout is not None and (self.dims or self.layout.extra):
            text += str(self.layout)
        return text

    def __str__(self) -> str:
        return self.to_text()


def tuple_shape(shapes: "tuple[Shape, ...] | list[Shape]") -> Shape:
    return Shape("tuple", tuple_shapes=tuple(shapes))


def array_shape(element_type: str, dims: tuple[int, ...], minor_to_major: tuple[int, ...] | None = None) -> Shape:
    """An array shape with XLA's default layout unless `minor_to_major` is given."""
    if minor_to_major is None:
        minor_to_major = tuple(range(len(dims) - 1, -1, -1))
    return Shape(element_type, tuple(dims), Layout(tuple(minor_to_major)) if dims else None, (), ())


# ------------------------------------------------------------------------------------------
# Instructions
# ------------------------------------------------------------------------------------------

#: Attributes whose value names computations (one name, a `{a, b}` list, or an inline body).
COMPUTATION_ATTRS = frozenset({
    "calls", "to_apply", "condition", "body", "branch_computations", "true_computation",
    "false_computation", "called_computations", "select", "scatter", "async_wrapped_computation",
})


@dataclass(frozen=True, slots=True, init=False)
class Span:
    """Where something starts in the HLO text (1-based line and column)."""

    line: int
    column: int

    def __init__(self, line: int, column: int) -> None:
        object.__setattr__(self, "line", line)
        object.__setattr__(self, "column", column)

    def __reduce__(self) -> tuple:
        return Span, (self.line, self.column)


@dataclass(frozen=True, slots=True, init=False)
class Instruction:
    """One HLO instruction.  Attribute values are kept verbatim, in source order; the
    `hlofuse.attributes` helpers read typed values from them."""

    name: str
    opcode: str
    shape: Shape
    operands: tuple[str, ...] = ()
    attrs: tuple[tuple[str, str], ...] = ()
    #: The text inside `constant(...)` / `parameter(...)`; None for other opcodes.
    literal: str | None = None
    #: Names of the computations this instruction calls, in attribute order.
    called: tuple[str, ...] = ()
    span: Span | None = field(default=None, compare=False, repr=False)

    def __init__(self, name: str, opcode: str, shape: Shape, operands: tuple[str, ...] = (),
                 attrs: tuple[tuple[str, str], ...] = (), literal: str | None = None, called: tuple[str, ...] = (),
                 span: Span | None = None) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "opcode", opcode)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "operands", operands)
        object.__setattr__(self, "attrs", attrs)
        object.__setattr__(self, "literal", literal)
        object.__setattr__(self, "called", called)
        object.__setattr__(self, "span", span)

    def __reduce__(self) -> tuple:
        return Instruction, (self.name, self.opcode, self.shape, self.operands, self.attrs, self.literal,
                             self.called, self.span)

    def attr(self, name: str, default: str | None = None) -> str | None:
        for key, value in self.attrs:
            if key == name:
                return value
        return default

    def has_attr(self, name: str) -> bool:
        return any(key == name for key, _ in self.attrs)

    @property
    def parameter_number(self) -> int:
        assert self.opcode == "parameter" and self.literal is not None
        return int(self.literal)

    @property
    def fusion_kind(self) -> str | None:
        """`kLoop`, `kInput`, `kOutput` or `kCustom` for a fusion, else None."""
        return self.attr("kind") if self.opcode == "fusion" else None

    @property
    def is_fusion(self) -> bool:
        return self.opcode == "fusion"

    @property
    def fused_computation(self) -> str | None:
        return self.attr("calls") if self.opcode == "fusion" else None

    @property
    def custom_call_target(self) -> str | None:
        value = self.attr("custom_call_target")
        return value.strip('"') if value is not None else None

    def replace(self, **changes) -> "Instruction":
        fields = {f: getattr(self, f) for f in self.__dataclass_fields__}
        fields.update(changes)
        return Instruction(**fields)


# ------------------------------------------------------------------------------------------
# Computations and modules
# ------------------------------------------------------------------------------------------


@mypyc_attr(native_class=False)
@dataclass(frozen=True)
class Computation:
    """A named list of instructions with one root.  The order of `instructions` is the text
    order (XLA prints post order, but hand-written HLO need not be in it)."""

    name: str
    instructions: tuple[Instruction, ...]
    root_name: str
    is_entry: bool = False
    attrs: tuple[tuple[str, str], ...] = ()
    span: Span | None = field(default=None, compare=False, repr=False)

    @_remembered
    def by_name(self) -> Mapping[str, Instruction]:
        return {instr.name: instr for instr in self.instructions}

    def __getitem__(self, name: str) -> Instruction:
        return self.by_name[name]

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    @property
    def root(self) -> Instruction:
        return self.by_name[self.root_name]

    @_remembered
    def parameters(self) -> tuple[Instruction, ...]:
        """Parameter instructions ordered by parameter number."""
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return tuple(sorted(params, key=lambda i: i.parameter_number))

    @_remembered
    def users(self) -> Mapping[str, tuple[str, ...]]:
        """Users of each instruction, each user once, in text order."""
        users: dict[str, list[str]] = {i.name: [] for i in self.instructions}
        for instr in self.instructions:
            seen = set()
            for op in instr.operands:
                if op not in seen:
                    seen.add(op)
                    users[op].append(instr.name)
        return {k: tuple(v) for k, v in users.items()}

    @_remembered
    def post_order(self) -> tuple[Instruction, ...]:
        """Operands before users (and control predecessors before successors); instructions
        unreachable from the root come in text order where they fall.  Iterative, so deep
        graphs do not hit Python's recursion limit."""
        by_name = self.by_name
        order: list[Instruction] = []
        state: dict[str, int] = {}  # 1 = on stack, 2 = done
        for start in self.instructions:
            if start.name in state:
                continue
            stack = [(start, iter(_predecessors(start)))]
            state[start.name] = 1
            while stack:
                node, preds = stack[-1]
                for pred in preds:
                    if pred in by_name and pred not in state:
                        state[pred] = 1
                        child = by_name[pred]
                        stack.append((child, iter(_predecessors(child))))
                        break
                else:
                    stack.pop()
                    state[node.name] = 2
                    order.append(node)
        return tuple(order)

    @property
    def execution_thread(self) -> str | None:
        for key, value in self.attrs:
            if key == "execution_thread":
                return value.strip('"')
        return None


def _predecessors(instr: Instruction) -> tuple[str, ...]:
    preds = instr.operands
    control = instr.attr("control-predecessors")
    if control:
        names = tuple(n.strip().lstrip("%") for n in control.strip("{}").split(",") if n.strip())
        preds = preds + names
    return preds


@dataclass(frozen=True, slots=True, init=False)
class SourceLocation:
    """A user's source position, from metadata or from the module's stack-frame tables."""

    file: str | None
    line: int | None
    function: str | None = None
    column: int | None = None

    def __init__(self, file: str | None, line: int | None, function: str | None = None,
                 column: int | None = None) -> None:
        object.__setattr__(self, "file", file)
        object.__setattr__(self, "line", line)
        object.__setattr__(self, "function", function)
        object.__setattr__(self, "column", column)

    def __reduce__(self) -> tuple:
        return SourceLocation, (self.file, self.line, self.function, self.column)


@mypyc_attr(native_class=False)
@dataclass(frozen=True)
class StackFrameIndex:
    """The FileNames / FunctionNames / FileLocations / StackFrames tables of a JAX dump."""

    file_names: Mapping[int, str] = field(default_factory=dict)
    function_names: Mapping[int, str] = field(default_factory=dict)
    #: id → (file_name_id, function_name_id, line, column)
    file_locations: Mapping[int, tuple[int, int, int, int]] = field(default_factory=dict)
    #: id → (file_location_id, parent's frame id); 0 means no parent.  XLA's text prints
    #: `parent_frame_id` one higher than the parent's id (a root frame prints 1); the parser
    #: stores the parent's real id here.
    frames: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    #: The section lines as printed, so the printer reproduces them.
    text: str = ""

    def location(self, frame_id: int) -> SourceLocation | None:
        """The source position of one frame (the innermost one of an instruction's stack)."""
        frame = self.frames.get(frame_id)
        if frame is None:
            return None
        loc = self.file_locations.get(frame[0])
        if loc is None:
            return None
        file_id, func_id, line, column = loc
        return SourceLocation(
            self.file_names.get(file_id), line, self.function_names.get(func_id), column
        )

    def chain(self, frame_id: int) -> tuple[SourceLocation, ...]:
        """The whole user stack of a frame, innermost first (the frame itself, its caller, ...
        up to the outermost call).  Stops at a frame the tables do not hold, or at a cycle."""
        out: list[SourceLocation] = []
        seen: set[int] = set()
        while frame_id and frame_id in self.frames and frame_id not in seen:
            seen.add(frame_id)
            loc = self.location(frame_id)
            if loc is not None:
                out.append(loc)
            frame_id = self.frames[frame_id][1]
        return tuple(out)

    def __bool__(self) -> bool:
        return bool(self.text)


@mypyc_attr(native_class=False)
@dataclass(frozen=True)
class Module:
    """An HLO module.  `computations` keeps text order; `entry_name` names the entry."""

    name: str
    computations: tuple[Computation, ...]
    entry_name: str
    attrs: tuple[tuple[str, str], ...] = ()
    stack_frames: StackFrameIndex = field(default_factory=StackFrameIndex)
    #: "module" (with an HloModule header), "computations" (bare) or "instruction" (lone).
    form: str = field(default="module", compare=False)
    path: str | None = field(default=None, compare=False, repr=False)
    #: Things worth telling the user that are not errors (unknown opcodes, ...).
    warnings: tuple[str, ...] = field(default=(), compare=False, repr=False)
    #: The spelling the text used (a printer.Style), so printing reproduces it.
    style: Any = field(default=None, compare=False, repr=False)

    @_remembered
    def by_name(self) -> Mapping[str, Computation]:
        return {c.name: c for c in self.computations}

    def __getitem__(self, name: str) -> Computation:
        return self.by_name[name]

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    @property
    def entry(self) -> Computation:
        return self.by_name[self.entry_name]

    def attr(self, name: str, default: str | None = None) -> str | None:
        for key, value in self.attrs:
            if key == name:
                return value
        return default

    @property
    def instruction_count(self) -> int:
        return sum(len(c.instructions) for c in self.computations)

    def instructions(self) -> Iterator[tuple[Computation, Instruction]]:
        for comp in self.computations:
            for instr in comp.instructions:
                yield comp, instr

    @_remembered
    def callers(self) -> Mapping[str, tuple[tuple[str, str, str], ...]]:
        """For each computation: (calling computation, calling instruction, attribute) triples."""
        found: dict[str, list[tuple[str, str, str]]] = {c.name: [] for c in self.computations}
        for comp in self.computations:
            for instr in comp.instructions:
                if not instr.called:
                    continue
                for key, value in instr.attrs:
                    if key not in COMPUTATION_ATTRS:
                        continue
                    for callee in _names_in(value):
                        if callee in found:
                            found[callee].append((comp.name, instr.name, key))
        return {k: tuple(v) for k, v in found.items()}

    def role(self, computation: str) -> str:
        """What calls a computation: `entry`, `fusion`, `while_body`, `while_condition`,
        `branch`, `reducer` (to_apply of reduce/map/sort/scatter/all-reduce...), `call`,
        `async`, `custom_call`, or `unused`."""
        if computation == self.entry_name:
            return "entry"
        callers = self.callers.get(computation, ())
        if not callers:
            return "unused"
        comp_name, instr_name, key = callers[0]
        opcode = self.by_name[comp_name].by_name[instr_name].opcode
        if opcode == "fusion":
            return "fusion"
        if opcode == "while":
            return "while_body" if key == "body" else "while_condition"
        if opcode == "conditional":
            return "branch"
        if opcode == "call":
            return "call"
        if opcode == "custom-call":
            return "custom_call"
        if opcode.startswith("async") or key == "async_wrapped_computation":
            return "async"
        return "reducer"

    @_remembered
    def fusion_computations(self) -> frozenset[str]:
        """Names of computations called by fusion instructions (their fused bodies)."""
        return frozenset(
            name for name, callers in self.callers.items()
            if any(self.by_name[c].by_name[i].opcode == "fusion" for c, i, _ in callers)
        )

    @_remembered
    def computation_post_order(self) -> tuple[Computation, ...]:
        """Callees before callers."""
        order: list[Computation] = []
        done: set[str] = set()
        for start in self.computations:
            stack = [(start, iter(_callees(start)))]
            if start.name in done:
                continue
            done.add(start.name)
            while stack:
                comp, it = stack[-1]
                for callee in it:
                    if callee in self.by_name and callee not in done:
                        done.add(callee)
                        stack.append((self.by_name[callee], iter(_callees(self.by_name[callee]))))
                        break
                else:
                    stack.pop()
                    order.append(comp)
        return tuple(order)


def _callees(comp: Computation) -> list[str]:
    return [c for instr in comp.instructions for c in instr.called]


def _names_in(value: str) -> list[str]:
    """Computation names in an attribute value: `%a`, `{%a, %b}` (inline bodies have none)."""
    text = value.strip()
    if text.startswith("{"):
        text = text[1:-1]
        if "{" in text:  # inline computation bodies
            return []
    return [n.strip().lstrip("%") for n in text.split(",") if n.strip()]

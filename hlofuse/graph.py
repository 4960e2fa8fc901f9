"""A mutable HLO graph for the fusion passes — the counterpart of XLA's HloInstruction and
HloComputation — built from an `ir.Module` and turned back into one: nodes and their operand and
user edges (in XLA's order: its traversals depend on instruction-list order and post order, and so
do ours), graphs, the program holding them, control dependencies and copies.  The fusion
mutations the passes replay live in `fusion_primitives`, unique names in `names`.

Every node remembers which instructions of the input module it stands for (`origin`), so a
fused kernel can always be named by the user's instructions.
"""

from __future__ import annotations

import bisect
import dataclasses
import operator
from typing import Final, Iterable, Iterator

from .native import mypyc_attr
from . import attributes, ir
from .names import NameUniquer, _Root


# ------------------------------------------------------------------------------------------
# Nodes and graphs
# ------------------------------------------------------------------------------------------


class Node:
    """One instruction of a Graph.  Mutable; `users` holds each user once, in the order the
    uses were made (as XLA keeps them)."""

    __slots__ = ("name", "opcode", "shape", "operands", "users", "attrs", "literal", "called",
                 "fused", "graph", "origin", "span", "uid", "edits", "user_slots", "visit", "cursor",
                 "name_parts", "source")

    def __init__(self, name: str, opcode: str, shape: ir.Shape, *, attrs=(), literal=None, called=(),
                 origin: tuple[str, ...] = (), span=None):
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands: list[Node] = []
        self.users: list[Node] = []
        #: Attributes and called computations are tuples, replaced (never edited in place) when
        #: they change: a node shares them with the instruction it was read from and with its
        #: clones (tuple() of a tuple is that tuple), and to_module hands them on as they are.
        self.attrs: tuple[tuple[str, str], ...] = tuple(attrs)
        self.literal = literal
        self.called: tuple[str, ...] = tuple(called)
        self.fused: Graph | None = None
        self.graph: Graph | None = None
        self.origin: tuple[str, ...] = origin
        self.span = span
        self.uid = 0
        #: Bumped whenever this node's operands or users change (analyses cache per node state).
        self.edits = 0
        #: id(user) → its position in `users`, kept only for nodes with many users (see _remove_user).
        self.user_slots: dict[int, int] | None = None
        #: The walk (a number from _WALKS) that last reached this node, and where that walk
        #: stands among its operands: graph walks mark nodes here instead of in sets of uids.
        self.visit = 0
        self.cursor = 0
        #: How the program's name uniquer split `name` when it handed it out (NameUniquer.take),
        #: handed to clones, which ask for the same name.
        self.name_parts: "tuple[_Root, int, str] | None" = None
        #: The input instruction this node was read as (Program.from_module): to_module hands it
        #: on unchanged when the node still says what it said.
        self.source: ir.Instruction | None = None

    # -- attributes -----------------------------------------------------------------------
    def attr(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def set_attr(self, key: str, value: str) -> None:
        if self.graph is not None:
            self.graph.bump()  # a new kind or control edge changes what analyses see
            if key == CONTROL and self.graph.program is not None:
                self.graph.program.has_control = True
        attrs = self.attrs
        for i, (k, _) in enumerate(attrs):
            if k == key:
                self.attrs = attrs[:i] + ((key, value),) + attrs[i + 1:]
                return
        self.attrs = attrs + ((key, value),)

    @property
    def is_fusion(self) -> bool:
        return self.opcode == "fusion"

    @property
    def fusion_kind(self) -> str | None:
        if self.opcode != "fusion":
            return None
        attrs = self.attrs
        if attrs and attrs[0][0] == "kind":  # (where create_fusion puts it; asked per candidate)
            return attrs[0][1]
        return self.attr("kind")

    @fusion_kind.setter
    def fusion_kind(self, kind: str) -> None:
        self.set_attr("kind", kind)

    @property
    def is_multi_output_fusion(self) -> bool:
        return self.is_fusion and self.fused is not None and self.fused.root.opcode == "tuple"

    @property
    def parameter_number(self) -> int:
        return int(self.literal)

    @property
    def is_root(self) -> bool:
        return self.graph is not None and self.graph.root is self

    @property
    def is_dead(self) -> bool:
        """XLA's IsDead: no users and not its computation's root (a root stays, even when a
        pass has fused it into all its users)."""
        return not self.users and not self.is_root

    def fused_parameter(self, i: int) -> "Node":
        return self.fused.parameters[i]

    def fused_nodes(self) -> list["Node"]:
        """The instructions inside a fusion, in post order (parameters included)."""
        return self.fused.post_order() if self.fused is not None else []

    def members(self) -> tuple[str, ...]:
        """Input-module instructions this node stands for (a fusion: everything inside)."""
        if self.fused is None:
            return self.origin
        cache = graph_cache(self.fused)  # asked for every decision about a growing fusion
        found = cache.get("members")
        if found is None:
            out: dict[str, None] = {}  # ordered, and O(1) membership for large fusions
            for node in self.fused._nodes.values():
                if node.opcode != "parameter":
                    for name in node.origin if node.fused is None else node.members():
                        out[name] = None
            found = cache["members"] = tuple(out)
        return found

    def operand_index(self, operand: "Node") -> int:
        try:
            return self.operands.index(operand)  # identity (Node has no __eq__), at C speed
        except ValueError:
            raise ValueError(f"{operand.name} is not an operand of {self.name}") from None

    def user_count(self) -> int:
        return len(self.users)

    def __repr__(self) -> str:
        return f"<{self.opcode} {self.name}>"


@mypyc_attr(allow_interpreted_subclasses=True)
class Graph:
    """A computation.  Keeps XLA's instruction-list order: nodes in the order they were added
    (text order for parsed HLO; new instructions appended)."""

    def __init__(self, program: "Program | None", name: str, *, is_entry: bool = False, attrs=()):
        self.program = program
        if program is not None:
            program.made_graphs.append(self)
        self.name = name
        self.is_entry = is_entry
        self.attrs = list(attrs)
        self._nodes: dict[int, Node] = {}
        #: name → node, made when first asked for (graph edits keep it once made): most
        #: computations, fusion bodies, are never asked for a node by name.
        self._by_name: dict[str, Node] | None = None
        self._root: Node | None = None
        #: Bumped on every change of the computation (nodes, edges, root), so analyses can
        #: cache per version (`version`; every bump also counts in `program.edits`).
        self._version = 0
        self.parameters: list[Node] = []
        self.fusion_owner: Node | None = None  # the fusion instruction whose body this is
        #: (version, {question: answer}) for analyses of this computation (gpu.heroes.graph_cache).
        self.answers: "tuple[int, dict] | None" = None
        #: The post order of version `_post_order_version` (its own fields, not an entry of
        #: `answers`: asked for at nearly every version, where a fresh answers dict would be made).
        self._post_order_list: "list[Node] | None" = None
        self._post_order_version = -1
        #: The pipeline's explainer of this (fused) computation's kernel boundaries, made on the
        #: first question (passes/priority_fusion.explain_boundary) for the replay context it
        #: answers for; dropped with the graph (dispose).
        self.boundary_explainer: object | None = None

    @property
    def version(self) -> int:
        return self._version

    @version.setter
    def version(self, value: int) -> None:
        self._version = value
        if self.program is not None:
            self.program.edits += 1

    def bump(self) -> None:
        """A new version (what `version += 1` does, in one call: this is on every edit)."""
        self._version += 1
        program = self.program
        if program is not None:
            program.edits += 1

    # -- access ---------------------------------------------------------------------------
    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def __iter__(self) -> Iterator[Node]:
        return iter(list(self._nodes.values()))

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node: Node) -> bool:
        return self._nodes.get(node.uid) is node

    def get(self, name: str) -> Node | None:
        return self._names().get(name)

    def __getitem__(self, name: str) -> Node:
        return self._names()[name]

    def _names(self) -> dict[str, Node]:
        found = self._by_name
        if found is None:
            found = self._by_name = {node.name: node for node in self._nodes.values()}
        return found

    @property
    def is_fusion_body(self) -> bool:
        return self.fusion_owner is not None

    @property
    def root(self) -> Node | None:
        return self._root

    @root.setter
    def root(self, node: Node | None) -> None:
        self._root = node
        self.bump()

    # -- editing --------------------------------------------------------------------------
    def add(self, node: Node, *, unique_name: bool = True) -> Node:
        program = self.program
        if program is None:  # (and, compiled, `program` is a Program below: its counters are read directly)
            raise ValueError(f"computation {self.name} belongs to no program: {node.name} cannot be added")
        if unique_name:
            parts = program.instruction_names.take(node.name, node.name_parts)
            node.name = name = parts[2]
            node.name_parts = parts
        else:
            name = node.name
            node.name_parts = program.instruction_names.reserve(name)
        node.graph = self
        self._version += 1  # (bump and next_uid, inlined: every clone and parameter is added here)
        program.edits += 1
        program._uid += 1
        node.uid = uid = program._uid
        self._nodes[uid] = node
        by_name = self._by_name
        if by_name is not None:
            by_name[name] = node
        if node.opcode == "parameter":
            params = self.parameters
            if params and int(params[-1].literal) > int(node.literal):  # (parameter_number, inlined)
                bisect.insort(params, node, key=_parameter_number)
            else:  # the usual case: parameters are added in order
                params.append(node)
        return node

    def remove(self, node: Node) -> None:
        """Delete a node that has no users left; it stops being a user of its operands.  Its
        control successors wait for its control predecessors instead (XLA's
        SafelyDropAllControlDependencies), so no ordering is lost and no name goes stale."""
        assert not node.users, f"{node.name} still has users"
        program = self.program
        if program is not None and program.has_control:
            drop_control_dependencies(node)
        self._version += 1  # (bump(), inlined)
        if program is not None:
            program.edits += 1
        for op in node.operands:
            _remove_user(op, node)
        node.operands = []
        self._nodes.pop(node.uid, None)
        by_name = self._by_name
        if by_name is not None and by_name.get(node.name) is node:
            del by_name[node.name]
        if node.opcode == "parameter":
            params = self.parameters
            i = _index_of(params, node, 0)
            if i >= 0:  # a new list (callers may hold the old one), built at C speed
                self.parameters = params[:i] + params[i + 1:]

    def rename(self, node: Node, new_name: str) -> None:
        waiting = []
        if self.program is not None and self.program.has_control:
            waiting = [(s, self.control_predecessors(s)) for s in self.control_successors(node)]
        by_name = self._by_name
        if by_name is not None:
            if by_name.get(node.name) is node:
                del by_name[node.name]
            by_name[new_name] = node
        node.name = new_name
        for succ, preds in waiting:  # their edges name `node` by its new name
            set_control_predecessors(succ, preds)

    def set_root(self, node: Node) -> None:
        self.root = node

    def replace_all_uses(self, old: Node, new: Node) -> None:
        """Every use of `old` (and the root, if it was `old`) becomes a use of `new`."""
        for user in list(old.users):
            replace_operand(user, old, new)
        if self.root is old:
            self.root = new

    def replace_instruction(self, old: Node, new: Node) -> None:
        """XLA's ReplaceInstruction with relay_control_dependency: redirect all uses and the
        control dependencies of `old` to `new`, then delete `old`."""
        if self.program is not None and self.program.has_control:
            relay_control_dependencies(old, new)
        self.replace_all_uses(old, new)
        self.remove(old)

    # -- order ----------------------------------------------------------------------------
    def post_order(self) -> list[Node]:
        """XLA's MakeInstructionPostOrder: from each user-less instruction in list order, an
        iterative DFS visiting control predecessors (reversed) and operands (in order).
        Remembered until the computation changes (a new list each call: callers may edit it)."""
        return list(self._remembered_post_order())

    def _remembered_post_order(self) -> list[Node]:
        """post_order's list itself (not to be edited: it is the remembered one)."""
        order = self._post_order_list
        if order is None or self._post_order_version != self._version:
            order = self._post_order_list = self._post_order()
            self._post_order_version = self._version
        return order

    def _post_order(self) -> list[Node]:
        if self.program is None or self.program.has_control:
            return self._post_order_with_control()
        # The search below without control edges: each node marked with this walk's number
        # and the position of its next operand (native fields of the node, not a set of uids
        # and an iterator per node: this runs for every version of every computation).
        order: list[Node] = []
        append = order.append
        walk = _WALKS.start()
        nodes = list(self._nodes.values())
        for start in nodes:
            if start.users or start.visit == walk:
                continue
            start.visit = walk
            start.cursor = 0
            stack = [start]
            while stack:
                node = stack[-1]
                operands = node.operands
                i = node.cursor
                n = len(operands)
                pushed = False
                while i < n:
                    child = operands[i]
                    i += 1
                    if child.visit != walk:
                        node.cursor = i
                        child.visit = walk
                        child.cursor = 0
                        stack.append(child)
                        pushed = True
                        break
                if not pushed:
                    stack.pop()
                    append(node)
        if len(order) != len(nodes):  # cycles cannot happen; be safe about strays
            order.extend(n for n in nodes if n.visit != walk)
        return order

    def _post_order_with_control(self) -> list[Node]:
        # A depth-first search that walks each node's children with an iterator (the
        # recursive search XLA's iterative one is equivalent to: a child already expanded is
        # skipped, the others are visited in order), about twice as fast as pushing every
        # child and popping it again.  Children: the control predecessors, last first, then
        # the operands in order (without control edges in the program, just the operands).
        order: list[Node] = []
        append = order.append
        expanded: set[int] = set()
        expand = expanded.add
        with_control = self.program is None or self.program.has_control
        children = self._children
        for start in list(self._nodes.values()):
            if start.users or start.uid in expanded:
                continue
            expand(start.uid)
            stack = [(start, iter(children(start) if with_control else start.operands))]
            push, pop = stack.append, stack.pop
            while stack:
                node, pending = stack[-1]
                for child in pending:
                    if child.uid not in expanded:
                        expand(child.uid)
                        # (the operands read directly unless there are control edges: a call
                        # per node was a fifth of the search)
                        push((child, iter(children(child) if with_control else child.operands)))
                        break
                else:
                    pop()
                    append(node)
        if len(order) != len(self._nodes):  # cycles cannot happen; be safe about strays
            seen = {n.uid for n in order}
            order.extend(n for n in self._nodes.values() if n.uid not in seen)
        return order

    def _children(self, node: Node) -> list[Node]:
        """What the post order visits before `node`: its control predecessors, last first, then
        its operands."""
        for key, _ in node.attrs:
            if key == CONTROL:
                return self.control_predecessors(node)[::-1] + node.operands
        return node.operands

    def control_predecessors(self, node: Node) -> list[Node]:
        text = node.attr(CONTROL)
        if not text:
            return []
        by_name = self._names()
        return [by_name[n] for n in ir._names_in(text) if n in by_name]

    def control_successors(self, node: Node) -> list[Node]:
        """Nodes that list `node` among their control predecessors (a scan: asked only of
        programs that have control edges at all, which dumps before fusion rarely do)."""
        if self.program is not None and not self.program.has_control:
            return []
        return [n for n in self._nodes.values() if n is not node and n.attrs and
                any(p is node for p in self.control_predecessors(n))]

    def reachable_from(self, start: Node) -> set[int]:
        """uids of every node reachable from `start` through users (start included)."""
        seen = {start.uid}
        stack = [start]
        while stack:
            node = stack.pop()
            for user in node.users:
                if user.uid not in seen:
                    seen.add(user.uid)
                    stack.append(user)
        return seen

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self._nodes)} nodes>"


class _WalkNumbers:
    """Numbers for graph walks that mark the nodes they reach (Node.visit): a new number per
    walk, so no mark needs clearing."""

    def __init__(self) -> None:
        self.last = 0

    def start(self) -> int:
        self.last += 1
        return self.last


_WALKS: Final = _WalkNumbers()


def graph_cache(graph: Graph) -> dict:
    """Answers about `graph` valid until it changes (keyed by what was asked).  Heroes, kinds
    and members of fusions are asked again and again while a fusion grows; a computation's
    version changes with every edit.  Kept on the graph itself: this is on every hot path."""
    entry = graph.answers
    if entry is None or entry[0] != graph._version:
        entry = graph.answers = (graph._version, {})
    return entry[1]


def program_cache(program: "Program") -> dict:
    """Answers about the whole program valid until any of it changes (program.edits)."""
    entry = program.answers
    if entry is None or entry[0] != program.edits:
        entry = program.answers = (program.edits, {})
    return entry[1]


def _parameter_number(node: Node) -> int:
    return node.parameter_number


def _touch(node: Node) -> None:
    node.edits += 1
    graph = node.graph
    if graph is not None:  # (graph.bump(), inlined: every edge edit comes here)
        graph._version += 1
        program = graph.program
        if program is not None:
            program.edits += 1


def _add_user(operand: Node, user: Node) -> None:
    operand.edits += 1
    if operand.user_slots is not None:
        operand.user_slots[id(user)] = len(operand.users)
    operand.users.append(user)


#: Above this many users a node keeps the positions of its users (a constant or broadcast
#: shared by a whole model has thousands, and every fusion removes one of them).
_MANY_USERS: Final = 64


def _remove_user(operand: Node, user: Node) -> None:
    """XLA's Users::RemoveUser: the last user moves into the removed user's slot (user order
    is not preserved, and XLA's traversals that follow user order see exactly this order).
    Positions come from `user_slots` when kept, checked before use: code that rebuilds a
    users list directly only costs a search."""
    operand.edits += 1
    users = operand.users
    slots = operand.user_slots
    i = slots.get(id(user), -1) if slots is not None else -1
    if not (0 <= i < len(users) and users[i] is user):
        try:
            i = users.index(user)  # Node has no __eq__: identity, at C speed
        except ValueError:
            return
        slots = operand.user_slots = {id(u): k for k, u in enumerate(users)} if len(users) > _MANY_USERS else None
    last = users.pop()
    if slots is not None:
        slots.pop(id(user), None)
    if i < len(users):
        users[i] = last
        if slots is not None:
            slots[id(last)] = i


def _index_of(nodes: list[Node], node: Node, start: int) -> int:
    """Position of `node` in `nodes` from `start` (identity: Node has no __eq__), or -1."""
    try:
        return nodes.index(node, start)
    except ValueError:
        return -1


def first_positions(node: Node) -> dict[int, int]:
    """uid of each operand → its first position among the node's operands (what XLA's
    operand_index answers), so that wide instructions (a concatenate of thousands of operands)
    are not searched once per operand."""
    out: dict[int, int] = {}
    for i, op in enumerate(node.operands):
        out.setdefault(op.uid, i)
    return out


def add_operand(node: Node, operand: Node) -> None:
    _touch(node)
    operands = node.operands
    users = operand.users
    # node uses operand already iff operand is among its operands: ask the shorter list
    already = operand in operands if len(operands) < len(users) else node in users
    operands.append(operand)
    if not already:  # (_add_user, inlined)
        operand.edits += 1
        if operand.user_slots is not None:
            operand.user_slots[id(node)] = len(users)
        users.append(node)


def replace_operand(node: Node, old: Node, new: Node) -> None:
    """Every use of `old` as an operand of `node` becomes `new`."""
    if len(node.operands) > _WIDE_OPERANDS and node.graph is not None and node.graph.program is not None:
        _replace_wide_operand(node, old, new)
        return
    _touch(node)
    operands = node.operands
    uses = operands.count(old)  # (at C speed, as the searches below: Node has no __eq__)
    if not uses:
        return
    i = -1
    for _ in range(uses):
        i = operands.index(old, i + 1)
        operands[i] = new
    _remove_user(old, node)
    users = new.users
    if node not in users:  # (_add_user, inlined)
        new.edits += 1
        if new.user_slots is not None:
            new.user_slots[id(node)] = len(users)
        users.append(node)


#: Above this many operands a node's operand positions are remembered between replacements
#: (an output tuple holds thousands, and every fusion of one of them replaces it there: a
#: search per replacement made that quadratic in the module's size).
_WIDE_OPERANDS: Final = 64


def _replace_wide_operand(node: Node, old: Node, new: Node) -> None:
    """replace_operand for a wide node: positions by operand identity, kept by the program
    for the node's current edit count (any other edit of its operands bumps that count, and
    the positions are read again from the list)."""
    remembered = node.graph.program.operand_positions
    entry = remembered.get(node.uid)
    operands = node.operands
    if entry is not None and entry[0] is node and entry[1] == node.edits:
        positions = entry[2]
    else:
        positions = {}
        for i, op in enumerate(operands):
            positions.setdefault(id(op), []).append(i)
    found = positions.pop(id(old), None)
    if found and operands[found[0]] is not old:  # (cannot happen; never trust a stale entry)
        remembered.pop(node.uid, None)
        found = [i for i, op in enumerate(operands) if op is old]
        positions = None
    _touch(node)
    if found:
        for i in found:
            operands[i] = new
        if positions is not None:
            positions.setdefault(id(new), []).extend(found)
    if positions is not None:
        remembered[node.uid] = (node, node.edits, positions)
    if found:
        _remove_user(old, node)
        if node not in new.users:
            _add_user(new, node)


def set_operand(node: Node, index: int, new: Node) -> None:
    _touch(node)
    old = node.operands[index]
    node.operands[index] = new
    if old not in node.operands:
        _remove_user(old, node)
    if node not in new.users:
        _add_user(new, node)


def remove_operand_at(node: Node, index: int) -> None:
    _touch(node)
    old = node.operands.pop(index)
    if old not in node.operands:
        _remove_user(old, node)


# ------------------------------------------------------------------------------------------
# The program: all graphs of a module
# ------------------------------------------------------------------------------------------


class ProgramMemo:
    """What a replay of one program learns once and reuses: answers that are functions of a
    structure (no node identity), so they stay true while the program is edited."""

    __slots__ = ("tilings", "structures")

    def __init__(self) -> None:
        #: hlofuse.cost.tiled.best_tiled by (device, profile, structure_key of the fusion).
        self.tilings: dict[tuple, object] = {}
        #: A fused body's structure (hlofuse.cost.structure) → a small number standing for it.
        self.structures: dict[tuple, int] = {}


class Program:
    """A module being rewritten: its graphs (computations), entry, and name tables.  Every
    attribute is declared here (a native class when compiled: the graph edits read its counters
    directly), including the bookkeeping the passes keep per program."""

    def __init__(self, name: str):
        self.name = name
        self.graphs: dict[str, Graph] = {}
        self.entry: Graph | None = None
        self.attrs: list[tuple[str, str]] = []
        self.instruction_names = NameUniquer()
        self.computation_names = NameUniquer()
        self._uid = 0
        #: Bumped by every change of any graph (its version) and by adding or removing graphs:
        #: an unchanged count means an unchanged program.
        self.edits = 0
        #: (edits, {question: answer}) for analyses of the whole program (program_cache).
        self.answers: "tuple[int, dict] | None" = None
        self.stack_frames = ir.StackFrameIndex()
        self.style: object = None  # the parsed module's printer.Style
        self.source: ir.Module | None = None
        #: Every graph made for this program, live or dropped (bodies merged away), for dispose().
        self.made_graphs: list[Graph] = []
        #: metadata text → the user's source location it names (decisions ask it per pair).
        self.locations: dict[str, ir.SourceLocation | None] = {}
        #: Whether any instruction has control predecessors (almost never before fusion): only
        #: then do edits keep control edges pointing at live instructions.
        self.has_control = False
        #: Answers that depend only on the structure of what is asked about, remembered for the
        #: program's life (ProgramMemo).
        self.memo = ProgramMemo()
        #: The pipeline's explainer of this (fused) program's kernel boundaries, made on the
        #: first question (passes/cpu.explain_boundary) for the replay context it answers for.
        self.boundary_explainer: object | None = None
        #: graph name -> (graph, its version, names of the graphs it calls), for graph_order.
        self.callees: dict[str, tuple[Graph, int, list[str]]] = {}
        #: node uid -> (node, its edit count, id(operand) -> positions), for wide nodes' edits.
        self.operand_positions: dict[int, tuple[Node, int, dict[int, list[int]]]] = {}
        #: graph name -> (graph, version) of fused computations CSE (passes/cleanup) left with
        #: nothing to merge, and of computations DCE left with nothing to remove.
        self.cse_clean: dict[str, tuple[Graph, int]] = {}
        self.dce_clean: dict[str, tuple[Graph, int]] = {}

    def next_uid(self) -> int:
        self._uid += 1
        return self._uid

    def location(self, node: Node) -> "ir.SourceLocation | None":
        """The user's source line of a node, from its metadata or the stack-frame tables
        (remembered per metadata text: decisions ask it for every pair, and jax repeats a
        text on many instructions)."""
        text = node.attr("metadata")
        if not text:
            return None
        known = self.locations
        if text in known:
            return known[text]
        meta = attributes.metadata(node)  # Node has the .attr() the reader needs
        found = None
        if meta.source_file or meta.source_line:
            found = ir.SourceLocation(meta.source_file, meta.source_line)
        elif meta.stack_frame_id is not None and self.stack_frames:
            found = self.stack_frames.location(meta.stack_frame_id)
        known[text] = found
        return found

    def dispose(self) -> None:
        """Break the reference cycles of everything this program made (node ↔ graph, operand
        ↔ user, fusion ↔ body), so it is freed at once by reference counting.  Left to the
        cyclic collector, a replayed program of 100k instructions is a million objects that
        its next collection has to find (seconds).  The program is unusable afterwards.

        Only the edges that close cycles are cut, each by one store or clear: a node's users
        (the operand edges alone are acyclic), and each graph's hold on its nodes (the nodes'
        own `graph` then points at an empty graph), its fusion instruction and its program.
        What is left is a tree of references, freed as the program is dropped."""
        for graph in self.made_graphs:
            for node in graph._nodes.values():
                node.users.clear()
            graph._nodes.clear()
            graph._by_name = None
            graph._root = graph.fusion_owner = graph.answers = graph.program = None
            graph._post_order_list = None
            graph.boundary_explainer = None
            graph.parameters = []
        self.made_graphs = []
        self.locations = {}
        self.memo = ProgramMemo()
        self.boundary_explainer = None
        self.graphs = {}
        self.entry = None
        self.callees = {}
        self.operand_positions = {}
        self.cse_clean = {}
        self.dce_clean = {}
        self.answers = None

    def add_graph(self, graph: Graph, *, unique_name: bool = True) -> Graph:
        if unique_name:
            graph.name = self.computation_names.get(graph.name)
        else:
            self.computation_names.reserve(graph.name)
        self.graphs[graph.name] = graph
        self.edits += 1
        return graph

    def remove_graph(self, graph: Graph) -> None:
        self.graphs.pop(graph.name, None)
        self.edits += 1

    def new_graph(self, name: str) -> Graph:
        return self.add_graph(Graph(self, name))

    def graph_order(self) -> list[Graph]:
        """Callees before callers (XLA's MakeComputationPostOrder), from the entry.
        Remembered until the program changes (passes ask for it at every run)."""
        cache = program_cache(self)
        order = cache.get("graph-order")
        if order is None:
            order = cache["graph-order"] = self._graph_order()
        return list(order)

    def _graph_order(self) -> list[Graph]:
        order: list[Graph] = []
        seen: set[str] = set()

        cache = self.callees

        for start in list(self.graphs.values()):
            if start.name in seen:
                continue
            stack = [(start, iter(self._called_graphs(start, cache)))]
            seen.add(start.name)
            while stack:
                g, it = stack[-1]
                for child in it:
                    if child.name not in seen:
                        seen.add(child.name)
                        stack.append((child, iter(self._called_graphs(child, cache))))
                        break
                else:
                    stack.pop()
                    order.append(g)
        return order

    def _called_graphs(self, g: Graph, cache: dict[str, tuple[Graph, int, list[str]]]) -> list[Graph]:
        """The graphs `g` calls or fuses, remembered in `cache` per version of `g` (passes ask
        for the order often, most graphs unchanged).  A method, not a closure: mypyc compiles
        no closures in a class that stays a Python class (hlofuse.native)."""
        cached = cache.get(g.name)
        if cached is not None and cached[0] is g and cached[1] == g._version:
            names = cached[2]
        else:
            names = []
            for node in self._calling_nodes(g):
                if node.fused is not None:
                    names.append(node.fused.name)
                if node.called:  # (most instructions call nothing)
                    names.extend(node.called)
            cache[g.name] = (g, g._version, names)
        if not names:
            return []
        return [self.graphs[n] for n in names if n in self.graphs]

    @staticmethod
    def _calling_nodes(g: Graph) -> list[Node]:
        """The nodes of `g` that call or fuse a graph, in post order.  Most graphs (fusion
        bodies) hold at most one, whose order needs no post order: that is computed only for
        graphs with several."""
        calling: list[Node] = []
        for node in g._nodes.values():
            if node.fused is not None or node.called:
                calling.append(node)
        if len(calling) < 2:
            return calling
        return [node for node in g._remembered_post_order() if node.fused is not None or node.called]

    def remove_dead_graphs(self) -> bool:
        """Remove every computation the entry no longer reaches through calls and fusions
        (XLA's HloDCE, RecursivelyRemoveDeadComputations): fused computations of fusions that
        were merged away, and computations nothing called to begin with."""
        if self.entry is None:
            return False
        live = {self.entry.name}
        stack = [self.entry]
        graphs = self.graphs
        known = self.callees
        while stack:
            g = stack.pop()
            cached = known.get(g.name)
            if cached is not None and cached[0] is g and cached[1] == g._version:
                # what graph_order found in this version of `g` (most graphs are unchanged
                # since the order was last asked for: their nodes are not scanned again)
                for name in cached[2]:
                    graph = graphs.get(name)
                    if graph is not None and name not in live:
                        live.add(name)
                        stack.append(graph)
                continue
            for node in g._nodes.values():  # (every node of a changed graph: kept lean)
                fused = node.fused
                if fused is not None and fused.name not in live and fused.name in graphs:
                    live.add(fused.name)
                    stack.append(graphs[fused.name])
                if node.called:
                    for name in node.called:
                        graph = graphs.get(name)
                        if graph is not None and name not in live:
                            live.add(name)
                            stack.append(graph)
        dead = [g for name, g in self.graphs.items() if name not in live]
        for graph in dead:
            self.remove_graph(graph)
        return bool(dead)

    def non_fusion_graphs(self) -> list[Graph]:
        return [g for g in self.graph_order() if not g.is_fusion_body]

    def callers(self) -> dict[str, list[Node]]:
        """Graph name → nodes that call it (through `called`; fusion bodies through `fused`)."""
        out: dict[str, list[Node]] = {name: [] for name in self.graphs}
        for g in self.graphs.values():
            for node in g:
                for c in node.called:
                    out.setdefault(c, []).append(node)
                if node.fused is not None:
                    out.setdefault(node.fused.name, []).append(node)
        return out

    # -- conversion -----------------------------------------------------------------------
    @classmethod
    def from_module(cls, module: ir.Module) -> "Program":
        """A graph per computation; fusion instructions get their fused computation as `fused`."""
        from .cycles import require_acyclic

        require_acyclic(module)  # a module built in memory has not met the parser's check
        prog = cls(module.name)
        prog.attrs = list(module.attrs)
        prog.stack_frames = module.stack_frames
        prog.style = module.style
        prog.source = module
        fusion_bodies = {}
        for comp in module.computations:
            for instr in comp.instructions:
                if instr.opcode == "fusion" and instr.fused_computation:
                    fusion_bodies[instr.fused_computation] = (comp.name, instr.name)
        owners: dict[str, Node] = {}  # fused computation → the fusion instruction it is the body of
        # (the input's names are reserved as the graphs and nodes are added, unique_name=False)
        for comp in module.computations:
            g = Graph(prog, comp.name, is_entry=comp.name == module.entry_name, attrs=comp.attrs)
            prog.add_graph(g, unique_name=False)
            nodes: dict[str, Node] = {}
            in_fusion = comp.name in fusion_bodies
            for instr in comp.instructions:
                called = instr.called
                if called and instr.opcode == "fusion":  # (the body is `fused`, not a callee)
                    body = instr.fused_computation
                    called = tuple([c for c in called if c != body])
                node = Node(instr.name, instr.opcode, instr.shape, attrs=instr.attrs, literal=instr.literal,
                            called=called, origin=() if in_fusion and instr.opcode == "parameter" else (instr.name,),
                            span=instr.span)
                node.source = instr
                g.add(node, unique_name=False)
                nodes[instr.name] = node
                if instr.opcode == "fusion" and fusion_bodies.get(instr.fused_computation) == (comp.name, instr.name):
                    owners[instr.fused_computation] = node
            for instr in comp.instructions:
                node = nodes[instr.name]
                for op in instr.operands:
                    add_operand(node, nodes[op])
                if not prog.has_control and instr.attrs and instr.attr(CONTROL):
                    prog.has_control = True
            g.root = nodes[comp.root_name]
            if comp.name == module.entry_name:
                prog.entry = g
        for body in fusion_bodies:
            if body in prog.graphs:
                owner = owners[body]
                owner.fused = prog.graphs[body]
                owner.fused.fusion_owner = owner
        # Nodes inside fused bodies stand for the input module's instructions of the same name.
        return prog

    def to_module(self) -> ir.Module:
        """The program as an ir.Module: fused computations printed before their users, as XLA
        prints them (callees before callers), instructions in post order."""
        comps: list[ir.Computation] = []
        make = _INSTRUCTION_MAKER or _bind_instruction_maker()
        # (compiled, ir.Instruction is a native class: called by name, its constructor is a
        # direct call storing the fields)
        direct = make is ir.Instruction
        name_of = _NAME_OF
        for g in self.graph_order():
            instrs: list[ir.Instruction] = []
            for node in g._remembered_post_order():
                source = node.source
                if source is not None and _says_the_same(node, source):
                    instrs.append(source)  # (most instructions outside fusions: nothing to build)
                    continue
                attrs = node.attrs
                called = node.called
                fused = node.fused
                if fused is not None:
                    listed = [(k, v) for k, v in attrs if k != "calls"]
                    kind_at = next((i for i, (k, _) in enumerate(listed) if k == "kind"), None)
                    entry = ("calls", fused.name)
                    if kind_at is None:
                        listed.insert(0, entry)
                    else:
                        listed.insert(kind_at + 1, entry)
                    attrs = tuple(listed)
                    called = (fused.name,) + tuple([c for c in called if c != fused.name])
                if direct:
                    instrs.append(ir.Instruction(node.name, node.opcode, node.shape,
                                                 tuple([op.name for op in node.operands]), attrs,
                                                 node.literal, called, node.span))
                else:
                    instrs.append(make(node.name, node.opcode, node.shape, tuple(map(name_of, node.operands)),
                                       attrs, node.literal, called, node.span))
            comps.append(ir.Computation(g.name, tuple(instrs), g.root.name, g is self.entry, tuple(g.attrs)))
        return ir.Module(self.name, tuple(comps), self.entry.name, tuple(self.attrs), self.stack_frames,
                         style=self.style)


def _says_the_same(node: Node, source: ir.Instruction) -> bool:
    """Whether `node`, not a fusion, still reads as the instruction it was read from: the same
    name, operands (by name), attributes and callees (the same tuples: edits replace them),
    shape and literal."""
    if (node.fused is not None or source.name != node.name or source.attrs is not node.attrs
            or source.called is not node.called or source.shape is not node.shape
            or source.literal is not node.literal or source.opcode != node.opcode):
        return False
    names = source.operands
    operands = node.operands
    n = len(operands)
    if len(names) != n:
        return False
    for i in range(n):
        if operands[i].name != names[i]:
            return False
    return True


_NAME_OF = operator.attrgetter("name")
_INSTRUCTION_FIELDS = ("name", "opcode", "shape", "operands", "attrs", "literal", "called", "span")
_INSTRUCTION_MAKER = None


def _bind_instruction_maker():
    """make(name, opcode, shape, operands, attrs, literal, called, span) -> an ir.Instruction.
    A frozen dataclass's __init__ sets each field through object.__setattr__; writing the
    slots directly builds one in about half the time (to_module makes one per instruction of
    the fused program).  Should ir.Instruction change shape, its constructor is used."""
    global _INSTRUCTION_MAKER
    cls = ir.Instruction
    if (tuple(f.name for f in dataclasses.fields(cls)) != _INSTRUCTION_FIELDS or not hasattr(cls, "__slots__")
            or hasattr(cls, "__post_init__")):
        _INSTRUCTION_MAKER = cls
        return cls
    new = object.__new__
    s_name, s_opcode, s_shape, s_operands, s_attrs, s_literal, s_called, s_span = (
        getattr(cls, f).__set__ for f in _INSTRUCTION_FIELDS)

    def make(name, opcode, shape, operands, attrs, literal, called, span):
        made = new(cls)
        s_name(made, name)
        s_opcode(made, opcode)
        s_shape(made, shape)
        s_operands(made, operands)
        s_attrs(made, attrs)
        s_literal(made, literal)
        s_called(made, called)
        s_span(made, span)
        return made

    _INSTRUCTION_MAKER = make
    return make


# ------------------------------------------------------------------------------------------
# Control dependencies
# ------------------------------------------------------------------------------------------
# A control edge lives in its successor's `control-predecessors` attribute, by name.  When a
# pass replaces, fuses or deletes an instruction, its edges move to what takes its place, so
# the fused module names only instructions that exist (and prints back).

#: The attribute that holds an instruction's control predecessors.
CONTROL: Final = "control-predecessors"


def set_control_predecessors(node: Node, preds: Iterable[Node]) -> None:
    """`node` waits for `preds` (each once, never itself); none removes the attribute."""
    names = list(dict.fromkeys(p.name for p in preds if p is not node))
    if names:
        node.set_attr(CONTROL, "{" + ", ".join(names) + "}")
    elif node.attr(CONTROL) is not None:
        node.attrs = tuple([(k, v) for k, v in node.attrs if k != CONTROL])
        if node.graph is not None:
            node.graph.bump()


def relay_control_dependencies(old: Node, new: Node) -> None:
    """`new` takes the place of `old` in control edges (XLA's CopyAllControlDepsFrom and
    DropAllControlDeps, as ReplaceInstruction does with relay_control_dependency=true)."""
    graph = old.graph
    preds = graph.control_predecessors(old)
    if preds:
        set_control_predecessors(new, graph.control_predecessors(new) + preds)
    for succ in graph.control_successors(old):
        set_control_predecessors(succ, [new if p is old else p for p in graph.control_predecessors(succ)])
    set_control_predecessors(old, ())


def drop_control_dependencies(node: Node) -> None:
    """Remove `node` from control edges, its successors waiting for its predecessors instead
    (XLA's SafelyDropAllControlDependencies)."""
    graph = node.graph
    preds = graph.control_predecessors(node)
    for succ in graph.control_successors(node):
        joined: list[Node] = []
        for p in graph.control_predecessors(succ):
            joined.extend(preds if p is node else (p,))
        set_control_predecessors(succ, joined)
    if node.attrs:
        set_control_predecessors(node, ())


def absorb_control_dependencies(fusion: Node, producer: Node) -> None:
    """`fusion` now computes `producer`'s value: it waits for the producer's control
    predecessors, and the producer's control successors wait for it (CopyAllControlDepsTo),
    except where an edge would close a cycle; the producer keeps its own edges while it lives."""
    graph = fusion.graph
    if graph is None or graph.program is None or not graph.program.has_control or producer.graph is not graph:
        return
    preds = graph.control_predecessors(producer)
    succs = graph.control_successors(producer)
    if not preds and not succs:
        return
    successors = _control_successor_map(graph)
    new_preds = [p for p in preds if not _reaches(fusion, p, successors)]
    if new_preds:
        set_control_predecessors(fusion, graph.control_predecessors(fusion) + new_preds)
        successors = _control_successor_map(graph)
    for succ in succs:
        if succ is not fusion and not _reaches(succ, fusion, successors):
            set_control_predecessors(succ, graph.control_predecessors(succ) + [fusion])


def _control_successor_map(graph: Graph) -> dict[int, list[Node]]:
    out: dict[int, list[Node]] = {}
    for node in graph._nodes.values():
        if node.attrs:
            for pred in graph.control_predecessors(node):
                out.setdefault(pred.uid, []).append(node)
    return out


def _reaches(start: Node, target: Node, successors: dict[int, list[Node]]) -> bool:
    """Whether `target` depends on `start` through data or control edges."""
    seen = {start.uid}
    stack = [start]
    while stack:
        node = stack.pop()
        if node is target:
            return True
        for nxt in (*node.users, *successors.get(node.uid, ())):
            if nxt.uid not in seen:
                seen.add(nxt.uid)
                stack.append(nxt)
    return False


# ------------------------------------------------------------------------------------------
# Copies (the fusion primitives in fusion_primitives.py clone what they fuse)
# ------------------------------------------------------------------------------------------


def clone_node(node: Node, graph: Graph, name: str | None = None) -> Node:
    """A copy of `node` (no operands yet) added to `graph` under a uniquified name.  Control
    dependencies are not copied (XLA's Clone does not copy them); the instruction that takes
    the place of `node` relays them (relay_control_dependencies, absorb_control_dependencies)."""
    attrs = node.attrs
    for key, _ in attrs:  # (a loop, not any(): on every clone, and attrs are few)
        if key == CONTROL:
            attrs = tuple([(k, v) for k, v in attrs if k != CONTROL])
            break
    copy = Node(name or node.name, node.opcode, node.shape, attrs=attrs, literal=node.literal,
                called=node.called, origin=node.origin, span=node.span)
    if name is None:
        copy.name_parts = node.name_parts  # (checked against the name before use)
    if node.fused is not None:
        copy.fused = clone_graph(node.fused, graph.program)
        copy.fused.fusion_owner = copy
    return graph.add(copy)


def clone_graph(graph: Graph, program: Program, suffix: str = "clone") -> Graph:
    """A deep copy of a computation (for duplicating fusions), named `<name>.clone`."""
    new = program.add_graph(Graph(program, f"{graph.name}.{suffix}" if suffix else graph.name))
    mapping: dict[int, Node] = {}
    for node in graph.nodes():
        copy = clone_node(node, new)
        mapping[node.uid] = copy
    for node in graph.nodes():
        for op in node.operands:
            add_operand(mapping[node.uid], mapping[op.uid])
    new.root = mapping[graph.root.uid]
    return new


def walk(nodes: Iterable[Node]) -> Iterator[Node]:
    """Nodes and, recursively, the nodes inside fusions."""
    for node in nodes:
        yield node
        if node.fused is not None:
            yield from walk(node.fused.nodes())

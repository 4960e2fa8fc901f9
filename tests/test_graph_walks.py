"""The graph layer's cheaper walks answer what the plain ones do: the post order that marks
nodes (against the search it replaced, on random graphs), the computation order and the dead
computations found from remembered callee lists, CSE's duplicate test that makes keys only
where two instructions can share one, and the name table made on first ask."""

from __future__ import annotations

import random

from hlofuse import loads
from hlofuse.graph import CONTROL, Graph, Node, Program, add_operand
from hlofuse.ir import Shape
from hlofuse.passes.cleanup import _has_duplicates, _cse_key, cse_graph

F32 = Shape("f32", (8,))


def _random_graph(seed: int, size: int = 60) -> Graph:
    rng = random.Random(seed)
    program = Program("m")
    graph = program.add_graph(Graph(program, "g"))
    nodes: list[Node] = []
    for i in range(size):
        if i < 3 or rng.random() < 0.1:
            node = graph.add(Node(f"p.{i}", "parameter", F32, literal=str(len(graph.parameters))))
        else:
            node = graph.add(Node(f"n.{i}", "add", F32))
            for _ in range(rng.randint(1, 3)):
                add_operand(node, rng.choice(nodes))
        nodes.append(node)
    graph.root = nodes[-1]
    return graph


def _reference_post_order(graph: Graph) -> list[Node]:
    """XLA's MakeInstructionPostOrder written plainly: from each user-less node in list order,
    a recursive search through the operands in order."""
    order: list[Node] = []
    seen: set[int] = set()

    def visit(node: Node) -> None:
        seen.add(node.uid)
        for op in node.operands:
            if op.uid not in seen:
                visit(op)
        order.append(node)

    for node in graph.nodes():
        if not node.users and node.uid not in seen:
            visit(node)
    return order


def test_post_order_matches_the_plain_search_on_random_graphs():
    for seed in range(40):
        graph = _random_graph(seed)
        assert [n.name for n in graph.post_order()] == [n.name for n in _reference_post_order(graph)], seed
        # and the search used with control edges gives the same order without any
        assert graph._post_order_with_control() == graph._post_order(), seed


def test_post_order_after_edits_is_recomputed_and_walks_do_not_interfere():
    graph = _random_graph(7)
    first = graph.post_order()
    other = _random_graph(8)
    other.post_order()  # another walk in between: marks are per walk
    extra = graph.add(Node("late", "negate", F32))
    add_operand(extra, first[0])
    order = graph.post_order()
    assert len(order) == len(first) + 1 and order == _reference_post_order(graph)


CALLS = """
HloModule m
add_f {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
max_f {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] maximum(x, y)
}
unused {
  ROOT c = f32[] constant(0)
}
ENTRY e {
  p = f32[8]{0} parameter(0)
  z = f32[] constant(0)
  b = f32[] reduce(p, z), dimensions={0}, to_apply=max_f
  a = f32[] reduce(p, z), dimensions={0}, to_apply=add_f
  ROOT t = (f32[], f32[]) tuple(a, b)
}
"""


def test_graph_order_follows_the_post_order_of_several_callers():
    program = Program.from_module(loads(CALLS))
    # the entry calls max_f (b) before add_f (a) in list order, but a comes first in post order
    names = [g.name for g in program.graph_order()]
    assert names.index("add_f") < names.index("max_f") < names.index("e")


def test_dead_computations_are_found_with_remembered_callees_and_after_edits():
    program = Program.from_module(loads(CALLS))
    program.graph_order()  # remembers what each computation calls
    assert program.remove_dead_graphs()  # `unused` is called by nothing
    assert "unused" not in program.graphs and {"add_f", "max_f"} <= set(program.graphs)
    entry = program.entry
    b = entry["b"]
    entry.root.operands[1] = entry["a"]  # b no longer read (the edit below bumps the version)
    b.users.clear()
    entry.remove(b)
    assert program.remove_dead_graphs()  # max_f was only called by b: the entry was rescanned
    assert "max_f" not in program.graphs and "add_f" in program.graphs


DUPLICATES = """
HloModule m
fused {
  a = f32[8]{0} parameter(0)
  b = f32[8]{0} parameter(1)
  s1 = f32[8]{0} subtract(a, b)
  s2 = f32[8]{0} subtract(b, a)
  c1 = f32[8]{0} constant({1, 2, 3, 4, 5, 6, 7, 8})
  c2 = f32[8]{0} constant({1, 2, 3, 4, 5, 6, 7, 9})
  m = f32[8]{0} multiply(s1, c1)
  n = f32[8]{0} multiply(s2, c2)
  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(m, n)
}
ENTRY e {
  p = f32[8]{0} parameter(0)
  q = f32[8]{0} parameter(1)
  ROOT f = (f32[8]{0}, f32[8]{0}) fusion(p, q), kind=kLoop, calls=fused
}
"""


def _body(text: str) -> Graph:
    return Program.from_module(loads(text)).graphs["fused"]


def _has_duplicates_plainly(graph: Graph) -> bool:
    from hlofuse.passes.cleanup import _SIDE_EFFECT

    keys = [_cse_key(n) for n in graph.nodes() if n.opcode not in _SIDE_EFFECT]
    return len(keys) != len(set(keys))


def test_duplicate_test_agrees_with_comparing_every_key():
    cases = {
        "none": DUPLICATES,
        "same operands": DUPLICATES.replace("subtract(b, a)", "subtract(a, b)"),
        "same constants": DUPLICATES.replace("7, 9}", "7, 8}"),
        "same operands, other order": DUPLICATES.replace("subtract(a, b)", "subtract(b, a)"),
        "first operand shared, second not": DUPLICATES.replace("subtract(b, a)", "subtract(a, a)"),
    }
    expected = {"none": False, "same operands": True, "same constants": True,
                "same operands, other order": True, "first operand shared, second not": False}
    for name, text in cases.items():
        body = _body(text)
        assert _has_duplicates(body) == _has_duplicates_plainly(body) == expected[name], name
    merged = _body(cases["same constants"])
    assert cse_graph(merged) and "c2" not in {n.name for n in merged.nodes()}


def test_name_table_is_made_on_first_ask_and_kept_through_edits():
    program = Program.from_module(loads(CALLS))
    entry = program.entry
    assert entry.get("a") is not None and entry.get("missing") is None
    made = entry.add(Node("a", "negate", Shape("f32", ())))  # uniquified
    assert made.name != "a" and entry[made.name] is made and entry["a"] is not made
    entry.rename(made, "renamed")
    assert entry.get("renamed") is made and entry.get(made.name) is made
    entry.remove(made)
    assert entry.get("renamed") is None
    # a table never asked for is made from the live nodes when first asked
    body = program.graphs["add_f"]
    node = body.add(Node("extra", "negate", Shape("f32", ())))
    assert body[node.name] is node and body.get("x") is not None


def test_control_predecessors_are_found_by_name():
    text = CALLS.replace("ROOT t = (f32[], f32[]) tuple(a, b)",
                         f"ROOT t = (f32[], f32[]) tuple(a, b), {CONTROL}={{b}}")
    program = Program.from_module(loads(text))
    entry = program.entry
    assert [n.name for n in entry.control_predecessors(entry.root)] == ["b"]


def test_clones_are_named_as_by_a_lookup_of_their_original_name():
    from hlofuse.graph import clone_node
    from hlofuse.names import NameUniquer

    program = Program.from_module(loads(CALLS))
    entry = program.entry
    a = entry["a"]
    first = clone_node(a, entry)  # parsed: its name is looked up
    second = clone_node(first, entry)  # a clone: the parts its name was handed out with
    entry.rename(first, "renamed.7")
    third = clone_node(first, entry)  # renamed since: the parts do not fit, looked up again
    reference = NameUniquer()
    for name in ("add_f", "max_f", "unused", "e", "x", "y", "s", "c", "p", "z", "b", "a", "t"):
        reference.reserve(name)
    expected = [reference.get("a")]
    expected.append(reference.get(expected[0]))
    expected.append(reference.get("renamed.7"))
    assert [first.name, second.name, third.name] == ["renamed.7", expected[1], expected[2]]
    assert expected[0] == "a.1" and second.name_parts[2] == second.name

"""hlofuse.graph: XLA's fusion primitives, post order and names, on small modules."""

from __future__ import annotations

import hlofuse
from hlofuse.graph import Program
from hlofuse.fusion_primitives import create_fusion, fuse_instruction, fuse_into_multi_output
from hlofuse.names import NameUniquer

EXP_MUL = """HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  e = f32[4] exponential(p0)
  m = f32[4] multiply(e, p1)
  n = f32[4] negate(e)
  ROOT t = (f32[4], f32[4]) tuple(m, n)
}
"""


def test_post_order_is_xlas_dfs_from_userless_instructions():
    prog = Program.from_module(hlofuse.loads(EXP_MUL))
    assert [n.name for n in prog.entry.post_order()] == ["p0", "e", "p1", "m", "n", "t"]


def test_fusing_a_producer_renumbers_parameters_as_xla_does():
    # XLA: multiply(exponential(p0), p1) becomes fusion(p1, p0) (docs/xla/legacy-gpu-pipeline.md §2.6)
    prog = Program.from_module(hlofuse.loads(EXP_MUL))
    g = prog.entry
    fusion = create_fusion(g["m"], "kLoop", "exponential_multiply_fusion")
    clone = fuse_instruction(fusion, g["e"])
    assert [op.name for op in fusion.operands] == ["p1", "p0"]
    assert [p.parameter_number for p in fusion.fused.parameters] == [0, 1]
    assert clone.opcode == "exponential" and clone.origin == ("e",)
    # `e` keeps its other user, so it stays outside (duplicated into the fusion)
    assert g.get("e") is not None and [u.name for u in g["e"].users] == ["n"]
    assert set(fusion.members()) == {"e", "m"}


def test_fused_program_prints_and_parses_back():
    prog = Program.from_module(hlofuse.loads(EXP_MUL))
    g = prog.entry
    f1 = create_fusion(g["m"], "kLoop")
    fuse_instruction(f1, g["e"])
    f2 = create_fusion(g["n"], "kLoop")
    fuse_instruction(f2, g["e"])
    g.remove(g["e"])
    module = prog.to_module()
    again = hlofuse.loads(hlofuse.dumps(module))
    assert again == module
    fusions = [i for i in again.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 2 and all(i.fusion_kind == "kLoop" for i in fusions)
    assert "exponential" not in {i.opcode for i in again.entry.instructions}


def test_multi_output_fusion_reads_outputs_through_get_tuple_element():
    prog = Program.from_module(hlofuse.loads(EXP_MUL))
    g = prog.entry
    fusion = create_fusion(g["n"], "kLoop")
    fuse_into_multi_output(fusion, g["m"])
    assert fusion.shape.is_tuple and len(fusion.shape.tuple_shapes) == 2
    root_ops = [op.opcode for op in g.root.operands]
    assert root_ops == ["get-tuple-element", "get-tuple-element"]
    indices = sorted(int(op.attr("index")) for op in g.root.operands)
    assert indices == [0, 1]
    module = prog.to_module()
    assert hlofuse.loads(hlofuse.dumps(module)) == module


def test_name_uniquer_follows_xla():
    names = NameUniquer()
    names.reserve("add.5")
    assert names.get("add") == "add"
    assert names.get("add.5") != "add.5"
    assert names.get("param_0") == "param_0"
    assert names.get("param_0") == "param_0.1"


def test_removing_users_of_a_widely_shared_node_keeps_xlas_swap_order():
    """A node with many users keeps their positions (graph.user_slots); removal order must stay
    XLA's Users::RemoveUser (the last user moves into the freed slot), also after the users
    list was rebuilt behind the map's back."""
    import random

    from hlofuse.graph import Node, add_operand

    prog = Program.from_module(hlofuse.loads(EXP_MUL))
    g = prog.entry
    shared = g["p0"]
    users = []
    for k in range(200):
        node = g.add(Node(f"u{k}", "negate", shared.shape))
        add_operand(node, shared)
        users.append(node)
    expected = list(shared.users)
    rng = random.Random(7)
    for step, victim in enumerate(rng.sample(users, 150)):
        if step == 60:  # someone rebuilds the list directly: the kept positions go stale
            shared.users = list(reversed(shared.users))
            expected = list(reversed(expected))
        g.remove(victim)
        i = next(k for k, u in enumerate(expected) if u is victim)
        last = expected.pop()
        if i < len(expected):
            expected[i] = last
        assert [u.name for u in shared.users] == [u.name for u in expected]
    assert shared.user_slots is not None  # the positions were kept for this many users


def test_wide_node_operand_replacements_keep_every_position():
    """A node with many operands (an output tuple) remembers where each operand is between
    replacements; any other edit of its operands is seen, and repeated operands all change."""
    from hlofuse.graph import _WIDE_OPERANDS, add_operand, remove_operand_at, replace_operand, set_operand

    n = _WIDE_OPERANDS + 36
    params = "\n".join(f"  p{i} = f32[4] parameter({i})" for i in range(n))
    ops = ", ".join(f"p{i}" for i in range(n)) + ", p3, p7"  # p3 and p7 twice
    shapes = ", ".join(["f32[4]"] * (n + 2))
    text = f"HloModule m\nENTRY e {{\n{params}\n  ROOT t = ({shapes}) tuple({ops})\n}}\n"
    prog = Program.from_module(hlofuse.loads(text))
    g = prog.entry
    t = g["t"]
    expected = [op.name for op in t.operands]

    def negate(name):
        node = g.add(type(g[name])(f"n_{name}", "negate", g[name].shape))
        add_operand(node, g[name])
        return node

    def check():
        assert [op.name for op in t.operands] == expected
        for op in t.operands:
            assert t in op.users

    for name in ("p3", "p0", f"p{n - 1}", "p7"):
        new = negate(name)
        replace_operand(t, g[name], new)
        expected = [new.name if e == name else e for e in expected]
        check()
        assert t not in g[name].users
    set_operand(t, 5, g["p40"])  # another edit of the operands: positions are read again
    expected[5] = "p40"
    check()
    remove_operand_at(t, 0)
    expected.pop(0)
    check()
    add_operand(t, g["p3"])
    expected.append("p3")
    replace_operand(t, g["p40"], g["p41"])  # p40 twice now, next to p41's own position
    expected = ["p41" if e == "p40" else e for e in expected]
    check()
    replace_operand(t, g["p41"], g["p42"])
    expected = ["p42" if e == "p41" else e for e in expected]
    check()
    assert t not in g["p40"].users and t not in g["p41"].users


WIDE_ADD = """HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  p2 = f32[4] parameter(2)
  p3 = f32[4] parameter(3)
  a = f32[4] add(p0, p1)
  n = f32[4] negate(p3)
  s = f32[4] subtract(a, p2)
  ROOT r = f32[4] multiply(s, n)
}
"""


def test_fusing_a_middle_operand_renumbers_and_renames_only_the_later_parameters():
    """XLA re-creates every parameter after the removed one as `param_<n-1>`; the earlier ones
    keep their names, and the parameter list stays in number order."""
    prog = Program.from_module(hlofuse.loads(WIDE_ADD))
    g = prog.entry
    fusion = create_fusion(g["r"], "kLoop")  # r(s, n): param_0 = s, param_1 = n
    fuse_instruction(fusion, g["s"])  # s at 0 goes; n becomes param_0 (renamed); a, p2 appended
    params = fusion.fused.parameters
    assert [op.name for op in fusion.operands] == ["n", "a", "p2"]
    assert [p.parameter_number for p in params] == [0, 1, 2]
    assert [p.name for p in params] == ["param_0.1", "param_1.1", "param_2"]
    fuse_instruction(fusion, g["a"])  # a at 1 goes: p2 becomes param_1; p0, p1 appended
    assert [op.name for op in fusion.operands] == ["n", "p2", "p0", "p1"]
    params = fusion.fused.parameters
    assert [p.parameter_number for p in params] == [0, 1, 2, 3]
    assert [p.name for p in params] == ["param_0.1", "param_1.2", "param_2.1", "param_3"]
    assert all(fusion.fused.get(p.name) is p for p in params)
    fuse_instruction(fusion, g["n"])  # the first: every other parameter moves down; p3 appended
    assert [op.name for op in fusion.operands] == ["p2", "p0", "p1", "p3"]
    assert [p.name for p in fusion.fused.parameters] == ["param_0.2", "param_1.3", "param_2.2", "param_3.1"]
    assert [p.parameter_number for p in fusion.fused.parameters] == [0, 1, 2, 3]


def test_printed_instructions_equal_the_ones_the_dataclass_builds():
    """to_module writes ir.Instruction's slots directly (graph._bind_instruction_maker): every
    field must come out as the constructor sets it."""
    from hlofuse import ir

    prog = Program.from_module(hlofuse.loads(EXP_MUL))
    g = prog.entry
    fuse_instruction(create_fusion(g["m"], "kLoop"), g["e"])
    fast = prog.to_module()
    made = [i for c in fast.computations for i in c.instructions]
    assert made and all(type(i) is ir.Instruction for i in made)
    rebuilt = [ir.Instruction(i.name, i.opcode, i.shape, i.operands, i.attrs, i.literal, i.called, i.span)
               for i in made]
    assert [(r, r.span) for r in rebuilt] == [(i, i.span) for i in made]
    assert [hash(r) for r in rebuilt] == [hash(i) for i in made]
    fusion = next(i for i in made if i.opcode == "fusion")
    assert fusion.called and fusion.attr("calls") == fusion.called[0] and fusion.operands == ("p1", "p0")


def test_to_module_hands_on_the_instructions_of_unchanged_nodes_and_rebuilds_edited_ones():
    """An instruction no pass changed comes out as the input's own object; one whose name,
    operands or attributes changed is built anew and says what the node says now."""
    module = hlofuse.loads(EXP_MUL)
    prog = Program.from_module(module)
    g = prog.entry
    g["n"].set_attr("metadata", '{op_name="neg"}')
    g.rename(g["p1"], "q1")  # its user m now reads q1
    out = prog.to_module()
    given = {i.name: i for i in module.entry.instructions}
    made = {i.name: i for i in out.entry.instructions}
    assert made["p0"] is given["p0"] and made["e"] is given["e"] and made["t"] is given["t"]
    assert made["n"] is not given["n"] and made["n"].attr("metadata") == '{op_name="neg"}'
    assert made["m"].operands == ("e", "q1") and made["q1"].opcode == "parameter"
    assert out == hlofuse.loads(hlofuse.dumps(out))


def test_nodes_read_from_the_input_hand_their_clones_the_parts_of_their_names():
    """A clone of a node read from the input asks for its name with the parts reserve gave
    (no lookup); a name those parts would not spell (leading zeros, characters to replace)
    is looked up as before, and every clone is named as a lookup names it."""
    from hlofuse.graph import clone_node

    names = NameUniquer()
    assert names.reserve("add.5")[1:] == (5, "add.5") and names.reserve("add")[1:] == (0, "add")
    assert names.reserve("add.07") is None and names.reserve("a b") is None
    text = EXP_MUL.replace(" e = ", " e.07 = ").replace("(e, p1)", "(e.07, p1)").replace("negate(e)", "negate(e.07)")
    prog = Program.from_module(hlofuse.loads(text))
    g = prog.entry
    assert g["p0"].name_parts[2] == "p0" and g["e.07"].name_parts is None
    clones = [clone_node(g[name], g).name for name in ("p0", "e.07", "m", "m")]
    reference = NameUniquer()
    for name in ("p0", "p1", "e.07", "m", "n", "t"):
        reference.reserve(name)
    assert clones == [reference.get(name) for name in ("p0", "e.07", "m", "m")] == ["p0.1", "e.0", "m.1", "m.2"]


def test_the_remembered_post_order_follows_every_edit():
    prog = Program.from_module(hlofuse.loads(EXP_MUL))
    g = prog.entry
    before = g._remembered_post_order()
    assert g._remembered_post_order() is before  # (the same version: the same list)
    create_fusion(g["m"], "kLoop", "m_fusion")
    after = g._remembered_post_order()
    assert after is not before and "m_fusion" in [n.name for n in after] and "m" not in [n.name for n in after]
    assert [n.name for n in before] == ["p0", "e", "p1", "m", "n", "t"]  # (the old list is not edited)

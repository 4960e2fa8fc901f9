"""What PriorityFusion and its cost model remember or skip for speed must give the answers
computed afresh: each test asks the shortcut and the long way and compares them."""

from __future__ import annotations

import dataclasses

import pytest

import hlofuse
from hlofuse.cost import model as cost_model
from hlofuse.cost.durations import f32, from_seconds
from hlofuse.device import load_gpu
from hlofuse.gpu import test_device as xla_test_device
from hlofuse.graph import Program
from hlofuse.rules import Candidate, evaluate
from hlofuse.rules import priority_fusion as pf
from hlofuse.rules.instruction_fusion import IN_PLACE_RULES


def _read_time_afresh(device, blocks, net, total, rate):
    """ReadTimeWithDRAMHeuristic written out with nothing remembered."""
    def adjust(bw):
        per_block = f32(f32(f32(device.clock_rate_ghz) * f32(1.0e9)) * 32)
        return min(bw, f32(blocks * per_block))

    dram_bw = f32(device.memory_bandwidth * rate)
    rest_bw = f32(float(device.memory_bandwidth))
    if net < device.l2_cache_size:
        rest_bw = f32(rest_bw * 2.5)
        if net < 2 * 1024 * device.core_count:
            rest_bw = f32(rest_bw * 8.0)
    else:
        rest_bw = f32(rest_bw * rate)
    dram_bw, rest_bw = adjust(dram_bw), adjust(rest_bw)
    dram_bytes = min(net, total)
    t = 0
    if dram_bytes:
        t += from_seconds(f32(dram_bytes / dram_bw))
    if total - dram_bytes:
        t += from_seconds(f32((total - dram_bytes) / rest_bw))
    return t


def test_read_time_bandwidths_are_remembered_per_device_grid_rate_and_cache_level():
    a6000 = xla_test_device()
    devices = [a6000, load_gpu("h100_sxm"),
               dataclasses.replace(a6000, memory_bandwidth=a6000.memory_bandwidth // 3),
               dataclasses.replace(a6000, clock_rate_ghz=a6000.clock_rate_ghz / 7),
               dataclasses.replace(a6000, l2_cache_size=1024),
               dataclasses.replace(a6000, core_count=2)]
    cases = [(blocks, net, total, rate) for blocks in (1, 3, 84, 4096) for rate in (1.0, 4 / 64, 2 / 64)
             for net, total in ((100, 100), (100, 700), (300_000, 900_000), (10**8, 3 * 10**8))]
    cost_model._BANDWIDTHS.clear()
    for _ in range(2):  # the second round is answered from what the first remembered
        for device in devices:
            for case in cases:
                assert cost_model.read_time(device, *case) == _read_time_afresh(device, *case), (device.name, case)
    assert len({cost_model.read_time(d, 84, 300_000, 900_000, 1.0) for d in devices}) > 3


def test_in_place_rules_are_left_out_only_where_they_cannot_object():
    program = Program.from_module(hlofuse.loads("""HloModule t
ENTRY e {
  p = f32[64] parameter(0)
  i = s32[] parameter(1)
  a = f32[64] exponential(p)
  n = f32[64] negate(a)
  d = f32[64] dynamic-update-slice(a, a, i)
  ROOT t = (f32[64], f32[64]) tuple(n, d)
}"""))
    graph = program.entry
    a, n, d = graph["a"], graph["n"], graph["d"]
    assert pf.rules_for(a, n) == pf.CAN_FUSE_RULES_NOT_IN_PLACE
    assert not set(IN_PLACE_RULES) & set(pf.CAN_FUSE_RULES_NOT_IN_PLACE)
    assert [r for r in pf.CAN_FUSE_RULES if r not in IN_PLACE_RULES] == list(pf.CAN_FUSE_RULES_NOT_IN_PLACE)
    assert pf.rules_for(a, d) == pf.CAN_FUSE_RULES
    # asked one by one, the in-place rules agree: silent for the negate, refusing for the update
    for consumer, expected in ((n, []), (d, ["IF-INPLACE-SHARED-BUFFER"])):
        c = Candidate(a, consumer, None)
        assert [r for r in IN_PLACE_RULES if evaluate((r,), c).blocked_by is not None] == expected


def _analysis_facts(a):
    from hlofuse.cost.fusion_analysis import launch_dimensions

    hero = a.hero_reduction()
    return (a.kind, a.fusion_kind, a.backend_kind, [r.name for r in a.roots], [h.name for h in a.heroes],
            [(h.opcode, h.shape) for h in a.heroes], repr(a.transpose), a.smallest_input_bits,
            a.smallest_output_bits, sorted((n.name, n.opcode) for n in a.nodes), launch_dimensions(a),
            hero.name if hero is not None else None)


@pytest.mark.python_modules  # instruments them (monkeypatching); see tests/test_native_core.py
def test_pairs_analysed_across_the_boundary_match_the_built_pair(monkeypatch):
    """Every pair PriorityFusion analyses without building it (the merged-heroes path) gets the
    analysis the built scratch fusion gets: kind, roots, heroes, transpose, widths, the
    instructions inside and the launch grid — on generated modules and sample programs full of
    transposes, concatenates and reductions."""
    import sys
    from pathlib import Path

    from click.testing import CliRunner

    from hlofuse.cli import main
    from hlofuse.cost import fusion_analysis as fa
    from hlofuse.pipeline import Options, replay

    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo / "bench"))
    try:
        import replay_speed
    finally:
        sys.path.remove(str(repo / "bench"))
    merged_pair = fa._merged_pair
    compared = []

    def checked(producer, consumer, config, cfg):
        found = merged_pair(producer, consumer, config, cfg)
        if found is not None:
            fusion = fa.materialise(producer, consumer)
            roots = fa.fusion_roots(fusion.fused)
            built = fa._finish(fusion, roots, [fa.find_non_trivial_hero(r, cfg) for r in roots],
                               [n for n in fusion.fused.nodes() if n.opcode != "parameter"], list(fusion.operands),
                               config, cfg)
            assert _analysis_facts(found) == _analysis_facts(built), (producer.name, consumer.name)
            compared.append(found.kind)
        return found

    monkeypatch.setattr(fa, "_merged_pair", checked)
    replay(hlofuse.loads(replay_speed.generate_for("priority", 2000)), Options(**replay_speed.PIPELINES["priority"]))
    runner = CliRunner()
    for folder in ("gpu-current-h100", "gpu-current-rtx2080ti"):
        for name in ("transpose_reduce", "softmax", "layer_norm", "attention", "cartpole_b_concat", "batch_norm"):
            program = repo / "sample_dumps" / folder / name
            if program.is_dir():
                assert runner.invoke(main, ["fuse", str(program), "--json"]).exit_code == 0
    kinds = set(compared)
    assert len(compared) > 500 and {"kReduction", "kTranspose", "kConcatenate", "kLoop"} <= kinds, kinds


_TWO_READERS = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
add_again {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
norm {
  x = f32[64,256] parameter(0)
  y = f32[64,256] parameter(1)
  z = f32[] constant(0)
  m = f32[64,256] multiply(x, y)
  r = f32[64] reduce(m, z), dimensions={1}, to_apply=%REDUCER
  b = f32[64,256] broadcast(r), dimensions={0}
  ROOT d = f32[64,256] divide(x, b)
}
norm2 {
  x = f32[64,256] parameter(0)
  y = f32[64,256] parameter(1)
  z = f32[] constant(0)
  m = f32[64,256] multiply(x, y)
  r = f32[64] reduce(m, z), dimensions={1}, to_apply=%REDUCER
  b = f32[64,256] broadcast(r), dimensions={0}
  ROOT d = f32[64,256] divide(x, b)
}
ENTRY e {
  p = f32[64,256] parameter(0)
  q = f32[64,256] parameter(1)
  same = f32[64,256] fusion(p, p), kind=kCustom, calls=norm
  other = f32[64,256] fusion(p, q), kind=kCustom, calls=norm2
  ROOT t = (f32[64,256], f32[64,256]) tuple(same, other)
}"""


def test_tiling_searches_are_remembered_by_structure_not_by_name():
    """The Triton tiling search is remembered per program by the fused computation's structure:
    two fusions that differ only in names share one answer, equal to a fresh search; binding
    one operand twice (read once) or a reducer that computes something else is another key."""
    from hlofuse.cost import tiled

    def program(reducer="add"):
        return Program.from_module(hlofuse.loads(_TWO_READERS.replace("%REDUCER", reducer)))

    model = cost_model.GpuPerformanceModel(load_gpu("h100_sxm"))
    one, again = program(), program("add_again")
    key = tiled.structure_key(one.entry.get("same"), one)
    assert key == tiled.structure_key(again.entry.get("same"), again)  # a reducer's name is not its structure
    assert key != tiled.structure_key(one.entry.get("other"), one)  # p read twice vs p and q
    for name in ("same", "other"):
        fusion = one.entry.get(name)
        infinite = cost_model.RunTime(0, 0, 0, 0, 0, 0, cost_model.dur.INFINITE)
        fresh = tiled._search(model, fusion, one, infinite)
        assert tiled.best_tiled(model, fusion, one) == fresh
        assert tiled.best_tiled(model, fusion, one) is tiled.best_tiled(model, fusion, one)  # remembered
    assert len(one.memo.tilings) == 2
    remembered = tiled.best_tiled(model, again.entry.get("same"), again)
    assert remembered == tiled.best_tiled(model, one.entry.get("same"), one)
    changed = Program.from_module(hlofuse.loads(_TWO_READERS.replace("%REDUCER", "add")
                                                .replace("ROOT s = f32[] add(a, b)\n}\nadd_again",
                                                         "ROOT s = f32[] multiply(a, b)\n}\nadd_again")))
    assert tiled.structure_key(changed.entry.get("same"), changed) != key


@pytest.mark.python_modules  # instruments them (monkeypatching); see tests/test_native_core.py
def test_run_times_remembered_by_structure_equal_the_ones_computed_afresh(monkeypatch):
    """Every run time, fused run time and tiling the model answers from its structural memo, during
    priority replays of a generated module (two GPUs, one with Triton) and of real Triton
    dumps, equals the one computed for that very node or pair."""
    import sys
    from pathlib import Path

    from hlofuse import xla_log
    from hlofuse.dumpdir import choose_module, priority_fusion_log, scan
    from hlofuse.pipeline import Options, replay

    model_class = cost_model.GpuPerformanceModel
    estimate, fused_runtime = model_class.estimate, model_class.fused_runtime
    from hlofuse.cost import tiled

    seen = {"one": 0, "pair": 0, "tiling": 0}

    def checked_estimate(self, node):
        if self.cached_runtime(node) is not None:  # (kept per node until invalidated, as XLA keeps it)
            return estimate(self, node)
        found = estimate(self, node)
        # (a model of its own: asking this one would bring its analyses up to date early)
        fresh = model_class(self.device, self.config, self.cost.concat_penalty)
        assert found == fresh._estimate_instruction(node), node.name
        seen["one"] += 1
        return found

    def checked_fused_runtime(self, producer, consumer, side_output=False):
        found = fused_runtime(self, producer, consumer, side_output)
        if not found.is_infinite:
            assert found == self._fused_runtime(producer, consumer, side_output, estimate(self, producer),
                                                estimate(self, consumer)), (producer.name, consumer.name)
            seen["pair"] += 1
        return found

    triton_tiling = model_class.triton_tiling

    def checked_triton_tiling(self, producer, consumer):
        fresh = (producer.uid, consumer.uid) not in self._triton
        found = triton_tiling(self, producer, consumer)
        if fresh:
            program = consumer.graph.program
            assert found == tiled.best_tiled(self, self.pair_analysis(producer, consumer).node, program), \
                (producer.name, consumer.name)
            seen["tiling"] += 1
        return found

    monkeypatch.setattr(model_class, "estimate", checked_estimate)
    monkeypatch.setattr(model_class, "fused_runtime", checked_fused_runtime)
    monkeypatch.setattr(model_class, "triton_tiling", checked_triton_tiling)
    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo / "bench"))
    try:
        import replay_speed
    finally:
        sys.path.remove(str(repo / "bench"))
    module = hlofuse.loads(replay_speed.generate_for("priority", 2000))
    for gpu in ("rtx2080ti", "h100_sxm"):
        replay(module, Options(**{**replay_speed.PIPELINES["priority"], "gpu": gpu}))
    data = Path(__file__).resolve().parent / "data" / "jax-0.10.2-triton"
    for folder in ("layer_norm_grad_h100", "softmax_concat_h100"):
        files = choose_module(scan(data / folder), None, str(data / folder))
        before = xla_log.load(priority_fusion_log(files).path).module_before_fusion
        replay(hlofuse.loads(before), Options(backend="gpu", pipeline="priority", gpu="h100_sxm"))
    assert seen["one"] > 1000 and seen["pair"] > 1000 and seen["tiling"] > 20, seen


def test_structure_keys_ignore_names_and_metadata_but_not_wiring():
    from hlofuse.cost.structure import node_key, pair_key

    program = Program.from_module(hlofuse.loads("""
ENTRY e {
  p = f32[8,16] parameter(0)
  q = f32[8,16] parameter(1)
  a = f32[8,16] add(p, q), metadata={op_name="first"}
  b = f32[8,16] add(q, p), metadata={op_name="second"}
  c = f32[8,16] add(p, p)
  m = f32[8,16] multiply(a, p)
  n = f32[8,16] multiply(b, p)
  ROOT t = (f32[8,16], f32[8,16], f32[8,16]) tuple(m, n, c)
}"""))
    get = program.entry.get
    assert node_key(get("a")) == node_key(get("b"))  # names, metadata and which parameter: not
    assert node_key(get("a")) != node_key(get("c"))  # one value read twice is read once
    assert node_key(get("m")) == node_key(get("n"))
    assert pair_key(get("a"), get("m")) != pair_key(get("b"), get("n"))  # m reads a's first operand, n b's second


def test_answers_kept_per_fused_body_follow_the_body_as_it_grows():
    """Shared memory, unnested reductions and physical transposition of a fusion are kept per
    version of its body: fusing a reduce and a transposing copy into it changes the answers."""
    from hlofuse import fusion_primitives as fp
    from hlofuse.gpu.budget import shared_memory_usage, unnested_reductions
    from hlofuse.gpu.config import ERA_PRIORITY, GpuConfig
    from hlofuse.gpu.transposes import is_physically_transposing

    program = Program.from_module(hlofuse.loads("""
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[64,128] parameter(0)
  t = f32[64,128]{0,1} copy(x)
  z = f32[] constant(0)
  r = f32[64] reduce(t, z), dimensions={1}, to_apply=add
  ROOT n = f32[64] negate(r)
}"""))
    cfg = GpuConfig(load_gpu("h100_sxm"), ERA_PRIORITY)
    entry = program.entry
    fusion = fp.create_fusion(entry.get("n"), "kLoop")
    before = (shared_memory_usage(fusion, cfg), unnested_reductions(fusion, cfg), is_physically_transposing(fusion))
    assert before == (0, 0, False)
    fp.fuse_instruction(fusion, entry.get("r"))
    entry.remove(entry.get("r"))
    assert shared_memory_usage(fusion, cfg) > 0 and unnested_reductions(fusion, cfg) == 1
    assert not is_physically_transposing(fusion)
    fp.fuse_instruction(fusion, entry.get("t"))
    assert is_physically_transposing(fusion)


def _generated(pipeline: str, size: int):
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo / "bench"))
    try:
        import replay_speed
    finally:
        sys.path.remove(str(repo / "bench"))
    return hlofuse.loads(replay_speed.generate_for(pipeline, size)), replay_speed.PIPELINES[pipeline]


@pytest.mark.python_modules  # instruments them (monkeypatching); see tests/test_native_core.py
def test_can_fuse_verdicts_remembered_by_structure_equal_the_rules_asked_afresh(monkeypatch):
    """Every CanFuse outcome PriorityFusion answers from its verdicts by structure (facts
    included) equals the rules asked for that very pair, and a replay that remembers nothing
    decides the same and reports the same facts (the cost analysis keeps a node's properties as
    first computed, so a remembered verdict must not move that moment)."""
    from hlofuse.passes import priority_fusion as passes_pf
    from hlofuse.pipeline import Options, replay

    run_class = passes_pf.PriorityFusionRun
    remembered = run_class._evaluate_can_fuse
    seen = {"remembered": 0}

    def checked(self, producer, consumer):
        known = len(self._verdicts)
        found = remembered(self, producer, consumer)
        if len(self._verdicts) == known and pf.rules_for(producer, consumer) is pf.CAN_FUSE_RULES_NOT_IN_PLACE:
            fresh = evaluate(pf.CAN_FUSE_RULES_NOT_IN_PLACE, self.candidate(producer, consumer), self.relaxed)
            assert (found.blocked_by, dict(found.facts), found.relaxed) == \
                (fresh.blocked_by, dict(fresh.facts), fresh.relaxed), (producer.name, consumer.name)
            seen["remembered"] += 1
        return found

    def afresh(self, producer, consumer):
        return evaluate(pf.rules_for(producer, consumer), self.candidate(producer, consumer), self.relaxed)

    module, options = _generated("priority", 1000)
    for gpu in ("rtx2080ti", "h100_sxm"):
        opts = Options(**{**options, "gpu": gpu})
        with monkeypatch.context() as m:
            m.setattr(run_class, "_evaluate_can_fuse", checked)
            checked_result = replay(module, opts).to_dict()
        with monkeypatch.context() as m:
            m.setattr(run_class, "_evaluate_can_fuse", afresh)
            fresh_result = replay(module, opts).to_dict()
        assert replay(module, opts).to_dict() == fresh_result
        assert checked_result["kernels"] == fresh_result["kernels"]
    assert seen["remembered"] > 1000, seen


def test_structure_keys_kept_by_the_model_are_numbers_that_follow_edits():
    """With a KeyMemo the keys are numbers (equal structure, equal number) and a pair's
    key kept there follows an edit that changes its wiring but neither node's own key."""
    from hlofuse import graph as g
    from hlofuse.cost.structure import KeyMemo, node_key, pair_key

    program = Program.from_module(hlofuse.loads("""
ENTRY e {
  p = f32[8,16] parameter(0)
  q = f32[8,16] parameter(1)
  a = f32[8,16] add(p, q)
  b = f32[8,16] add(q, p)
  c = f32[8,16] subtract(p, q)
  m = f32[8,16] multiply(a, p)
  ROOT t = (f32[8,16], f32[8,16], f32[8,16]) tuple(m, b, c)
}"""))
    get = program.entry.get
    known = KeyMemo()
    assert node_key(get("a"), known) == node_key(get("b"), known) != node_key(get("c"), known)
    assert isinstance(node_key(get("a"), known), int)
    before = pair_key(get("a"), get("m"), known)
    assert isinstance(before, int) and pair_key(get("a"), get("m"))[2] == ("P", 0)
    m_key = node_key(get("m"), known)
    g.replace_operand(get("m"), get("p"), get("q"))  # m = multiply(a, q): same key, other wiring
    after = pair_key(get("a"), get("m"), known)
    assert node_key(get("m"), known) == m_key and pair_key(get("a"), get("m"))[2] == ("P", 1)
    assert after != before and after == pair_key(get("a"), get("m"), KeyMemo())  # (numbers are the program's)


def test_a_kept_node_key_follows_an_attribute_edited_in_place():
    """Node.set_attr edits the attribute list in place (no edit count changes): a key kept in
    `known` is made anew, and equals the key of a node that has that attribute from the start."""
    from hlofuse.cost.structure import KeyMemo, node_key

    program = Program.from_module(hlofuse.loads("""
ENTRY e {
  p = f32[8,16] parameter(0)
  a = f32[8,16] reverse(p), dimensions={0}
  b = f32[8,16] reverse(p), dimensions={0}
  c = f32[8,16] reverse(p), dimensions={1}
  ROOT t = (f32[8,16], f32[8,16], f32[8,16]) tuple(a, b, c)
}"""))
    get = program.entry.get
    known = KeyMemo()
    assert node_key(get("a"), known) == node_key(get("b"), known) != node_key(get("c"), known)
    get("b").set_attr("dimensions", "{1}")
    assert node_key(get("b"), known) == node_key(get("c"), known) != node_key(get("a"), known)
    get("b").set_attr("dimensions", "{0}")
    assert node_key(get("b"), known) == node_key(get("a"), known)


@pytest.mark.python_modules  # instruments them (monkeypatching); see tests/test_native_core.py
def test_fusion_cost_properties_remembered_by_structure_equal_the_ones_computed_afresh(monkeypatch):
    """A fusion's cost properties and utilisations answered from the analysis's memo by body
    structure, during priority replays (two GPUs), equal those computed for that very fusion."""
    from hlofuse.cost.analysis import GpuHloCostAnalysis, _unpacked
    from hlofuse.pipeline import Options, replay

    remembered = GpuHloCostAnalysis._analyse_fusion_by_structure
    seen = {"remembered": 0}

    def checked(self, fusion):
        known = len(self._by_structure)
        found = remembered(self, fusion)
        if len(self._by_structure) == known:
            fresh = GpuHloCostAnalysis(self.profile, self.concat_penalty)
            assert found == fresh._analyse_fusion(fusion), fusion.name
            # (kept packed by position until a question needs them: unpacked here)
            packed = self._packed.get(fusion.uid)
            info = self._fusions[fusion.uid] if packed is None else _unpacked(fusion.fused.post_order(), packed[2])
            assert info == fresh._fusions[fusion.uid], fusion.name
            assert {k: list(r) for k, r in info.roots.items()} == \
                {k: list(r) for k, r in fresh._fusions[fusion.uid].roots.items()}  # (summed in their order)
            seen["remembered"] += 1
        return found

    monkeypatch.setattr(GpuHloCostAnalysis, "_analyse_fusion_by_structure", checked)
    module, options = _generated("priority", 2000)
    for gpu in ("rtx2080ti", "h100_sxm"):
        replay(module, Options(**{**options, "gpu": gpu}))
    assert seen["remembered"] > 1000, seen


def test_head_rules_asked_without_a_candidate_agree_with_the_rules():
    """pf.head_rules_pass (PriorityFusion's shortcut past PF-ROOT-PRODUCER and the fusibility
    rules) agrees with asking those rules, for every edge of a generated module and of a
    module with a root producer, custom calls, tuples and a lone bitcast."""
    module, _ = _generated("priority", 1000)
    small = hlofuse.loads("""HloModule t
ENTRY e {
  p = f32[64] parameter(0)
  r = u32[64] custom-call(p), custom_call_target="cu_threefry2x32_ffi"
  c = f32[64] convert(r)
  b = s32[64] bitcast-convert(c)
  n = f32[64] negate(p)
  q = f32[8,8] bitcast(n)
  ROOT t = (f32[64], s32[64], f32[8,8]) tuple(c, b, q)
}""")
    pairs = 0
    for program in (Program.from_module(module), Program.from_module(small)):
        for graph in program.graphs.values():
            for producer in graph.nodes():
                for consumer in producer.users:
                    asked = evaluate(pf.HEAD_RULES, Candidate(producer, consumer, None, {})).allowed
                    assert pf.head_rules_pass(producer, consumer) == asked, (producer.name, consumer.name)
                    pairs += 1
        root = program.entry.root
        for op in root.operands:  # the root as producer (of a pair no graph has)
            assert not pf.head_rules_pass(root, op) and not evaluate(pf.HEAD_RULES, Candidate(root, op, None, {})).allowed
    assert pairs > 1000


@pytest.mark.python_modules  # instruments them (monkeypatching); see tests/test_native_core.py
def test_runtimes_of_removed_consumers_equal_the_sums_over_every_removed_node(monkeypatch):
    """ComputeRuntimesOfRemovedConsumers, which looks the removed nodes up from the smaller
    side, gives what summing over every consumer and the producer in order gives."""
    from hlofuse.cost.model import KERNEL_LAUNCH_OVERHEAD
    from hlofuse.passes import priority_fusion as passes_pf
    from hlofuse.pipeline import Options, replay

    run_class = passes_pf.PriorityFusionRun
    real = run_class._removed_consumer_runtimes
    seen = {"operands": 0}

    def checked(self, producer, consumers):
        expected = {}
        for uid in self._new_consumers:
            if uid not in self._key:
                continue
            operand = self._nodes.get(uid) or self._to_update.get(uid)
            original = self.model.cached_fused_times(operand)
            if original is None:
                continue
            unfused = fused = 0
            for node in list(consumers) + [producer]:
                if node.uid in original:
                    fused += original[node.uid]
                    runtime = self.model.cached_runtime(node)
                    unfused += runtime.exec_time if runtime is not None else 0
            own = self.model.cached_runtime(operand)
            expected[uid] = (unfused + (own.exec_time if own is not None else 0) + KERNEL_LAUNCH_OVERHEAD, fused)
        real(self, producer, consumers)
        assert {uid: self._removed[uid] for uid in expected} == expected
        seen["operands"] += len(expected)

    monkeypatch.setattr(run_class, "_removed_consumer_runtimes", checked)
    module, options = _generated("priority", 1000)
    replay(module, Options(**options))
    assert seen["operands"] > 100, seen


def test_priority_fusion_fusibility_of_fusions_asked_in_either_order():
    """is_pf_fusible looks at a kLoop/kInput fusion's kind before its instructions; for every
    node of a module with loop, custom, elementwise-custom and Triton fusions it agrees with
    PriorityFusion's IsFusible written out in XLA's order."""
    from hlofuse.gpu.properties import is_elementwise, is_fusible

    def written_out(node):
        if not is_fusible(node):
            return False
        if is_elementwise(node) or pf.is_fusible_bitcast(node):
            return True
        if node.opcode == "fusion":
            return node.fusion_kind != "kCustom" or pf.is_generic_triton_fusion(node)
        return node.opcode in pf._PF_FUSIBLE_OPCODES

    program = Program.from_module(hlofuse.loads("""HloModule t
elementwise {
  a = f32[64] parameter(0)
  ROOT n = f32[64] negate(a)
}
reducing {
  a = f32[64,8] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[64] reduce(a, z), dimensions={1}, to_apply=add
}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[64] parameter(0)
  m = f32[64,8] parameter(1)
  l = f32[64] fusion(p), kind=kLoop, calls=elementwise
  c = f32[64] fusion(l), kind=kCustom, calls=elementwise
  r = f32[64] fusion(m), kind=kCustom, calls=reducing
  t = f32[64] fusion(m), kind=kCustom, calls=reducing, backend_config={"fusion_backend_config":{"kind":"__triton","block_level_fusion_config":{"output_tiles":[{"sizes":["64"]}],"num_warps":"4"}}}
  i = f32[64] fusion(m), kind=kInput, calls=reducing
  b = s32[64] bitcast-convert(p)
  ROOT u = (f32[64], f32[64], f32[64], f32[64], s32[64]) tuple(c, r, t, i, b)
}"""))
    nodes = list(program.entry.nodes())
    assert [pf.is_pf_fusible(n) for n in nodes] == [written_out(n) for n in nodes]
    assert {n.name for n in nodes if pf.is_pf_fusible(n)} >= {"l", "c", "t", "i"}
    assert not pf.is_pf_fusible(program.entry.get("r"))


def test_bodies_keyed_by_how_they_grew_have_one_structure_per_key():
    """PriorityFusion keys a body it grows by the pair it fused (structure.grown_body_key), not
    by walking the body: every fusion sharing such a key has the same body spelled out, and
    the layers of a model share keys."""
    from hlofuse.cost.structure import spelled_out_body_key
    from hlofuse.graph import graph_cache
    from hlofuse.pipeline import Options, get_pipeline, make_context

    module, options = _generated("priority", 1000)
    for gpu in ("rtx2080ti", "h100_sxm"):
        opts = Options(**{**options, "gpu": gpu})
        ctx = make_context(opts)
        spec = get_pipeline(opts.backend, opts.pipeline)
        ctx.pipeline = spec.name
        program = Program.from_module(module)
        for name, fn in spec.passes:
            ctx.pass_name = name
            fn(program, ctx)
            if name == "priority-fusion":
                break
        grown = {number for key, number in program.memo.structures.items() if key[0] == "grown"}
        spelled: dict[int, tuple] = {}
        sharing = 0
        for graph in list(program.graphs.values()):
            owner = graph.fusion_owner
            if owner is None:
                continue
            memo, number = graph_cache(graph).get("structure") or (None, None)
            if number not in grown:
                continue
            body = spelled_out_body_key(graph)
            if number in spelled:
                assert spelled[number] == body, owner.name
                sharing += 1
            else:
                spelled[number] = body
        assert len(spelled) > 20 and sharing > 100, (gpu, len(spelled), sharing)


def test_utilisations_of_a_fusion_found_by_structure_are_those_of_its_own_instructions():
    """The second of two equal fusions gets its properties from the first (by structure); the
    utilisations, unpacked only when asked, are keyed by its own instructions and equal a
    fresh analysis's."""
    from hlofuse.cost.analysis import GpuHloCostAnalysis
    from hlofuse.cost.profiles import profile_for

    program = Program.from_module(hlofuse.loads("""
f1 {
  a = f32[64] parameter(0)
  b = f32[64] parameter(1)
  e = f32[64] exponential(a)
  m = f32[64] multiply(e, b)
  ROOT s = f32[64] add(m, e)
}
f2 {
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  e2 = f32[64] exponential(x)
  m2 = f32[64] multiply(e2, y)
  ROOT s2 = f32[64] add(m2, e2)
}
ENTRY e {
  p = f32[64] parameter(0)
  q = f32[64] parameter(1)
  one = f32[64] fusion(p, q), kind=kLoop, calls=f1
  two = f32[64] fusion(q, one), kind=kLoop, calls=f2
  ROOT t = (f32[64], f32[64]) tuple(one, two)
}"""))
    profile = profile_for(load_gpu("h100_sxm"))
    shared = GpuHloCostAnalysis(profile, by_structure=True)
    one, two = program.entry.get("one"), program.entry.get("two")
    shared.properties(one)
    shared.properties(two)
    assert two.uid in shared._packed and two.uid not in shared._fusions  # (not unpacked yet)
    fresh = GpuHloCostAnalysis(profile)
    body = two.fused
    e2, m2 = body.get("e2"), body.get("m2")
    for i in range(2):
        assert shared.fused_ir_size(two, i) == fresh.fused_ir_size(two, i)
    assert shared.common_elementwise_utilization(two, e2, m2) == fresh.common_elementwise_utilization(two, e2, m2) > 0
    assert shared._fusions[two.uid] == fresh._fusions[two.uid]


def test_a_kept_key_outlives_a_change_of_users_but_not_of_operands():
    """A node's edit count moves when its users change too: its key, which reads only its
    operands, is kept then (the same record, so the pair keys made from it hold), and made
    anew when an operand changes."""
    from hlofuse import graph as g
    from hlofuse.cost.structure import KeyMemo, node_key, pair_key

    program = Program.from_module(hlofuse.loads("""
ENTRY e {
  p = f32[8,16] parameter(0)
  q = f32[8,16] parameter(1)
  a = f32[8,16] add(p, q)
  m = f32[8,16] multiply(a, p)
  n = f32[8,16] negate(q)
  ROOT t = (f32[8,16], f32[8,16]) tuple(m, n)
}"""))
    get = program.entry.get
    known = KeyMemo()
    a_key, pair = node_key(get("a"), known), pair_key(get("a"), get("m"), known)
    kept = known.nodes[get("a").uid]
    edits = get("a").edits
    g.replace_operand(get("n"), get("q"), get("a"))  # a gains a user: n = negate(a)
    assert get("a").edits != edits
    assert node_key(get("a"), known) == a_key and known.nodes[get("a").uid] is kept
    assert pair_key(get("a"), get("m"), known) == pair
    g.replace_operand(get("a"), get("q"), get("p"))  # a = add(p, p): another key
    assert node_key(get("a"), known) != a_key and known.nodes[get("a").uid] is not kept
    assert node_key(get("a"), known) == node_key(get("a"), KeyMemo())

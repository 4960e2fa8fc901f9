"""`hlofuse diff` and `hlofuse.diff` (issue 18): two compiles of a program compared — kernels
matched by the instructions they compute, boundaries on one side only with the other side's
decision, each side's totals equal to `explain`'s, and the JSON schema."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import hlofuse
from hlofuse.cli import main
from hlofuse.errors import EXIT_INPUT, EXIT_RULE, EXIT_USAGE

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_dumps"


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def run_json(*args) -> dict:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def plain(payload: dict) -> dict:
    return json.loads(json.dumps(payload))


# ------------------------------------------------------------------------------------------
# Keys: what an instruction computes, without its name
# ------------------------------------------------------------------------------------------

KEYED = """
HloModule m

fused_computation {
  param_0 = f32[8]{0} parameter(0)
  constant.1 = f32[] constant(2)
  broadcast.2 = f32[8]{0} broadcast(constant.1), dimensions={}
  ROOT multiply.3 = f32[8]{0} multiply(param_0, broadcast.2), metadata={op_name="jit(f)/jit(main)/while/body/mul" source_file="/home/u/f.py" source_line=7}
}

ENTRY main {
  p = f32[8]{0} parameter(0)
  exponential.4 = f32[8]{0} exponential(p), metadata={op_name="jit(f)/exp" source_file="f.py" source_line=6}
  ROOT fusion.5 = f32[8]{0} fusion(exponential.4), kind=kLoop, calls=fused_computation
}
"""


def test_op_tail_keeps_the_primitive_of_any_jax_version():
    from hlofuse.diff.keys import op_tail

    assert op_tail("jit(f)/jit(main)/while/body/add") == op_tail("jit(f)/while/body/closed_call/add") == "add"
    assert op_tail("jit(f)/while/body/jit(_where)/select_n") == "select_n"
    assert op_tail("jit(f)/while/body/jit(dynamic_index_in_dim)") == "dynamic_index_in_dim"
    assert op_tail(None) is None and op_tail("") is None


def test_keys_follow_source_and_op_and_through_fusion_parameters():
    from hlofuse.diff.keys import Key, ModuleKeys

    keys = ModuleKeys(hlofuse.loads(KEYED))
    mul = keys.key("multiply.3")
    assert (mul.file, mul.line, mul.op) == ("f.py", 7, "mul")  # the file by its name: paths differ by machine
    assert keys.key("fusion.5") == mul  # a fusion computes its root
    assert keys.key("param_0") == keys.key("exponential.4")  # a fusion's parameter is its operand
    broadcast = keys.key("broadcast.2")
    assert not broadcast.anchored and broadcast.derived[0] == "broadcast"
    # a key with a source location is compared without its opcode (a dot_general is a custom
    # call in one jax version, a dot in another), one without is compared with it
    assert Key("custom-call", "f.py", 3, "dot_general") == Key("dot", "f.py", 3, "dot_general")
    assert Key("add", derived=("add",)) != Key("subtract", derived=("subtract",))


# ------------------------------------------------------------------------------------------
# Renaming: the same program with other instruction names
# ------------------------------------------------------------------------------------------

_QUOTED = r'"(?:[^"\\]|\\.)*"'


def renamed_text(text: str, mapping: dict[str, str]) -> str:
    """`text` with every name of `mapping` replaced, outside quoted strings (op_name and
    source paths stay as they are)."""
    names = sorted(mapping, key=len, reverse=True)
    pattern = re.compile(_QUOTED + r"|(?<![\w.\-])(" + "|".join(map(re.escape, names)) + r")(?![\w\-(=]|\.\d)")
    return pattern.sub(lambda m: mapping[m.group(1)] if m.group(1) else m.group(0), text)


def renumbering(modules) -> dict[str, str]:
    """A new name for every instruction and computation of `modules`: the same stem, numbered
    from 9000 in reverse order of appearance (nothing keeps its number)."""
    names = []
    for module in modules:
        for comp in module.computations:
            names.append(comp.name)
            names += [instr.name for instr in comp.instructions]
    names = list(dict.fromkeys(names))
    return {name: f"{re.split(r'[.]', name)[0]}.{9000 + i}" for i, name in enumerate(reversed(names))}


def renamed_dump(source: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of the HLO files of a dump folder (XLA's fusion log left out, as its names
    sit in quoted text): as they are, and every instruction and computation renamed in all of
    them alike."""
    files = sorted(p for p in source.iterdir() if p.suffix == ".txt" and "priority_fusion_dump" not in p.name)
    texts = {p.name: p.read_text() for p in files}
    mapping = renumbering([hlofuse.loads(t) for t in texts.values()])
    same, other = tmp_path / "a" / source.name, tmp_path / "b" / source.name
    same.mkdir(parents=True)
    other.mkdir(parents=True)
    for name, text in texts.items():
        (same / name).write_text(text)
        (other / name).write_text(renamed_text(text, mapping))
    return same, other


def test_renaming_helper_renames_every_instruction():
    dump = SAMPLES / "gpu-current-h100" / "cartpole_b_concat"
    text = next(dump.glob("*after_optimizations.txt")).read_text()
    module = hlofuse.loads(text)
    mapping = renumbering([module])
    renamed = hlofuse.loads(renamed_text(text, mapping))
    before = {i.name for _, i in module.instructions()}
    after = {i.name for _, i in renamed.instructions()}
    assert not before & after and len(after) == len(before)


@pytest.mark.parametrize("dump", [
    SAMPLES / "gpu-current-h100" / "cartpole_b_concat",
    SAMPLES / "gpu-legacy-rtx2080ti" / "cartpole_a_rng_customcall",
    SAMPLES / "gpu-current-rtx2080ti" / "adam_update",
    SAMPLES / "cpu" / "mlp",
    SAMPLES / "gpu-current-h100" / "cumsum",  # instructions without metadata, keyed deeper than _DEPTH
    SAMPLES / "cpu" / "cumsum",  # an instruction named `slice`, as the attribute is
], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_same_program_renamed_diffs_to_no_change(dump, tmp_path):
    same, renamed = renamed_dump(dump, tmp_path)
    d = hlofuse.diff(same, renamed)
    assert d.unchanged, (d.headline, [(m.status, m.a, m.b) for m in d.kernels if m.status != "same"])
    assert d.headline.startswith("No change")
    summary = d.to_dict()["summary"]
    assert summary["kernels_delta"] == summary["launches_delta"] == summary["bytes_delta"] == 0
    assert summary["modelled_us_delta"] == 0
    assert not d.added and not d.removed
    # the names did change: every kernel is matched to one of another name
    names_a = {r.name for m in d.kernels for r in m.a}
    names_b = {r.name for m in d.kernels for r in m.b}
    assert names_a and not names_a & names_b


def test_a_dump_diffed_with_itself_is_no_change():
    dump = SAMPLES / "gpu-legacy-h100" / "cartpole_b_concat_vecdone"
    payload = run_json("diff", dump, dump)
    assert payload["summary"]["unchanged"] is True
    assert payload["kernels"]["added"] == payload["kernels"]["removed"] == payload["kernels"]["changed"] == []
    assert len(payload["kernels"]["same"]) == payload["a"]["totals"]["kernels"]
    assert payload["boundaries"] == {"added": [], "removed": []}


# ------------------------------------------------------------------------------------------
# Each side's totals are explain's
# ------------------------------------------------------------------------------------------

PAIRS = [
    (SAMPLES / "gpu-legacy-h100" / "cartpole_a_rng", SAMPLES / "gpu-current-h100" / "cartpole_a_rng"),
    (SAMPLES / "gpu-current-rtx2080ti" / "adam_update", SAMPLES / "gpu-current-h100" / "adam_update"),
    (SAMPLES / "cpu-noynn" / "mlp", SAMPLES / "cpu" / "mlp"),
    (SAMPLES / "gpu-legacy-rtx2080ti" / "cartpole_b_concat", SAMPLES / "gpu-legacy-rtx2080ti" / "cartpole_c_separate"),
]


@pytest.mark.parametrize("a,b", PAIRS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_sides_totals_equal_explains(a, b):
    d = hlofuse.diff(a, b)
    payload = plain(d.to_dict())
    for side, path in (("a", a), ("b", b)):
        explained = run_json("explain", path)  # what the user sees from explain, predictions and all
        summary = explained["summary"]
        totals = payload[side]["totals"]
        assert totals["kernels"] == summary["kernels"] == explained["counts"][0]["kernels"]
        assert totals["launches_per_run"] == summary["kernels_launched"] == explained["launches_per_run"]
        assert totals["boundaries"] == summary["boundaries"]
        assert totals["bytes_per_run"] == summary["bytes_across_boundaries_per_run"]
        assert totals["modelled_us_per_run"] == summary["modelled"]["modelled_us_per_run"]
        assert totals["modelled_by"] == summary["modelled"]["target"]["description"]
        assert payload[side]["input"] == explained["input"]
    summary = payload["summary"]
    ta, tb = payload["a"]["totals"], payload["b"]["totals"]
    assert summary["kernels_delta"] == tb["kernels"] - ta["kernels"]
    assert summary["launches_delta"] == tb["launches_per_run"] - ta["launches_per_run"]
    assert summary["bytes_delta"] == tb["bytes_per_run"] - ta["bytes_per_run"]
    assert summary["modelled_us_delta"] == pytest.approx(tb["modelled_us_per_run"] - ta["modelled_us_per_run"], abs=1e-3)


# ------------------------------------------------------------------------------------------
# JSON
# ------------------------------------------------------------------------------------------


def test_json_schema_and_the_api_print_the_same():
    a, b = SAMPLES / "gpu-current-rtx2080ti" / "adam_update", SAMPLES / "gpu-current-h100" / "adam_update"
    payload = run_json("diff", a, b)
    assert plain(hlofuse.diff(a, b).to_dict()) == payload
    assert payload["schema"] == "hlofuse.diff/1"
    assert set(payload) >= {"schema", "a", "b", "kernels", "boundaries", "summary", "notes"}
    assert set(payload["kernels"]) == {"added", "removed", "changed", "same"}
    assert set(payload["boundaries"]) == {"added", "removed"}
    assert set(payload["summary"]) >= {"kernels_delta", "launches_delta", "bytes_delta", "modelled_us_delta",
                                       "headline", "largest"}
    for side in ("a", "b"):
        assert set(payload[side]) >= {"input", "module", "backend", "pipeline", "gpu", "totals"}
    # one-sided boundaries are explain's boundary objects, with the comparison's fields
    explained = run_json("explain", a)["boundaries"]
    removed = payload["boundaries"]["removed"]
    assert removed
    for change in removed:
        own = {k: v for k, v in change.items() if k not in ("bytes_per_run", "other_side")}
        assert own in explained
        assert set(change["other_side"]) == {"status", "text", "kernel", "decision", "boundary"}
    counted = sum(len(v) for v in payload["kernels"].values())
    assert counted == len(hlofuse.diff(a, b).kernels)


def test_rtx2080ti_refuses_what_the_h100_fuses_and_says_both_sides():
    # XLA:GPU's cost model on the RTX 2080 Ti finds fusing Adam's subtractions into their 7
    # users unprofitable (PF-UNPROFITABLE, as XLA's log says); on the H100 it fuses them.
    a, b = SAMPLES / "gpu-current-rtx2080ti" / "adam_update", SAMPLES / "gpu-current-h100" / "adam_update"
    d = hlofuse.diff(a, b)
    refused = [c for c in d.removed if c.boundary.rule == "PF-UNPROFITABLE"]
    assert len(refused) == 14
    for change in refused:
        assert change.other.status == "fused"
        assert change.other.decision is not None and change.other.decision.pass_name == "priority-fusion"
        assert change.other.decision.verdict.value == "fused"
    assert d.a_totals.kernels - d.b_totals.kernels == 2
    assert "in B they are one kernel" in d.headline and "the cost model refused it: fused" in d.headline
    assert d.count("merged") == 2  # the two subtraction kernels, duplicated into their users on the H100


# ------------------------------------------------------------------------------------------
# Real pairs: the expected direction
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("build", ["gpu-legacy-rtx2080ti", "gpu-legacy-h100", "gpu-current-rtx2080ti", "gpu-current-h100"])
def test_concatenated_state_launches_more_kernels_than_separate_arrays_on_the_gpu(build):
    # (on XLA:CPU it is the other way round: 502 against 1,105 launches per run)
    concat, separate = SAMPLES / build / "cartpole_b_concat", SAMPLES / build / "cartpole_c_separate"
    payload = run_json("diff", concat, separate)
    assert payload["summary"]["launches_delta"] < 0
    assert payload["a"]["totals"]["launches_per_run"] > payload["b"]["totals"]["launches_per_run"]
    assert payload["summary"]["headline"].startswith("B launches")
    assert "fewer kernels per run" in payload["summary"]["headline"]


@pytest.mark.parametrize("program", ["cartpole_a_rng", "softmax", "layer_norm", "sgd_update"])
def test_legacy_against_priority_kernel_counts_are_each_sides_explain(program):
    a, b = SAMPLES / "gpu-legacy-h100" / program, SAMPLES / "gpu-current-h100" / program
    d = hlofuse.diff(a, b)
    assert d.a_totals.kernels == len(hlofuse.explain(a, predict=False).explanation.kernels)
    assert d.b_totals.kernels == len(hlofuse.explain(b, predict=False).explanation.kernels)
    # every kernel of each side is in exactly one match (a kernel merged into several or split
    # out of several lists the other side's hosts, which are in their own matches)
    assert sorted(r.name for m in d.kernels if not (m.hosts and m.status == "split") for r in m.a) == \
        sorted(k.name for k in d.a.explanation.kernels)
    assert sorted(r.name for m in d.kernels if not (m.hosts and m.status == "merged") for r in m.b) == \
        sorted(k.name for k in d.b.explanation.kernels)


def test_priority_fusion_makes_softmax_one_kernel_where_legacy_made_three():
    d = hlofuse.diff(SAMPLES / "gpu-legacy-h100" / "softmax", SAMPLES / "gpu-current-h100" / "softmax")
    assert (d.a_totals.kernels, d.b_totals.kernels) == (3, 1)
    (merge,) = d.kernels
    assert merge.status == "merged" and len(merge.a) == 3 and "Triton" in merge.b[0].label
    assert d.removed and all(c.other.status == "fused" for c in d.removed)
    assert d.headline.startswith("B launches 2 fewer kernels per run")


@pytest.mark.parametrize("program", ["argsort_rows", "rnn_scan"])
def test_jax_0_10_against_0_11_matches_kernels_across_the_versions(program):
    # 0.11.2 writes other source paths (absolute), other metadata on tuples and broadcasts,
    # and wraps rnn_scan's loop in an async computation
    a, b = SAMPLES / "gpu-current-h100" / program, REPO / "tests" / "data" / "jax-0.11.2-h100" / program
    d = hlofuse.diff(a, b)
    assert d.a_totals.kernels == d.b_totals.kernels
    assert d.count("same") >= d.a_totals.kernels - 2
    assert not any(m.status in ("added", "removed") for m in d.kernels)


def test_library_fusion_on_xla_cpu_changes_the_kind_of_the_same_kernels():
    d = hlofuse.diff(SAMPLES / "cpu-noynn" / "mlp", SAMPLES / "cpu" / "mlp")
    kinds = [m for m in d.kernels if m.status == "changed-kind"]
    assert kinds and all(m.a[0].label != m.b[0].label for m in kinds)
    assert d.a_totals.kernels == d.b_totals.kernels


def test_the_papers_source_change_differs_where_the_source_changed():
    # the paper's source change: the state as separate arrays instead of one concatenate
    d = hlofuse.diff(SAMPLES / "gpu-current-h100" / "cartpole_b_concat",
                     SAMPLES / "gpu-current-h100" / "cartpole_c_separate")
    assert not d.unchanged
    assert any(c.other.status == "missing" for c in d.removed + d.added)


# ------------------------------------------------------------------------------------------
# One input replayed two ways
# ------------------------------------------------------------------------------------------


def test_vs_gpu_replays_the_module_before_fusion_for_both_gpus():
    dump = SAMPLES / "gpu-current-h100" / "adam_update"
    d = hlofuse.diff(dump, vs_gpu="rtx2080ti")
    assert d.a.explanation.stage == d.b.explanation.stage == "replayed"
    assert (d.a.explanation.gpu, d.b.explanation.gpu) == ("h100_sxm", "rtx2080ti")
    assert any(c.boundary.rule == "PF-UNPROFITABLE" and c.other.status == "fused" for c in d.added)
    replayed_a = hlofuse.explain(dump, stage="before_fusion", predict=False).to_dict()["summary"]
    assert d.a_totals.kernels == replayed_a["kernels"]
    assert d.a_totals.launches_per_run == replayed_a["kernels_launched"]


def test_vs_pipeline_and_relax_on_the_command_line():
    dump = SAMPLES / "gpu-legacy-rtx2080ti" / "softmax"
    payload = run_json("diff", dump, "--vs-pipeline", "priority")
    assert (payload["a"]["pipeline"], payload["b"]["pipeline"]) == ("legacy", "priority")
    assert payload["a"]["stage"] == payload["b"]["stage"] == "replayed"
    relaxed = run_json("diff", SAMPLES / "gpu-current-rtx2080ti" / "adam_update", "--relax", "PF-UNPROFITABLE")
    assert relaxed["b"]["relax"] == ["PF-UNPROFITABLE"] and relaxed["a"]["relax"] == []
    assert relaxed["summary"]["kernels_delta"] < 0
    assert all(c["rule"] != "PF-UNPROFITABLE" for c in relaxed["boundaries"]["added"])


def test_vs_xla_flags_replays_with_the_flags_the_rules_read():
    # jax 0.4.35 runs XLA:GPU's emitters at level 0, where this transpose is a loop fusion; at
    # level 4 it is a tiled transpose, an input fusion (tests/data/jax-0.4.35-emitter-level)
    before = REPO / "tests" / "data" / "jax-0.4.35-emitter-level" / "before_fusion.txt"
    d = hlofuse.diff(before, pipeline="legacy", gpu="rtx2080ti", xla_flags="--xla_gpu_mlir_emitter_level=0",
                     vs_xla_flags="--xla_gpu_mlir_emitter_level=4")
    (match,) = d.kernels
    assert match.status == "changed-kind"
    assert (match.a[0].label, match.b[0].label) == ("loop fusion", "input fusion")
    assert "kernel of another kind: loop fusion in A, input fusion in B" in d.headline
    payload = d.to_dict()
    assert payload["b"]["xla_flags"] == ["--xla_gpu_mlir_emitter_level=4"]
    assert payload["kernels"]["changed"][0]["status"] == "changed-kind"


def test_xlas_kernels_against_a_replay_say_so():
    dump = SAMPLES / "gpu-legacy-rtx2080ti" / "cartpole_b_concat"
    d = hlofuse.diff(dump, dump, relax=["concat"])  # B is replayed from the snapshot before fusion
    assert (d.a.explanation.stage, d.b.explanation.stage) == ("fused", "replayed")
    assert any("A is XLA's kernels and B hlofuse's replay" in n for n in d.notes)
    assert d.a_totals.kernels - d.b_totals.kernels == 3  # the final module's three copies


# ------------------------------------------------------------------------------------------
# Errors, module selection, outputs
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args,code,words", [
    (["sample_dumps/no-such-dump", "sample_dumps/cpu/mlp"], EXIT_INPUT, "no-such-dump"),
    (["sample_dumps/cpu/mlp"], EXIT_USAGE, "give A and B"),
    (["-", "-"], EXIT_USAGE, "both be -"),
    (["sample_dumps/cpu/mlp", "--vs-gpu", "h100_sxm"], EXIT_USAGE, "--vs-gpu"),
    (["sample_dumps/gpu-current-h100/mlp", "--relax", "NO-SUCH-RULE"], EXIT_RULE, "NO-SUCH-RULE"),
])
def test_bad_input_is_one_line_and_an_exit_code(args, code, words):
    result = run("diff", *args)
    assert result.exit_code == code, result.output
    assert words in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    as_json = run("diff", *args, "--json")
    assert as_json.exit_code == code and words in json.loads(as_json.stdout)["error"]


def test_a_fused_file_alone_cannot_be_replayed_two_ways(tmp_path):
    source = next((SAMPLES / "gpu-current-h100" / "mlp").glob("*after_optimizations.txt"))
    lone = tmp_path / source.name
    shutil.copy(source, lone)
    result = run("diff", lone, "--vs-gpu", "rtx2080ti")
    assert result.exit_code == EXIT_USAGE and "no snapshot before fusion" in result.output


def _several_modules(tmp_path: Path, name: str, program: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for key, source in (("module_0001.jit_small", SAMPLES / "gpu-current-h100" / "sgd_update"),
                        ("module_0002.jit_big", SAMPLES / "gpu-current-h100" / program)):
        text = next(source.glob("*sm_9.0a_gpu_after_optimizations.txt")).read_text()
        (folder / f"{key}.sm_9.0a_gpu_after_optimizations.txt").write_text(text)
    return folder


def test_a_folder_of_several_modules_chooses_as_explain_does(tmp_path):
    a = _several_modules(tmp_path, "a", "adam_update")
    b = _several_modules(tmp_path, "b", "adam_update")
    payload = run_json("diff", a, b)
    assert payload["a"]["input"] == run_json("explain", a)["input"]
    assert payload["a"]["input"].endswith("module_0002.jit_big.sm_9.0a_gpu_after_optimizations.txt")
    assert payload["summary"]["unchanged"] is True
    chosen = run_json("diff", a, b, "--module", "jit_small")
    assert chosen["a"]["input"] == run_json("explain", a, "--module", "jit_small")["input"]
    assert chosen["b"]["input"].endswith("module_0001.jit_small.sm_9.0a_gpu_after_optimizations.txt")
    missing = run("diff", a, b, "--module", "jit_none")
    assert missing.exit_code == run("explain", a, "--module", "jit_none").exit_code == EXIT_INPUT


def test_human_output_leads_with_the_headline_and_files_are_written(tmp_path):
    a, b = SAMPLES / "gpu-legacy-h100" / "softmax", SAMPLES / "gpu-current-h100" / "softmax"
    html, csv = tmp_path / "d.html", tmp_path / "d.csv"
    result = run("diff", a, b, "--html", html, "--csv", csv)
    assert result.exit_code == 0, result.output
    headline = hlofuse.diff(a, b).headline
    assert result.stdout.split("\n")[0] == headline[: len(result.stdout.split("\n")[0])]
    assert "Totals" in result.stdout and "Kernels" in result.stdout and "\x1b[" not in result.stdout
    page = html.read_text()
    assert "<script" not in page.lower() and "src=" not in page
    assert page.count('class="a"') and page.count('class="b"')
    import pandas as pd

    frame = pd.read_csv(csv)
    assert list(frame.columns)[:4] == ["side", "producer", "consumer", "producer_kernel"]
    assert len(frame) == 3 and set(frame["side"]) == {"A only"}


def test_the_api_function_stays_after_the_subpackage_is_imported():
    import importlib

    importlib.import_module("hlofuse.diff")
    assert callable(hlofuse.diff) and hlofuse.diff.__module__ == "hlofuse"
    from hlofuse.diff import compare  # the subpackage is still importable by name

    assert callable(compare)


def test_the_api_gives_the_csvs_rows_as_a_frame_and_a_notebook_view():
    d = hlofuse.diff(SAMPLES / "gpu-current-rtx2080ti" / "adam_update", SAMPLES / "gpu-current-h100" / "adam_update")
    frame = d.changes
    assert len(frame) == len(d.added) + len(d.removed) == 14
    assert set(frame["rule"]) == {"PF-UNPROFITABLE"} and set(frame["other_side"]) == {"fused"}
    assert set(frame["other_pass"]) == {"priority-fusion"}
    assert d.headline in d._repr_html_().replace("&#x27;", "'")


def test_help_teaches_by_example():
    result = run("diff", "--help")
    assert result.exit_code == 0
    assert "hlofuse diff sample_dumps/" in result.output and "--vs-gpu" in result.output
    assert "diff" in run("--help").output

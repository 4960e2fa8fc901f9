"""`--xla_dump_to` folders (hlofuse/dumpdir.py): XLA's file names of each era, what is skipped,
and how a module and a stage are chosen."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from hlofuse.dumpdir import (
    FUSION_PASSES, choose_module, choose_stage, classify, fusion_snapshot, read_input, scan,
)
from hlofuse.errors import InputError

# (file name, (module id, module, stage, step, pipeline, after_pass, before_pass, device)).
# Names are those of sample_dumps/ (jax 0.10.2 GPU/CPU, jax 0.4.35 GPU) and of
# shared/xla-fusion-rules.md §8.3.
NAMES = [
    # before / after optimizations, every backend spelling
    ("module_0001.jit_f.before_optimizations.txt", (1, "jit_f", "before_optimizations", None, None, None, None, None)),
    ("module_0001.jit_cartpole_b_concat.sm_9.0a_gpu_after_optimizations.txt",
     (1, "jit_cartpole_b_concat", "after_optimizations", None, None, None, None, "sm_9.0a_gpu")),
    ("module_0001.jit_adam_update.sm_9.0_gpu_after_optimizations.txt",
     (1, "jit_adam_update", "after_optimizations", None, None, None, None, "sm_9.0_gpu")),
    ("module_0001.jit_mlp.sm_7.5_gpu_after_optimizations.txt",
     (1, "jit_mlp", "after_optimizations", None, None, None, None, "sm_7.5_gpu")),
    ("module_0000.jit_softmax.cpu_after_optimizations.txt",
     (0, "jit_softmax", "after_optimizations", None, None, None, None, "cpu")),
    ("module_0003.jit__compiled_impl.gfx942_gpu_after_optimizations.txt",
     (3, "jit__compiled_impl", "after_optimizations", None, None, None, None, "gfx942_gpu")),
    ("module_0001.jit_f.after_optimizations.txt", (1, "jit_f", "after_optimizations", None, None, None, None, None)),
    ("module_0002.jit_f.v2.sm_8.0_gpu_after_optimizations.txt",
     (2, "jit_f.v2", "after_optimizations", None, None, None, None, "sm_8.0_gpu")),
    # per-pass snapshots: legacy GPU pipeline, PriorityFusion pipeline, CPU
    ("module_0001.jit_cartpole_b_concat.0003.fusion.after_fusion.before_fusion_merger.txt",
     (1, "jit_cartpole_b_concat", "pass", 3, "fusion", "fusion", "fusion_merger", None)),
    ("module_0001.jit_mlp.0002.fusion.after_fusion.before_fusion.txt",
     (1, "jit_mlp", "pass", 2, "fusion", "fusion", "fusion", None)),
    ("module_0001.jit_adam_update.0007.horizontal_fusion.after_pipeline-start.before_horizontal_loop_fusion.txt",
     (1, "jit_adam_update", "pass", 7, "horizontal_fusion", "pipeline-start", "horizontal_loop_fusion", None)),
    ("module_0001.jit_argsort_rows.0002.fusion.after_sort-iota-fusion.before_priority-fusion.txt",
     (1, "jit_argsort_rows", "pass", 2, "fusion", "sort-iota-fusion", "priority-fusion", None)),
    ("module_0001.jit_adam_update.0005.fusion.after_multi_output_fusion.before_cse.txt",
     (1, "jit_adam_update", "pass", 5, "fusion", "multi_output_fusion", "cse", None)),
    ("module_0000.jit_softmax.0001.HLO_passes_after_layout_assignment.after_fusion.before_fusion-wrapper.txt",
     (0, "jit_softmax", "pass", 1, "HLO_passes_after_layout_assignment", "fusion", "fusion-wrapper", None)),
    ("module_0012.pmap_train_step.0004.fusion.after_dce.before_multi_output_fusion.txt",
     (12, "pmap_train_step", "pass", 4, "fusion", "dce", "multi_output_fusion", None)),
    # PriorityFusion's own log
    ("module_0001.jit_f.priority_fusion_dump.txt", (1, "jit_f", "priority_fusion_dump", None, None, None, None, None)),
    # a module name that contains words of the skipped files
    ("module_0001.jit_schedule_autotune.before_optimizations.txt",
     (1, "jit_schedule_autotune", "before_optimizations", None, None, None, None, None)),
]

NOT_HLO = [
    "module_0001.jit_f.sm_9.0a_gpu_after_optimizations-buffer-assignment.txt",
    "module_0001.jit_f.sm_9.0a_gpu_after_optimizations-memory-usage-report.txt",
    "module_0001.jit_f.cpu_after_optimizations-buffer-assignment.txt",
    "module_0001.jit_f.thunk_sequence.txt",
    "module_0001.jit_f.ir-no-opt.ll",
    "module_0001.jit_f.ir-with-opt.ll",
    "module_0001.jit_f.sm_9.0a_gpu_after_optimizations.ptx",
    "module_0001.jit_f.before_optimizations.pb",
    "module_0001.jit_f.sm_9.0a_gpu_after_optimizations.dot",
    "module_0001.jit_f.sm_9.0a_gpu_after_optimizations.html",
    "module_0001.jit_f.autotune_results.pbtxt",
    "module_0001.jit_f.gpu_target_config.pbtxt",
    "module_0001.jit_f.debug_options",
    "jit_f.before_optimizations.txt",
    "README.md",
]

TINY = "HloModule m\n\nENTRY %e (p: f32[2]) -> f32[2] {\n  ROOT %p = f32[2]{0} parameter(0)\n}\n\n"


@pytest.mark.parametrize("name,want", NAMES, ids=[n for n, _ in NAMES])
def test_classify_names_of_each_era(name, want):
    f = classify(Path("dump") / name)
    assert f is not None, name
    got = (f.module_id, f.module, f.stage, f.step, f.pipeline, f.after_pass, f.before_pass, f.device)
    assert got == want


@pytest.mark.parametrize("name", NOT_HLO)
def test_what_is_not_hlo_text_is_skipped(name):
    assert classify(Path("dump") / name) is None


def test_backend_and_label():
    gpu = classify(Path("module_0001.jit_f.sm_9.0a_gpu_after_optimizations.txt"))
    cpu = classify(Path("module_0001.jit_f.cpu_after_optimizations.txt"))
    step = classify(Path("module_0001.jit_f.0004.fusion.after_dce.before_multi_output_fusion.txt"))
    assert (gpu.backend, cpu.backend, step.backend) == ("gpu", "cpu", None)
    assert step.label == "0004 after dce (before multi_output_fusion)"
    assert gpu.key == "module_0001.jit_f"


def _dump(folder: Path, names: list[str], text: str = TINY) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(text)
    return folder


LEGACY = [
    "module_0001.jit_f.before_optimizations.txt",
    "module_0001.jit_f.0000.fusion.after_pipeline-start.before_variadic-op-splitter.txt",
    "module_0001.jit_f.0002.fusion.after_fusion.before_fusion.txt",
    "module_0001.jit_f.0003.fusion.after_fusion.before_fusion_merger.txt",
    "module_0001.jit_f.0005.fusion.after_dce.before_multi_output_fusion.txt",
    "module_0001.jit_f.sm_7.5_gpu_after_optimizations.txt",
    "module_0001.jit_f.sm_7.5_gpu_after_optimizations-buffer-assignment.txt",
    "module_0001.jit_f.ir-no-opt.ll",
]


def test_scan_orders_stages_and_skips_the_rest(tmp_path):
    folder = _dump(tmp_path / "d", LEGACY + ["module_0002.jit_g.before_optimizations.txt"])
    (folder / "sub").mkdir()
    stages = [(f.module, f.stage, f.step) for f in scan(folder)]
    assert stages == [
        ("jit_f", "before_optimizations", None), ("jit_f", "pass", 0), ("jit_f", "pass", 2),
        ("jit_f", "pass", 3), ("jit_f", "pass", 5), ("jit_f", "after_optimizations", None),
        ("jit_g", "before_optimizations", None),
    ]


def test_choose_module_by_name_id_or_size(tmp_path):
    folder = _dump(tmp_path / "d", ["module_0001.jit_small.before_optimizations.txt"])
    _dump(folder, ["module_0002.jit_big.before_optimizations.txt"], TINY + "\n" * 100)
    files = scan(folder)
    assert {f.module for f in choose_module(files, None, str(folder))} == {"jit_big"}
    assert {f.module for f in choose_module(files, "jit_small", str(folder))} == {"jit_small"}
    assert {f.module for f in choose_module(files, "module_0001", str(folder))} == {"jit_small"}
    with pytest.raises(InputError, match="no module 'nope'; modules here: module_0001.jit_small"):
        choose_module(files, "nope", str(folder))
    with pytest.raises(InputError, match="no HLO text files"):
        choose_module([], None, str(tmp_path))


def test_choose_stage(tmp_path):
    files = scan(_dump(tmp_path / "d", LEGACY))
    assert choose_stage(files, None).stage == "after_optimizations"
    assert choose_stage(files, "before_optimizations").stage == "before_optimizations"
    assert choose_stage(files, "last").step == 5
    assert choose_stage(files, "3").after_pass == "fusion"
    assert choose_stage(files, "after_dce").step == 5
    assert choose_stage(files, "before_fusion").step == 0  # the snapshot right before `fusion` runs
    # After the fusion passes: step 3 is right after `fusion`, step 5 sits between fusion passes
    # (after fusion_merger and dce, before multi_output_fusion); which one dumpdir picks is the
    # fusion engine's choice (hlofuse/dumpdir.py, fusion_snapshot), not this test's.
    assert choose_stage(files, "after_fusion").step in (3, 5)
    with pytest.raises(InputError, match="no stage 'after_nothing'; stages here: before_optimizations"):
        choose_stage(files, "after_nothing")


def test_fusion_snapshot_per_pipeline(tmp_path):
    names = ["module_0001.jit_f.0000.fusion.after_pipeline-start.before_variadic-op-splitter.txt",
             "module_0001.jit_f.0002.fusion.after_sort-iota-fusion.before_priority-fusion.txt",
             "module_0001.jit_f.0004.fusion.after_dce.before_multi_output_fusion.txt",
             "module_0001.jit_f.0005.fusion.after_multi_output_fusion.before_cse.txt"]
    files = scan(_dump(tmp_path / "d", names))
    assert fusion_snapshot(files, "before_fusion", "priority").step == 0
    assert fusion_snapshot(files, "after_fusion", "priority").step == 5
    assert fusion_snapshot(files, "after_fusion", "cpu") is None
    assert "priority-fusion" in FUSION_PASSES["priority"]


#: A jax 0.4.35 compile dumped with `--xla_dump_hlo_pass_re=fusion|...|horizontal_loop_fusion`:
#: the file names XLA wrote, after-fusion pipelines with reused pass names included.
LEGACY_BROAD = [
    "module_0001.jit_reduce_middle.0004.post-layout_assignment.after_gemm-fusion-autotuner.before_call-inliner.txt",
    "module_0001.jit_reduce_middle.0005.fusion.after_pipeline-start.before_variadic-op-splitter.txt",
    "module_0001.jit_reduce_middle.0011.fusion.after_multi_output_fusion.before_cse.txt",
    "module_0001.jit_reduce_middle.0013.horizontal_fusion.after_horizontal_loop_fusion.before_horizontal_input_fusion.txt",
    "module_0001.jit_reduce_middle.0014.horizontal_fusion.after_horizontal_input_fusion.before_cse.txt",
    "module_0001.jit_reduce_middle.0017.GPU-ir-emit-prepare.after_copy-insertion.before_horizontal-loop-fusion-for-copy.txt",
    "module_0001.jit_reduce_middle.0020.horizontal-loop-fusion-for-copy.after_horizontal_loop_fusion.before_dce.txt",
    "module_0001.jit_reduce_middle.0026.fusion-wrapper.after_fusion-wrapper.before_pipeline-end.txt",
]


@pytest.mark.parametrize("pipeline", [None, "legacy"])
def test_after_fusion_is_never_a_later_pipeline_reusing_a_pass_name(tmp_path, pipeline):
    """Copy insertion's `horizontal-loop-fusion-for-copy` and scheduling's `fusion-wrapper` run
    passes named like fusion passes long after fusion: the module right after fusion is the
    last snapshot of the `horizontal_fusion` pipeline."""
    files = scan(_dump(tmp_path / "d", LEGACY_BROAD))
    assert fusion_snapshot(files, "before_fusion", pipeline).step == 5
    assert fusion_snapshot(files, "after_fusion", pipeline).step == 14


def test_read_input_file_folder_and_stdin(tmp_path, monkeypatch):
    folder = _dump(tmp_path / "d", LEGACY)
    text, name = read_input(str(folder), stage="before_optimizations")
    assert text == TINY and name.endswith("module_0001.jit_f.before_optimizations.txt")
    path = folder / LEGACY[0]
    assert read_input(str(path)) == (TINY, str(path))
    monkeypatch.setattr(sys, "stdin", io.StringIO(TINY))
    assert read_input("-") == (TINY, "<stdin>")
    with pytest.raises(InputError, match="no such file or folder"):
        read_input(str(tmp_path / "missing.hlo"))


def test_read_input_keeps_line_ends(tmp_path):
    path = tmp_path / "crlf.hlo"
    path.write_bytes(TINY.replace("\n", "\r\n").encode())
    assert read_input(str(path))[0] == TINY.replace("\n", "\r\n")


def test_sample_dumps_classify(sample_dumps_dir):
    """Every module_* file under sample_dumps/ is either HLO text of a known stage or skipped."""
    names = [p for p in sample_dumps_dir.rglob("module_*") if p.is_file()]
    if not names:
        pytest.skip("sample_dumps/ has no dumps right now (being regenerated?)")
    unknown = [p.name for p in names if p.suffix == ".txt" and classify(p) is None
               and "buffer-assignment" not in p.name and "memory-usage" not in p.name]
    assert not unknown, f"{len(unknown)} of {len(names)} .txt files not recognised: {unknown[:5]}"

"""Backend detection (hlofuse/backend.py, through hlofuse.resolve): from dump file names and
from module contents."""

from __future__ import annotations

from pathlib import Path

import hlofuse
from hlofuse.backend import detect

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_dumps"


def test_cpu_dump_folder_and_files():
    d = hlofuse.resolve(SAMPLES / "cpu" / "mlp").detection
    assert (d.backend, d.pipeline) == ("cpu", "cpu") and "cpu_after_optimizations" in d.why
    before = next((SAMPLES / "cpu-noynn" / "mlp").glob("*before_fusion.txt"))
    d = hlofuse.resolve(before).detection
    assert d.backend == "cpu" and "cpu_after_optimizations" in d.why  # its sibling's name says so


def test_gpu_dump_folders_name_their_pipeline():
    assert hlofuse.resolve(SAMPLES / "gpu-current-h100" / "mlp").pipeline == "priority"
    legacy = hlofuse.resolve(SAMPLES / "gpu-legacy-rtx2080ti" / "mlp").detection
    assert (legacy.backend, legacy.pipeline) == ("gpu", "legacy") and "GpuInstructionFusion" in legacy.why
    after = next((SAMPLES / "gpu-current-h100" / "mlp").glob("*gpu_after_optimizations.txt"))
    d = hlofuse.resolve(after).detection
    assert d.backend == "gpu" and "sm_9.0a" in d.why and d.gpu == "h100_sxm"


def test_module_contents_without_telling_file_names():
    cpu = hlofuse.loads("""HloModule m
body {
  p0 = f32[8,8] parameter(0)
  ROOT d = f32[8,8] dot(p0, p0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY e {
  x = f32[8,8] parameter(0)
  ROOT f = f32[8,8] fusion(x), kind=kCustom, calls=body, backend_config={"outer_dimension_partitions":[],"fusion_config":{"kind":"__ynn_fusion"}}
}""")
    d = detect(cpu, file="model.hlo")
    assert d.backend == "cpu" and "__ynn_fusion" in d.why and "model.hlo" in d.why
    gpu = hlofuse.loads("""HloModule m
ENTRY e {
  a = f32[8,8] parameter(0)
  ROOT g = (f32[8,8], s8[0]) custom-call(a, a), custom_call_target="__cublas$gemm", backend_config={"operation_queue_id":"0","gemm_backend_config":{}}
}""")
    d = detect(gpu)
    assert d.backend == "gpu" and ("operation_queue_id" in d.why or "__cublas$gemm" in d.why)


def test_nothing_to_go_on_says_so():
    plain = hlofuse.loads("HloModule m\nENTRY e {\n  x = f32[8] parameter(0)\n  ROOT n = f32[8] negate(x)\n}")
    d = detect(plain, file="-")
    assert d.backend == "gpu" and "assumed" in d.why and "<stdin>" in d.why
    assert "--backend" in d.message()


def test_explain_api_detects_from_the_dump_it_is_given():
    from hlofuse.explain import dump_context
    from hlofuse.explain.detect import detect as explain_detect

    folder = SAMPLES / "cpu" / "softmax"
    after = next(folder.glob("*cpu_after_optimizations.txt"))
    module = hlofuse.load(str(after))
    assert explain_detect(module, dump_context(str(folder)), None, None, None).backend == "cpu"
    assert explain_detect(module, None, None, None, None).backend == "cpu"  # YNN fusions in the module say so

"""Regenerate this folder: one small jax program compiled deviceless by jax 0.4.35's XLA:GPU
for the RTX 2080 Ti, at the default `xla_gpu_mlir_emitter_level` and with it set to 4.

    .venv-samples-legacy/bin/python tests/data/jax-0.4.35-emitter-level/generate.py

A transpose keeping its minor dimension (f32[64,128,2], dimensions {1,0,2}) is a tiled
transpose only for the MLIR transpose emitter (level 3 and up): at jax's default XLA makes a
loop fusion of it (after_fusion.level-default.txt), with level 4 an input fusion
(after_fusion.level-4.txt).  The module before fusion is the same in both (before_fusion.txt).
"""

import glob
import re
import shutil
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
from jax.experimental import topologies

HERE = Path(__file__).resolve().parent
SPEC = HERE.parent.parent.parent / "hlofuse" / "data" / "gpu_specs" / "rtx2080ti.txtpb"


def f(x):
    return jnp.exp(x).transpose(1, 0, 2) * 2.0


def compile_with(level: int | None, dump: str) -> None:
    topo = topologies.get_topology_desc(platform="cuda", target_config=SPEC.read_text(), topology="1x1x1")
    sharding = jax.sharding.SingleDeviceSharding(topo.devices[0])
    options = {"xla_dump_to": dump, "xla_dump_hlo_pass_re": "fusion",
               "xla_gpu_enable_priority_fusion": False, "xla_gpu_autotune_level": 0}
    if level is not None:
        options["xla_gpu_mlir_emitter_level"] = level
    args = [jax.ShapeDtypeStruct((64, 128, 2), jnp.float32, sharding=sharding)]
    jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",)).compile(compiler_options=options)


def main() -> int:
    if jax.__version__ != "0.4.35":
        sys.exit(f"wants jax 0.4.35, this interpreter has {jax.__version__}")
    # Source paths in the dumps' metadata: relative to the repository root, not this machine.
    jax.config.update("jax_hlo_source_file_canonicalization_regex", "^" + re.escape(str(HERE.parents[2]) + "/"))
    for level, suffix in ((None, "level-default"), (4, "level-4")):
        with tempfile.TemporaryDirectory() as dump:
            compile_with(level, dump)
            if level is None:
                shutil.copy(glob.glob(f"{dump}/*.fusion.after_variadic-op-splitter.before_fusion.txt")[0],
                            HERE / "before_fusion.txt")
            shutil.copy(glob.glob(f"{dump}/*.fusion.after_dce.before_multi_output_fusion.txt")[0],
                        HERE / f"after_fusion.{suffix}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())

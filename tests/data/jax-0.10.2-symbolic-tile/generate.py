"""Regenerate this folder: small LayerNorm programs whose normalisation (a generic Triton
fusion) is read by a reduce through a bitcast or reshape, compiled deviceless for the H100 by
jax 0.10.2's XLA:GPU (XLA 5a9e73cb), one folder per program.

    .venv-samples-current/bin/python tests/data/jax-0.10.2-symbolic-tile/generate.py

Each folder keeps the module right before the fusion passes, the last snapshot of the fusion
pipeline and PriorityFusion's log (`priority_fusion_dump.txt`), under XLA's names.

What each shows (XLA's result):
  ln_sum_merged        LayerNorm of f32[4,32,64] summed over its first two dimensions: XLA
                       reduces f32[128,64] over the 128, the LayerNorm's index is then
                       (s0 / 32, s0 mod 32, d0) and SymbolicTileAnalysis refuses the pair
                       ("Failed to compute symbolic tile for ...")
  ln_sum_kept          the LayerNorm of f32[4,32,64] summed over its first dimension only: no
                       bitcast merges the reduced dimension, XLA fuses it all into one
                       Triton fusion
  ln_split_sum         a LayerNorm of f32[128,64] reshaped to f32[4,32,64] and summed over the
                       4: the reduced dimension is split, its index s0 * 32 + d0 is tiled
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
from jax.experimental import topologies

HERE = Path(__file__).resolve().parent
SPECS = HERE.parent.parent.parent / "hlofuse" / "data" / "gpu_specs"
PASS_RE = "^(variadic-op-splitter|priority-fusion|multi_output_fusion)$"
F32 = jnp.float32


def layer_norm(x, g, b):
    m = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean((x - m) ** 2, -1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b


def ln_sum_merged(x, g, b):
    return layer_norm(x, g, b).sum((0, 1))


def ln_sum_kept(x, g, b):
    return layer_norm(x, g, b).sum(0)


def ln_split_sum(x, g, b):
    return layer_norm(x, g, b).reshape(4, 32, 64).sum(0)


def cls_token_norm(x, w, cls, pos, g, b):
    tokens = (x @ w).reshape(4, 64, 64)
    tokens = jnp.concatenate([jnp.broadcast_to(cls, (4, 1, 64)), tokens], axis=1)
    return layer_norm(tokens + pos, g, b)


PROGRAMS = {
    "ln_sum_merged": (ln_sum_merged, [(4, 32, 64), (64,), (64,)]),
    "ln_sum_kept": (ln_sum_kept, [(4, 32, 64), (64,), (64,)]),
    "ln_split_sum": (ln_split_sum, [(128, 64), (64,), (64,)]),
    "cls_token_norm": (cls_token_norm, [(256, 48), (48, 64), (1, 1, 64), (65, 64), (64,), (64,)]),
}


def compile_one(name: str, dump: str) -> None:
    fn, shapes = PROGRAMS[name]
    topo = topologies.get_topology_desc(platform="cuda", target_config=(SPECS / "h100_sxm.txtpb").read_text(),
                                        topology="1x1x1")
    sharding = jax.sharding.SingleDeviceSharding(topo.devices[0])
    args = [jax.ShapeDtypeStruct(s, F32, sharding=sharding) for s in shapes]
    jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).compile(
        compiler_options={"xla_dump_to": dump, "xla_dump_hlo_pass_re": PASS_RE})


def keep(dump: Path, out: Path) -> None:
    """The snapshot before fusion, the last one of the fusion pipeline and XLA's log."""
    names = sorted(p.name for p in dump.iterdir())
    fusion = [n for n in names if re.search(r"\.\d{4}\.fusion\.after_", n)]
    before = [n for n in fusion if n.endswith(".before_variadic-op-splitter.txt")]
    last = max(fusion, key=lambda n: int(re.search(r"\.(\d{4})\.fusion\.", n).group(1)))
    log = [n for n in names if n.endswith(".priority_fusion_dump.txt")]
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    for name in before[:1] + [last] + log:
        shutil.copy(dump / name, out / name)


def main(argv: list[str]) -> int:
    if jax.__version__ != "0.10.2":
        sys.exit(f"wants jax 0.10.2, this interpreter has {jax.__version__}")
    if argv[:1] == ["--one"]:
        # Source paths in the dumps' metadata: relative to the repository root.
        jax.config.update("jax_hlo_source_file_canonicalization_regex", "^" + re.escape(str(HERE.parents[2]) + "/"))
        compile_one(argv[1], argv[2])
        return 0
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}
    for name in argv or PROGRAMS:
        # one process per program, so XLA numbers its module 1
        with tempfile.TemporaryDirectory() as dump:
            subprocess.run([sys.executable, __file__, "--one", name, dump], check=True, env=env)
            keep(Path(dump), HERE / name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

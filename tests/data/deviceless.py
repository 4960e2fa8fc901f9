"""What the generate.py scripts beside this file share: each program compiled deviceless by
jax 0.10.2's XLA:GPU for a GPU spec of hlofuse/data/gpu_specs, in a process of its own (so that
XLA numbers its module 1), and the three files the tests read kept under XLA's names: the
module right before the fusion passes, the last snapshot of the fusion pipeline, and
PriorityFusion's log (`priority_fusion_dump.txt`).

A script calls `main(__file__, PROGRAMS, argv)` with PROGRAMS mapping a folder name to
(gpu spec, function, argument shapes, all f32); `generate.py NAME...` regenerates some."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "hlofuse" / "data" / "gpu_specs"
PASS_RE = "^(variadic-op-splitter|priority-fusion|multi_output_fusion)$"


def compile_one(gpu: str, fn, shapes, dump: str) -> None:
    import jax
    import jax.numpy as jnp
    from jax.experimental import topologies

    topo = topologies.get_topology_desc(platform="cuda", target_config=(SPECS / f"{gpu}.txtpb").read_text(),
                                        topology="1x1x1")
    sharding = jax.sharding.SingleDeviceSharding(topo.devices[0])
    args = [jax.ShapeDtypeStruct(s, jnp.float32, sharding=sharding) for s in shapes]
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


def main(script: str, programs: dict, argv: list[str]) -> int:
    import jax

    if jax.__version__ != "0.10.2":
        sys.exit(f"wants jax 0.10.2, this interpreter has {jax.__version__}")
    if argv[:1] == ["--one"]:
        # Source paths in the dumps' metadata: relative to the repository root.
        jax.config.update("jax_hlo_source_file_canonicalization_regex", "^" + re.escape(str(REPO) + "/"))
        compile_one(*programs[argv[1]], argv[2])
        return 0
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}
    for name in argv or programs:
        with tempfile.TemporaryDirectory() as dump:
            subprocess.run([sys.executable, script, "--one", name, dump], check=True, env=env)
            keep(Path(dump), Path(script).resolve().parent / name)
    return 0

"""Reference outputs of the sample programs, computed by real JAX (jax 0.10.2 on the CPU),
for tests/test_execute_xla.py: the evaluator must reproduce them from the programs' dumps.

Run with a Python that has jax (not the project's venv):
    /work/venv-jax/bin/python tests/data/execute/make_references.py
    JAX_ENABLE_X64=1 /work/venv-jax/bin/python tests/data/execute/make_references.py --rng

Inputs are not stored: both sides draw them from SEED with hlofuse.execute.inputs (NumPy
only).  For each output the file keeps its shape, its sum and sum of magnitudes (float64),
and 256 sampled elements, so the files stay small.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "sample_dumps"))

SEED = 7
SAMPLES = 256


def element_type(dtype) -> str:
    return {"float32": "f32", "int32": "s32", "uint32": "u32", "bool": "pred",
            "float64": "f64", "int64": "s64"}[np.dtype(dtype).name]


def summary(outputs: list[np.ndarray], seed: int) -> dict:
    rng = np.random.default_rng(seed + 1)
    data = {"seed": np.int64(seed), "n_outputs": np.int64(len(outputs))}
    for k, out in enumerate(outputs):
        out = np.asarray(out)
        flat = out.reshape(-1)
        index = np.sort(rng.choice(flat.size, size=min(SAMPLES, flat.size), replace=False))
        data[f"out{k}_shape"] = np.asarray(out.shape, np.int64)
        data[f"out{k}_index"] = index.astype(np.int64)
        data[f"out{k}_values"] = flat[index]
        data[f"out{k}_sum"] = np.float64(flat.astype(np.float64).sum())
        data[f"out{k}_abs"] = np.float64(np.abs(flat.astype(np.float64)).sum())
    return data


def main(names: list[str]) -> None:
    import jax

    from hlofuse.execute.inputs import random_inputs
    from programs import PROGRAMS

    for program in PROGRAMS:
        if names and program.name not in names:
            continue
        if program.gpu_only:
            continue
        signature = [(shape, element_type(dtype)) for shape, dtype in program.args]
        args = random_inputs(signature, SEED)
        with jax.default_device(jax.devices("cpu")[0]):
            for key, value in program.jax_config.items():
                jax.config.update(key, value)
            outputs = jax.tree_util.tree_leaves(jax.jit(program.fn)(*args))
        np.savez_compressed(HERE / f"{program.name}.npz", **summary([np.asarray(o) for o in outputs], SEED))
        print(program.name, [np.asarray(o).shape for o in outputs])


def rng_references() -> None:
    """rng_bit_generator.json: HLO modules of `jax.lax.rng_bit_generator` (each algorithm, a few
    shapes and widths) with the state and bits XLA:CPU computed for one key.  Run with
    JAX_ENABLE_X64=1 so that the 64-bit cases are kept."""
    import json

    import jax
    import jax.numpy as jnp
    from jax import lax

    key = jnp.array([0x12345678, 0x9ABCDEF0, 7, 3], jnp.uint32)
    cases = {}
    for alg in (lax.RandomAlgorithm.RNG_DEFAULT, lax.RandomAlgorithm.RNG_PHILOX, lax.RandomAlgorithm.RNG_THREE_FRY):
        for shape, dtype in (((5, 3), jnp.uint32), ((2, 3, 4), jnp.uint8), ((), jnp.uint32), ((3, 5), jnp.uint64),
                             ((7,), jnp.uint64)):
            fn = jax.jit(lambda k, shape=shape, dtype=dtype, alg=alg: lax.rng_bit_generator(k, shape, dtype, algorithm=alg))
            state, bits = fn(key)
            tag = f"{alg.name}_{'x'.join(map(str, shape)) or 'scalar'}_{np.dtype(dtype).name}"
            cases[tag] = {"hlo": fn.lower(key).as_text(dialect="hlo"),
                          "key": [int(v) for v in np.asarray(key)],
                          "state": [int(v) for v in np.asarray(state).reshape(-1)],
                          "bits": [int(v) for v in np.asarray(bits).reshape(-1)]}
    (HERE / "rng_bit_generator.json").write_text(json.dumps(cases, indent=1))
    print(len(cases), "rng_bit_generator cases")


if __name__ == "__main__":
    if sys.argv[1:] == ["--rng"]:
        rng_references()
    else:
        main(sys.argv[1:])

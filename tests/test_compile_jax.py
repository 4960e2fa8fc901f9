"""`hlofuse.compile_jax` and `hlofuse compile` with real JAX (issue 19): the same kernels as a
dump of the same function made with XLA_FLAGS, pytrees and static arguments, the caller's
own script, and every error path (the user's file and line, XLA's refusals, what to install).

Needs JAX with its CUDA plugin (`pip install 'hlofuse[jax]'`); skipped without it.  No GPU
is needed: XLA:GPU compiles for a described H100.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import hlofuse
from hlofuse.cli import main
from hlofuse.errors import (EXIT_INPUT, EXIT_USER_CODE, EXIT_XLA_COMPILE, BackendUnavailable, InputError,
                            UserCodeError, XlaCompileError)
from hlofuse.from_jax import MANIFEST, install

jax = pytest.importorskip("jax", reason="JAX is not installed: pip install 'hlofuse[jax]' runs these tests")
try:
    install.require("gpu", deviceless=True)
except Exception as missing:  # noqa: BLE001
    pytest.skip(f"JAX's CUDA plugin is not usable here ({missing})", allow_module_level=True)
jax.config.update("jax_platforms", "cpu")  # this process never starts a GPU runtime

from conftest import CHILD_PYTHONPATH, REPO  # noqa: E402

GPU = "h100_sxm"

PROGRAMS = '''
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def softmax(x):
    e = jnp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def mlp(x, w1, b1, w2):
    h = jax.nn.relu(x @ w1 + b1)
    return jnp.tanh(h @ w2)


def step_loop(state, n_steps):
    def body(s, _):
        pos, vel = s
        acc = -jnp.sin(pos) * 9.8 - 0.1 * vel
        vel = vel + 0.01 * acc
        return (pos + 0.01 * vel, vel), None

    out, _ = lax.scan(body, state, None, length=n_steps)
    return out


def concat_users(a, b):
    s = jnp.concatenate([a, b], axis=1)
    return jnp.sin(s).sum(axis=1), s * 2.0


def params_tree(params, x):
    return {"y": jnp.tanh(x @ params["w"] + params["b"]), "norm": jnp.sum(params["w"] ** 2)}


def scale(x, factor):
    return x * factor


@partial(jax.jit, static_argnums=1)
def power(x, n):
    for _ in range(n):
        x = x * x
    return x


def shape_error(x):
    y = jnp.ones(3)
    return x + y  # THE-BAD-LINE


def example_args():
    return (np.zeros((64, 32), np.float32), np.zeros((32, 128), np.float32), np.zeros(128, np.float32),
            np.zeros((128, 16), np.float32))


def not_a_tuple():
    return np.zeros(3)
'''

#: The functions compared with a dump made with XLA_FLAGS: (name, argument shapes, static args).
CASES = {
    "softmax": ([(256, 512)], {}),
    "mlp": ([(64, 32), (32, 128), (128,), (128, 16)], {}),
    "step_loop": ([((1024,), (1024,))], {1: 10}),
    "concat_users": ([(512, 3), (512, 1)], {}),
}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("user")
    (folder / "progs.py").write_text(PROGRAMS)
    sys.path.insert(0, str(folder))
    import progs

    yield progs
    sys.path.remove(str(folder))
    sys.modules.pop("progs", None)


def example(shapes, static):
    """Example arguments: numpy zeros of the shapes (tuples of shapes are pytrees), the
    static values at their positions."""
    def make(s):
        return tuple(make(x) for x in s) if s and isinstance(s[0], tuple) else np.zeros(s, np.float32)

    args = [make(s) for s in shapes]
    for position, value in sorted(static.items()):
        args.insert(position, value)
    return tuple(args)


REFERENCE = '''
import sys
import numpy as np
import jax
sys.path.insert(0, {folder!r})
import progs
from test_cases import CASES, example

backend = sys.argv[1]
for name, (shapes, static) in CASES.items():
    fn = jax.jit(getattr(progs, name), static_argnums=tuple(static))
    args = example(shapes, static)
    if backend == "cpu":
        fn(*args)  # compiled by XLA:CPU as any jax program is, and run
    else:
        from jax.experimental import topologies
        spec = open({spec!r}).read()
        topo = topologies.get_topology_desc(platform="cuda", target_config=spec, topology="1x1x1")
        on = jax.sharding.SingleDeviceSharding(topo.devices[0])
        abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=on),
                                          [a for i, a in enumerate(args) if i not in static])
        for i in sorted(static):
            abstract.insert(i, static[i])
        fn.trace(*abstract).lower(lowering_platforms=("cuda",)).compile()
'''


@pytest.fixture(scope="module")
def xla_flags_dumps(programs, tmp_path_factory):
    """{backend: dump folder}: every CASE compiled in one process with the XLA_FLAGS the README
    tells users to set."""
    folder = Path(programs.__file__).parent
    (folder / "test_cases.py").write_text(
        "import numpy as np\n" + f"CASES = {CASES!r}\n" + textwrap.dedent(_source_of(example)))
    script = folder / "reference.py"
    script.write_text(REFERENCE.format(folder=str(folder), spec=str(REPO / "hlofuse/data/gpu_specs/h100_sxm.txtpb")))
    dumps = {}
    for backend in ("gpu", "cpu"):
        dump = tmp_path_factory.mktemp(f"xla-flags-{backend}")
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": f"--xla_dump_to={dump} "
               "--xla_dump_hlo_pass_re=^(fusion|priority-fusion|multi_output_fusion)$"}
        done = subprocess.run([sys.executable, str(script), backend], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        dumps[backend] = dump
    return dumps


def _source_of(fn) -> str:
    import inspect

    return inspect.getsource(fn)


@pytest.fixture(scope="module")
def compiled(programs):
    """{(name, backend): compile_jax's dump} for every CASE."""
    out = {}
    for name, (shapes, static) in CASES.items():
        for backend in ("gpu", "cpu"):
            out[name, backend] = hlofuse.compile_jax(getattr(programs, name), *example(shapes, static),
                                                     static_argnums=tuple(static), backend=backend,
                                                     gpu=GPU if backend == "gpu" else None)
    return out


def kernels(report):
    return [(k.computation, k.name, k.kind, tuple(k.instructions)) for k in report.explanation.kernels]


def boundaries(report):
    return [(b.producer, b.consumer, b.rule) for b in report.explanation.boundaries]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["gpu", "cpu"])
@pytest.mark.parametrize("name", list(CASES))
def test_the_same_kernels_as_a_dump_made_with_xla_flags(name, backend, compiled, xla_flags_dumps):
    ours = hlofuse.explain(compiled[name, backend])
    theirs = hlofuse.explain(xla_flags_dumps[backend], module=f"jit_{name}",
                             gpu=GPU if backend == "gpu" else None)
    assert kernels(ours) and kernels(ours) == kernels(theirs)
    assert boundaries(ours) == boundaries(theirs)
    assert ours.summary()["kernels_launched"] == theirs.summary()["kernels_launched"]
    assert (ours.explanation.backend, ours.explanation.pipeline) == \
        ((backend, "priority") if backend == "gpu" else ("cpu", "cpu"))


@pytest.mark.slow
def test_the_dump_has_the_snapshots_hlofuse_needs(compiled):
    gpu, cpu = compiled["step_loop", "gpu"], compiled["step_loop", "cpu"]
    names = os.listdir(gpu)
    assert any(n.endswith(".priority_fusion_dump.txt") for n in names)  # XLA's own reasons
    assert not any(n.endswith((".ll", ".ptx")) for n in names)  # generated code is not kept
    record = json.loads((Path(gpu) / MANIFEST).read_text())
    assert record["module"] == gpu.module == "module_0001.jit_step_loop" and record["deviceless"]
    assert set(record["files"]) == set(names) - {MANIFEST}
    for dump in (gpu, cpu):  # check replays from the snapshot before fusion: it is there
        report = hlofuse.check(dump)
        assert report.result.reproduced == report.result.xla_kernels > 0
    loop = hlofuse.explain(gpu).explanation.loops[0]
    assert loop.trip_count == 10  # the static argument's value
    assert gpu.device == "NVIDIA H100 80GB HBM3" and cpu.target == "XLA:CPU"
    assert gpu.compile_seconds > 0 and gpu.seconds["total"] >= gpu.compile_seconds


def test_pytrees_in_and_out(programs):
    params = {"w": np.zeros((32, 16), np.float32), "b": np.zeros(16, np.float32)}
    dump = hlofuse.compile_jax(programs.params_tree, params, np.zeros((8, 32), np.float32), backend="cpu")
    module = hlofuse.load(dump, stage="before_optimizations")
    shapes = [str(i.shape).split("{")[0] for i in module.entry.parameters]
    assert shapes == ["f32[16]", "f32[32,16]", "f32[8,32]"]  # leaves in JAX's order: b, w (sorted keys), x


def test_python_scalars_are_weakly_typed_as_jax_traces_them(programs):
    x = jax.ShapeDtypeStruct((8,), jax.numpy.bfloat16)
    dump = hlofuse.compile_jax(programs.scale, x, 2.0, backend="cpu")
    root = hlofuse.load(dump, stage="before_optimizations").entry.root
    assert str(root.shape).startswith("bf16[8]")  # a strong f32 scalar would have made it f32


def test_static_arguments_of_a_jitted_function_and_given(programs):
    x = np.zeros(16, np.float32)
    three = hlofuse.compile_jax(programs.power, x, 3, backend="cpu")  # its own static_argnums=1
    five = hlofuse.compile_jax(programs.power, x, 5, static_argnums=1, backend="cpu")
    for dump, n in ((three, 3), (five, 5)):
        module = hlofuse.load(dump, stage="before_optimizations")
        assert [i.opcode for _, i in module.instructions()].count("multiply") == n
        assert sum(i.opcode == "parameter" for i in module.entry.instructions) == 1


def test_a_temporary_dump_is_removed_with_its_record(programs):
    dump = hlofuse.compile_jax(programs.softmax, np.zeros((4, 4), np.float32), backend="cpu")
    folder = Path(dump)
    assert dump.temporary and (folder / MANIFEST).exists()
    report = hlofuse.explain(dump)
    del dump
    gc.collect()
    assert folder.exists()  # the report keeps it while it lives
    del report
    gc.collect()
    assert not folder.parent.exists()


def test_functions_and_pytree_classes_of_the_callers_own_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent('''
        from typing import NamedTuple
        import numpy as np
        import jax.numpy as jnp
        import hlofuse

        class State(NamedTuple):
            pos: np.ndarray
            vel: np.ndarray

        def step(state):
            return State(state.pos + state.vel, state.vel * 0.9)

        if __name__ == "__main__":
            s = State(np.zeros(64, np.float32), np.ones(64, np.float32))
            dump = hlofuse.compile_jax(step, s, backend="cpu")
            print(dump.module, len(hlofuse.explain(dump).kernels))
        '''))
    env = {**os.environ, "PYTHONPATH": CHILD_PYTHONPATH, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    module, count = done.stdout.split()
    assert module.endswith(".jit_step") and int(count) >= 1


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------


def test_a_trace_error_is_the_users_at_their_line(programs):
    with pytest.raises(UserCodeError) as err:
        hlofuse.compile_jax(programs.shape_error, np.zeros(4, np.float32), backend="cpu")
    line = PROGRAMS.splitlines().index("    return x + y  # THE-BAD-LINE") + 1
    assert err.value.path.endswith("progs.py") and err.value.line == line
    assert err.value.exit_code == EXIT_USER_CODE
    assert err.value.one_line().endswith(f"progs.py:{line}: error: tracing shape_error: TypeError: add got "
                                         "incompatible shapes for broadcasting: (4,), (3,).")
    assert "Traceback" in err.value.details


def test_the_command_reports_errors_in_the_script_at_their_line(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import numpy as np\n\nraise ValueError('no data here')\n\ndef f(x):\n    return x\n")
    result = CliRunner().invoke(main, ["compile", f"{broken}:f", "--arg", "f32[8]", "--backend", "cpu"])
    assert result.exit_code == EXIT_USER_CODE
    assert result.stderr.strip().splitlines()[-1].endswith(
        "broken.py:3: error: importing the script: ValueError: no data here")
    result = CliRunner().invoke(main, ["compile", f"{broken}:f", "--arg", "f32[8]", "--backend", "cpu", "--json"])
    assert result.exit_code == EXIT_USER_CODE
    error = json.loads(result.stdout)
    assert error["path"].endswith("broken.py") and error["line"] == 3 and "ValueError: no data here" in error["error"]
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def f(x):\n    return x +\n")
    result = CliRunner().invoke(main, ["compile", f"{syntax}:f", "--arg", "f32[8]", "--backend", "cpu"])
    assert result.exit_code == EXIT_USER_CODE and "syntax.py:2: error: importing the script: SyntaxError" in result.stderr


def test_names_that_are_not_there_and_arguments_that_are_not_a_tuple(programs):
    script = programs.__file__
    result = CliRunner().invoke(main, ["compile", f"{script}:nope", "--arg", "f32[8]", "--backend", "cpu"])
    assert result.exit_code == EXIT_INPUT and "has no function 'nope'" in result.stderr
    result = CliRunner().invoke(main, ["compile", f"{script}:softmax", "--args-from", "not_a_tuple", "--backend", "cpu"])
    assert result.exit_code == EXIT_USER_CODE
    assert "not_a_tuple() returned a ndarray; it must return the example arguments as a tuple" in result.stderr


def test_functions_a_fresh_process_cannot_find_are_refused_before_starting_one(programs):
    def local(x):
        return x

    for fn in (local, lambda x: x):
        with pytest.raises(InputError, match="define it at the top level of a module or script"):
            hlofuse.compile_jax(fn, np.zeros(3, np.float32), backend="cpu")


def test_xlas_refusal_is_not_the_users_error(programs):
    with pytest.raises(XlaCompileError) as err:
        hlofuse.compile_jax(programs.softmax, np.zeros((4, 4), np.float32), backend="cpu",
                            xla_flags="--xla_no_such_flag=1")
    assert err.value.exit_code == EXIT_XLA_COMPILE
    assert "Unknown flag in XLA_FLAGS: --xla_no_such_flag=1" in str(err.value)


def test_a_script_that_compiles_when_imported_is_told_to_guard_the_call(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text("import numpy as np\nimport hlofuse\n\ndef f(x):\n    return x * 2\n\n"
                      "hlofuse.compile_jax(f, np.zeros(4, np.float32), backend='cpu')\n")
    env = {**os.environ, "PYTHONPATH": CHILD_PYTHONPATH, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode != 0
    assert "unguarded.py:7: error: importing the script: RuntimeError: hlofuse.compile_jax was called while its " \
           "compiling process imported this script: put the call under `if __name__ == \"__main__\":`" in done.stderr


HAS_GPU = os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl")


@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU: without gpu= compile_jax compiles for the GPU of the machine")
def test_with_a_gpu_here_and_no_gpu_named_it_compiles_for_that_gpu(programs):
    dump = hlofuse.compile_jax(programs.softmax, np.zeros((256, 512), np.float32))
    assert not dump.deviceless and dump.gpu is None and "NVIDIA" in dump.device
    assert any(n.endswith("_gpu_after_optimizations.txt") for n in os.listdir(dump))
    assert hlofuse.explain(dump).explanation.backend == "gpu"


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU, which compile_jax compiles for when no gpu= is given")
def test_without_a_gpu_and_without_gpu_the_message_says_what_to_name(programs):
    with pytest.raises(BackendUnavailable) as err:
        hlofuse.compile_jax(programs.softmax, np.zeros((4, 4), np.float32))
    message = err.value.one_line()
    assert message.startswith("error: JAX found no GPU here") and "h100_sxm" in message and "CPU" in message


# ------------------------------------------------------------------------------------------
# The command
# ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_command_explains_what_the_api_explains(programs, compiled):
    result = CliRunner().invoke(main, ["compile", f"{programs.__file__}:softmax", "--arg", "f32[256,512]",
                                       "--gpu", GPU, "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    api = json.loads(json.dumps(hlofuse.explain(compiled["softmax", "gpu"]).to_dict()))
    assert payload["kernels"] == api["kernels"] and payload["boundaries"] == api["boundaries"]
    assert payload["compiled"]["module"] == "module_0001.jit_softmax" and payload["compiled"]["gpu"] == GPU


def test_the_command_takes_a_module_name_as_python_imports_it(programs, monkeypatch):
    monkeypatch.chdir(Path(programs.__file__).parent)  # `package.module:FUNCTION`, found from here
    result = CliRunner().invoke(main, ["compile", "progs:concat_users", "--arg", "f32[16,3]", "--arg", "f32[16,1]",
                                       "--backend", "cpu", "--json", "--explain"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["module"] == "jit_concat_users" and payload["compiled"]["backend"] == "cpu"


def test_the_command_keeps_the_dump_and_replaces_its_own(programs, tmp_path):
    out = tmp_path / "dump"
    args = ["compile", f"{programs.__file__}:mlp", "--args-from", "example_args", "--backend", "cpu", "-o", str(out)]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines()[-1] == f"next: hlofuse explain {out}"
    names = sorted(os.listdir(out))
    assert MANIFEST in names and any(n.endswith("cpu_after_optimizations.txt") for n in names)
    record = json.loads((out / MANIFEST).read_text())
    assert record["dump"] == str(out) and not record["temporary"] and record["function"] == "mlp"
    again = CliRunner().invoke(main, args + ["--explain"])
    assert again.exit_code == 0, again.output
    assert sorted(os.listdir(out)) == names and "kernels in XLA's final module" in again.stdout

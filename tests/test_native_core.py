"""The optional compiled core (hlofuse.native): used when built and current, never when stale,
unsafe or switched off, and with the same results as the Python modules it is compiled from."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hlofuse
from hlofuse import native

from conftest import REPO

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _fake_build(root: Path, tag: str | None = None) -> Path:
    """A tree under `root` shaped like a built core: every module's source and extension (empty
    files), the shared library and a manifest of the sources' digests; returns the manifest."""
    for module in native.MODULES:
        source = native.source_path(module, root)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(f"# {module}\n")
        native.extension_path(module, root).write_bytes(b"")
    folder = root / "hlofuse" / "native"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ("_core__mypyc" + SUFFIX)).write_bytes(b"")
    manifest = folder / "built.json"
    sources = {m: native.digest(native.source_path(m, root)) for m in native.MODULES}
    manifest.write_text(json.dumps({"python": tag or native.build_tag(), "sources": sources}))
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return manifest


def test_a_current_build_is_used(tmp_path, monkeypatch):
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    manifest = _fake_build(tmp_path)
    assert native.why_not_compiled(tmp_path, manifest) is None


def test_sources_unchanged_since_the_build_are_not_hashed(tmp_path, monkeypatch):
    """Every process decides at import: sources whose size and modification time are the
    build's are taken as built (no hashlib); a touched source is hashed, and used if its
    content is the build's."""
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    manifest = _fake_build(tmp_path)
    built = json.loads(manifest.read_text())
    built["stats"] = {m: native.source_stat(native.source_path(m, tmp_path)) for m in native.MODULES}
    manifest.write_text(json.dumps(built))
    hashed = []
    real_digest = native.digest
    monkeypatch.setattr(native, "digest", lambda path: hashed.append(path) or real_digest(path))
    assert native.why_not_compiled(tmp_path, manifest) is None and hashed == []
    touched = native.source_path("hlofuse.graph", tmp_path)
    os.utime(touched, ns=(1, 1))
    assert native.why_not_compiled(tmp_path, manifest) is None and hashed == [touched]
    touched.write_text("# edited\n")
    assert native.why_not_compiled(tmp_path, manifest) == "hlofuse/graph.py changed since the build"


def test_a_changed_source_makes_the_build_unused(tmp_path, monkeypatch):
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    manifest = _fake_build(tmp_path)
    native.source_path("hlofuse.cost.model", tmp_path).write_text("# edited\n")
    assert native.why_not_compiled(tmp_path, manifest) == "hlofuse/cost/model.py changed since the build"


@pytest.mark.parametrize("what", ["extension", "folder"])
def test_code_another_user_can_write_is_not_loaded(tmp_path, monkeypatch, what):
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    manifest = _fake_build(tmp_path)
    extension = native.extension_path("hlofuse.graph", tmp_path)
    target = extension if what == "extension" else extension.parent
    target.chmod(target.stat().st_mode | 0o022)
    assert native.why_not_compiled(tmp_path, manifest) == f"{target} is writable by other users"


def test_a_missing_extension_or_another_python_makes_the_build_unused(tmp_path, monkeypatch):
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    manifest = _fake_build(tmp_path, tag="cpython-99 .so")
    assert native.why_not_compiled(tmp_path, manifest) == "built for another Python (cpython-99 .so)"
    manifest = _fake_build(tmp_path)
    native.extension_path("hlofuse.names", tmp_path).unlink()
    assert native.why_not_compiled(tmp_path, manifest) == f"names{SUFFIX} is missing"


def test_the_environment_switches_the_build_off(tmp_path, monkeypatch):
    manifest = _fake_build(tmp_path)
    monkeypatch.setenv(native.PURE_ENV, "1")
    assert native.why_not_compiled(tmp_path, manifest) == f"${native.PURE_ENV} is set"
    monkeypatch.setenv(native.PURE_ENV, "0")
    assert native.why_not_compiled(tmp_path, manifest) is None


def test_this_process_uses_the_compiled_core_when_it_is_built():
    """`make test` builds the core first: the suite then runs on it."""
    if native.why_not_compiled() is not None:
        pytest.skip(f"compiled core not in use: {native.why_not_compiled()}")
    import hlofuse.graph
    import hlofuse.passes.priority_fusion

    import hlofuse.parse.reader
    import hlofuse.validate

    assert hlofuse.native.active == "compiled"
    assert hlofuse.graph.__file__.endswith(SUFFIX)
    assert hlofuse.passes.priority_fusion.__file__.endswith(SUFFIX)
    assert hlofuse.parse.reader.__file__.endswith(SUFFIX) and hlofuse.validate.__file__.endswith(SUFFIX)


def test_shapes_instructions_and_rule_evaluation_come_compiled_with_the_core():
    """The passes ask shapes and instructions millions of questions and evaluate rules per
    candidate pair: with the core in use those are compiled (native classes, no interpreter)."""
    if native.why_not_compiled() is not None:
        pytest.skip(f"compiled core not in use: {native.why_not_compiled()}")
    import hlofuse.cycles
    import hlofuse.rules
    import hlofuse.rules.evaluation

    for module in (hlofuse.ir, hlofuse.cycles, hlofuse.rules.evaluation):
        assert module.__file__.endswith(SUFFIX), module.__name__
    shape = hlofuse.ir.Shape("f32", (2, 3))
    assert not hasattr(shape, "__dict__") and not hasattr(hlofuse.ir.Shape, "__slots__")  # native
    assert hlofuse.rules.evaluate is hlofuse.rules.evaluation.evaluate
    assert not hasattr(hlofuse.rules.Outcome(None, {}, ()), "__dict__")


def test_computations_and_modules_remember_their_lookups():
    """A computation's by_name, users, post order and parameters, and a module's by_name,
    callers, fused computations and computation order, are computed once.  (Guards a trap of
    compiling ir: mypy reads functools.cached_property as a plain property, and validating a
    12 MB module then rebuilt by_name for every instruction, 10x the parse.)"""
    module = hlofuse.loads(_SMALL_MODULE)
    comp = module.entry
    for name in ("by_name", "users", "post_order", "parameters"):
        assert getattr(comp, name) is getattr(comp, name), name
    for name in ("by_name", "callers", "fusion_computations", "computation_post_order"):
        assert getattr(module, name) is getattr(module, name), name
    assert [i.name for i in comp.post_order] == ["a", "b", "f", "t"] and comp.users["a"] == ("f",)
    assert module.role("fused") == "fusion" and [c.name for c in module.computation_post_order] == ["fused", "e"]


_SMALL_MODULE = """HloModule m

fused {
  p0 = f32[8,4]{1,0} parameter(0)
  ROOT n = f32[8,4]{1,0} negate(p0)
}

ENTRY e {
  a = f32[8,4]{0,1} parameter(0)
  b = (f32[8,4]{1,0}, s32[]) parameter(1)
  f = f32[8,4]{1,0} fusion(a), kind=kLoop, calls=fused, metadata={op_name="jit(f)/neg" source_file="x.py" source_line=3}
  ROOT t = (f32[8,4]{1,0}, (f32[8,4]{1,0}, s32[])) tuple(f, b)
}
"""

_PICKLE_A_MODULE = """
import sys, hlofuse
from hlofuse import native, result_cache
m = hlofuse.loads(open(sys.argv[1]).read())
open(sys.argv[2], "wb").write(result_cache.dumps(m))
print(native.active)
"""


@pytest.mark.parametrize("writer_pure", [True, False])
def test_a_cached_module_loads_whichever_core_wrote_it(tmp_path, writer_pure):
    """The result cache's key does not say which core wrote an entry: a module pickled by the
    Python modules loads with the compiled core (whose ir classes have no slots to write),
    and the other way round, equal to the module parsed here."""
    import pickle

    from hlofuse import result_cache

    source = tmp_path / "m.hlo"
    source.write_text(_SMALL_MODULE)
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    if writer_pure:
        env[native.PURE_ENV] = "1"
    out = tmp_path / "module.pickle"
    proc = subprocess.run([sys.executable, "-c", _PICKLE_A_MODULE, str(source), str(out)], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = pickle.loads(out.read_bytes())
    assert loaded == hlofuse.loads(source.read_text())
    assert pickle.loads(result_cache.dumps(loaded)) == loaded
    assert [i.span for c in loaded.computations for i in c.instructions][:3] == \
        [i.span for c in hlofuse.loads(source.read_text()).computations for i in c.instructions][:3]


def _fingerprint(tmp_path: Path, name: str, pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["HLOFUSE_NO_CACHE"] = "1"  # computed by each core, not read from the other's cache
    if pure:
        env[native.PURE_ENV] = "1"
    out = tmp_path / f"{name}.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "fingerprint.py"), "-o", str(out),
                           "--generated", "1000"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "compiled core not used" not in proc.stderr
    return json.loads(out.read_text())


def test_the_python_modules_and_the_compiled_core_agree_on_every_sample(tmp_path, monkeypatch):
    """Every sample dump replayed with its pipelines and explained, and the generated modules
    of bench/replay_speed.py for the three pipelines: the same kernels, decisions and
    explanations from the Python modules as from the compiled core (or, where none is built,
    from a second run of the Python modules)."""
    pure = _fingerprint(tmp_path, "pure", pure=True)
    default = _fingerprint(tmp_path, "default", pure=False)
    assert pure["core"] == f"python: ${native.PURE_ENV} is set"
    monkeypatch.delenv(native.PURE_ENV, raising=False)  # (as for the second child)
    reason = native.why_not_compiled()
    assert default["core"] == ("compiled" if reason is None else f"python: {reason}")
    assert pure["inputs"] > 300
    differ = sorted(k for k in pure["fingerprints"] if pure["fingerprints"][k] != default["fingerprints"].get(k))
    assert not differ, differ[:10]
    assert pure["digest"] == default["digest"]


def test_the_tests_that_instrument_the_python_modules_pass_on_them():
    """The python_modules tests, skipped in a process on the compiled core, run on the Python
    modules (where no core is built they ran in this process already)."""
    if hlofuse.native.active != "compiled":
        pytest.skip("this process runs on the Python modules: the python_modules tests ran here")
    env = {**os.environ, native.PURE_ENV: "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    files = [str(p) for p in sorted((REPO / "tests").glob("test_*.py")) if "python_modules" in p.read_text()
             and p.name != Path(__file__).name]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "python_modules",
                           *files], env=env, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert " passed" in proc.stdout and " skipped" not in proc.stdout.splitlines()[-1], proc.stdout[-500:]


def test_without_a_compiler_the_build_says_so_in_one_line_and_changes_nothing(tmp_path):
    import importlib.util

    before = sorted(p.name for p in (REPO / "hlofuse").rglob("*" + SUFFIX))
    compiler = tmp_path / "no-such-cc"
    env = {**os.environ, "CC": str(compiler)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "hlofuse.native.build"], env=env, cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0
    # (a Python without mypy lacks that first)
    why = f"no C compiler ({compiler})" if importlib.util.find_spec("mypyc") else "mypy is not installed in this Python"
    assert proc.stderr.splitlines()[-1:] == [f"hlofuse: compiled core not built ({why}); the Python modules are used"]
    assert len(proc.stderr.splitlines()) <= 2  # and, before it, that a stale build is not used
    assert sorted(p.name for p in (REPO / "hlofuse").rglob("*" + SUFFIX)) == before

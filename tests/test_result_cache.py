"""The cache of parse and replay results (hlofuse/result_cache.py): the same answers with it
and without it, keys that change with everything a result depends on, and entries that are
discarded, never loaded, when they are not exactly what this user's hlofuse wrote."""

from __future__ import annotations

import os
import pickle
import zlib

import pytest
from click.testing import CliRunner

from hlofuse import private_files, result_cache
from hlofuse.cli import main

from conftest import REPO

SAMPLES = REPO / "sample_dumps"
FUSE_INPUTS = [
    (SAMPLES / "gpu-legacy-rtx2080ti" / "cartpole_b_concat", ["--pipeline", "legacy"]),
    (SAMPLES / "gpu-current-h100" / "layer_norm", []),
    (SAMPLES / "cpu" / "cartpole_d_unroll10", []),
]
EXPLAIN_INPUTS = [
    SAMPLES / "gpu-current-rtx2080ti" / "cartpole_b_concat",  # fused: the snapshot before fusion replayed
    SAMPLES / "cpu" / "attention",
]


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    """A cache of this test's own, for every text however small."""
    monkeypatch.setenv(private_files.CACHE_ENV, str(tmp_path / "hlofuse"))
    monkeypatch.delenv(result_cache.CACHE_OFF_ENV, raising=False)
    monkeypatch.setattr(result_cache, "MIN_PARSE_BYTES", 0)
    return tmp_path / "hlofuse" / result_cache.FOLDER


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def _entries(folder) -> list[str]:
    if not folder.exists():
        return []
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(private_files.SEAL_SUFFIX))


def _replay_forbidden(monkeypatch):
    """Any replay or parse from here on fails the test: the answers must come from the cache."""
    import hlofuse.pipeline
    from hlofuse.parse import diagnostics

    def refuse(*_args, **_kwargs):
        raise AssertionError("computed again although the cache holds it")

    monkeypatch.setattr(hlofuse.pipeline, "replay", refuse)
    monkeypatch.setattr("hlofuse.parse.run_parser", refuse)
    monkeypatch.setattr(diagnostics, "run_parser", refuse)


@pytest.mark.parametrize("path,options", FUSE_INPUTS, ids=lambda v: getattr(v, "name", ""))
def test_fuse_json_is_the_same_cached_and_uncached(path, options, fresh_cache, monkeypatch):
    uncached = _run("fuse", path, *options, "--json", "--no-cache")
    assert _entries(fresh_cache) == []  # --no-cache neither reads nor writes
    first = _run("fuse", path, *options, "--json")
    kinds = {name.split("-")[0] for name in _entries(fresh_cache)}
    assert kinds == {"parse", "replay"}
    _replay_forbidden(monkeypatch)
    second = _run("fuse", path, *options, "--json")
    assert uncached == first == second


@pytest.mark.parametrize("path", EXPLAIN_INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_explain_json_is_the_same_cached_and_uncached(path, fresh_cache, monkeypatch):
    uncached = _run("explain", path, "--json", "--no-cache")
    first = _run("explain", path, "--json")
    assert any(name.startswith("replay-") for name in _entries(fresh_cache))
    _replay_forbidden(monkeypatch)
    second = _run("explain", path, "--json")
    assert uncached == first == second


def test_the_environment_variable_turns_the_cache_off(fresh_cache, monkeypatch):
    path, options = FUSE_INPUTS[0]
    monkeypatch.setenv(result_cache.CACHE_OFF_ENV, "1")
    _run("fuse", path, *options, "--json")
    assert _entries(fresh_cache) == []


def _cached_replay_entry(fresh_cache):
    path, options = FUSE_INPUTS[0]
    expected = _run("fuse", path, *options, "--json", "--no-cache")
    _run("fuse", path, *options, "--json")
    (name,) = [n for n in _entries(fresh_cache) if n.startswith("replay-")]
    return path, options, expected, name


def test_a_corrupted_entry_is_discarded_and_the_answer_computed_again(fresh_cache):
    path, options, expected, name = _cached_replay_entry(fresh_cache)
    entry = fresh_cache / name
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])  # torn: the seal no longer matches
    assert _run("fuse", path, *options, "--json") == expected
    assert name in _entries(fresh_cache)  # stored again, sealed
    assert private_files.read(fresh_cache, name) is not None


class _Planted:
    """What a planted pickle would run when loaded: it leaves a mark."""

    def __reduce__(self):
        return (open, (os.environ["HLOFUSE_TEST_MARK"], "w"))


def _plant(folder, name: str, mark, seal: bytes | None) -> None:
    os.environ["HLOFUSE_TEST_MARK"] = str(mark)
    data = zlib.compress(pickle.dumps(_Planted()), 1)
    (folder / name).unlink()
    (folder / name).write_bytes(data)
    os.chmod(folder / name, 0o600)
    (folder / (name + private_files.SEAL_SUFFIX)).write_bytes(seal or b"0" * 64)


def test_a_planted_entry_with_a_wrong_seal_is_never_loaded(fresh_cache, tmp_path):
    path, options, expected, name = _cached_replay_entry(fresh_cache)
    mark = tmp_path / "loaded"
    _plant(fresh_cache, name, mark, seal=None)
    assert _run("fuse", path, *options, "--json") == expected
    assert not mark.exists()


def test_a_planted_entry_in_a_folder_others_can_write_is_never_loaded(fresh_cache, tmp_path):
    import hashlib

    path, options, expected, name = _cached_replay_entry(fresh_cache)
    mark = tmp_path / "loaded"
    data = zlib.compress(pickle.dumps(_Planted()), 1)
    _plant(fresh_cache, name, mark, seal=hashlib.sha256(data).hexdigest().encode())  # a seal that matches
    os.chmod(fresh_cache, 0o777)
    try:
        result = CliRunner().invoke(main, ["fuse", str(path), *options, "--json"])
    finally:
        os.chmod(fresh_cache, 0o700)
    assert result.exit_code == 0 and result.stdout == expected
    assert not mark.exists()


def test_a_planted_link_is_never_followed(fresh_cache, tmp_path):
    import hashlib

    path, options, expected, name = _cached_replay_entry(fresh_cache)
    mark = tmp_path / "loaded"
    os.environ["HLOFUSE_TEST_MARK"] = str(mark)
    data = zlib.compress(pickle.dumps(_Planted()), 1)
    elsewhere = tmp_path / "planted.bin"
    elsewhere.write_bytes(data)
    (fresh_cache / name).unlink()
    (fresh_cache / name).symlink_to(elsewhere)
    (fresh_cache / (name + private_files.SEAL_SUFFIX)).write_bytes(hashlib.sha256(data).hexdigest().encode())
    assert _run("fuse", path, *options, "--json") == expected
    assert not mark.exists()
    assert not (fresh_cache / name).is_symlink()  # discarded, and the real result stored in its place


def test_an_entry_sealed_but_unreadable_is_discarded(fresh_cache):
    path, options, expected, name = _cached_replay_entry(fresh_cache)
    private_files.store(fresh_cache, name, b"not zlib at all")  # sealed by us, but not a result
    assert _run("fuse", path, *options, "--json") == expected
    assert private_files.read(fresh_cache, name) != b"not zlib at all"


def test_options_input_and_code_change_the_key(monkeypatch):
    from hlofuse.parse import parse_text
    from hlofuse.pipeline import Options

    text = (SAMPLES / "cpu" / "softmax").glob("*before_optimizations.txt")
    text = next(iter(text)).read_text()
    module = parse_text(text, "a.hlo")
    base = Options(backend="gpu", pipeline="priority", gpu="h100_sxm")
    variants = [base, Options(backend="gpu", pipeline="legacy", gpu="h100_sxm"),
                Options(backend="gpu", pipeline="priority", gpu="rtx2080ti"),
                Options(backend="gpu", pipeline="priority", gpu="h100_sxm", relax=("concat",)),
                Options(backend="gpu", pipeline="priority", gpu="h100_sxm", passes=("priority-fusion",)),
                Options(backend="gpu", pipeline="priority", gpu="h100_sxm", xla_flags=("--xla_gpu_x=1",))]
    keys = {result_cache.replay_key(module, o) for o in variants}
    assert len(keys) == len(variants) and None not in keys
    assert result_cache.replay_key(parse_text(text, "b.hlo"), base) not in keys  # another path
    assert result_cache.replay_key(parse_text(text + "\n", "a.hlo"), base) not in keys  # other content
    assert result_cache.parse_key(text, "a.hlo", False) != result_cache.parse_key(text, "a.hlo", True)
    from hlofuse import code_digest

    monkeypatch.setattr(code_digest, "code_digest", lambda: "other code")
    assert result_cache.replay_key(module, base) not in keys


def test_the_code_digest_reads_the_sources_not_the_compiled_core(tmp_path, monkeypatch):
    """The key covers the package's sources and data; the compiled core's extension modules
    (built from those sources, megabytes) and its manifest are not read."""
    import importlib.machinery

    from hlofuse import code_digest

    package = tmp_path / "hlofuse"
    (package / "native").mkdir(parents=True)
    (package / "rules.py").write_text("# a rule\n")
    (package / "native" / "built.json").write_text("{}")
    (package / "native" / ("_core__mypyc" + importlib.machinery.EXTENSION_SUFFIXES[0])).write_bytes(b"\0")
    (package / ("graph" + importlib.machinery.EXTENSION_SUFFIXES[0])).write_bytes(b"\0")
    monkeypatch.setattr(code_digest, "_PACKAGE", package)
    assert [f.relative_to(package).as_posix() for f in code_digest._files()] == ["rules.py"]


def test_a_module_not_parsed_from_text_is_replayed_without_the_cache(fresh_cache):
    from dataclasses import replace

    from hlofuse.parse import parse_text
    from hlofuse.pipeline import Options

    text = next(iter((SAMPLES / "cpu" / "softmax").glob("*before_optimizations.txt"))).read_text()
    derived = replace(parse_text(text, "a.hlo"), name="other")
    assert result_cache.replay_key(derived, Options(backend="cpu")) is None
    result_cache.cached_replay(derived, Options(backend="cpu"))
    assert not any(n.startswith("replay-") for n in _entries(fresh_cache))


def test_every_command_that_reads_or_replays_has_no_cache():
    from hlofuse.cli import COMMANDS

    for name in ["parse", "print", *COMMANDS]:
        command = main.get_command(None, name)
        assert "--no-cache" in {opt for p in command.params for opt in p.opts}, name


def test_parse_and_print_with_no_cache_keep_nothing(fresh_cache):
    path = SAMPLES / "cpu" / "cartpole_d_unroll10"
    assert _run("parse", path, "--json", "--no-cache") == _run("parse", path, "--json")
    assert [n.split("-")[0] for n in _entries(fresh_cache)] == ["parse"]
    _run("print", path, "--no-cache")
    assert len(_entries(fresh_cache)) == 1


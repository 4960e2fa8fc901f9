"""hlofuse caches code it loads (a pickled grammar, compiled kernels) only in a folder the user
alone can write, and never loads what another user could have planted: issue 17, items 1-2.

"Another user" is simulated as the tests run (as root here): a folder chown'ed to uid 12345,
a folder of mode 0777, links planted at the names hlofuse writes, files planted where older
versions looked (the temporary folder, $XDG_CACHE_HOME/kernels)."""

from __future__ import annotations

import ctypes
import hashlib
import os
import pickle
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import lark
import pytest

from hlofuse import private_files
from hlofuse.execute import cpu
from hlofuse.parse import grammar

from conftest import REPO

OTHER_UID = 12345
#: A kernel file as the CPU target compiles them: `k` writes 42 into its first buffer.
SOURCE = "void k(void** b) { ((float*)b[0])[0] = 42.0f; }\n"


@pytest.fixture
def xdg(tmp_path, monkeypatch) -> Path:
    """$XDG_CACHE_HOME in a fresh folder of ours; warnings shown again."""
    folder = tmp_path / "xdg"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    monkeypatch.delenv(private_files.CACHE_ENV, raising=False)
    monkeypatch.setattr(private_files, "_warned", set())
    return folder


@pytest.fixture
def shared_tmp(tmp_path, monkeypatch) -> Path:
    """The temporary folder, as /tmp is: writable by everyone."""
    folder = tmp_path / "shared-tmp"
    folder.mkdir()
    folder.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def give_to_another_user(*paths: Path) -> None:
    try:
        for path in paths:
            os.chown(path, OTHER_UID, OTHER_UID, follow_symlinks=False)
    except PermissionError:
        pytest.skip("simulating another user needs root (chown)")


def run_kernel(lib) -> float:
    out = (ctypes.c_float * 1)()
    buffers = (ctypes.c_void_p * 1)(ctypes.addressof(out))
    lib.k(buffers)
    return out[0]


# ------------------------------------------------------------------------------------------
# The private folder
# ------------------------------------------------------------------------------------------


def test_cache_folders_are_created_private(xdg):
    folder = private_files.cache_folder("kernels")
    assert folder == xdg / "hlofuse" / "kernels"
    for made in (folder, folder.parent):
        st = os.lstat(made)
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700


@pytest.mark.parametrize("attack", ["other-owner", "mode-0777", "symlink", "file"])
def test_an_unsafe_cache_folder_is_refused_with_one_warning(xdg, tmp_path, capsys, attack):
    target = xdg / "hlofuse"
    if attack == "symlink":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        target.symlink_to(elsewhere)
    elif attack == "file":
        target.write_text("")
    else:
        target.mkdir(mode=0o700)
        if attack == "mode-0777":
            target.chmod(0o777)
        else:
            give_to_another_user(target)
    assert private_files.cache_folder("kernels") is None
    assert private_files.cache_folder("kernels") is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not caching kernels" in err and str(target) in err
    assert not (tmp_path / "elsewhere" / "kernels").exists()


def test_a_cache_root_writable_by_others_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # XDG_CACHE_HOME=/tmp, say
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    monkeypatch.delenv(private_files.CACHE_ENV, raising=False)
    monkeypatch.setattr(private_files, "_warned", set())
    assert private_files.cache_folder("grammar") is None
    assert list(shared.iterdir()) == []


def test_a_relative_xdg_cache_home_is_ignored(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.delenv(private_files.CACHE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert private_files.cache_folder("grammar") == home / ".cache" / "hlofuse" / "grammar"


def test_hlofuse_cache_names_the_folder_and_gets_the_same_checks(tmp_path, monkeypatch):
    monkeypatch.setattr(private_files, "_warned", set())
    monkeypatch.setenv(private_files.CACHE_ENV, str(tmp_path / "mine"))
    assert private_files.cache_folder("kernels") == tmp_path / "mine" / "kernels"
    (tmp_path / "mine").chmod(0o777)
    assert private_files.cache_folder("kernels") is None
    monkeypatch.setenv(private_files.CACHE_ENV, "relative")
    assert private_files.cache_folder("kernels") is None


def test_a_store_replaces_a_planted_link_instead_of_writing_through_it(xdg, tmp_path):
    folder = private_files.cache_folder("grammar")
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (folder / "entry").symlink_to(victim)
    private_files.store(folder, "entry", b"data")
    assert victim.read_text() == "precious"
    assert not (folder / "entry").is_symlink() and private_files.read(folder, "entry") == b"data"


def test_an_entry_that_does_not_match_its_seal_is_discarded(xdg):
    folder = private_files.cache_folder("grammar")
    private_files.store(folder, "entry", b"0123456789")
    with open(folder / "entry", "r+b") as fh:
        fh.truncate(5)
    assert private_files.read(folder, "entry") is None
    assert not (folder / "entry").exists() and not (folder / ("entry" + private_files.SEAL_SUFFIX)).exists()


def test_an_entry_without_a_seal_or_behind_a_link_is_not_read(xdg, tmp_path):
    folder = private_files.cache_folder("kernels")
    (folder / "unsealed").write_bytes(b"x")
    assert private_files.verified(folder, "unsealed") is None and not (folder / "unsealed").exists()
    elsewhere = tmp_path / "lib.so"
    elsewhere.write_bytes(b"x")
    (folder / "linked").symlink_to(elsewhere)
    (folder / ("linked" + private_files.SEAL_SUFFIX)).write_text(hashlib.sha256(b"x").hexdigest())
    assert private_files.verified(folder, "linked") is None
    assert elsewhere.exists()  # the link is removed, not what it points to


# ------------------------------------------------------------------------------------------
# The grammar cache: a planted pickle never runs
# ------------------------------------------------------------------------------------------


class _Plant:
    """Unpickled, it leaves a marker file: the proof that planted code ran."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('ran')",)


def plant_grammar_pickles(folder: Path, marker: Path, seal: bool = False) -> None:
    """A planted cache entry in both formats: Lark's `cache=` file (older hlofuse) and ours."""
    name = grammar.cache_name(grammar.grammar_path().read_text())
    (folder / name).write_bytes(b"0" * 64 + b"\n" + pickle.dumps(_Plant(marker)))
    sealed = pickle.dumps(_Plant(marker))
    (folder / "grammar").mkdir(exist_ok=True)
    (folder / "grammar" / name).write_bytes(sealed)
    if seal:
        (folder / "grammar" / (name + private_files.SEAL_SUFFIX)).write_text(hashlib.sha256(sealed).hexdigest())


def build_parser() -> lark.Lark:
    return grammar.parser.__wrapped__()  # not the process's cached parser


def test_no_grammar_cache_in_the_temporary_folder_when_the_home_cache_is_unusable(
        tmp_path, monkeypatch, shared_tmp, capsys):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / ".cache").write_text("not a folder")  # a read-only or broken home in CI
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv(private_files.CACHE_ENV, raising=False)
    monkeypatch.setattr(private_files, "_warned", set())
    marker = tmp_path / "planted-code-ran"
    name = grammar.cache_name(grammar.grammar_path().read_text())
    (shared_tmp / name).write_bytes(b"0" * 64 + b"\n" + pickle.dumps(_Plant(marker)))  # where 0.x looked
    before = sorted(shared_tmp.iterdir())
    built = build_parser()
    assert not marker.exists()
    assert sorted(shared_tmp.iterdir()) == before  # nothing written to the shared folder either
    assert built.parse("ENTRY e { ROOT x = f32[] parameter(0) }", start="start") is not None
    assert "not caching grammar" in capsys.readouterr().err


@pytest.mark.parametrize("attack", ["other-owner", "mode-0777", "symlink"])
def test_a_planted_grammar_pickle_never_runs(xdg, tmp_path, attack):
    marker = tmp_path / "planted-code-ran"
    if attack == "symlink":
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        plant_grammar_pickles(theirs, marker, seal=True)
        (xdg / "hlofuse").symlink_to(theirs)
    else:
        mine = xdg / "hlofuse"
        mine.mkdir(mode=0o700)
        plant_grammar_pickles(mine, marker, seal=True)
        if attack == "mode-0777":
            mine.chmod(0o777)
        else:
            give_to_another_user(mine, mine / "grammar")
    built = build_parser()
    assert not marker.exists()
    assert built.parse("ENTRY e { ROOT x = f32[] parameter(0) }", start="start") is not None


def test_an_unsealed_or_corrupt_grammar_entry_is_built_again(xdg, tmp_path):
    marker = tmp_path / "planted-code-ran"
    folder = xdg / "hlofuse"
    folder.mkdir(mode=0o700)
    plant_grammar_pickles(folder, marker, seal=False)  # in our own folder, without a seal
    build_parser()
    assert not marker.exists()
    name = grammar.cache_name(grammar.grammar_path().read_text())
    data = private_files.read(folder / "grammar", name)
    assert data is not None and len(data) > 10_000  # rebuilt and sealed
    with open(folder / "grammar" / name, "r+b") as fh:  # cut short: a crash mid-write
        fh.truncate(len(data) // 2)
    assert build_parser().parse("ENTRY e { ROOT x = f32[] parameter(0) }", start="start") is not None
    rebuilt = private_files.read(folder / "grammar", name)  # (not byte for byte: Lark pickles sets)
    assert rebuilt is not None and len(rebuilt) > 10_000


# ------------------------------------------------------------------------------------------
# The kernel cache: a planted or broken library is never loaded
# ------------------------------------------------------------------------------------------


def build_planted_library(path: Path, marker: Path) -> None:
    """A library with the kernel's name that leaves a marker when loaded and computes -1."""
    src = path.parent.parent / (path.name + ".plant.c")
    src.write_text('#include <stdio.h>\n'
                   f'__attribute__((constructor)) static void plant(void) {{ FILE* f = fopen("{marker}", "w");'
                   ' if (f) { fputs("ran", f); fclose(f); } }\n'
                   'void k(void** b) { ((float*)b[0])[0] = -1.0f; }\n')
    subprocess.run([cpu.compiler(), "-shared", "-fPIC", "-o", str(path), str(src)], check=True)


def plant_libraries(folders: list[Path], marker: Path, seal: bool) -> None:
    name = cpu.library_name(cpu.compiler(), SOURCE)
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        build_planted_library(folder / name, marker)
        if seal:
            digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
            (folder / (name + private_files.SEAL_SUFFIX)).write_text(digest)


@pytest.fixture
def compiler():
    try:
        return cpu.compiler()
    except Exception:
        pytest.skip("no C compiler")


def test_kernels_are_cached_sealed_in_the_private_folder(xdg, compiler, monkeypatch):
    lib, path = cpu.load_library(SOURCE)
    assert run_kernel(lib) == 42.0
    assert path.parent == xdg / "hlofuse" / "kernels"
    assert (path.parent / (path.name + private_files.SEAL_SUFFIX)).exists()
    assert path.with_suffix(".c").read_text() == SOURCE
    assert [p for p in path.parent.iterdir() if p.name.startswith(".")] == []  # build folders removed

    def no_build(*args):
        raise AssertionError("compiled again")

    monkeypatch.setattr(cpu, "build_library", no_build)
    assert cpu.load_library(SOURCE)[1] == path


@pytest.mark.parametrize("attack", ["other-owner", "mode-0777"])
def test_a_planted_kernel_library_is_never_loaded(xdg, tmp_path, compiler, attack):
    marker = tmp_path / "planted-code-ran"
    # where older hlofuse looked ($XDG_CACHE_HOME/kernels) and where hlofuse looks now
    theirs = [xdg / "kernels", xdg / "hlofuse" / "kernels"]
    plant_libraries(theirs, marker, seal=True)
    for folder in theirs:
        if attack == "mode-0777":
            folder.chmod(0o777)
        else:
            give_to_another_user(folder)
    if attack == "mode-0777":
        (xdg / "hlofuse").chmod(0o777)
    lib, path = cpu.load_library(SOURCE)
    assert not marker.exists()
    assert run_kernel(lib) == 42.0
    assert not any(path.is_relative_to(folder) for folder in theirs)


def test_an_unsealed_library_in_the_own_cache_is_discarded(xdg, tmp_path, compiler):
    marker = tmp_path / "planted-code-ran"
    plant_libraries([xdg / "kernels", xdg / "hlofuse" / "kernels"], marker, seal=False)
    (xdg / "hlofuse").chmod(0o700)
    lib, path = cpu.load_library(SOURCE)
    assert not marker.exists() and run_kernel(lib) == 42.0


def test_a_link_planted_at_the_kernel_source_is_not_written_through(xdg, tmp_path, compiler):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    name = cpu.library_name(cpu.compiler(), SOURCE)[:-3] + ".c"
    for folder in (xdg / "kernels", xdg / "hlofuse" / "kernels"):  # then and now
        folder.mkdir(parents=True, mode=0o700)
        (folder / name).symlink_to(victim)
    (xdg / "hlofuse").chmod(0o700)
    lib, _ = cpu.load_library(SOURCE)
    assert run_kernel(lib) == 42.0
    assert victim.read_text() == "precious"


def test_a_truncated_cached_library_is_rebuilt_not_crashed_on(xdg, compiler):
    code = ("import ctypes; from hlofuse.execute import cpu; "
            f"lib, path = cpu.load_library({SOURCE!r}); out = (ctypes.c_float * 1)(); "
            "lib.k((ctypes.c_void_p * 1)(ctypes.addressof(out))); print(path); print(out[0])")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    path = Path(first.stdout.split()[0])
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # a full disk, a killed compiler, a crash mid-copy
        fh.truncate(size // 2)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr[-2000:]  # SIGBUS or "file too short" before
    assert second.stdout.split() == [str(path), "42.0"]
    assert path.stat().st_size == size


def test_without_a_private_folder_kernels_compile_in_a_fresh_temporary_folder(
        tmp_path, monkeypatch, shared_tmp, compiler):
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared_tmp))  # refused: others can write it
    monkeypatch.delenv(private_files.CACHE_ENV, raising=False)
    monkeypatch.setattr(private_files, "_warned", set())
    lib, path = cpu.load_library(SOURCE)
    assert run_kernel(lib) == 42.0
    assert path.parent.parent == shared_tmp and not path.parent.exists()  # deleted once loaded
    assert list(shared_tmp.iterdir()) == []

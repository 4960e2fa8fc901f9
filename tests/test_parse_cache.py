"""The compiled grammar is cached on disk (building it takes about a second, loading it
milliseconds): under $XDG_CACHE_HOME/hlofuse or ~/.cache/hlofuse, or the temporary folder when
those cannot be written (read-only homes in CI)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from hlofuse.parse import grammar

from conftest import REPO


def test_cache_file_under_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = grammar.cache_file("grammar text")
    assert os.path.dirname(path) == str(tmp_path / "hlofuse")
    assert grammar.cache_file("other grammar") != path  # keyed by the grammar (and Lark, Python)


def test_unwritable_cache_folder_falls_back_to_the_temporary_folder(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert os.path.dirname(grammar.cache_file("grammar text")) == tempfile.gettempdir()


def test_a_fresh_process_writes_the_cache_and_the_next_one_reads_it(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path), PYTHONPATH=str(REPO))
    code = ("import time, hlofuse.parse as p; t = time.perf_counter(); p.parser(); "
            "print(time.perf_counter() - t); import hlofuse; hlofuse.loads('ENTRY e { ROOT x = f32[] parameter(0) }')")
    cold = float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                check=True).stdout)
    files = list((tmp_path / "hlofuse").glob("*.lark-cache"))
    assert len(files) == 1 and files[0].stat().st_size > 10_000
    warm = float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                check=True).stdout)
    assert warm < cold, (cold, warm)

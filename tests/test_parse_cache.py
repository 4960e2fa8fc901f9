"""The compiled grammar is cached on disk (building it takes about a second, loading it
milliseconds), in the user's private cache folder: $XDG_CACHE_HOME/hlofuse/grammar or
~/.cache/hlofuse/grammar.  Where no private folder can be had it is built in memory; the
attacks on that folder are in test_private_files.py."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from hlofuse import private_files
from hlofuse.parse import grammar

from conftest import REPO


def test_cache_entry_is_keyed_by_the_grammar():
    assert grammar.cache_name("grammar text") != grammar.cache_name("other grammar")  # and Lark, Python
    assert grammar.cache_name("grammar text") == grammar.cache_name("grammar text")


def test_cache_folder_under_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(private_files.CACHE_ENV, raising=False)
    folder = private_files.cache_folder(grammar.CACHE_FOLDER)
    assert folder == tmp_path / "hlofuse" / "grammar"
    for made in (folder, folder.parent):
        assert stat.S_IMODE(os.lstat(made).st_mode) == 0o700


def test_a_fresh_process_writes_the_cache_and_the_next_one_reads_it(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path), PYTHONPATH=str(REPO))
    env.pop(private_files.CACHE_ENV, None)
    code = ("import time, hlofuse.parse as p; t = time.perf_counter(); p.parser(); "
            "print(time.perf_counter() - t); import hlofuse; hlofuse.loads('ENTRY e { ROOT x = f32[] parameter(0) }')")
    cold = float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                check=True).stdout)
    files = list((tmp_path / "hlofuse" / "grammar").glob("*.lark-cache"))
    assert len(files) == 1 and files[0].stat().st_size > 10_000
    assert files[0].with_name(files[0].name + private_files.SEAL_SUFFIX).exists()
    warm = float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                check=True).stdout)
    assert warm < cold, (cold, warm)

"""Fixtures every test module may use: where the repository, the shared XLA corpus and the
sample dumps are, and how to read HLO text exactly as it is on disk.

Keep this file small and generic; fixtures used by one test module belong in that module.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: PYTHONPATH for child Pythons the tests start: this checkout first, then what the suite was
#: started with (dependencies may live outside the venv, as where they travel as wheels).
CHILD_PYTHONPATH = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)

# The suite keeps a cache of its own (hlofuse/result_cache.py, the grammar, the rule
# catalogue), made afresh for each run and removed after it: it neither reads nor fills the
# user's ~/.cache/hlofuse.  Subprocesses inherit it.
_CACHE_ROOT = tempfile.mkdtemp(prefix="hlofuse-tests-")
os.environ["HLOFUSE_CACHE"] = os.path.join(_CACHE_ROOT, "hlofuse")
os.environ.pop("HLOFUSE_NO_CACHE", None)
atexit.register(shutil.rmtree, _CACHE_ROOT, True)


def shared_dir() -> Path:
    """The team's shared folder (corpus, specifications): $HLOFUSE_SHARED, ../shared, or
    /work/shared (where CI machines keep it when the checkout lives elsewhere)."""
    if os.environ.get("HLOFUSE_SHARED"):
        return Path(os.environ["HLOFUSE_SHARED"])
    for candidate in (REPO.parent / "shared", Path("/work/shared")):
        if candidate.is_dir():
            return candidate
    return REPO.parent / "shared"


def read_text(path: str | os.PathLike) -> str:
    """A file's text with its line ends untouched (CRLF and CR-only files stay as they are)."""
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.read()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """shared/corpus (XLA's own HLO texts); the tests that need it skip when it is absent."""
    folder = shared_dir() / "corpus"
    if not folder.is_dir():
        pytest.skip(f"the XLA corpus is not at {folder} (set HLOFUSE_SHARED to the shared folder)")
    return folder


@pytest.fixture(scope="session")
def sample_dumps_dir() -> Path:
    return REPO / "sample_dumps"


def pytest_collection_modifyitems(config, items):
    """Tests marked python_modules wrap functions of the modules hlofuse.native compiles, which
    compiled code calls directly: with the compiled core in use they are skipped here and run
    on the Python modules by tests/test_native_core.py."""
    from hlofuse import native

    if native.active != "compiled":
        return
    skip = pytest.mark.skip(reason="instruments the Python modules; run on them by test_native_core.py")
    for item in items:
        if "python_modules" in item.keywords:
            item.add_marker(skip)

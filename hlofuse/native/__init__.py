"""The optional compiled core: the replay's hottest modules compiled with mypyc, used when built.

`python -m hlofuse.native.build` (run by `make venv`/`make test`/`make demo` when the venv has
mypy and a C compiler is found) compiles the modules of MODULES, unchanged, into extension
modules beside their sources, and writes `built.json` here: the digest of each source it
compiled.  Python imports an extension module before a source of the same name, so a built
core is used by default.  It is not used, and every module is imported from its source, when

  * $HLOFUSE_PURE_PYTHON is set (a non-empty value other than 0): the fallback, to compare;
  * a source changed since the build (a stale module would replay old code), or a module of
    the build is missing, or the build was made by another Python: one line on stderr;
  * a folder holding a compiled module, or the module itself, could be written by another user
    (it would run code as whoever imports hlofuse): one line on stderr.

All or nothing: the compiled modules call one another directly, through one shared library,
so a source loaded beside them would leave two versions of the same classes.

Only the standard library is imported here: this runs before any other module of hlofuse.
"""

from __future__ import annotations

import importlib.machinery
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # what mypyc reads: a class decorated so stays a Python class (dynamic attributes), or
    # may be subclassed by modules that are not compiled
    from mypy_extensions import mypyc_attr
else:
    def mypyc_attr(**_flags):
        """mypy_extensions.mypyc_attr without that package: a no-op outside mypyc."""
        return lambda cls: cls

#: The modules compiled: what cProfile shows hottest in the three pipelines' replays (shapes
#: and instructions, graph edits, fusion primitives, structure keys, the cost models, the rule
#: and pass loops; the cycle check every Program.from_module makes).  hlofuse.ir with them,
#: though every process imports it (and so loads the core's library): reading HLO loads that
#: library anyway, its modules being compiled.  No
#: package __init__: mypyc gives a compiled package the folder of its shared library as path.
#: (A compiled rule function keeps no docstring or source line: the registry reads them from
#: the source, hlofuse.rules._doc_and_place.)
MODULES = (
    "hlofuse.ir",
    "hlofuse.decision",
    "hlofuse.cycles",
    "hlofuse.graph",
    "hlofuse.names",
    "hlofuse.fusion_primitives",
    "hlofuse.pipeline",
    "hlofuse.verify",
    "hlofuse.cost.structure",
    "hlofuse.cost.analysis",
    "hlofuse.cost.model",
    "hlofuse.cost.fusion_analysis",
    "hlofuse.cost.legacy",
    "hlofuse.gpu.heroes",
    "hlofuse.gpu.fusible",
    "hlofuse.rules.evaluation",
    "hlofuse.rules.candidates",
    "hlofuse.rules.instruction_facts",
    "hlofuse.rules.instruction_fusion",
    "hlofuse.rules.gpu_instruction_fusion",
    "hlofuse.rules.gpu_fusible",
    "hlofuse.rules.priority_fusion",
    "hlofuse.rules.cpu",
    "hlofuse.passes.cleanup",
    "hlofuse.passes.instruction_fusion",
    "hlofuse.passes.priority_fusion",
    "hlofuse.passes.cpu",
    "hlofuse.passes.legacy",
    "hlofuse.passes.gpu_instruction_fusion",
    "hlofuse.passes.fusion_merger",
    "hlofuse.passes.multi_output_fusion",
    "hlofuse.passes.horizontal_fusion",
    "hlofuse.gpu.budget",
    "hlofuse.gpu.emitter",
    "hlofuse.gpu.properties",
    "hlofuse.gpu.transposes",
    "hlofuse.gpu.shapes",
    "hlofuse.gpu.reductions",
    "hlofuse.rules.fusion_merger",
    "hlofuse.rules.multi_output_fusion",
    "hlofuse.rules.horizontal_fusion",
    # reading HLO: the computation reader and the lexer, assembly, validation (their loops over
    # every instruction; what remains is the regular expressions and the objects a module holds)
    "hlofuse.parse.shapes",
    "hlofuse.parse.lexer",
    "hlofuse.parse.reader",
    "hlofuse.parse.assemble",
    "hlofuse.validate",
)

#: mypyc's shared library of the build (every compiled module's code), in this folder.
GROUP = "hlofuse.native._core"
PURE_ENV = "HLOFUSE_PURE_PYTHON"
MANIFEST = Path(__file__).resolve().parent / "built.json"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent

#: "compiled", or "python: <why>" (what choose() decided).
active = "python: not decided"


def source_path(module: str, root: Path = PACKAGE_ROOT) -> Path:
    """The .py file of one of MODULES (a package's __init__.py)."""
    base = root.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def extension_path(module: str, root: Path = PACKAGE_ROOT) -> Path:
    """Where the build puts `module`'s extension (beside its source)."""
    source = source_path(module, root)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return source.with_name(source.stem + suffix)


def digest(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_tag() -> str:
    """The Python a build is for (an extension works only with the ABI it was compiled for)."""
    return f"{sys.implementation.cache_tag} {importlib.machinery.EXTENSION_SUFFIXES[0]}"


def why_not_compiled(root: Path = PACKAGE_ROOT, manifest: Path = MANIFEST) -> str | None:
    """None when the compiled core under `root` can be used, else why not (one phrase)."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return f"${PURE_ENV} is set"
    if not manifest.exists():
        return "not built"
    import json

    try:
        built = json.loads(manifest.read_text())
        sources, tag = built["sources"], built["python"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{manifest.name} is unreadable"
    if tag != build_tag():
        return f"built for another Python ({tag})"
    if set(sources) != set(MODULES):
        return "built from another list of modules"
    group = manifest.parent / (GROUP.rsplit(".", 1)[1] + "__mypyc" + importlib.machinery.EXTENSION_SUFFIXES[0])
    for path in [group, *(extension_path(m, root) for m in MODULES)]:
        unsafe = _writable_by_others(path)
        if unsafe:
            return unsafe
    stats = built.get("stats", {})
    for module in MODULES:
        source = source_path(module, root)
        if not source.exists():
            return f"{source.relative_to(root)} changed since the build"
        # size and modification time as recorded at the build: unchanged without hashing
        # (every process starts here; hashlib and OpenSSL cost a process megabytes)
        if stats.get(module) == source_stat(source):
            continue
        if digest(source) != sources[module]:
            return f"{source.relative_to(root)} changed since the build"
    return None


def source_stat(path: Path) -> list[int]:
    info = os.stat(path)
    return [info.st_size, info.st_mtime_ns]


def _writable_by_others(path: Path) -> str | None:
    """Why `path` or its folder is not safe to load code from (missing, a link, owned by
    another user than us or root, writable by group or others), or None."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    for item in (path.parent, path):
        try:
            info = os.lstat(item)
        except OSError:
            return f"{path.name} is missing"
        if stat.S_ISLNK(info.st_mode):
            return f"{item} is a link"
        if uid is not None and info.st_uid not in (uid, 0):
            return f"{item} belongs to another user"
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{item} is writable by other users"
    return None


class _SourceFinder:
    """Imports MODULES from their sources even where an extension sits beside them."""

    def find_spec(self, name, path=None, target=None):
        if name not in MODULES:
            return None
        import importlib.util

        source = source_path(name)
        package = [str(source.parent)] if source.name == "__init__.py" else None
        return importlib.util.spec_from_file_location(name, source, submodule_search_locations=package)


def choose() -> str:
    """Decide, before any of MODULES is imported, whether they come compiled or from source."""
    global active
    reason = why_not_compiled()
    if reason is None:
        active = "compiled"
        return active
    active = f"python: {reason}"
    if not any(isinstance(f, _SourceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder())
    if reason not in ("not built", f"${PURE_ENV} is set"):
        print(f"hlofuse: compiled core not used: {reason}; using the Python modules "
              "(`make native` rebuilds it)", file=sys.stderr)
    return active

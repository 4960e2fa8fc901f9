"""Build the compiled core (hlofuse.native): `python -m hlofuse.native.build [--clean]`.

Compiles hlofuse.native.MODULES with mypyc into extension modules beside their sources (the
package's own folders), then records the digest of each source in hlofuse/native/built.json,
which hlofuse.native checks at every start.  Needs mypy (which carries mypyc), setuptools and a
C compiler with Python's headers; where one is missing it says so in one line on stderr and
exits 0: hlofuse then runs its Python modules, with the same results.

The sources are compiled as they are.  mypy's complaints are not errors here (mypyc is given
`ignore_errors`), but mypyc checks every annotation at run time, so an annotation in a compiled
module must say what the value really is.  C files and mypy's cache go to a private temporary
folder, never into the package (`--keep-c DIR` copies the C files out, to read what mypyc made
of a function).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

from . import GROUP, MANIFEST, MODULES, PACKAGE_ROOT, build_tag, digest, source_path, source_stat


def missing_tool() -> str | None:
    """What the build lacks (one phrase), or None."""
    for module, package in (("mypyc.build", "mypy"), ("setuptools", "setuptools")):
        try:
            __import__(module)
        except ImportError:
            return f"{package} is not installed in this Python"
    # setuptools compiles with $CC where it is set, else with the compiler Python was built with
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    include = sysconfig.get_paths().get("include")
    if not include or not Path(include, "Python.h").exists():
        return "Python's C headers (Python.h) are missing"
    return None


def clean() -> None:
    """Remove a build: the manifest first (so a half-removed build is never used), then every
    extension module in the package (those of a build from an earlier list of modules too)."""
    MANIFEST.unlink(missing_ok=True)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for path in (PACKAGE_ROOT / "hlofuse").rglob("*" + suffix):
        path.unlink()


def build(quiet: bool = True, keep_c: Path | None = None) -> None:
    from mypyc.build import mypycify
    from setuptools import Distribution

    clean()
    sources = {m: source_path(m) for m in MODULES}
    digests = {m: digest(p) for m, p in sources.items()}
    with tempfile.TemporaryDirectory(prefix="hlofuse-native-") as scratch:
        config = Path(scratch, "mypy.ini")
        config.write_text("[mypy]\nignore_missing_imports = True\nfollow_imports = silent\n"
                          f"cache_dir = {scratch}/mypy-cache\n[mypy-hlofuse.*]\nignore_errors = True\n")
        cwd = os.getcwd()
        os.chdir(PACKAGE_ROOT)  # mypyc names modules by their paths from here
        try:
            paths = [str(p.relative_to(PACKAGE_ROOT)) for p in sources.values()]

            def compile_all() -> None:
                extensions = mypycify(["--config-file", str(config), *paths], opt_level="3",
                                      group_name=GROUP, target_dir=str(Path(scratch, "c")))
                dist = Distribution({"name": "hlofuse-native", "ext_modules": extensions})
                command = dist.get_command_obj("build_ext")
                command.inplace = True
                command.build_temp = str(Path(scratch, "temp"))
                command.parallel = os.cpu_count() or 1
                dist.run_command("build_ext")

            if quiet:
                _run_quietly(compile_all, Path(scratch, "build.log"))
            else:
                compile_all()
        finally:
            os.chdir(cwd)
        if keep_c is not None:  # to read what mypyc made of a function (generic or direct access)
            shutil.copytree(Path(scratch, "c"), keep_c, dirs_exist_ok=True)
        # sources edited while compiling: not recorded, so the next start ignores the build
        if any(digest(p) != digests[m] for m, p in sources.items()):
            raise RuntimeError("a source changed during the build; run it again")
        stats = {m: source_stat(p) for m, p in sources.items()}
        MANIFEST.write_text(json.dumps({"python": build_tag(), "sources": digests, "stats": stats}, indent=1)
                            + "\n")


def _run_quietly(work, log_path: Path) -> None:
    """`work()` with mypyc's and the compiler's output in a log, shown only when it fails."""
    with open(log_path, "w") as log:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            work()
        except BaseException:
            _restore(saved)
            sys.stderr.write(log_path.read_text()[-4000:])
            raise
        else:
            _restore(saved)


def _restore(saved: tuple[int, int]) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    os.close(saved[0])
    os.close(saved[1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="remove the compiled core")
    parser.add_argument("--verbose", action="store_true", help="show the compiler's output")
    parser.add_argument("--keep-c", type=Path, metavar="DIR", help="also copy the generated C files to DIR")
    args = parser.parse_args(argv)
    if args.clean:
        clean()
        return 0
    lacking = missing_tool()
    if lacking:
        print(f"hlofuse: compiled core not built ({lacking}); the Python modules are used", file=sys.stderr)
        return 0
    try:
        build(quiet=not args.verbose, keep_c=args.keep_c.resolve() if args.keep_c else None)
    except Exception as err:  # a failed build leaves the Python modules in use, as before
        clean()
        print(f"hlofuse: compiled core not built ({type(err).__name__}: {err}); the Python modules are used",
              file=sys.stderr)
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

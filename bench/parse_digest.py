#!/usr/bin/env python3
"""What hlofuse's parser makes of every sample dump and corpus file, one digest a file: to show
that a change to the parser reads everything as before.

    PYTHONPATH=OLD_CHECKOUT python bench/parse_digest.py > old.txt
    PYTHONPATH=NEW_CHECKOUT python bench/parse_digest.py > new.txt
    diff old.txt new.txt            # nothing: the same modules and the same errors

A file's line holds a digest of everything the parse produced: the module's fields (attributes,
stack frames, style, warnings), each computation and each instruction with its line and column;
or the error message, with its file:line:column, for an input that is rejected.  Run both from
the same checkout of this script (the paths it prints are its own); the hash seed is fixed so
that sets print in one order.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

if os.environ.get("PYTHONHASHSEED") != "0":  # frozensets in the module's style print in hash order
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable, *sys.argv])

HERE = Path(__file__).resolve().parent
os.environ["HLOFUSE_NO_CACHE"] = "1"


def inputs(shared: Path) -> list[Path]:
    files = sorted((HERE.parent / "sample_dumps").rglob("*.txt"))
    for pattern in ("*.hlo", "*.txt"):
        files += sorted((shared / "corpus").rglob(pattern))
    return files


def digest(path: Path) -> str:
    import hlofuse
    from hlofuse.errors import HlofuseError

    text = path.read_bytes().decode("utf-8", "surrogateescape")
    try:
        module = hlofuse.loads(text, path=str(path))
    except HlofuseError as err:
        return "error " + str(err)
    parts = [repr((module.name, module.entry_name, module.attrs, module.form, module.warnings, module.style,
                   module.stack_frames))]
    for comp in module.computations:
        parts.append(repr((comp.name, comp.root_name, comp.is_entry, comp.attrs, comp.span)))
        parts.extend(repr((instr, instr.span)) for instr in comp.instructions)
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", default=os.environ.get("HLOFUSE_SHARED", "/work/shared"),
                    help="the shared folder holding corpus/ (default $HLOFUSE_SHARED or /work/shared)")
    ap.add_argument("paths", nargs="*", help="more files to read")
    a = ap.parse_args(argv)
    for path in inputs(Path(a.shared)) + [Path(p) for p in a.paths]:
        print(f"{path} {digest(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

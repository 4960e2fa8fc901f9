"""DOT source → SVG through Graphviz's `dot` program (the only renderer that needs it)."""

from __future__ import annotations

import shutil
import subprocess

from ..errors import EXIT_BACKEND, HlofuseError

INSTALL_HINT = ("install Graphviz: `sudo apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` "
                "(macOS), `conda install graphviz`, or `make graphviz` here")


class GraphvizMissing(HlofuseError):
    """Graphviz's `dot` program is not installed (or failed)."""

    exit_code = EXIT_BACKEND


def dot_program() -> str | None:
    return shutil.which("dot")


def to_svg(dot_source: str, timeout: float = 120.0) -> str:
    """Run `dot -Tsvg`; raises GraphvizMissing when the program is absent or fails."""
    program = dot_program()
    if program is None:
        raise GraphvizMissing(f"Graphviz's dot program was not found; {INSTALL_HINT}")
    try:
        done = subprocess.run([program, "-Tsvg"], input=dot_source.encode("utf-8"), capture_output=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise GraphvizMissing(f"Graphviz's dot took longer than {timeout:.0f}s; narrow the drawing with "
                              "--computation or --focus") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GraphvizMissing(f"Graphviz's dot failed: {message[-1] if message else done.returncode}")
    return done.stdout.decode("utf-8", "replace")


def inline_svg(svg: str) -> str:
    """The <svg> element alone (no XML prolog or doctype), for embedding in HTML."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg

"""Whether the JAX installed here can compile what was asked, read from the installed
packages' metadata (no JAX import: a broken plugin must not crash the question).

XLA:CPU needs jax and jaxlib.  XLA:GPU without a GPU needs JAX's CUDA plugin, whose compiler
compiles for a described device; the plugin (jax-cudaNN-plugin) and its PJRT half
(jax-cudaNN-pjrt) are built with jaxlib and load only beside the jaxlib of their own version.
`hlofuse[jax]` pins all four to the JAX whose XLA the replay is written from.
"""

from __future__ import annotations

from importlib import metadata

from ..errors import BackendUnavailable

#: The JAX whose XLA hlofuse's current rules are written from (pyproject's `jax` extra).
PINNED = "0.10.2"
INSTALL = "pip install 'hlofuse[jax]'"
#: CUDA majors JAX publishes plugins for, newest first.
CUDA_MAJORS = ("13", "12")


def installed(dist: str) -> str | None:
    """The installed version of a distribution, or None."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str]:
    """{distribution: version} of the JAX packages installed here."""
    names = ["jax", "jaxlib"] + [f"jax-cuda{m}-{part}" for m in CUDA_MAJORS for part in ("plugin", "pjrt")]
    return {n: v for n in names if (v := installed(n)) is not None}


def require(backend: str, deviceless: bool) -> dict[str, str]:
    """The versions (as `versions()`), or BackendUnavailable with one line saying what to
    install.  `deviceless`: XLA:GPU for a described GPU, which needs the CUDA plugin."""
    found = versions()
    if "jax" not in found or "jaxlib" not in found:
        missing = [n for n in ("jax", "jaxlib") if n not in found]
        state = f"{' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} not installed"
        raise BackendUnavailable(f"compiling a JAX function needs JAX ({state}): {INSTALL}")
    jaxlib = found["jaxlib"]
    if backend != "gpu":
        return found
    plugins = [m for m in CUDA_MAJORS if f"jax-cuda{m}-plugin" in found or f"jax-cuda{m}-pjrt" in found]
    if not plugins:
        why = "compiling for a GPU without one" if deviceless else "compiling for XLA:GPU"
        raise BackendUnavailable(
            f"{why} needs JAX's CUDA plugin, which is not installed: {INSTALL}, or "
            f"pip install 'jax-cuda12-plugin=={jaxlib}' 'jax-cuda12-pjrt=={jaxlib}' to match your jaxlib {jaxlib}")
    for major in plugins:
        for part in ("plugin", "pjrt"):
            dist = f"jax-cuda{major}-{part}"
            have = found.get(dist)
            if have != jaxlib:
                state = "is missing" if have is None else f"is {have}"
                raise BackendUnavailable(
                    f"{dist} {state}, and JAX's CUDA plugin loads only beside the jaxlib of its own version "
                    f"({jaxlib}): pip install 'jax-cuda{major}-plugin=={jaxlib}' 'jax-cuda{major}-pjrt=={jaxlib}', "
                    f"or {INSTALL}")
    return found


def version_note(found: dict[str, str]) -> str | None:
    """A note when the JAX here is not the one hlofuse's rules are written from."""
    jaxlib = found.get("jaxlib")
    if jaxlib is None or jaxlib == PINNED:
        return None
    return (f"compiled by jaxlib {jaxlib}; hlofuse's rules are written from the XLA of jaxlib {PINNED} "
            f"({INSTALL} installs it), so explanations of another XLA may differ where XLA changed")

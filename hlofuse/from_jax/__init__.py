"""From a JAX function to a dump folder hlofuse reads: `compile_jax` (Python) and
`hlofuse compile` (the command) compile with the JAX installed here, for a described GPU
without one (deviceless), for the GPU of this machine, or for the CPU.

Modules: `compile` (the caller's side: options, the compiling process, the dump folder),
`child` (the compiling process), `arguments` (example arguments written as text),
`install` (what JAX is installed, and what to install).  Nothing here imports JAX at import
time."""

from .compile import JaxDump, compile_jax, compile_script
from .folder import MANIFEST

__all__ = ["MANIFEST", "JaxDump", "compile_jax", "compile_script"]

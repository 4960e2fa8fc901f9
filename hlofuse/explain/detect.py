"""Backend, pipeline and GPU of a module explained through the API: hlofuse/backend.py decides,
as for every command (hlofuse/inputs.py), from the module and the dump around it."""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from .dumpctx import DumpContext


@dataclass(frozen=True)
class Detected:
    backend: str
    pipeline: str | None
    gpu: str | None
    why: str


def detect(module: ir.Module, dump: DumpContext | None, backend: str | None, pipeline: str | None,
           gpu: str | None) -> Detected:
    from ..backend import DumpClues
    from ..backend import detect as decide

    clues, file = DumpClues(), module.path
    if dump is not None:
        from ..dumpdir import other_files, priority_fusion_log

        log = priority_fusion_log(list(dump.files))
        names = tuple(f.path.name for f in dump.files) + tuple(other_files(dump.folder, dump.chosen.key))
        clues, file = DumpClues(names, log.path if log is not None else None), str(dump.chosen.path)
    return from_detection(decide(module, file=file, clues=clues, backend=backend, pipeline=pipeline, gpu=gpu))


def from_detection(found) -> Detected:
    """The explainer's record of a backend.Detection."""
    return Detected(found.backend, found.pipeline, found.gpu, found.why)

"""One input resolution for every command and the Python API.

What a command works on is decided here, once, the same way for `parse`, `print`, `fuse`,
`check`, `explain`, `render`, `bench` and `hlofuse.resolve`: the file or dump folder the user
gave, the one module chosen, the file of each stage the command needs (read and parsed here),
the backend, the fusion pipeline and the GPU (hlofuse/backend.py), and the evidence: one line
in plain words per decision.  Options are checked before any file is read.

What a command needs (`need`):
  module   the stage asked (default: XLA's final module, after_optimizations)   parse, print
  explain  the same; `--relax` on a fused module switches to the snapshot before fusion
  replay   XLA's module right before fusion (default: its snapshot), to replay   fuse
  before   the same, only to read or draw (no replay: XLA:TPU's are fine)       render --stage before
  check    the snapshots right before and right after fusion                      check
  bench    the module before fusion and XLA's fused module, whichever the dump has  bench
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from . import ir
from .backend import BACKENDS, COMPILER, Detection, DumpClues, detect
from .dumpdir import DumpFile
from .errors import BackendUnavailable, InputError, OptionError

MODULE, EXPLAIN, REPLAY, BEFORE, CHECK, BENCH = "module", "explain", "replay", "before", "check", "bench"
NEEDS = (MODULE, EXPLAIN, REPLAY, BEFORE, CHECK, BENCH)
PIPELINES = {"legacy": "gpu", "priority": "gpu", "cpu": "cpu"}


@dataclass(frozen=True)
class Stage:
    """One module read for the command: its IR, the name shown (a path or <stdin>), and the
    dump file it came from (None for a lone file or stdin)."""

    module: ir.Module
    name: str
    file: DumpFile | None = None
    role: str = ""  # what it is, in words: "XLA's snapshot right before fusion", ...


@dataclass(frozen=True)
class ResolvedInput:
    """Everything a command needs to know about its input, decided once."""

    given: str  # the path the user gave ("-" for stdin)
    folder: Path | None  # the dump folder around the input, if any
    files: tuple[DumpFile, ...]  # the chosen module's HLO files in that folder
    main: Stage  # the module the command works on
    before: Stage | None  # XLA's module right before fusion (replay, check, bench)
    after: Stage | None  # XLA's module after fusion (check: the snapshot; bench: the final module)
    detection: Detection
    chosen: tuple[str, ...]  # one line per choice of module and stage
    warnings: tuple[str, ...] = ()

    @property
    def module(self) -> ir.Module:
        return self.main.module

    @property
    def backend(self) -> str:
        return self.detection.backend

    @property
    def pipeline(self) -> str | None:
        return self.detection.pipeline

    @property
    def gpu(self) -> str | None:
        return self.detection.gpu

    @property
    def evidence(self) -> tuple[str, ...]:
        return self.chosen + self.detection.evidence

    @property
    def detected(self) -> str:
        """The detection line: backend, pipeline and GPU, and why each."""
        return self.detection.why

    def stage_file(self, which: str) -> DumpFile | None:
        """A stage of the chosen module in the dump: before_fusion, after_fusion (snapshots)
        or after_optimizations (XLA's final module); None when the dump has none."""
        from .dumpdir import fusion_snapshot

        files = list(self.files)
        if which == "after_optimizations":
            return next((f for f in files if f.stage == "after_optimizations"), None)
        return fusion_snapshot(files, which, self.pipeline) if files else None

    def dump_context(self, stage: Stage | None = None):
        """The explainer's view of the dump around `stage` (default: the main module)."""
        from .explain.dumpctx import DumpContext

        stage = stage or self.main
        if self.folder is None or stage.file is None:
            return None
        return DumpContext(self.folder, self.files, stage.file)


# ------------------------------------------------------------------------------------------
# Options, checked before any file is read
# ------------------------------------------------------------------------------------------


def check_options(*, backend: str | None = None, pipeline: str | None = None, gpu: str | None = None,
                  relax: Sequence[str] = (), xla_flags: Sequence[str] = ()) -> None:
    """Reject contradicting or unknown options with one line, before any work."""
    if backend is not None and backend not in BACKENDS:
        raise OptionError(f"--backend {backend}: choose one of {', '.join(BACKENDS)}")
    if pipeline is not None:
        if pipeline not in PIPELINES:
            raise OptionError(f"--pipeline {pipeline}: choose one of {', '.join(PIPELINES)}")
        if backend is not None and PIPELINES[pipeline] != backend:
            raise OptionError(f"--pipeline {pipeline} is an {COMPILER[PIPELINES[pipeline]]} pipeline, "
                              f"not {COMPILER[backend]}'s (--backend {backend})")
    if gpu is not None:
        if backend is not None and backend != "gpu":
            raise OptionError(f"--gpu describes a GPU; --backend {backend} has none")
        from .device import load_gpu

        load_gpu(gpu)
    if relax:
        from .rules import resolve_relax

        if backend == "tpu":
            raise OptionError("--relax changes a replay, and XLA:TPU's passes are not replayed")
        resolve_relax(tuple(relax), pipeline)
    if xla_flags:
        from .gpu.config import parse_xla_flags

        try:
            parse_xla_flags(tuple(xla_flags))
        except ValueError as err:
            raise OptionError(f"--xla-flags: {err}") from None


# ------------------------------------------------------------------------------------------
# Resolution
# ------------------------------------------------------------------------------------------


def resolve(path: str, *, need: str = MODULE, module: str | None = None, stage: str | None = None,
            backend: str | None = None, pipeline: str | None = None, gpu: str | None = None,
            after_path: str | None = None, relax: Sequence[str] = (), strict: bool = False) -> ResolvedInput:
    """Resolve INPUT (an HLO file, a `--xla_dump_to` folder or "-") for a command that needs
    `need`; `after_path` is check's second file (BEFORE AFTER)."""
    if need not in NEEDS:
        raise ValueError(f"need must be one of {NEEDS}")
    check_options(backend=backend, pipeline=pipeline, gpu=gpu, relax=relax)
    from .dumpdir import canonical_stage

    stage = canonical_stage(stage)
    path = str(path)
    found = _locate(path, module, stage, after_path)
    files = found.files
    pick = _Picker(found, need, stage, pipeline)
    stages = pick.stages()
    parsed = {role: _read(f, name, role_text, strict) for role, (f, name, role_text) in stages.items()}
    main_role = "main" if "main" in parsed else ("after" if "after" in parsed else "before")
    main = parsed[main_role]
    clues = DumpClues(found.names, found.log)
    detection = detect(main.module, file=main.name, clues=clues, backend=backend, pipeline=pipeline, gpu=gpu)
    if pipeline is None and detection.pipeline is not None and files:
        # Snapshots of the fusion pipelines are told apart by the pipeline; choose again with
        # the detected one, and read again only what changed.
        again = _Picker(found, need, stage, detection.pipeline).stages()
        for role, (f, name, role_text) in again.items():
            if role not in parsed or parsed[role].name != name:
                parsed[role] = _read(f, name, role_text, strict)
        main = parsed[main_role]
    chosen = list(found.chosen) + [f"{s.role}: {Path(s.name).name}" for s in parsed.values() if s.role]
    warnings = list(pick.warnings)
    for s in parsed.values():
        warnings += [f"{s.name}:{w}" for w in s.module.warnings]
    resolved = ResolvedInput(path, found.folder, tuple(files), main, parsed.get("before"), parsed.get("after"),
                             detection, tuple(chosen), tuple(warnings))
    if detection.backend == "tpu" and need in (REPLAY, CHECK):
        raise BackendUnavailable(f"{Path(main.name).name} is an XLA:TPU module: XLA:TPU's fusion passes are not "
                                 "replayed (they are not public); `hlofuse explain` explains its structure")
    if need == EXPLAIN and relax:
        resolved = _relax_switch(resolved, strict)
    return resolved


@dataclass(frozen=True)
class _Found:
    folder: Path | None
    files: list[DumpFile]
    given: DumpFile | None  # the dump file the user named (a file input inside a dump)
    text_name: str | None  # a lone file or "-" (no dump around it)
    after_name: str | None  # check's second file
    names: tuple[str, ...]  # every file name of the module in the dump (HLO and other)
    log: Path | None
    chosen: tuple[str, ...]


def _locate(path: str, module: str | None, stage: str | None, after_path: str | None) -> _Found:
    from . import dumpdir

    if path == "-":
        if stage is not None:
            raise OptionError("--stage chooses a file of a dump folder; the input is stdin")
        return _Found(None, [], None, "-", after_path, (), None, ())
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file or folder")
    if p.is_dir():
        if after_path is not None:
            raise OptionError("give BEFORE AFTER files, or one dump folder")
        every = dumpdir.scan(p)
        key, why = dumpdir.pick_module(every, module, path)
        files = [f for f in every if f.key == key]
        return _Found(p, files, None, None, None, _names(p, key, files), _log(files), (why,))
    if module is not None:
        raise OptionError(f"--module chooses a module of a dump folder; {path} is one file")
    given = dumpdir.classify(p)
    if given is None or after_path is not None:
        if stage is not None:
            raise OptionError(f"--stage chooses a file of a dump folder; {path} is one file")
        return _Found(None, [], None, path, after_path, (p.name,), None, ())
    files = [f for f in dumpdir.scan(p.parent) if f.key == given.key]
    given = next((f for f in files if f.path.name == p.name), given)
    return _Found(p.parent, files, given, None, None, _names(p.parent, given.key, files), _log(files), ())


def _names(folder: Path, key: str, files: list[DumpFile]) -> tuple[str, ...]:
    from .dumpdir import other_files

    return tuple(f.path.name for f in files) + tuple(other_files(folder, key))


def _log(files: list[DumpFile]) -> Path | None:
    from .dumpdir import priority_fusion_log

    log = priority_fusion_log(files)
    return log.path if log is not None else None


_BEFORE = "XLA's snapshot right before fusion"
_AFTER_SNAPSHOT = "XLA's snapshot right after fusion"
_FINAL = "XLA's final module (after_optimizations)"


class _Picker:
    """Which file plays which role for a need: {role: (DumpFile or None, name, role in words)}."""

    def __init__(self, found: _Found, need: str, stage: str | None, pipeline: str | None):
        self.found, self.need, self.stage, self.pipeline = found, need, stage, pipeline
        self.warnings: list[str] = []

    def stages(self) -> dict[str, tuple[DumpFile | None, str, str]]:
        found = self.found
        if found.text_name is not None:
            return self._lone()
        if found.given is not None and self.stage is None:
            return self._given()
        return self._dump()

    def _lone(self) -> dict:
        found, need = self.found, self.need
        if need == CHECK:
            if found.after_name is None:
                raise OptionError("check needs XLA's module before and after fusion: give BEFORE AFTER files, "
                                  "or one dump folder")
            return {"before": (None, found.text_name, "before fusion"),
                    "after": (None, found.after_name, "after fusion")}
        return {"main": (None, found.text_name, "")}

    def _given(self) -> dict:
        """A file of a dump named by the user: that file is the module; its siblings are context."""
        f = self.found.given
        if self.need == CHECK:
            raise OptionError("check compares XLA's snapshots before and after fusion: give the dump folder, "
                              "or BEFORE AFTER files")
        if self.need in (REPLAY, BEFORE) and f.stage == "before_optimizations":
            self.warnings.append(_APPROXIMATE)
        return {"main": (f, str(f.path), "")}

    def _dump(self) -> dict:
        from .dumpdir import choose_stage, fusion_snapshot

        files, need, stage, pipeline = self.found.files, self.need, self.stage, self.pipeline
        if need in (MODULE, EXPLAIN) or (need in (REPLAY, BEFORE, BENCH) and stage is not None):
            f = choose_stage(files, stage, pipeline)
            return {"main": (f, str(f.path), _role(f, files, pipeline))}
        before = fusion_snapshot(files, "before_fusion", pipeline)
        if need in (REPLAY, BEFORE):
            if before is None:
                before = next((f for f in files if f.stage == "before_optimizations"), None)
                if before is None:
                    raise InputError(f"{self.found.folder}: no module before fusion here (no snapshot right before "
                                     "fusion, no before_optimizations file)")
                self.warnings.append("this dump has no snapshot right before fusion; using before_optimizations: "
                                     + _APPROXIMATE)
                return {"main": (before, str(before.path), "XLA's module before optimizations")}
            return {"main": (before, str(before.path), _BEFORE)}
        after = fusion_snapshot(files, "after_fusion", pipeline)
        final = next((f for f in files if f.stage == "after_optimizations"), None)
        if need == CHECK:
            if before is not None and after is None and final is not None:
                after = final
                self.warnings.append("no snapshot right after fusion here; comparing with after_optimizations, "
                                     "where XLA's later passes also ran, so some differences may not be fusion's")
            if before is None or after is None:
                raise InputError(f"{self.found.folder}: needs XLA's snapshots right before and after fusion; dump "
                                 "with --xla_dump_hlo_pass_re matching the fusion passes (see README)")
            return {"before": (before, str(before.path), _BEFORE),
                    "after": (after, str(after.path), _AFTER_SNAPSHOT if after is not final else _FINAL)}
        # bench: XLA's final module is what XLA runs; the snapshot after fusion stands in for it.
        fused = final or after
        out = {}
        if before is not None:
            out["before"] = (before, str(before.path), _BEFORE)
        if fused is not None:
            out["after"] = (fused, str(fused.path), _FINAL if fused is final else _AFTER_SNAPSHOT)
        if not out:
            raise InputError(f"{self.found.folder}: no module before or after fusion in this dump")
        return out


_APPROXIMATE = ("XLA's earlier passes (simplification, layout assignment, ...) did not run on this module, "
                "so the replay is approximate")


def _role(f: DumpFile, files: list[DumpFile], pipeline: str | None) -> str:
    from .dumpdir import fusion_snapshot

    if f.stage == "after_optimizations":
        return _FINAL
    if f.stage == "before_optimizations":
        return "XLA's module before optimizations"
    if f is fusion_snapshot(files, "before_fusion", pipeline):
        return _BEFORE
    if f is fusion_snapshot(files, "after_fusion", pipeline):
        return _AFTER_SNAPSHOT
    return f"XLA's snapshot {f.label}" if f.stage == "pass" else ""


def _read(f: DumpFile | None, name: str, role: str, strict: bool) -> Stage:
    from .dumpdir import read_input
    from .parse import parse_text

    text, shown = read_input(name)
    return Stage(parse_text(text, shown, strict=strict), shown, f, role)


def _relax_switch(resolved: ResolvedInput, strict: bool) -> ResolvedInput:
    """`explain --relax` changes what a replay decides, so it needs a module before fusion:
    on a fused input, the dump's snapshot right before fusion is explained (replayed) instead;
    without one it is an error, before any work."""
    return switch_to_before_fusion(resolved, "--relax", strict)


def switch_to_before_fusion(resolved: ResolvedInput, option: str, strict: bool = False) -> ResolvedInput:
    """A resolved input whose main module is the one before fusion, to replay: itself when it
    is not fused, else the dump's snapshot right before fusion (an error naming `option`, the
    option that needs a replay, without one)."""
    if not is_fused(resolved):
        return resolved
    name = Path(resolved.main.name).name
    snap = resolved.stage_file("before_fusion")
    if snap is None:
        raise OptionError(f"{option} changes hlofuse's replay, and {name} is already fused, with no snapshot "
                          "before fusion beside it to replay: dump with --xla_dump_hlo_pass_re (see README) or "
                          "give the module before fusion")
    before = _read(snap, str(snap.path), _BEFORE, strict)
    line = f"{option}: explaining the replay of {_BEFORE} ({snap.path.name}) instead of the fused {name}"
    return replace(resolved, main=before, before=before, chosen=resolved.chosen + (line,))


def is_fused(resolved: ResolvedInput, stage: Stage | None = None) -> bool:
    """Whether a stage holds a fused module: as the dump's file names say, else by its fusions."""
    from .explain import looks_fused

    stage = stage or resolved.main
    ctx = resolved.dump_context(stage)
    verdict = ctx.stage_is_fused() if ctx is not None else None
    return looks_fused(stage.module) if verdict is None else verdict

"""The dump folder around an explained file: its module's other files (per-pass snapshots,
XLA's fusion log), and whether the chosen stage holds a fused module."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

@dataclass(frozen=True)
class DumpContext:
    """The dump folder around the explained file: its module's files and the chosen one."""

    folder: Path
    files: tuple  # dumps.DumpFile of the chosen module
    chosen: Any  # dumps.DumpFile

    @property
    def device(self) -> str | None:
        for f in self.files:
            if f.device:
                return f.device
        return None

    def stage_is_fused(self) -> bool | None:
        """True for after_optimizations and snapshots taken after the main fusion pass
        (`fusion`, `priority-fusion`); False before it; None when the names do not say."""
        f = self.chosen
        if f.stage == "after_optimizations":
            return True
        if f.stage == "before_optimizations":
            return False
        if f.stage != "pass":
            return None
        verdict = _snapshot_is_fused(f)
        if verdict is not None:
            return verdict
        fused_steps = [x.step for x in self.files if x.stage == "pass" and _snapshot_is_fused(x)]
        if fused_steps and f.step is not None and f.step > min(fused_steps):
            return True
        return None

    def before_fusion_snapshot(self, pipeline: str | None = None):
        """The per-pass snapshot right before the fusion passes (None without one)."""
        from ..dumpdir import fusion_snapshot

        return fusion_snapshot(list(self.files), "before_fusion", pipeline)

    def after_fusion_snapshot(self, pipeline: str | None = None):
        from ..dumpdir import fusion_snapshot

        return fusion_snapshot(list(self.files), "after_fusion", pipeline)

    def xla_log(self):
        from ..dumpdir import priority_fusion_log

        return priority_fusion_log(list(self.files))


#: Passes that run before the main fusion pass, the main fusion passes, and those after it.
_PRE_FUSION = frozenset({"variadic-op-splitter", "sort-iota-fusion"})
_MAIN_FUSION = frozenset({"fusion", "priority-fusion"})


def _snapshot_is_fused(f) -> bool | None:
    """A per-pass snapshot `after_X.before_Y` holds a fused module once the main fusion pass
    ran: X is a fusion pass other than the pre-fusion ones, or Y comes after the main pass."""
    from ..dumpdir import FUSION_PASSES

    passes = {p for names in FUSION_PASSES.values() for p in names}
    if f.after_pass in passes - _PRE_FUSION:
        return True
    if f.before_pass in passes - _PRE_FUSION - _MAIN_FUSION:
        return True
    if f.before_pass in _PRE_FUSION | _MAIN_FUSION:
        return False
    return None


def dump_context(path: str, module: str | None = None, stage: str | None = None,
                 pipeline: str | None = None) -> DumpContext | None:
    """The DumpContext of a dump folder input (or of the folder holding an input file)."""
    from ..dumpdir import choose_module, choose_stage, classify, scan

    p = Path(path)
    if path == "-" or not p.exists():
        return None
    if p.is_dir():
        files = choose_module(scan(p), module, path)
        return DumpContext(p, tuple(files), choose_stage(files, stage, pipeline))
    chosen = classify(p)
    if chosen is None:
        return None
    siblings = [f for f in scan(p.parent) if f.key == chosen.key]
    return DumpContext(p.parent, tuple(siblings), chosen)

"""`explain --all-modules`: every module of a dump folder explained and triaged, in parallel
processes, and one ranking of their groups of boundaries across the folder.

A folder `--xla_dump_to` wrote for a whole program holds a module per jitted function (a
training step, an evaluation step, initialisation, small helpers).  Each is explained as
`hlofuse explain DIR --module KEY` would (its own stages, backend, GPU and predictions), in a
forked process per module when cores are idle; what comes back is plain data (the module's
summary and its groups), so a module's failure is reported in its row and the others carry on.
Modelled times are per run of each module: the folder does not say how often each runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModuleTriage:
    """One module's triage, as plain data."""

    key: str
    payload: dict | None  # summary, groups, counts of its explanation (render/json.py dicts)
    error: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class FolderTriage:
    folder: str
    modules: tuple[ModuleTriage, ...]
    #: Every module's groups, each with its module's key, most costly first.
    groups: tuple[dict, ...] = field(default=())

    def group_records(self) -> list:
        """The groups as groups.Group records (with `module`), for --fail-on."""
        from ..explain.records import SourceRef
        from .groups import Group

        out = []
        for g in self.groups:
            source = SourceRef(**g["source"]) if g["source"] else None
            out.append(Group(rule=g["rule"], source=source, count=g["count"], bytes=g["bytes"],
                             bytes_per_run=g["bytes_per_run"], modelled_us=g["modelled_us"], share=g["share"],
                             relaxable=g["relaxable"], tags=tuple(g["tags"]), boundaries=tuple(g["boundaries"]),
                             hint=g["hint"], hint_kind=g["hint_kind"]))
        return out

    def to_dict(self) -> dict:
        return {
            "schema": "hlofuse.explain-modules/1",
            "folder": self.folder,
            "modules": [{"module": m.key, "error": m.error, "seconds": round(m.seconds, 2),
                         **({k: m.payload[k] for k in ("input", "backend", "pipeline", "gpu", "summary")}
                            if m.payload else {})} for m in self.modules],
            "groups": list(self.groups),
        }


_OPTIONS: dict[str, Any] = {}


def triage_folder(folder: str, options: dict, jobs: int | None = None) -> FolderTriage:
    """Explain and triage every module of `folder`; `options` are hlofuse.explain's."""
    from ..dumpdir import modules, scan
    from ..errors import InputError
    from .fixes import parallel_jobs

    keys = modules(scan(folder))
    if not keys:
        raise InputError(f"{folder}: no HLO text files from --xla_dump_to found here")
    _OPTIONS.update(folder=folder, options=dict(options))
    try:
        n = jobs if jobs is not None else parallel_jobs(len(keys))
        if n <= 1 or len(keys) == 1:
            results = [_one(k) for k in keys]
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("fork")) as pool:
                results = list(pool.map(_one, keys))
    finally:
        _OPTIONS.clear()
    groups = []
    for m in results:
        if m.payload is None:
            continue
        for g in m.payload["groups"]:
            groups.append({"module": m.key, **g})
    groups.sort(key=lambda g: (-(g["modelled_us"] or 0.0), -g["bytes_per_run"], -g["count"], g["module"], g["rule"]))
    return FolderTriage(folder, tuple(results), tuple(groups))


def _one(key: str) -> ModuleTriage:
    """Explain one module (in a worker, or here): its JSON payload or its error."""
    from ..api import explain
    from ..errors import HlofuseError

    start = time.perf_counter()
    try:
        report = explain(_OPTIONS["folder"], module=key, **_OPTIONS["options"])
        payload = report.to_dict()
        payload = {k: payload[k] for k in ("input", "backend", "pipeline", "gpu", "summary", "groups", "notes")}
        return ModuleTriage(key, payload, None, time.perf_counter() - start)
    except HlofuseError as err:
        return ModuleTriage(key, None, str(err), time.perf_counter() - start)
    except Exception as err:  # noqa: BLE001 - one module's failure must not stop the folder
        return ModuleTriage(key, None, f"internal error: {type(err).__name__}: {err}", time.perf_counter() - start)

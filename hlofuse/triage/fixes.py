"""Predicted fixes: the replay run again with one change — a rule relaxed, or an XLA option
set — and priced on the same target as the replay without it.

Bounded on purpose: one replay per distinct change (every group of a relaxable rule shares
its rule's replay), only the changes some group asks for, in parallel processes when cores
are idle (forked, so the module before fusion is not copied), and none at all when the caller
says so.  A replay costs about what the replay behind the explanation cost; `predict_changes`
reports the seconds each took.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from .groups import Change
from .pricing import ModuleCost, price_module


@dataclass(frozen=True)
class Variant:
    """One change to replay: rules relaxed, XLA flags added."""

    basis: str  # relax:RULE | flag:--xla_...=...
    relax: tuple[str, ...] = ()
    xla_flags: tuple[str, ...] = ()


def relax_variant(rule: str) -> Variant:
    return Variant(f"relax:{rule}", relax=(rule,))


def flag_variant(flag: str) -> Variant:
    return Variant(f"flag:{flag}", xla_flags=(flag,))


@dataclass(frozen=True)
class _Outcome:
    kernels: int
    launches: int
    us: float
    seconds: float
    error: str | None = None


# The replay's input and options, set before forking so that workers inherit them.
_JOB: dict = {}


def predict_changes(replay_result, base_flags: tuple[str, ...], target, variants: list[Variant],
                    baseline: ModuleCost | None = None, jobs: int | None = None) -> dict[str, Change]:
    """Each variant's Change against the replay without it (`replay_result`, a FusionResult
    whose input is the module before fusion), priced on `target`."""
    if not variants:
        return {}
    if baseline is None:
        baseline = price_module(replay_result.module, target)
    base_kernels = len(baseline.kernels)
    _JOB.update(result=replay_result, flags=tuple(base_flags), target=target)
    try:
        outcomes = _run_all(variants, jobs if jobs is not None else parallel_jobs(len(variants)))
    finally:
        _JOB.clear()
    out = {}
    for variant, o in zip(variants, outcomes):
        if o.error is not None:
            out[variant.basis] = Change(variant.basis, None, error=o.error, seconds=o.seconds,
                                        baseline_us=baseline.total_us)
            continue
        out[variant.basis] = Change(variant.basis, o.us - baseline.total_us, o.kernels - base_kernels,
                                    o.launches - baseline.launches, baseline.total_us, seconds=o.seconds)
    return out


def parallel_jobs(tasks: int) -> int:
    """Processes to use: the idle cores (cores minus the load average), at most one per task;
    1 (no fork) when none is idle, in a threaded process, or where fork does not exist."""
    import threading

    wanted = os.environ.get("HLOFUSE_JOBS", "")
    if wanted.isdigit():
        return max(1, min(int(wanted), tasks))
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return 1
    cpus = os.cpu_count() or 1
    try:
        idle = int(cpus - os.getloadavg()[0] + 0.5)
    except (AttributeError, OSError):
        idle = cpus
    return max(1, min(idle, tasks, cpus))


def _run_all(variants: list[Variant], jobs: int) -> list[_Outcome]:
    if jobs <= 1 or len(variants) == 1:
        return [_run_one(v) for v in variants]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        return list(pool.map(_run_one, variants))


def _run_one(variant: Variant) -> _Outcome:
    """Replay with the variant's change and price the result (in a worker, or here)."""
    from ..errors import HlofuseError
    from ..pipeline import Options, replay

    result = _JOB["result"]
    start = time.perf_counter()
    options = Options(backend=result.backend, pipeline=result.pipeline, gpu=result.gpu,
                      relax=variant.relax, xla_flags=_JOB["flags"] + variant.xla_flags)
    try:
        changed = replay(result.input, options)
        cost = price_module(changed.module, _JOB["target"])
    except HlofuseError as err:
        return _Outcome(0, 0, 0.0, time.perf_counter() - start, str(err))
    except Exception as err:  # noqa: BLE001 - one failed prediction must not stop the explanation
        return _Outcome(0, 0, 0.0, time.perf_counter() - start, f"{type(err).__name__}: {err}")
    return _Outcome(len(cost.kernels), cost.launches, cost.total_us, time.perf_counter() - start)

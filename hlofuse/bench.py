"""`hlofuse bench`: run fusion plans as real kernels, check them against the reference
evaluator, and time them.

A plan is a module to run:
  unfused      every op its own kernel: XLA's module right before fusion (a dump's snapshot),
               or, without one, XLA's fused module with every fusion inlined;
  xla          the fused module XLA made (after_optimizations, or the after-fusion snapshot),
               or the replay of the module before fusion when the dump has neither;
  replay       hlofuse's replay of XLA's fusion pipeline on the module before fusion;
  relax:RULE   the replay with a rule relaxed (`hlofuse fuse --relax RULE`): compare it with
               `replay` to see what relaxing alone changes;
  loop         `xla`, with each while loop whose body is elementwise per batch element run as
               one kernel with the loop inside (execute/loop.py) — the plan XLA cannot make.
Every plan runs on the same inputs (execute/inputs.py, or the user's), its outputs are
compared with the reference evaluator's on the `unfused` module, and its runs are
interleaved with the other plans' so that a machine's changing load hits all plans alike.
A plan that cannot be made for this input (`loop` without a suitable loop, a replay without
the module before fusion) is skipped, with the reason.

With `xla_program` (`bench --compare-xla`), XLA's own compiled program (execute/
xla_program.py: the module before optimizations, compiled by an installed JAX's XLA:CPU in a
child process) runs on the same inputs, is checked against the same reference and takes its
turn in every timing round; each plan's `vs_xla` is its median over XLA's.

Timings: the median of the runs, with their spread (min, max, interquartile range).  A
plan's spread is its IQR over its median (with fewer than 4 runs, max − min over the median);
above NOISY_SPREAD the plan is flagged noisy.  Ratios are of medians, and a ratio between two
plans is within noise when it is closer to 1 than the two plans' spreads added: below
1 + spread(A) + spread(B), the measurement cannot tell the plans apart.

    plans = make_plans(load_source("dump/"), ["unfused", "xla", "loop"])
    results = run_plans(plans, device=choose_device("cpu"), repeat=5)
    to_frame(results)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from . import ir
from .errors import BackendUnavailable, ExecutionError, HlofuseError, InputError

if TYPE_CHECKING:
    from .execute.budget import Limits

DEFAULT_PLANS = ("unfused", "xla")
PLAN_NAMES = ("unfused", "xla", "replay", "relax:RULE", "loop")
#: A plan whose runs spread more than this (IQR over median) is flagged noisy.
NOISY_SPREAD = 0.10


# ------------------------------------------------------------------------------------------
# Where plans come from
# ------------------------------------------------------------------------------------------


@dataclass
class Source:
    """What an input offers: the module before fusion and XLA's fused module (either may be
    missing), the backend and pipeline that made them, and notes on what was chosen."""

    name: str
    before: ir.Module | None
    after: ir.Module | None
    backend: str
    pipeline: str | None
    gpu: str | None = None
    notes: list[str] = field(default_factory=list)
    evidence: tuple[str, ...] = ()
    #: XLA's input program (the module before optimizations, what jax.jit handed XLA): what
    #: `--compare-xla` compiles and runs with XLA itself; None when the input lacks it.
    program: Path | None = None


def load_source(path: str, module_name: str | None = None, stage: str | None = None) -> Source:
    """Read a dump folder (the before-fusion snapshot and XLA's fused module) or one HLO file
    (fused or not), through the same input resolution as every command."""
    from .inputs import BENCH, is_fused, resolve

    resolved = resolve(path, need=BENCH, module=module_name, stage=stage)
    before = resolved.before.module if resolved.before is not None else None
    after = resolved.after.module if resolved.after is not None else None
    notes = []
    if resolved.before is not None:
        notes.append(f"unfused: {Path(resolved.before.name).name}")
    if resolved.after is not None:
        notes.append(f"xla: {Path(resolved.after.name).name}")
    if before is None and after is None:
        if is_fused(resolved):
            after = resolved.module
        else:
            before = resolved.module
    name = resolved.files[0].key if resolved.files and resolved.folder is not None and Path(path).is_dir() \
        else resolved.main.name
    program = next((f.path for f in resolved.files if f.stage == "before_optimizations"), None)
    if program is None and before is not None and after is None and resolved.given != "-" and Path(path).is_file():
        program = Path(path)  # a lone unoptimized module is itself the program
    return Source(name, before, after, resolved.backend, resolved.pipeline, resolved.gpu, notes, resolved.evidence,
                  program)


def unfuse(module: ir.Module) -> ir.Module:
    """The module with every fusion replaced by the instructions of its computation (named
    `<fusion>.<instruction>`, the fusion's root keeping the fusion's name): every op its own
    kernel, computing exactly what the fused module computes."""
    fusion_bodies = module.fusion_computations
    comps = []
    for comp in module.computations:
        if comp.name in fusion_bodies:
            comps.append(comp)
            continue
        instrs: list[ir.Instruction] = []
        for instr in comp.instructions:
            instrs += _inline(module, instr) if instr.opcode == "fusion" else [instr]
        comps.append(ir.Computation(comp.name, tuple(instrs), comp.root_name, comp.is_entry, comp.attrs))
    return ir.Module(module.name, tuple(comps), module.entry_name, module.attrs, module.stack_frames,
                     form=module.form)


def _inline(module: ir.Module, fusion: ir.Instruction) -> list[ir.Instruction]:
    body = module[fusion.fused_computation.lstrip("%")]
    if fusion.fusion_kind == "kCustom":  # a library call stays one
        return [fusion]
    rename: dict[str, str] = {}
    out: list[ir.Instruction] = []
    for instr in body.post_order:
        if instr.opcode == "parameter":
            rename[instr.name] = fusion.operands[instr.parameter_number]
            continue
        new_name = fusion.name if instr.name == body.root_name else f"{fusion.name}.{instr.name}"
        rename[instr.name] = new_name
        copy = instr.replace(name=new_name, operands=tuple(rename[o] for o in instr.operands))
        out += _inline(module, copy) if copy.opcode == "fusion" else [copy]
    if body.root.opcode == "parameter":  # a fusion that only forwards its operand
        out.append(ir.Instruction(fusion.name, "copy", fusion.shape, (rename[body.root_name],)))
    return out


@dataclass
class Plan:
    name: str
    module: ir.Module | None = None
    loop: bool = False
    origin: str = ""
    error: str | None = None
    skipped: str | None = None  # why the plan does not apply to this input


class NotApplicable(HlofuseError):
    """A plan that cannot be made for this input (no suitable loop, no module to replay)."""


def check_plan_names(names: Sequence[str]) -> list[str]:
    """The plan names, checked before any work: unknown or repeated names are usage errors,
    `relax:RULE` rules must exist and be relaxable (exit code of a rule reference)."""
    from .errors import OptionError
    from .rules import resolve_relax

    seen = []
    for name in names:
        if name in seen:
            raise OptionError(f"--plan {name} is given twice")
        seen.append(name)
        if name in ("unfused", "xla", "replay", "loop"):
            continue
        if name.startswith("relax:"):
            rules = tuple(r for r in name[len("relax:"):].split(",") if r)
            if not rules:
                raise OptionError("--plan relax: needs a rule, e.g. relax:concat")
            resolve_relax(rules)
            continue
        raise OptionError(f"unknown plan {name!r}; plans: {', '.join(PLAN_NAMES)}")
    return seen


def make_plans(source: Source, names: Sequence[str], gpu: str | None = None,
               progress: Callable[[str], None] | None = None) -> list[Plan]:
    """The plans named (`unfused`, `xla`, `relax:RULE`, `loop`), each with its module, or the
    reason it does not apply (`skipped`) or failed (`error`)."""
    plans = []
    for name in names:
        try:
            plans.append(_make_plan(source, name, gpu or source.gpu, progress))
        except NotApplicable as why:
            plans.append(Plan(name, skipped=str(why)))
        except HlofuseError as err:
            plans.append(Plan(name, error=str(err)))
    return plans


def _replay(source: Source, relax: tuple[str, ...], gpu: str | None):
    from .pipeline import Options
    from .result_cache import cached_replay as replay

    if source.backend == "tpu":
        raise NotApplicable("XLA:TPU's fusion passes are not replayed")
    if source.before is None:
        raise NotApplicable("replaying needs the module before fusion; dump with --xla_dump_hlo_pass_re "
                            "to keep XLA's snapshot before its fusion passes")
    try:
        options = Options(backend=source.backend, pipeline=source.pipeline, relax=relax,
                          gpu=gpu if source.backend == "gpu" else None)
        return replay(source.before, options).module
    except InputError as err:
        if "no fusion pipeline" in str(err):
            raise InputError(f"the {source.pipeline} fusion pipeline is not available yet: {err}") from None
        raise


def _make_plan(source: Source, name: str, gpu: str | None, progress) -> Plan:
    if name == "unfused":
        if source.before is not None:
            return Plan(name, source.before, origin="XLA's module before fusion")
        return Plan(name, unfuse(source.after), origin="XLA's fused module with every fusion inlined")
    if name in ("xla", "loop"):
        if source.after is not None:
            module, origin = source.after, "XLA's fused module"
        else:
            if progress:
                progress(f"replaying the {source.pipeline} pipeline")
            module, origin = _replay(source, (), gpu), f"the {source.pipeline} replay"
        if name == "loop":
            _check_loop(module)
            return Plan(name, module, loop=True, origin=origin + ", while loops as one kernel")
        return Plan(name, module, origin=origin)
    if name == "replay":
        if progress:
            progress(f"replaying the {source.pipeline} pipeline")
        return Plan(name, _replay(source, (), gpu), origin=f"the {source.pipeline} replay")
    if name.startswith("relax:"):
        rules = tuple(r for r in name[len("relax:"):].split(",") if r)
        if not rules:
            raise InputError("relax: needs a rule, e.g. relax:concat")
        if progress:
            progress(f"replaying the {source.pipeline} pipeline with {', '.join(rules)} relaxed")
        return Plan(name, _replay(source, rules, gpu), origin=f"the {source.pipeline} replay, {', '.join(rules)} relaxed")
    raise InputError(f"unknown plan {name!r}; plans: {', '.join(PLAN_NAMES)}")


def _check_loop(module: ir.Module) -> None:
    """NotApplicable unless a while loop of `module` can run as one kernel (execute/loop.py)."""
    from .execute.lower import lower

    try:
        lowered = lower(module, loop_kernels=True)
    except HlofuseError:
        return  # not about the loop: running the plan reports it
    if not any(k.kind == "loop" for k in lowered.kernels):
        raise NotApplicable("no while loop here runs as one kernel: " + "; ".join(lowered.notes)
                            if lowered.notes else "the module has no while loop")


# ------------------------------------------------------------------------------------------
# Devices
# ------------------------------------------------------------------------------------------


def choose_device(name: str = "auto"):
    """`cpu`, `cuda` (BackendUnavailable without CuPy and a GPU), or `auto`: CUDA when there."""
    from .execute.cpu import CpuDevice

    if name == "cpu":
        return CpuDevice()
    from .execute import cuda

    if name == "cuda":
        return cuda.CudaDevice()
    if name == "auto":
        return cuda.CudaDevice() if cuda.available() else CpuDevice()
    raise InputError(f"unknown device {name!r}; choose auto, cuda or cpu")


# ------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------


@dataclass
class PlanResult:
    name: str
    kernels: int | None = None
    launches: int | None = None
    bytes: int | None = None
    median_s: float | None = None
    speedup: float | None = None
    max_rel_error: float | None = None
    ok: bool = False
    error: str | None = None
    origin: str = ""
    notes: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    skipped: str | None = None
    min_s: float | None = None
    max_s: float | None = None
    iqr_s: float | None = None
    #: IQR over median (max − min over median with fewer than 4 runs); None with one run.
    spread: float | None = None
    #: Whether `speedup` is closer to 1 than this plan's and `unfused`'s spreads allow to tell.
    speedup_within_noise: bool | None = None
    #: With --compare-xla: this plan's median over XLA's own run's (below 1: faster than XLA).
    vs_xla: float | None = None

    @property
    def noisy(self) -> bool:
        return self.spread is not None and self.spread > NOISY_SPREAD

    @property
    def failed(self) -> bool:
        return self.skipped is None and not self.ok

    def to_dict(self) -> dict:
        return {"name": self.name, "kernels": self.kernels, "launches": self.launches, "bytes": self.bytes,
                "median_s": self.median_s, "speedup": self.speedup,
                "max_rel_error": _finite(self.max_rel_error), "ok": self.ok, "error": self.error,
                "origin": self.origin, "notes": list(self.notes), "skipped": self.skipped,
                "runs": len(self.times), "min_s": self.min_s, "max_s": self.max_s, "iqr_s": self.iqr_s,
                "spread": self.spread, "noisy": self.noisy, "speedup_within_noise": self.speedup_within_noise,
                "vs_xla": self.vs_xla}


@dataclass
class XlaResult:
    """XLA's own compiled program run beside the plans (`--compare-xla`): its timings on the
    same clock as the plans', its outputs checked against the same reference, or why it
    did not run."""

    ran: bool = False
    why_not: str | None = None
    runner: str = ""  # what ran it, in words: XLA:CPU (jax 0.10.2, single-threaded)
    program: str = ""  # the HLO file XLA compiled
    threads: str = "single"
    xla_flags: str = ""
    max_rel_error: float | None = None
    ok: bool = False
    times: list[float] = field(default_factory=list)
    median_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    iqr_s: float | None = None
    spread: float | None = None

    def to_dict(self) -> dict:
        return {"ran": self.ran, "why_not": self.why_not, "runner": self.runner, "program": self.program,
                "threads": self.threads, "xla_flags": self.xla_flags, "max_rel_error": _finite(self.max_rel_error),
                "ok": self.ok, "runs": len(self.times), "median_s": self.median_s, "min_s": self.min_s,
                "max_s": self.max_s, "iqr_s": self.iqr_s, "spread": self.spread}


def noise_floor(a: PlanResult, b: PlanResult) -> float | None:
    """The smallest ratio between plans a and b that their run-to-run spread lets one trust."""
    if a.spread is None or b.spread is None:
        return None
    return 1.0 + a.spread + b.spread


def _spread(times: list[float]) -> tuple[float, float, float | None, float | None]:
    """min, max, IQR (None below 4 runs) and the relative spread of `times`."""
    lo, hi, med = min(times), max(times), float(np.median(times))
    if len(times) < 2 or med <= 0:
        return lo, hi, None, None
    if len(times) < 4:
        return lo, hi, None, (hi - lo) / med
    q1, q3 = np.percentile(times, [25, 75])
    return lo, hi, float(q3 - q1), float(q3 - q1) / med


def _finite(x):
    if x is None:
        return None
    return x if np.isfinite(x) else str(x)


def signature(module: ir.Module) -> list[tuple[tuple[int, ...], str]]:
    out = []
    for p in module.entry.parameters:
        if p.shape.is_tuple:
            raise ExecutionError(f"entry parameter {p.name} is a tuple; give inputs with --inputs")
        out.append((p.shape.dims, p.shape.element_type))
    return out


class Progress:
    """What run_plans reports while it works (the CLI draws a progress bar from it)."""

    def stage(self, text: str, total: int | None = None) -> None: ...
    def advance(self) -> None: ...


def run_plans(plans: list[Plan], device, *, inputs: Sequence[np.ndarray] | None = None, seed: int = 0,
              repeat: int = 5, warmup: int = 1, progress: Progress | None = None,
              limits: "Limits | None" = None) -> list[PlanResult]:
    """Compile, check and time every plan; the reference is the evaluator on `unfused` (or the
    first plan that has a module).  `limits`: memory and loop iterations a plan may take
    (execute/budget.py; by default from the environment)."""
    progress = progress or Progress()
    prepared = prepare(plans, device, inputs=inputs, seed=seed, progress=progress, limits=limits)
    time_prepared([prepared], device, repeat=repeat, warmup=warmup, progress=progress)
    return prepared.results


@dataclass
class Prepared:
    """Plans compiled, checked and counted, ready to be timed; with `--compare-xla`, XLA's own
    program too (`xla`, and `xla_program` while it runs)."""

    results: list[PlanResult]
    runners: dict[str, object]
    xla: XlaResult | None = None
    xla_program: object | None = None

    def close(self) -> None:
        """End XLA's process, if one runs."""
        if self.xla_program is not None:
            self.xla_program.close()
            self.xla_program = None


def prepare(plans: list[Plan], device, *, inputs: Sequence[np.ndarray] | None = None, seed: int = 0,
            progress: Progress | None = None, limits: "Limits | None" = None,
            xla_program: Path | None | bool = None, xla_threads: str = "single") -> Prepared:
    """Compile, run once and check every plan.  `xla_program`: the HLO file of XLA's own
    program to run beside the plans (`Source.program`; False: not asked; None: asked, but
    the input has none)."""
    from .execute import budget
    from .execute.inputs import random_inputs, relative_error, tolerance
    from .execute.cpu import value_leaves
    from .execute.interp import Evaluator
    from .execute.lower import lower
    from .execute.runtime import Runner

    progress = progress or Progress()
    results = {p.name: PlanResult(p.name, error=p.error, origin=p.origin, skipped=p.skipped) for p in plans}
    ordered = [results[p.name] for p in plans]
    usable = [p for p in plans if p.module is not None]
    if not usable:
        return Prepared(ordered, {})
    reference_plan = next((p for p in usable if p.name == "unfused"), usable[0])
    limits = limits or budget.Limits.from_environment()
    # Before the inputs are drawn: a few lines of text can declare terabytes or 10**18 trips.
    budget.check(reference_plan.module, limits, f"plan {reference_plan.name}")
    sig = signature(reference_plan.module)
    if inputs is None:
        inputs = random_inputs(sig, seed)
    elif len(inputs) != len(sig):
        raise InputError(f"the module takes {len(sig)} inputs, {len(inputs)} were given")
    progress.stage(f"reference: evaluating {reference_plan.name} with NumPy")
    evaluator = Evaluator(reference_plan.module, max_iterations=limits.iterations, max_bytes=limits.memory_bytes)
    reference = [np.asarray(v) for v in value_leaves(evaluator.run(list(inputs)))]
    runners = {}
    progress.stage("compiling", total=len(usable))
    for plan in usable:
        result = results[plan.name]
        try:
            budget.check(plan.module, limits, f"plan {plan.name}")
            if signature(plan.module) != sig:
                raise ExecutionError(f"its inputs differ from the reference's ({plan.module.name})")
            lowered = lower(plan.module, loop_kernels=plan.loop, loop_tile=getattr(device, "loop_tile", 1),
                            generated_dots=getattr(device, "generated_dots", False),
                            split_gemm_fusions=getattr(device, "split_gemm_fusions", False))
            if plan.loop and not any(k.kind == "loop" for k in lowered.kernels):
                raise ExecutionError("no while loop here runs as one kernel: " + "; ".join(lowered.notes)
                                     if lowered.notes else "the module has no while loop")
            runner = Runner(lowered, device)
            runner.set_inputs(inputs)
            counts = runner.count()
            outputs = runner.outputs()
            if len(outputs) != len(reference):
                raise ExecutionError(f"{len(outputs)} outputs, the reference has {len(reference)}")
            errors = [relative_error(o, r) for o, r in zip(outputs, reference)]
            if runner.native:  # what is timed is the device's own run of the steps: check it too
                runner.run()
                errors = [max(e, relative_error(o, r)) for e, o, r in zip(errors, runner.outputs(), reference)]
            result.notes += lowered.notes  # after the first runs: a device may add notes then
            result.max_rel_error = max(errors, default=0.0)
            result.ok = all(e <= tolerance(_etype(r)) for e, r in zip(errors, reference))
            result.kernels = len(lowered.kernels)
            result.launches = counts.launches
            result.bytes = counts.bytes
            runners[plan.name] = runner
        except HlofuseError as err:
            result.error = str(err)
            result.ok = False
        progress.advance()
    prepared = Prepared(ordered, runners)
    if xla_program is not False:
        progress.stage("XLA: compiling and running its own program")
        prepared.xla, prepared.xla_program = _start_xla(xla_program, device, inputs, reference, xla_threads)
    return prepared


def _start_xla(program: Path | None, device, inputs, reference, threads: str):
    """XLA's own program started and checked, or an XlaResult saying why it does not run."""
    from .execute.inputs import relative_error, tolerance
    from .execute.xla_program import XlaProgram, XlaUnavailable

    result = XlaResult(threads=threads, program=str(program) if program is not None else "")
    if program is None:
        result.why_not = "the input has no program before optimizations (XLA's input) to compile"
        return result, None
    if getattr(device, "name", "") != "cpu":
        result.why_not = f"XLA's own run is compared on the CPU only (device {device.name})"
        return result, None
    running = XlaProgram(program, inputs, threads=threads)
    try:
        running.start()
    except XlaUnavailable as why:
        result.why_not = str(why)
        return result, None
    result.ran = True
    result.runner = running.describe()
    result.xla_flags = running.info.get("xla_flags", "")
    if len(running.outputs) != len(reference):
        result.why_not = f"XLA's program has {len(running.outputs)} outputs, the reference {len(reference)}"
        result.ok = False
    else:
        errors = [relative_error(o, r) for o, r in zip(running.outputs, reference)]
        result.max_rel_error = max(errors, default=0.0)
        result.ok = all(e <= tolerance(_etype(r)) for e, r in zip(errors, reference))
    return result, running


def time_prepared(groups: list[Prepared], device, *, repeat: int = 5, warmup: int = 1,
                  progress: Progress | None = None) -> None:
    """Time every prepared plan of every group, interleaved (A, B, C, ..., then again), so
    that the machine's changing load affects them alike; medians and speedups over each
    group's `unfused`.  XLA's own program, where a group runs it, takes its turn in every
    round on the same clock (its process's CPU time beside the thread clock, or wall time)."""
    from .execute.runtime import median

    progress = progress or Progress()
    clock = getattr(device, "clock", "thread")
    entries = [(result, group.runners[result.name].run, device.measure)
               for group in groups for result in group.results if result.name in group.runners]
    for group in groups:
        if group.xla_program is not None:
            entries.append((group.xla, None, lambda _, program=group.xla_program: program.measure(clock)))
    progress.stage("timing", total=repeat * len(entries))
    for _, run, measure in entries:
        for _ in range(warmup):
            measure(run)
    for _ in range(repeat):
        for result, run, measure in entries:
            result.times.append(measure(run))
            progress.advance()
    for result, _, _ in entries:
        result.median_s = median(result.times)
        result.min_s, result.max_s, result.iqr_s, result.spread = _spread(result.times)
    for group in groups:
        base = next((r for r in group.results if r.name == "unfused"), None)
        for r in group.results:
            if base is not None and base.median_s and r.median_s:
                r.speedup = base.median_s / r.median_s
                floor = noise_floor(r, base)
                if floor is not None and r is not base:
                    r.speedup_within_noise = 1 / floor < r.speedup < floor
            if group.xla is not None and group.xla.median_s and r.median_s:
                r.vs_xla = r.median_s / group.xla.median_s
        group.close()


def _etype(array: np.ndarray) -> str:
    kind, size = array.dtype.kind, array.dtype.itemsize
    if kind == "f":
        return {2: "f16", 4: "f32", 8: "f64"}[size]
    if kind == "c":
        return "c64" if size == 8 else "c128"
    return "s32"


def to_frame(results: list[PlanResult]):
    import pandas as pd

    rows = [{k: v for k, v in r.to_dict().items() if k not in ("notes",)} for r in results]
    # The first columns are the documented ones, in their order; the spread and skips follow.
    return pd.DataFrame(rows, columns=["name", "kernels", "launches", "bytes", "median_s", "speedup",
                                       "max_rel_error", "ok", "error", "origin", "runs", "min_s", "max_s",
                                       "iqr_s", "spread", "noisy", "speedup_within_noise", "skipped"])


def to_json(device_name: str, results: list[PlanResult], source: Source | None = None,
            xla: XlaResult | None = None) -> dict:
    payload = {"device": device_name, "plans": [r.to_dict() for r in results],
               "noisy_spread": NOISY_SPREAD}
    if xla is not None:
        payload["xla"] = xla.to_dict()
    if source is not None:
        payload["module"] = source.name
        payload["backend"] = source.backend
        payload["pipeline"] = source.pipeline
        payload["evidence"] = list(source.evidence)
    return payload


def read_inputs(path: str, module: ir.Module) -> list[np.ndarray]:
    """Inputs from a .npz file: arrays named like the entry parameters, or arr_0, arr_1, ..."""
    try:
        data = np.load(path)
    except OSError as err:
        raise InputError(f"{path}: {err}") from None
    params = module.entry.parameters
    out = []
    for i, p in enumerate(params):
        for key in (p.name, p.name.split(".")[0], f"arr_{i}"):
            if key in data:
                out.append(data[key])
                break
        else:
            raise InputError(f"{path}: no array for parameter {i} ({p.name}); name them after the "
                             f"parameters or arr_0, arr_1, ...")
    return out


__all__ = ["BackendUnavailable", "NotApplicable", "Plan", "PlanResult", "Source", "check_plan_names", "choose_device",
           "load_source", "make_plans", "noise_floor", "prepare", "run_plans", "time_prepared", "to_frame", "to_json",
           "unfuse", "XlaResult"]

"""The Python API of the commands: `hlofuse.explain(...)`, `hlofuse.check(...)` and
`hlofuse.diff(...)` return reports whose `.to_dict()` is what `hlofuse explain --json`,
`hlofuse check --json` and `hlofuse diff --json` print.
The commands are this module plus printing: they resolve the input here, print what was
chosen, and build the same report.

An input is a path (an HLO file, a `--xla_dump_to` folder, "-" for stdin), a folder
`compile_jax` returned (its module, GPU and XLA flags are the defaults), or a parsed
`ir.Module` (no dump around it: backend, pipeline and GPU detected from its text).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from . import counts, ir
from .inputs import CHECK, EXPLAIN, ResolvedInput, Stage, check_options

# ------------------------------------------------------------------------------------------
# Reports
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExplainReport:
    """`hlofuse explain`'s result: the explanation (with a note where two kernel counts of
    the program differ, and its triage: costs, groups, predictions), the input as resolved,
    and the kernel counts.  `.kernels`, `.boundaries` and `.groups` are pandas DataFrames
    (columns: hlofuse/render/frames.py); in a notebook the report shows the summary and the
    top groups, as the command does."""

    explanation: object  # hlofuse.explain.Explanation
    input: ResolvedInput
    counts: tuple[counts.KernelCount, ...]
    source: object = None  # what was given (keeps a temporary compile_jax folder alive)

    @property
    def kernels(self):
        from .render.frames import kernels_frame

        return kernels_frame(self.explanation)

    @property
    def boundaries(self):
        from .render.frames import boundaries_frame

        return boundaries_frame(self.explanation)

    @property
    def groups(self):
        from .render.frames import groups_frame

        return groups_frame(self.explanation)

    def summary(self) -> dict:
        return self.explanation.summary()

    @property
    def evidence(self) -> tuple[str, ...]:
        return self.input.evidence

    def to_dict(self) -> dict:
        """What `hlofuse explain --json` prints."""
        from .render.json import explanation_dict

        payload = explanation_dict(self.explanation)
        payload["counts"] = [c.to_dict() for c in self.counts]
        payload["launches_per_run"] = self.explanation.summary()["kernels_launched"]
        payload["evidence"] = list(self.input.evidence)
        return payload

    def _repr_html_(self) -> str:
        from .render.html import summary_html

        counted = f"in {self.counts[0].words}" if self.counts else None
        return summary_html(self.explanation, counted=counted)


@dataclass(frozen=True)
class CheckReport:
    """`hlofuse check`'s result: the replay compared with XLA's kernels, the kernel counts
    (XLA's first, then the replay's), and XLA's own reasons where its fusion log has them."""

    result: object  # hlofuse.check.CheckResult
    input: ResolvedInput
    counts: tuple[counts.KernelCount, ...]
    xla_reason: Callable[[str, str], str | None] | None = None  # (producer, consumer) → XLA's log line
    source: object = None

    @property
    def agreement(self) -> float:
        return self.result.agreement

    @property
    def evidence(self) -> tuple[str, ...]:
        return self.input.evidence

    def to_dict(self) -> dict:
        """What `hlofuse check --json` prints."""
        payload = self.result.to_dict()
        if self.xla_reason is not None:
            for kernel in payload["kernels"]:
                for d in kernel["decisions"]:
                    d["xla_log_reason"] = self.xla_reason(d["producer"], d["consumer"])
        payload["replay_kernels"] = self.counts[1].kernels
        payload["counts"] = [c.to_dict() for c in self.counts]
        payload["counts_differ"] = counts.differences(list(self.counts))
        payload["evidence"] = list(self.input.evidence)
        return payload


# ------------------------------------------------------------------------------------------
# explain
# ------------------------------------------------------------------------------------------


def explain(source, *, module: str | None = None, stage: str | None = None, backend: str | None = None,
            pipeline: str | None = None, gpu: str | None = None, relax: Sequence[str] = (),
            xla_flags: str | Sequence[str] | None = None, strict: bool = False, predict: bool | None = None,
            cpu_bandwidth: float | None = None, cpu_flop_rate: float | None = None,
            cpu_launch_us: float | None = None) -> ExplainReport:
    """Explain every kernel boundary of `source` (a path, a compile_jax folder or an
    ir.Module), as `hlofuse explain` does; the options are the command's (`predict`:
    --predict/--no-predict; `cpu_bandwidth` in bytes/s, `cpu_flop_rate` in flops/s and
    `cpu_launch_us` override the CPU roofline's constants)."""
    resolved, flags = resolve_for_explain(source, module=module, stage=stage, backend=backend, pipeline=pipeline,
                                          gpu=gpu, relax=relax, xla_flags=xla_flags, strict=strict)
    options = triage_options(predict, cpu_bandwidth, cpu_flop_rate, cpu_launch_us)
    return explain_resolved(resolved, relax=relax, xla_flags=flags, source=source, triage=options)


def triage_options(predict: bool | None = None, cpu_bandwidth: float | None = None,
                   cpu_flop_rate: float | None = None, cpu_launch_us: float | None = None, jobs: int | None = None,
                   predict_top: int | None = 10):
    """TriageOptions from the command's options (the CPU roofline's constants checked)."""
    from .errors import OptionError
    from .triage import CpuRoofline, TriageOptions

    for name, value in (("cpu bandwidth", cpu_bandwidth), ("cpu FLOP rate", cpu_flop_rate),
                        ("cpu launch time", cpu_launch_us)):
        if value is not None and not value > 0:
            raise OptionError(f"the {name} must be a positive number, not {value}")
    cpu = CpuRoofline().with_overrides(cpu_bandwidth, cpu_flop_rate, cpu_launch_us)
    return TriageOptions(predict=predict, cpu=cpu, jobs=jobs, predict_top=predict_top)


def resolve_for_explain(source, *, module=None, stage=None, backend=None, pipeline=None, gpu=None, relax=(),
                        xla_flags=None, strict=False) -> tuple[ResolvedInput, tuple[str, ...]]:
    """The input `explain` works on (options checked first) and the XLA flags to apply."""
    module, gpu, flags = _defaults(source, module, gpu, xla_flags)
    check_options(backend=backend, pipeline=pipeline, gpu=gpu, relax=relax, xla_flags=flags)
    if isinstance(source, ir.Module):
        return resolve_module(source, backend=backend, pipeline=pipeline, gpu=gpu), flags
    from .inputs import resolve

    return resolve(_path(source), need=EXPLAIN, module=module, stage=stage, backend=backend, pipeline=pipeline,
                   gpu=gpu, relax=relax, strict=strict), flags


def explain_resolved(resolved: ResolvedInput, *, relax: Sequence[str] = (), xla_flags: tuple[str, ...] = (),
                     source=None, triage=None) -> ExplainReport:
    """Explain a resolved input, then triage it (`triage`: TriageOptions, default ones when
    None); the kernel counts and why they differ added."""
    from .collector import collector_paused
    from .explain import explain as explain_module
    from .triage import TriageOptions, triage as triage_explanation

    with collector_paused():  # both build graphs of the module; the triage takes its cycles apart
        ex = explain_module(resolved.module, dump=resolved.dump_context(), relax=tuple(relax), xla_flags=xla_flags,
                            detection=resolved.detection)
        ex = triage_explanation(ex, triage or TriageOptions(), tuple(xla_flags))
    kernel_counts = explained_counts(resolved, ex)
    ex = replace(ex, notes=ex.notes + tuple(counts.differences(kernel_counts)))
    return ExplainReport(ex, resolved, tuple(kernel_counts), source)


def explained_counts(resolved: ResolvedInput, ex) -> list[counts.KernelCount]:
    """What explain counts (the module explained, or the replay of it) first, then XLA's
    snapshot right after fusion when the dump has one and it is not the module explained."""
    from .dumpdir import read_input
    from .parse import parse_text

    own_what = counts.REPLAY if ex.stage == "replayed" else (
        counts.XLA_FINAL if resolved.main.file is not None and resolved.main.file.stage == "after_optimizations"
        else counts.MODULE)
    if ex.fused_module is None:
        return []
    out = [counts.count(ex.fused_module, own_what, resolved.main.name)]
    snap = resolved.stage_file("after_fusion")
    if snap is not None and str(snap.path) != resolved.main.name:
        text, name = read_input(str(snap.path))
        out.append(counts.count(parse_text(text, name), counts.XLA_AFTER_FUSION, str(snap.path)))
    return out


# ------------------------------------------------------------------------------------------
# diff
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffSides:
    """The two inputs of a comparison, resolved, with what is applied to each side's replay."""

    a: ResolvedInput
    b: ResolvedInput
    a_flags: tuple[str, ...] = ()
    b_flags: tuple[str, ...] = ()
    b_relax: tuple[str, ...] = ()
    one_input: bool = False  # B is A replayed another way


def diff(a, b=None, *, module: str | None = None, stage: str | None = None, backend: str | None = None,
         pipeline: str | None = None, gpu: str | None = None, xla_flags: str | Sequence[str] | None = None,
         vs_pipeline: str | None = None, vs_gpu: str | None = None,
         vs_xla_flags: str | Sequence[str] | None = None, relax: Sequence[str] = (), strict: bool = False):
    """Compare two compiles of a program, as `hlofuse diff` does: `a` and `b` are paths (HLO
    files, dump folders, "-"), compile_jax folders or ir.Modules, each explained as `explain`
    explains it (the same module chosen in each); or `a` alone, replayed twice: as given
    (`backend`, `pipeline`, `gpu`, `xla_flags`) and as B, with `vs_pipeline`, `vs_gpu`,
    `vs_xla_flags` or `relax` (B's, in both forms).  Returns a diff.Diff whose `.to_dict()`
    equals `hlofuse diff --json`."""
    sides = resolve_for_diff(a, b, module=module, stage=stage, backend=backend, pipeline=pipeline, gpu=gpu,
                             xla_flags=xla_flags, vs_pipeline=vs_pipeline, vs_gpu=vs_gpu,
                             vs_xla_flags=vs_xla_flags, relax=relax, strict=strict)
    return diff_resolved(sides)


def resolve_for_diff(a, b=None, *, module=None, stage=None, backend=None, pipeline=None, gpu=None, xla_flags=None,
                     vs_pipeline=None, vs_gpu=None, vs_xla_flags=None, relax=(), strict=False) -> DiffSides:
    """Both sides of a comparison, resolved (every option checked before any work)."""
    from .errors import OptionError

    relax = tuple(relax)
    b_flags_given = (vs_xla_flags,) if isinstance(vs_xla_flags, str) else tuple(vs_xla_flags or ())
    if b is not None:
        if _is_stdin(a) and _is_stdin(b):
            raise OptionError("A and B cannot both be - (stdin): give one of them as a file or dump folder")
        side_a, a_flags = resolve_for_explain(a, module=module, stage=stage, backend=backend, pipeline=pipeline,
                                              gpu=gpu, xla_flags=xla_flags, strict=strict)
        side_b, b_flags = resolve_for_explain(b, module=module, stage=stage, pipeline=vs_pipeline, gpu=vs_gpu,
                                              relax=relax, xla_flags=b_flags_given or None, strict=strict)
        return DiffSides(side_a, side_b, a_flags, b_flags, relax)
    changes = [name for name, given in (("--vs-pipeline", vs_pipeline), ("--vs-gpu", vs_gpu),
                                        ("--vs-xla-flags", b_flags_given), ("--relax", relax)) if given]
    if not changes:
        raise OptionError("diff compares two compiles: give A and B, or A with --vs-gpu, --vs-pipeline, "
                          "--vs-xla-flags or --relax to compare its replay with another one")
    side_a, a_flags = resolve_for_explain(a, module=module, stage=stage, backend=backend, pipeline=pipeline, gpu=gpu,
                                          xla_flags=xla_flags, strict=strict)
    side_a = _before_fusion(side_a, changes[0], strict)
    side_b = replace(side_a, detection=_detection_b(side_a, vs_pipeline, vs_gpu, relax, b_flags_given))
    return DiffSides(side_a, side_b, a_flags, b_flags_given or a_flags, relax, one_input=True)


def diff_resolved(sides: DiffSides):
    """Explain both sides (no predicted fixes: the totals are what a comparison needs) and
    compare them."""
    from .diff import compare
    from .triage import TriageOptions

    options = TriageOptions(predict=False)
    report_a = explain_resolved(sides.a, xla_flags=sides.a_flags, triage=options)
    report_b = explain_resolved(sides.b, relax=sides.b_relax, xla_flags=sides.b_flags, triage=options)
    return compare(report_a, report_b, {"relax": (), "xla_flags": sides.a_flags},
                   {"relax": sides.b_relax, "xla_flags": sides.b_flags})


def _before_fusion(resolved: ResolvedInput, option: str, strict: bool) -> ResolvedInput:
    """Both sides of a one-input comparison are replays of the module before fusion."""
    from .inputs import switch_to_before_fusion

    return switch_to_before_fusion(resolved, option, strict)


def _detection_b(a: ResolvedInput, vs_pipeline, vs_gpu, relax, vs_flags):
    """B's backend, pipeline and GPU: A's, with --vs-pipeline and --vs-gpu put in their place
    (checked here, with B's --relax against B's pipeline)."""
    from .backend import Detection
    from .errors import OptionError
    from .inputs import PIPELINES

    backend = PIPELINES[vs_pipeline] if vs_pipeline in PIPELINES else a.backend
    if vs_gpu is not None and backend != "gpu":
        raise OptionError(f"--vs-gpu describes a GPU, and B is replayed by XLA:{backend.upper()}")
    pipeline = vs_pipeline or (a.pipeline if backend == a.backend else None)
    check_options(backend=backend, pipeline=pipeline, gpu=vs_gpu, relax=relax, xla_flags=vs_flags)
    if backend == "cpu":
        return Detection("cpu", "cpu", None, ("B: XLA:CPU (--vs-pipeline cpu)",))
    gpu = vs_gpu or (a.gpu if a.backend == "gpu" else None)
    said = [f"pipeline {pipeline}" + (" (--vs-pipeline)" if vs_pipeline else " (as A)"),
            f"GPU {gpu}" + (" (--vs-gpu)" if vs_gpu else " (as A)")]
    return Detection("gpu", pipeline, gpu, ("B: XLA:GPU; " + "; ".join(said),))


def _is_stdin(source) -> bool:
    return isinstance(source, str) and source == "-"


# ------------------------------------------------------------------------------------------
# check
# ------------------------------------------------------------------------------------------


def check(before, after=None, *, module: str | None = None, backend: str | None = None,
          pipeline: str | None = None, passes: str | Sequence[str] | None = None, gpu: str | None = None,
          relax: Sequence[str] = (), library_fusion: bool | None = None,
          xla_flags: str | Sequence[str] | None = None) -> CheckReport:
    """Replay the fusion pipeline on XLA's module right before fusion and compare with XLA's
    right after it, as `hlofuse check` does: a dump folder (or compile_jax folder), or the
    two modules (paths or ir.Modules)."""
    resolved, flags = resolve_for_check(before, after, module=module, backend=backend, pipeline=pipeline, gpu=gpu,
                                        relax=relax, xla_flags=xla_flags)
    options = replay_options(resolved, passes, relax, library_fusion, flags)
    return check_resolved(resolved, options, source=before)


def resolve_for_check(before, after=None, *, module=None, backend=None, pipeline=None, gpu=None, relax=(),
                      xla_flags=None) -> tuple[ResolvedInput, tuple[str, ...]]:
    module, gpu, flags = _defaults(before, module, gpu, xla_flags)
    check_options(backend=backend, pipeline=pipeline, gpu=gpu, relax=relax, xla_flags=flags)
    if isinstance(before, ir.Module) or isinstance(after, ir.Module):
        from .errors import OptionError

        if not (isinstance(before, ir.Module) and isinstance(after, ir.Module)):
            raise OptionError("check compares two modules: give both as ir.Modules, or both as paths")
        return resolve_module(before, backend=backend, pipeline=pipeline, gpu=gpu, after=after), flags
    from .inputs import resolve

    return resolve(_path(before), need=CHECK, module=module, backend=backend, pipeline=pipeline, gpu=gpu,
                   after_path=_path(after) if after is not None else None), flags


def check_resolved(resolved: ResolvedInput, options, *, source=None) -> CheckReport:
    """Check a resolved input with replay options (`replay_options`)."""
    from .check import check as check_modules

    after_file = resolved.after.file
    if options.passes is None and after_file is not None and after_file.stage == "pass":
        options = replay_until(options, after_file)
    result = check_modules(resolved.before.module, resolved.after.module, options)
    xla_what = counts.XLA_FINAL if after_file is not None and after_file.stage == "after_optimizations" \
        else counts.XLA_AFTER_FUSION
    kernel_counts = xla_counts(resolved, counts.count(resolved.after.module, xla_what, resolved.after.name))
    kernel_counts.insert(1, counts.count(result.replay.module, counts.REPLAY, resolved.before.name))
    return CheckReport(result, resolved, tuple(kernel_counts), xla_log_reasons(resolved), source)


def replay_options(resolved: ResolvedInput, passes, relax=(), library_fusion=None, xla_flags=()):
    """Options for the replay of `resolved`; pass names are checked here, before the replay."""
    from .errors import OptionError
    from .pipeline import Options, get_pipeline

    if isinstance(passes, str):
        passes = [p.strip() for p in passes.split(",")]
    chosen = tuple(p for p in passes if p) if passes else None
    if chosen is not None:
        names = list(dict.fromkeys(n for n, _ in get_pipeline(resolved.backend, resolved.pipeline).passes))
        unknown = [p for p in chosen if p not in names]
        if unknown:
            raise OptionError(f"--passes: {', '.join(unknown)} is not a pass of the {resolved.pipeline} pipeline; "
                              f"its passes: {', '.join(names)}")
    if isinstance(xla_flags, str):
        xla_flags = (xla_flags,)
    return Options(backend=resolved.backend, pipeline=resolved.pipeline, passes=chosen, gpu=resolved.gpu,
                   relax=tuple(relax), library_fusion=library_fusion, xla_flags=tuple(xla_flags or ()))


def replay_until(options, after_file):
    """Replay only the passes up to the one XLA's after-snapshot was taken after."""
    from .pipeline import get_pipeline

    spec = get_pipeline(options.backend, options.pipeline)
    names = [n for n, _ in spec.passes]
    if after_file.after_pass in names:
        last = len(names) - 1 - names[::-1].index(after_file.after_pass)
        return replace(options, passes=tuple(dict.fromkeys(names[: last + 1])))
    if after_file.before_pass in names:  # taken between passes: replay those before it
        first = names.index(after_file.before_pass)
        return replace(options, passes=tuple(dict.fromkeys(names[:first])))
    return options


def xla_counts(resolved: ResolvedInput, own: counts.KernelCount) -> list[counts.KernelCount]:
    """The command's own count first, then XLA's counts of the same program that the dump has
    (the snapshot right after fusion, the final module), parsed here to count them."""
    from .dumpdir import read_input
    from .parse import parse_text

    out = [own]
    for which, what in (("after_fusion", counts.XLA_AFTER_FUSION), ("after_optimizations", counts.XLA_FINAL)):
        f = resolved.stage_file(which)
        if f is None or any(c.file == str(f.path) for c in out):
            continue
        if resolved.after is not None and resolved.after.file is not None and resolved.after.file.path == f.path:
            module = resolved.after.module
        else:
            text, name = read_input(str(f.path))
            module = parse_text(text, name)
        out.append(counts.count(module, what, str(f.path)))
    return out


def xla_log_reasons(resolved: ResolvedInput):
    """A lookup (producer, consumer) → XLA's own reason, from its priority-fusion log."""
    from .dumpdir import priority_fusion_log

    log_file = priority_fusion_log(list(resolved.files))
    if log_file is None:
        return None
    from .xla_log import load_log

    log = load_log(log_file.path)
    return lambda producer, consumer: log.reason(producer, consumer)


# ------------------------------------------------------------------------------------------
# Inputs
# ------------------------------------------------------------------------------------------


def resolve_module(module: ir.Module, *, backend=None, pipeline=None, gpu=None,
                   after: ir.Module | None = None) -> ResolvedInput:
    """A parsed module (no dump around it) as a resolved input; with `after`, the pair
    `check` compares."""
    from .backend import detect

    name = module.path or f"<module {module.name}>"
    main = Stage(module, name, None, "")
    detection = detect(module, file=module.path, backend=backend, pipeline=pipeline, gpu=gpu)
    if after is None:
        return ResolvedInput(name, None, (), main, None, None, detection, ())
    later = Stage(after, after.path or f"<module {after.name}>", None, "after fusion")
    return ResolvedInput(name, None, (), main, replace(main, role="before fusion"), later, detection, ())


def _defaults(source, module, gpu, xla_flags):
    """A compile_jax folder says which module, GPU and XLA flags it was compiled with."""
    from .from_jax import JaxDump

    if isinstance(xla_flags, str):
        xla_flags = (xla_flags,)
    flags = tuple(xla_flags or ())
    if isinstance(source, JaxDump):
        module = module or source.module
        gpu = gpu or (source.gpu if source.deviceless else None)
        flags = flags or tuple(source.xla_flags)
    return module, gpu, flags


def _path(source) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    raise TypeError(f"expected a path, a compile_jax folder or an ir.Module, not {type(source).__name__}")

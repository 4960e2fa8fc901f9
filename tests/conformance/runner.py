"""Run XLA's fusion unit-test cases (shared/corpus/fusion) through hlofuse's replay and check
what the tests assert.

The pass table maps each corpus `pass` name to how hlofuse runs it.  To add a pass, call
`register_pass(name, run, config=...)` from a module imported below (or add it in `_builtin`):
`run(program, ctx, case) -> changed` runs the pass on a `graph.Program` built from the case's
HLO; `config(case) -> GpuConfig | None` sets the device and XLA era the case was written for.
Cases whose `expect` is only `manual` (or whose pass has no runner yet) are not run.

XLA's unit tests use `TestGpuDeviceInfo::RTXA6000DeviceInfo()`, which differs from the shipped
a6000.txtpb (clock 1.41 GHz, compute capability 8.9): `hlofuse.gpu.test_device()`.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import hlofuse
from hlofuse.gpu import GpuConfig, test_device
from hlofuse.graph import Program
from hlofuse.pipeline import Context, Options, make_context

from .expect import SelectorError, check_expectations, select

HERE = Path(__file__).resolve().parent
KNOWN_FAILURES = HERE / "known_failures.tsv"


def corpus_dir() -> Path:
    """shared/corpus/fusion: $HLOFUSE_SHARED, ../shared, or /work/shared, as tests/conftest.py
    looks for the shared folder (so a checkout elsewhere still finds the one the machine has)."""
    if os.environ.get("HLOFUSE_SHARED"):
        return Path(os.environ["HLOFUSE_SHARED"]) / "corpus" / "fusion"
    for shared in (HERE.parent.parent.parent / "shared", Path("/work/shared")):
        if shared.is_dir():
            return shared / "corpus" / "fusion"
    return HERE.parent.parent.parent / "shared" / "corpus" / "fusion"


@dataclass(frozen=True)
class PassRunner:
    name: str
    run: Callable[[Program, Context, dict], bool | None]
    config: Callable[[dict], GpuConfig | None]
    pipeline: str = "legacy"
    backend: str = "gpu"


PASSES: dict[str, PassRunner] = {}


def register_pass(name: str, run, config=None, pipeline: str = "legacy", backend: str = "gpu") -> None:
    PASSES[name] = PassRunner(name, run, config or (lambda case: legacy_config(case)), pipeline, backend)


@dataclass
class CaseResult:
    case: dict
    ok: bool
    problems: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def name(self) -> str:
        return case_id(self.case)


def case_id(case: dict) -> str:
    return f"{case['pass']}::{case['test']}"


def load_manifest() -> list[dict]:
    path = corpus_dir() / "MANIFEST.jsonl"
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_known_failures() -> dict[str, str]:
    """case id → reason, from known_failures.tsv (columns: case, reason)."""
    if not KNOWN_FAILURES.exists():
        return {}
    out = {}
    with open(KNOWN_FAILURES, newline="") as fh:
        for row in csv.reader((line for line in fh if line.strip() and not line.startswith("#")), delimiter="\t"):
            if len(row) >= 2:
                out[row[0]] = row[1]
    return out


def runnable(case: dict) -> bool:
    """Non-manual cases of passes that have a runner."""
    expect = case["expect"]
    if case["pass"] not in PASSES:
        return False
    asserted = {k for k in expect if k not in ("manual", "assertion_text", "pass_options", "run_mode",
                                               "pre_passes", "filecheck_on")}
    return not expect.get("manual") and bool(asserted)


# ------------------------------------------------------------------------------------------
# Running one case
# ------------------------------------------------------------------------------------------


def legacy_config(case: dict, **changes) -> GpuConfig:
    """The A6000 unit-test device and XLA 2024, with the emitter level some fixtures set."""
    cfg = GpuConfig(test_device(), era="2024")
    if case.get("test") in _EMITTER_LEVEL_3 or case.get("fixture") in _EMITTER_LEVEL_3:
        cfg = cfg.replace(mlir_emitter_level=3)
    return cfg.replace(**changes) if changes else cfg


#: Tests and fixtures that set xla_gpu_mlir_emitter_level=3 at XLA 76da7301
#: (docs/xla/legacy-gpu-pipeline.md §11.2, §11.3).
_EMITTER_LEVEL_3 = frozenset({"CostBasedMerge", "NoMergeBecauseTooManyBasicBlockSplits",
                              "TransposeMultiOutputFusionTest"})


def make_ctx(runner: PassRunner, case: dict) -> Context:
    ctx = make_context(Options(backend=runner.backend, pipeline=runner.pipeline))
    ctx.pipeline = runner.pipeline
    ctx.pass_name = runner.name
    cfg = runner.config(case)
    if cfg is not None:
        ctx.gpu_config = cfg
    return ctx


def run_case(case: dict) -> CaseResult:
    runner = PASSES[case["pass"]]
    path = corpus_dir() / case["file"]
    try:
        module = hlofuse.loads(path.read_text(), path=str(path))
        program = Program.from_module(module)
        ctx = make_ctx(runner, case)
        changed = runner.run(program, ctx, case)
        problems = check_expectations(case["expect"], program, changed)
        problems += _check_predicates(case["expect"], program, ctx)
    except Exception as err:  # a crash is a failure with its message, never a skip
        return CaseResult(case, False, error=f"{type(err).__name__}: {err}")
    return CaseResult(case, not problems, problems)


def run_all(cases: list[dict] | None = None) -> list[CaseResult]:
    cases = [c for c in (cases or load_manifest()) if runnable(c)]
    return [run_case(c) for c in cases]


# ------------------------------------------------------------------------------------------
# gpu_fusible predicates
# ------------------------------------------------------------------------------------------


def _predicate_table():
    from hlofuse.gpu.fusible import is_fusible_as_multi_output_fusion_root, is_input_fusible_reduction, \
        is_reduce_input_fusion
    from hlofuse.gpu.heroes import heroes_incompatibility, shapes_incompatibility
    from hlofuse.gpu.transposes import is_physically_transposing, transposes_minor_dimension
    from hlofuse.rules import Candidate, evaluate
    from hlofuse.rules.multi_output_fusion import PRODUCER_RULES

    def producer_mof_fusible(ctx, cfg, x):
        return evaluate(PRODUCER_RULES, Candidate(x, x, ctx)).allowed

    return {
        "TransposesMinorDimension": lambda ctx, cfg, x: transposes_minor_dimension(x),
        "IsPhysicallyTransposing": lambda ctx, cfg, x: is_physically_transposing(x),
        "IsReduceInputFusion": lambda ctx, cfg, x: is_reduce_input_fusion(x, cfg),
        "IsInputFusibleReduction": lambda ctx, cfg, x: is_input_fusible_reduction(x, cfg),
        "IsFusibleAsMultiOutputFusionRoot": lambda ctx, cfg, x: is_fusible_as_multi_output_fusion_root(x, cfg),
        "IsProducerMultiOutputFusible": producer_mof_fusible,
        "ShapesCompatibleForMultiOutputFusion": lambda ctx, cfg, a, b: shapes_incompatibility(a, b, cfg) is None,
        "FusionHeroesAreCompatible": lambda ctx, cfg, a, b: heroes_incompatibility(a, b, cfg) is None,
    }


def _check_predicates(expect: dict, program: Program, ctx: Context) -> list[str]:
    from hlofuse.gpu import gpu_config

    preds = expect.get("predicates") or []
    if not preds:
        return []
    table = _predicate_table()
    cfg = gpu_config(ctx)
    problems = []
    for p in preds:
        fn = table.get(p["predicate"])
        if fn is None:
            problems.append(f"predicate {p['predicate']} has no hlofuse counterpart")
            continue
        try:
            args = [select(program, a) for a in p["args"]]
        except SelectorError as err:
            problems.append(str(err))
            continue
        value = bool(fn(ctx, cfg, *args))
        if value != bool(p["value"]):
            problems.append(f"{p['predicate']}({', '.join(p['args'])}) = {value}, XLA says {p['value']}")
    return problems


# ------------------------------------------------------------------------------------------
# The pass table
# ------------------------------------------------------------------------------------------


def _run_predicates(program: Program, ctx: Context, case: dict) -> None:
    return None  # no pass runs: the expectations are about the input module


def _run_fusion_merger(program: Program, ctx: Context, case: dict) -> bool:
    from hlofuse.passes.fusion_merger import run

    return run(program, ctx)


def _run_multi_output_fusion(program: Program, ctx: Context, case: dict) -> bool:
    from hlofuse.passes.multi_output_fusion import run

    return run(program, ctx)


def _builtin() -> None:
    register_pass("gpu_fusible_predicate", _run_predicates)
    register_pass("fusion_merger", _run_fusion_merger)
    register_pass("multi_output_fusion", _run_multi_output_fusion)
    _optional("horizontal_loop_fusion", f"{__package__}._legacy_extra", "run_horizontal_loop_fusion")
    _optional("gpu_instruction_fusion", f"{__package__}._legacy_extra", "run_gpu_instruction_fusion")
    try:  # PriorityFusion's cases (jaxlib 0.10.2's XLA:GPU)
        from . import _priority
    except ImportError:
        pass
    else:
        _priority.register(register_pass)
    try:  # XLA:CPU's cases (cpu_instruction_fusion, transpose_folding) on the CPU backend
        from . import _cpu
    except ImportError:
        pass
    else:
        _cpu.register(register_pass)


def _optional(name: str, module: str, function: str) -> None:
    """Register a pass whose runner lives in another module, when that module imports."""
    import importlib

    try:
        fn = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError):
        return
    register_pass(name, fn)


_builtin()

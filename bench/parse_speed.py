#!/usr/bin/env python3
"""How fast hlofuse reads HLO text, and how much memory it takes.

    python bench/parse_speed.py                 # a generated 12 MB module + the largest sample dump
    python bench/parse_speed.py --mb 1,12,40 --repeat 3 --json
    python bench/parse_speed.py --xla-python /path/to/venv-with-jax/bin/python

The generated module looks like an optimised GPU dump of a large transformer, in XLA's long
form: hundreds of computations (loop and reduction fusions, while bodies and conditions,
reducers), instructions with metadata (op_name, stack_frame_id, source_file/source_line),
backend_config JSON, long tuples with /*index=N*/ marks, sharding, tiled layouts, and the
FileNames / FunctionNames / FileLocations / StackFrames tables of current JAX.  It is
deterministic (a seeded generator) and prints back from hlofuse character for character.

Reported: MB/s and instructions/s for the whole `hlofuse.loads`, the split into lexing+parsing
(Lark and its callbacks), assembly (names, computations, structural checks) and validation
(per-instruction checks), and memory in a fresh process that reads and parses the file (see
`measure_memory`): its whole-process peak, and the parse's own peak above what the process
held right before it, each also as a multiple of the file size.  XLA's own C++ parser reads
such text at about 25 MB/s on the 2-core machine these numbers were taken on.

XLA's parser (jaxlib's `hlo_module_from_text`, the C++ HloParser) is timed on the same files
in the same run, one process, when jaxlib can be imported: by this Python, or by the one
`--xla-python` names; the ratio hlofuse/XLA is of MB per CPU second, the steadier figure on a
shared machine.  hlofuse's cache of parsed modules is off here (HLOFUSE_NO_CACHE): this times
the parser.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

# Run by --xla-python's interpreter: XLA's C++ parser on a file, best of N, as JSON.
_XLA_PARSER = """
import json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
from jaxlib import _hlo
path, repeat = sys.argv[1], int(sys.argv[2])
with open(path, encoding="utf-8", newline="") as fh:
    text = fh.read()
wall, cpu = [], []
for _ in range(repeat):
    c, t = time.process_time(), time.perf_counter()
    module = _hlo.hlo_module_from_text(text)
    wall.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
    del module
import jaxlib
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "jaxlib": jaxlib.__version__}))
"""

# ------------------------------------------------------------------------------------------
# 1. The generated module
# ------------------------------------------------------------------------------------------

_FILES = ["/home/user/project/model/transformer.py", "/home/user/project/model/layers.py",
          "/home/user/project/train.py", "/usr/lib/python3/site-packages/flax/linen/module.py"]
_FUNCS = ["Transformer.__call__", "Block.__call__", "MLP.__call__", "Attention.__call__", "LayerNorm.__call__",
          "train_step", "loss_fn", "main", "<module>", "_call_wrapped_method"]
_UNARY = ["exponential", "tanh", "negate", "rsqrt", "log", "logistic", "sqrt", "abs"]
_BINARY = ["add", "multiply", "subtract", "maximum", "divide", "minimum"]


class _Gen:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.n = 0
        self.frames = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}.{self.n}"

    def meta(self, op_type: str, path: str) -> str:
        r = self.rng.random()
        op_name = f"jit(train_step)/jit(main)/transformer/{path}/{op_type}"
        if r < 0.70:
            fid = self.rng.randint(1, self.frames)
            return (f'metadata={{op_type="{op_type}" op_name="{op_name}" '
                    f'scheduling_name="{op_type}.{self.n}" stack_frame_id={fid}}}')
        if r < 0.85:
            return (f'metadata={{op_type="{op_type}" op_name="{op_name}" source_file="{_FILES[self.n % 3]}" '
                    f'source_line={self.rng.randint(10, 900)}}}')
        return f'metadata={{op_name="{op_name}"}}'

    def fusion_config(self, kind: str) -> str:
        warps = self.rng.choice([1, 2, 4, 8])
        tile = self.rng.choice([64, 128, 256, 512])
        return ('backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],'
                f'"fusion_backend_config":{{"kind":"{kind}","block_level_fusion_config":{{"num_warps":"{warps}",'
                f'"output_tiles":[{{"sizes":["1","{tile}"]}}],"num_ctas":1,"num_stages":1,"is_tma_allowed":false}}}},'
                '"force_earliest_schedule":false,"reification_cost":[],"device_type":"DEVICE_TYPE_INVALID"}')

    def gemm_config(self, m: int, k: int, n: int) -> str:
        return ('backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"gemm_backend_config":'
                '{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],'
                '"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},'
                '"alpha_imag":0,"precision_config":{"operand_precision":["DEFAULT","DEFAULT"],'
                f'"algorithm":"ALG_UNSET"}},"epilogue":"DEFAULT","lhs_stride":"{m * k}","rhs_stride":"{k * n}",'
                '"grad_x":false,"grad_y":false,"damax_output":false},"force_earliest_schedule":false,'
                '"reification_cost":[],"device_type":"DEVICE_TYPE_INVALID"}')


def _tuple_text(shapes: list[str]) -> str:
    return "(" + ", ".join(("/*index=%d*/" % i if i and i % 5 == 0 else "") + s for i, s in enumerate(shapes)) + ")"


def _operands(names: list[str]) -> str:
    return ", ".join(("/*index=%d*/" % i if i and i % 5 == 0 else "") + "%" + n for i, n in enumerate(names))


def _no_layout(shape: str) -> str:
    """Signature spelling: shapes without layouts (XLA prints signatures that way)."""
    out, depth = [], 0
    for ch in shape:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _computation(name: str, params: list[tuple[str, str]], lines: list[str], root_shape: str,
                 entry: bool = False) -> str:
    sig = ", ".join(f"{p}: {_no_layout(s)}" for p, s in params)
    head = ("ENTRY " if entry else "") + f"%{name} ({sig}) -> {_no_layout(root_shape)} {{"
    return head + "\n" + "\n".join("  " + line for line in lines) + "\n}\n"


def _layer(g: _Gen, i: int, batch: int, hidden: int) -> tuple[list[str], dict]:
    """One transformer-ish layer: reducers, a loop fusion, a reduction fusion, a while loop."""
    comps = []
    bh = f"f32[{batch},{hidden}]{{1,0:T(8,128)}}"
    bh_bf16 = f"bf16[{batch},{hidden}]{{1,0:T(8,128)(2,1)}}"
    h = f"f32[{hidden}]{{0:T(256)}}"
    b = f"f32[{batch}]{{0}}"
    path = f"layer_{i}"

    # reducers
    add = f"region_add.{i}"
    p, q = g.name("Arg_0"), g.name("Arg_1")
    r = g.name("add")
    comps.append(_computation(add, [(p, "f32[]"), (q, "f32[]")], [
        f"%{p} = f32[] parameter(0), {g.meta('reduce_sum', path)}",
        f"%{q} = f32[] parameter(1), {g.meta('reduce_sum', path)}",
        f"ROOT %{r} = f32[] add(%{p}, %{q}), {g.meta('reduce_sum', path)}",
    ], "f32[]"))
    mx = f"region_max.{i}"
    p, q = g.name("Arg_0"), g.name("Arg_1")
    r = g.name("maximum")
    comps.append(_computation(mx, [(p, "f32[]"), (q, "f32[]")], [
        f"%{p} = f32[] parameter(0)", f"%{q} = f32[] parameter(1)",
        f"ROOT %{r} = f32[] maximum(%{p}, %{q}), {g.meta('reduce_max', path)}",
    ], "f32[]"))

    # a loop fusion: a chain of elementwise ops over [batch, hidden]
    fused = f"fused_computation.{i}"
    p0, p1, p2 = g.name("param_0"), g.name("param_1"), g.name("param_2")
    lines = [f"%{p0} = {bh} parameter(0)", f"%{p1} = {h} parameter(1)", f"%{p2} = {bh_bf16} parameter(2)"]
    bc = g.name("broadcast")
    lines.append(f"%{bc} = {bh} broadcast(%{p1}), dimensions={{1}}, {g.meta('broadcast_in_dim', path)}")
    cv = g.name("convert")
    lines.append(f"%{cv} = {bh} convert(%{p2}), {g.meta('convert_element_type', path)}")
    cur, other = p0, bc
    for _ in range(g.rng.randint(8, 16)):
        if g.rng.random() < 0.4:
            op = g.rng.choice(_UNARY)
            nm = g.name(op.replace("-", "_"))
            lines.append(f"%{nm} = {bh} {op}(%{cur}), {g.meta(op, path + '/mlp')}")
        else:
            op = g.rng.choice(_BINARY)
            nm = g.name(op)
            lines.append(f"%{nm} = {bh} {op}(%{cur}, %{other}), {g.meta(op, path + '/mlp')}")
            other = g.rng.choice([other, cv, cur])
        cur = nm
    lines[-1] = "ROOT " + lines[-1]
    comps.append(_computation(fused, [(p0, bh), (p1, h), (p2, bh_bf16)], lines, bh))

    # a reduction fusion (kInput) with a reducer
    red = f"fused_reduce.{i}"
    p0 = g.name("param_0")
    c0, rd = g.name("constant"), g.name("reduce")
    comps.append(_computation(red, [(p0, bh)], [
        f"%{p0} = {bh} parameter(0)",
        f"%{c0} = f32[] constant(0)",
        f"ROOT %{rd} = {b} reduce(%{p0}, %{c0}), dimensions={{1}}, to_apply=%{add}, {g.meta('reduce_sum', path + '/ln')}",
    ], b))

    # a while loop over a 7-tuple state
    state = ["s32[]", bh, h, bh_bf16, b, h, bh]
    st = _tuple_text(state)
    body, cond = f"while_body.{i}", f"while_cond.{i}"
    arg = g.name("arg_tuple")
    lines = [f"%{arg} = {st} parameter(0), sharding={{{{replicated}}, {{devices=[2,1]<=[2]}}, {{replicated}}, "
             f"{{devices=[2,1]<=[2]}}, {{replicated}}, {{replicated}}, {{devices=[2,1]<=[2]}}}}"]
    gtes = []
    for k, s in enumerate(state):
        nm = g.name("get-tuple-element")
        lines.append(f"%{nm} = {s} get-tuple-element(%{arg}), index={k}")
        gtes.append(nm)
    one, inc = g.name("constant"), g.name("add")
    lines.append(f"%{one} = s32[] constant(1)")
    lines.append(f"%{inc} = s32[] add(%{gtes[0]}, %{one}), {g.meta('add', path + '/while/body')}")
    fu = g.name("loop_fusion")
    lines.append(f"%{fu} = {bh} fusion(%{gtes[1]}, %{gtes[2]}, %{gtes[3]}), kind=kLoop, calls=%{fused}, "
                 f"{g.meta('add', path + '/while/body/mlp')}, {g.fusion_config('__triton')}")
    rf = g.name("input_reduce_fusion")
    lines.append(f"%{rf} = {b} fusion(%{fu}), kind=kInput, calls=%{red}, {g.meta('reduce_sum', path + '/ln')}, "
                 f"{g.fusion_config('__triton_softmax')}")
    cp = g.name("copy")
    lines.append(f"%{cp} = {bh} copy(%{gtes[6]}), {g.meta('copy', path)}")
    tup = g.name("tuple")
    lines.append(f"ROOT %{tup} = {st} tuple({_operands([inc, fu, gtes[2], gtes[3], rf, gtes[5], cp])})")
    comps.append(_computation(body, [(arg, st)], lines, st))
    arg = g.name("arg_tuple")
    gt, lim, lt = g.name("get-tuple-element"), g.name("constant"), g.name("compare")
    comps.append(_computation(cond, [(arg, st)], [
        f"%{arg} = {st} parameter(0)",
        f"%{gt} = s32[] get-tuple-element(%{arg}), index=0",
        f"%{lim} = s32[] constant({g.rng.randint(2, 64)})",
        f"ROOT %{lt} = pred[] compare(%{gt}, %{lim}), direction=LT, {g.meta('lt', path + '/while/cond')}",
    ], "pred[]"))
    return comps, {"state": state, "body": body, "cond": cond, "add": add, "max": mx, "fused": fused}


def generate(target_bytes: int, seed: int = 0, batch: int = 512, hidden: int = 1024) -> str:
    """A realistic optimised GPU module of at least `target_bytes` bytes, deterministically."""
    g = _Gen(seed)
    header_tables, g.frames = _tables(g.rng)
    comps: list[str] = []
    entry_lines: list[str] = []
    size = 0
    bh = f"f32[{batch},{hidden}]{{1,0:T(8,128)}}"
    x = g.name("x")
    entry_params = [(x, bh)]
    entry_lines.append(f"%{x} = {bh} parameter(0), sharding={{devices=[2,1]<=[2]}}, {g.meta('x', 'input')}")
    cur = x
    i = 0
    while size < target_bytes:
        layer, info = _layer(g, i, batch, hidden)
        comps.extend(layer)
        size += sum(len(c) for c in layer)
        path = f"layer_{i}"
        w = g.name("w")
        entry_params.append((w, f"f32[{hidden}]{{0:T(256)}}"))
        lines = [f"%{w} = f32[{hidden}]{{0:T(256)}} parameter({len(entry_params) - 1}), {g.meta('w', path)}"]
        zero, cvt = g.name("constant"), g.name("convert")
        lines.append(f"%{zero} = s32[] constant(0)")
        lines.append(f"%{cvt} = bf16[{batch},{hidden}]{{1,0:T(8,128)(2,1)}} convert(%{cur}), {g.meta('convert', path)}")
        red = g.name("reduce")
        bvec = f"f32[{batch}]{{0}}"
        fzero = g.name("constant")
        lines.append(f"%{fzero} = f32[] constant(-inf)")
        lines.append(f"%{red} = {bvec} reduce(%{cur}, %{fzero}), dimensions={{1}}, to_apply=%{info['max']}, "
                     f"{g.meta('reduce_max', path)}")
        init = g.name("tuple")
        st = _tuple_text(info["state"])
        lines.append(f"%{init} = {st} tuple({_operands([zero, cur, w, cvt, red, w, cur])})")
        wh = g.name("while")
        lines.append(f"%{wh} = {st} while(%{init}), condition=%{info['cond']}, body=%{info['body']}, "
                     f'{g.meta("while", path)}, backend_config={{"known_trip_count":{{"n":"16"}}}}')
        out = g.name("get-tuple-element")
        lines.append(f"%{out} = {bh} get-tuple-element(%{wh}), index=1")
        ar = g.name("all-reduce")
        lines.append(f"%{ar} = {bh} all-reduce(%{out}), channel_id={i + 1}, replica_groups=[1,2]<=[2], "
                     f"use_global_device_ids=true, to_apply=%{info['add']}, {g.meta('psum', path)}, "
                     f'backend_config={{"operation_queue_id":"0","wait_on_operation_queues":[],'
                     f'"collective_backend_config":{{"is_sync":true,"no_parallel_custom_call":false}}}}')
        gemm = g.name("custom-call")
        lines.append(f"%{gemm} = (f32[{batch},{hidden}]{{1,0}}, s8[4194304]{{0}}) custom-call(%{ar}, %{ar}), "
                     f'custom_call_target="__cublas$gemm", {g.meta("dot_general", path + "/attn")}, '
                     f"{g.gemm_config(batch, hidden, hidden)}")
        gout = g.name("get-tuple-element")
        lines.append(f"%{gout} = f32[{batch},{hidden}]{{1,0}} get-tuple-element(%{gemm}), index=0")
        cur = g.name("bitcast")
        lines.append(f"%{cur} = {bh} bitcast(%{gout})")
        entry_lines.extend(lines)
        size += sum(len(line) + 3 for line in lines)
        i += 1
    entry_lines[-1] = "ROOT " + entry_lines[-1]
    entry = _computation("main.1", entry_params, entry_lines, bh, entry=True)
    layout = "{(" + ", ".join(s for _, s in entry_params) + ")->" + bh + "}"
    header = (f"HloModule jit_train_step, is_scheduled=true, entry_computation_layout={layout}, "
              "allow_spmd_sharding_propagation_to_output={true}, num_partitions=2, "
              'frontend_attributes={fingerprint_before_lhs="5f1e2a"}')
    return header + "\n\n" + header_tables + "\n\n" + "\n".join(comps + [entry]) + "\n"


def _tables(rng: random.Random) -> tuple[str, int]:
    """FileNames ... StackFrames as current JAX prints them (parent ids printed one higher)."""
    n_locs, n_frames = 300, 600
    lines = ["FileNames"] + [f'{k + 1} "{f}"' for k, f in enumerate(_FILES)]
    lines += ["", "FunctionNames"] + [f'{k + 1} "{f}"' for k, f in enumerate(_FUNCS)]
    lines += ["", "FileLocations"]
    for k in range(n_locs):
        line = rng.randint(10, 900)
        col = rng.randint(4, 40)
        lines.append(f"{k + 1} {{file_name_id={rng.randint(1, len(_FILES))} function_name_id="
                     f"{rng.randint(1, len(_FUNCS))} line={line} end_line={line} column={col} end_column={col + 20}}}")
    lines += ["", "StackFrames"]
    for k in range(n_frames):
        parent = rng.randint(0, k)  # 0: a root frame
        lines.append(f"{k + 1} {{file_location_id={rng.randint(1, n_locs)} parent_frame_id={parent + 1}}}")
    return "\n".join(lines) + "\n", n_frames


# ------------------------------------------------------------------------------------------
# 2. Measurements
# ------------------------------------------------------------------------------------------


def _stages(text: str) -> dict:
    """Time the three stages of hlofuse.loads separately (same code path as loads)."""
    from hlofuse import parse as P
    from hlofuse.validate import check_module

    t0 = time.perf_counter()
    raw = P.run_parser(text, "start")
    t1 = time.perf_counter()
    module = P.assemble(raw, text, None)
    t2 = time.perf_counter()
    module = check_module(module, text)
    t3 = time.perf_counter()
    return {"parse_s": t1 - t0, "assemble_s": t2 - t1, "validate_s": t3 - t2, "total_s": t3 - t0,
            "instructions": module.instruction_count, "computations": len(module.computations)}


def _best_of(text: str, repeat: int, jobs: str) -> tuple[list[float], list[float]]:
    """Wall-clock seconds per parse, and CPU seconds (this process plus its forked reader):
    on a shared machine the CPU time is the steadier figure."""
    import hlofuse

    os.environ["HLOFUSE_JOBS"] = jobs
    runs, cpu = [], []
    try:
        for _ in range(repeat):
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            c, t = time.process_time(), time.perf_counter()
            module = hlofuse.loads(text)
            runs.append(time.perf_counter() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(time.process_time() - c + (after.ru_utime + after.ru_stime)
                       - (children.ru_utime + children.ru_stime))
            del module
    finally:
        os.environ.pop("HLOFUSE_JOBS", None)
    return runs, cpu


def measure_speed(text: str, repeat: int) -> dict:
    import hlofuse  # noqa: F401
    from hlofuse.parse import PARALLEL_MIN_BYTES, parser

    t = time.perf_counter()
    parser()
    load_s = time.perf_counter() - t
    one, one_cpu = _best_of(text, repeat, "1")
    two, two_cpu = _best_of(text, repeat, "2") if len(text) >= PARALLEL_MIN_BYTES and hasattr(os, "fork") else ([], [])
    stages = min((_stages(text) for _ in range(max(1, repeat // 2))), key=lambda s: s["total_s"])
    mb = len(text.encode()) / 1e6
    best = min(one + two)
    report = {
        "mb": round(mb, 2), "grammar_load_s": round(load_s, 3),
        "one_process_s": [round(r, 3) for r in one], "one_process_mb_per_s": round(mb / min(one), 2),
        "one_process_cpu_s": round(min(one_cpu), 3), "one_process_mb_per_cpu_s": round(mb / min(one_cpu), 2),
        "best_s": round(best, 3), "mb_per_s": round(mb / best, 2), "instructions": stages["instructions"],
        "computations": stages["computations"], "instructions_per_s": round(stages["instructions"] / best),
        "stages_s": {k: round(stages[k], 3) for k in ("parse_s", "assemble_s", "validate_s")},
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }
    if two:
        report["two_processes_s"] = [round(r, 3) for r in two]
        report["two_processes_mb_per_s"] = round(mb / min(two), 2)
        report["two_processes_cpu_s"] = round(min(two_cpu), 3)
    return report


# Run in a fresh process by measure_memory.  Linux keeps the resident high-water mark (VmHWM)
# of a process; writing 5 to /proc/self/clear_refs resets it to the current size, so the peak of
# the parse alone is read without the imports and the reading of the file before it.
_MEMORY_PROBE = """
import gc, json, os, resource, sys
sys.path.insert(0, %r)
os.environ["HLOFUSE_NO_CACHE"] = "1"
def status(key):
    try:
        for line in open("/proc/self/status"):
            if line.startswith(key): return int(line.split()[1])
    except OSError: pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss if key == "VmHWM:" else None
def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as fh: fh.write("5")
        return True
    except OSError: return False
import time
out = {"start_kb": status("VmRSS:")}
cpu = time.process_time()
import hlofuse
out["import_cpu_s"] = time.process_time() - cpu
out["imported_kb"] = status("VmRSS:")
cpu = time.process_time()
m = hlofuse.loads("HloModule m\\nENTRY e { ROOT p = f32[] parameter(0) }")  # grammar tables, lazy imports
out["first_use_cpu_s"] = time.process_time() - cpu  # (patterns compiled, tables loaded: once a process)
del m
out["ready_kb"] = status("VmRSS:")
out["modules_imported"] = sorted(n for n in sys.modules if not n.startswith("_") and "." not in n)
text = open(sys.argv[1], encoding="utf-8", newline="").read()
gc.collect()
out["before_parse_kb"] = status("VmRSS:")
out["peak_before_parse_kb"] = status("VmHWM:")
out["reset"] = reset_peak()
module = hlofuse.loads(text)
out["parse_peak_kb"] = status("VmHWM:")
out["after_parse_kb"] = status("VmRSS:")
out["child_peak_kb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps(out))
"""


def measure_memory(path: str) -> dict:
    """Resident memory of a fresh process that imports hlofuse, reads the file and parses it
    (one process: HLOFUSE_JOBS=1), from /proc/self/status:

    - whole-process peak: the largest resident size of that process at any time (VmHWM), the
      interpreter, the imports and the file's text included;
    - parse peak: the largest resident size while `hlofuse.loads` ran (VmHWM reset to the current
      size right before it), minus the size right before it: what parsing itself costs;
    - kept: what the process holds after the parse beyond what it held before (the module);
    - the CPU seconds of `import hlofuse` and of the first parse (of a tiny module): what every
      process pays once, before any parse (the timed parses leave it out, as XLA's do).

    Where VmHWM cannot be reset (no /proc), the parse peak is taken from the whole-process
    high-water mark, which then counts the reading of the file too."""
    env = {**os.environ, "HLOFUSE_JOBS": "1"}
    out = subprocess.run([sys.executable, "-c", _MEMORY_PROBE % str(HERE.parent), path], capture_output=True,
                         text=True, check=True, env=env)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    size = os.path.getsize(path)
    peak_kb = max(r["parse_peak_kb"], r["peak_before_parse_kb"]) if r["reset"] else r["parse_peak_kb"]
    parse_kb = r["parse_peak_kb"] - r["before_parse_kb"]
    return {"rss_ready_mb": round(r["ready_kb"] / 1024, 1),
            "rss_before_parse_mb": round(r["before_parse_kb"] / 1024, 1),
            "peak_rss_mb": round(peak_kb / 1024, 1), "peak_over_file": round(peak_kb * 1024 / size, 2),
            "parse_peak_mb": round(parse_kb / 1024, 1), "parse_peak_over_file": round(parse_kb * 1024 / size, 2),
            "kept_mb": round((r["after_parse_kb"] - r["before_parse_kb"]) / 1024, 1),
            "parse_peak_exact": r["reset"], "modules_imported": r["modules_imported"],
            "import_cpu_s": round(r["import_cpu_s"], 3), "first_use_cpu_s": round(r["first_use_cpu_s"], 3)}


def xla_python(requested: str | None) -> str | None:
    """The interpreter that runs XLA's parser: --xla-python, else this one when it has jaxlib."""
    if requested:
        return requested
    probe = subprocess.run([sys.executable, "-c", "from jaxlib import _hlo; _hlo.hlo_module_from_text"],
                           capture_output=True)
    return sys.executable if probe.returncode == 0 else None


def measure_xla(python: str, path: str, repeat: int) -> dict:
    """XLA's C++ parser on `path` in a process of `python` (one process, best of `repeat`)."""
    out = subprocess.run([python, "-c", _XLA_PARSER, path, str(repeat)], capture_output=True, text=True)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"XLA's parser failed: {last[:300]}"}
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    mb = os.path.getsize(path) / 1e6
    return {"xla_mb_per_s": round(mb / min(figures["wall_s"]), 2), "xla_mb_per_cpu_s": round(mb / min(figures["cpu_s"]), 2),
            "xla_cpu_s": round(min(figures["cpu_s"]), 3), "jaxlib": figures["jaxlib"]}


def largest_sample_dump() -> Path | None:
    from hlofuse.dumpdir import scan

    best = None
    root = HERE.parent / "sample_dumps"
    for folder, dirs, _ in os.walk(root):
        dirs.sort()
        for f in scan(folder):
            if f.stage == "priority_fusion_dump":
                continue
            if best is None or f.path.stat().st_size > best.stat().st_size:
                best = f.path
    return best


def repeats(mb: float, least: int) -> int:
    """Parses of an input of `mb` MB, by each parser: at least `least`, and about 10 MB's worth
    for small inputs (a 1 MB parse takes some 50 ms; on a shared machine the best of three such
    is as noisy as the load)."""
    return max(least, min(12, math.ceil(10 / max(mb, 0.01))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", default="12", help="size of the generated module in MB, or sizes separated by commas "
                                               "(1,12,40: one module of each) (default 12)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="parses per input, by hlofuse and by XLA; the best counts (default 3; more for inputs "
                         "under 4 MB, see `repeats`)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", metavar="PATH", help="also write the generated module here")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--xla-python", metavar="PYTHON",
                    help="a Python with jaxlib, to time XLA's parser beside hlofuse's (default: this one if it "
                         "has jaxlib)")
    a = ap.parse_args(argv)
    os.environ["HLOFUSE_NO_CACHE"] = "1"  # the parser is timed, not hlofuse.result_cache
    xla = xla_python(a.xla_python)

    import hlofuse

    report = {}
    sizes = [float(mb) for mb in a.mb.split(",")]
    for mb in sizes:
        t = time.perf_counter()
        text = generate(int(mb * 1e6), a.seed)
        gen_s = time.perf_counter() - t
        key = "generated" if len(sizes) == 1 else f"generated_{mb:g}mb"
        with tempfile.TemporaryDirectory() as tmp:
            path = a.keep if a.keep and len(sizes) == 1 else os.path.join(tmp, "generated.hlo")
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
            memory = measure_memory(path)
            n = repeats(len(text) / 1e6, a.repeat)
            report[key] = {**measure_speed(text, n), **memory, "generate_s": round(gen_s, 2), "repeats": n}
            if xla:
                report[key].update(measure_xla(xla, path, n))
        report[key]["prints_back_exactly"] = hlofuse.dumps(hlofuse.loads(text)) == text
        del text
    sample = largest_sample_dump()
    if sample is not None:
        stext = sample.read_text(encoding="utf-8")
        memory = measure_memory(str(sample))
        n = repeats(len(stext) / 1e6, a.repeat)
        report["largest_sample_dump"] = {"path": str(sample.relative_to(HERE.parent)),
                                         **measure_speed(stext, n), **memory, "repeats": n}
        if xla:
            report["largest_sample_dump"].update(measure_xla(xla, str(sample), n))
    report["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    try:
        import lark

        report["machine"]["lark"] = lark.__version__
    except ImportError:  # pragma: no cover
        pass
    if a.json:
        print(json.dumps(report, indent=2))
        return 0
    for key, r in report.items():
        if key == "machine":
            continue
        label = r.get("path", f"generated module ({r['mb']} MB)")
        print(f"{label}:")
        print(f"  {r['mb']} MB, {r['computations']} computations, {r['instructions']} instructions")
        print(f"  one process, best of {r['repeats']}: {r['one_process_s']} s  ->  {r['one_process_mb_per_s']} "
              f"MB/s (CPU {r['one_process_cpu_s']} s  ->  {r['one_process_mb_per_cpu_s']} MB per CPU second)")
        if "two_processes_s" in r:
            print(f"  two processes: {r['two_processes_s']} s  ->  {r['two_processes_mb_per_s']} MB/s "
                  f"(CPU of both {r['two_processes_cpu_s']} s)")
        print(f"  best: {r['best_s']} s  ->  {r['mb_per_s']} MB/s, {r['instructions_per_s']} instructions/s "
              f"(load average then: {r['load_average']})")
        st = r["stages_s"]
        print(f"  stages: lexing+parsing {st['parse_s']} s, assembly {st['assemble_s']} s, "
              f"validation {st['validate_s']} s")
        print(f"  memory: whole-process peak {r['peak_rss_mb']} MB = {r['peak_over_file']}x the file (the "
              f"interpreter and imports {r['rss_ready_mb']} MB, then the text); the parse's own peak "
              f"{r['parse_peak_mb']} MB = {r['parse_peak_over_file']}x the file"
              f"{'' if r['parse_peak_exact'] else ' (no /proc: counted from the whole-process peak)'}, "
              f"{r['kept_mb']} MB kept as the module")
        print(f"  once a process (not in the figures above): import {r['import_cpu_s']} s CPU, first parse "
              f"(a tiny module: patterns compiled, tables loaded) {r['first_use_cpu_s']} s CPU")
        if "xla_mb_per_cpu_s" in r:
            print(f"  XLA's parser (jaxlib {r['jaxlib']}, one process): {r['xla_mb_per_s']} MB/s, CPU "
                  f"{r['xla_cpu_s']} s -> {r['xla_mb_per_cpu_s']} MB per CPU second; hlofuse in one process "
                  f"reaches {r['one_process_mb_per_cpu_s'] / r['xla_mb_per_cpu_s']:.2f}x of it")
        elif "error" in r:
            print(f"  {r['error']}")
        if "prints_back_exactly" in r:
            print(f"  prints back exactly: {r['prints_back_exactly']}")
    if not xla:
        print("XLA's parser not timed: no jaxlib here (--xla-python PYTHON names a Python that has it)")
    print(f"machine: {report['machine']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

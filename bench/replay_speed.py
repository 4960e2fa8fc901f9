"""How replay time grows with module size: each fusion pipeline (gpu/legacy, gpu/priority,
cpu) on generated modules of about 1k, 10k and 100k instructions.

A generated module looks like XLA's module right before its fusion passes on today's dumps:
no fusions yet, a training-step-like while loop whose body holds half of the work and whose
state is one long tuple (a counter, the activations, one weight per layer), the other half in
the entry computation, and a long output tuple.  The work is a chain of layers; every layer
reads the previous layer's result (so the module is one connected computation, as XLA sees a
real model) and holds the patterns real models are made of: a matrix multiplication (a cuBLAS
custom call on GPU, a `dot` on CPU), many small elementwise chains, broadcasts of scalar
constants, a softmax-like row normalisation (reductions broadcast back), a column reduction,
a transpose, slices and a concatenate, a select, bitcasts, and small independent side outputs.
Like XLA after CSE, a few values are shared by the whole module: a big constant table and a
broadcast constant read by every layer (thousands of users at 100k), and the scalar constants
of the reductions.  Every instruction carries op_name/source metadata, as jax's do.

Times are seconds of `hlofuse.pipeline.replay` after parsing: CPU seconds (steadier on a
shared machine) and wall-clock, and µs of CPU per instruction.  Run one pipeline or all:

    python bench/replay_speed.py [--pipeline legacy|priority|cpu|all] [--sizes 1000,10000,100000]
                                 [--repeat 1] [--explain]

`--explain` also times `hlofuse explain`'s work on the replayed module (every kernel boundary
explained through the pipeline's explain_boundary).

Measured on the 2-core development machine (CPU seconds of the replay after parsing, µs of
CPU per instruction in brackets; one run of all three pipelines, 2026-11-24):
    gpu/legacy     1k 0.30 s (303)   10k 2.0 s (195)   100k 23 s (226)
    gpu/priority   1k 0.49 s (491)   10k 5.3 s (531)   100k 55 s (546)
    cpu            1k 0.07 s (71)    10k 0.77 s (77)   100k 8.9 s (89)
The same machine's speed varies by a third from one hour to the next (on 2026-11-22 the code
of then took 89-127 s for legacy 100k; on 2026-11-24, 44-57 s): compare only runs made back
to back.  Back to back with the code before the 2026-11-24 round (225bd99), 100k took 44 ->
31 s on legacy (twice: 44.9 -> 31.2, 43.9 -> 30.9), 102 -> 55 s on priority, 12.2 -> 8.9 s
on cpu, with the same kernels and decisions.  Later that day the legacy lists were made to run
once, as jax 0.4.35 runs them (XLA's fixed point is sliced off, docs/xla/legacy-gpu-pipeline.md
§1.2): legacy 100k 31 -> 23 s, with other kernels (16,455, was 14,920) and fewer decisions
(274k, was 367k).  Explaining every boundary (`--explain`) adds 2-3 s per 10k instructions.

The compiled core (hlofuse/native, `make native`) runs these replays by default when built;
`HLOFUSE_PURE_PYTHON=1` runs the Python modules.  Back to back on this machine, 2026-11-26
(CPU s, Python modules -> compiled core, load 1.3-3): 10k priority 3.98 -> 2.43, legacy 2.47 ->
1.53, cpu 0.90 -> 0.58; 100k priority 33.1 -> 26.5, legacy 23.1 -> 19.2, cpu 8.56 -> 6.35.
Compiling the same modules with Cython instead (pure-Python mode, annotations not enforced)
gained 6-14% at 10k.

What made it so, 2026-11-24: a replay leaves no reference cycles (the program is taken apart
when the result is built; recursive closures and scratch fusions left cycles per call), and
what survives is handed to the oldest generation without a collection (the first collection
after a 100k replay took ~5 s); decisions built once per kept answer with positional fields;
source lines remembered per metadata text; rule lists compiled once; a program-wide edit count
for the fixed point and program-wide answers (computation order, fusible computations); GPU
configs keyed by a token; in-place rules asked only of consumers that update in place; name
uniquing without regular expressions; cheaper cost-model arithmetic (float32 roundings skipped
only where they cannot change a value) and merger candidates; CSE/DCE and horizontal fusion
skipping walks that cannot change anything; priority fusion analysing most producer-consumer
pairs without building them (heroes found across the boundary, as the legacy model does) and
its read bandwidths remembered per device and grid.  Before (2026-11-22): the collector paused during
a replay, post orders and analysis answers kept per computation version, wide nodes edited
without scans, multi-output fusion's reachability raised only along new edges, idle
fixed-point stages not rerun.  What is left is flat: rule evaluation (~30 rules per fused
pair), the cost model, graph edits (cloning, naming) and building 367k decisions.
"""

from __future__ import annotations

import argparse
import sys
import time

PIPELINES = {
    "legacy": {"backend": "gpu", "pipeline": "legacy", "gpu": "rtx2080ti"},
    "priority": {"backend": "gpu", "pipeline": "priority", "gpu": "rtx2080ti"},
    "cpu": {"backend": "cpu", "pipeline": "cpu"},
}

_GEMM_CONFIG = ('{"operation_queue_id":"0","wait_on_operation_queues":[],"gemm_backend_config":{"alpha_real":1,'
                '"alpha_imag":0,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],'
                '"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},'
                '"precision_config":{"operand_precision":["DEFAULT","DEFAULT"],"algorithm":"ALG_UNSET"},'
                '"epilogue":"DEFAULT","damax_output":false,"lhs_stride":"16384","rhs_stride":"4096",'
                '"grad_x":false,"grad_y":false},"force_earliest_schedule":false}')

# One layer: x f32[256,64] in, y{i} f32[256,64] out; {w} its f32[64,64] weight, {b} its f32[64]
# bias; side outputs o{i} (f32[64]) and z{i} (f32[256,64]).  `{matmul}` is the backend's.
_LAYER = """\
  {matmul}
  bb{i} = f32[256,64]{{1,0}} broadcast({b}), dimensions={{1}}{md}
  a{i} = f32[256,64]{{1,0}} add(h{i}, bb{i}){md}
  sc{i} = f32[256,64]{{1,0}} multiply(a{i}, {p}half){md}
  th{i} = f32[256,64]{{1,0}} tanh(sc{i}){md}
  g{i} = f32[256,64]{{1,0}} multiply(th{i}, {p}table){md}
  mx{i} = f32[256]{{0}} reduce(g{i}, {p}ninf), dimensions={{1}}, to_apply=max{md}
  mxb{i} = f32[256,64]{{1,0}} broadcast(mx{i}), dimensions={{0}}{md}
  d{i} = f32[256,64]{{1,0}} subtract(g{i}, mxb{i}){md}
  e{i} = f32[256,64]{{1,0}} exponential(d{i}){md}
  s{i} = f32[256]{{0}} reduce(e{i}, {p}zero), dimensions={{1}}, to_apply=add{md}
  sb{i} = f32[256,64]{{1,0}} broadcast(s{i}), dimensions={{0}}{md}
  n{i} = f32[256,64]{{1,0}} divide(e{i}, sb{i}){md}
  pos{i} = pred[256,64]{{1,0}} compare(n{i}, {p}eps), direction=GT{md}
  r{i} = f32[256,64]{{1,0}} select(pos{i}, n{i}, {p}eps){md}
  sl1{i} = f32[256,32]{{1,0}} slice(r{i}), slice={{[0:256], [0:32]}}{md}
  sl2{i} = f32[256,32]{{1,0}} slice(r{i}), slice={{[0:256], [32:64]}}{md}
  ng{i} = f32[256,32]{{1,0}} negate(sl2{i}){md}
  k{i} = f32[256,64]{{1,0}} concatenate(ng{i}, sl1{i}), dimensions={{1}}{md}
  y{i} = f32[256,64]{{1,0}} add(k{i}, {x}){md}
  cs{i} = f32[64]{{0}} reduce(y{i}, {p}zero), dimensions={{0}}, to_apply=add{md}
  cb{i} = f32[1,64]{{1,0}} bitcast(cs{i}){md}
  ob{i} = f32[1,64]{{1,0}} bitcast({b}){md}
  o{i} = f32[1,64]{{1,0}} multiply(cb{i}, ob{i}){md}
  c{i} = f32[] constant({k}){md}
  cbc{i} = f32[64,256]{{1,0}} broadcast(c{i}), dimensions={{}}{md}
  tr{i} = f32[64,256]{{1,0}} transpose(n{i}), dimensions={{1,0}}{md}
  z{i} = f32[64,256]{{1,0}} multiply(tr{i}, cbc{i}){md}
"""
_GPU_MATMUL = ("mm{i} = (f32[256,64]{{1,0}}, s8[65536]{{0}}) custom-call({x}, {w}), "
               "custom_call_target=\"__cublas$gemm\"{md}, backend_config=" + _GEMM_CONFIG.replace("{", "{{").replace("}", "}}")
               + "\n  h{i} = f32[256,64]{{1,0}} get-tuple-element(mm{i}), index=0{md}")
_CPU_MATMUL = "h{i} = f32[256,64]{{1,0}} dot({x}, {w}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{md}"

_SHARED = """\
  {p}halfc = f32[] constant(0.5)
  {p}half = f32[256,64]{{1,0}} broadcast({p}halfc), dimensions={{}}
  {p}table = f32[256,64]{{1,0}} constant({{...}})
  {p}zero = f32[] constant(0)
  {p}ninf = f32[] constant(-inf)
  {p}epsc = f32[] constant(1e-06)
  {p}eps = f32[256,64]{{1,0}} broadcast({p}epsc), dimensions={{}}
"""

_REDUCERS = """\
add {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT s = f32[] add(l, r)
}

max {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT m = f32[] maximum(l, r)
}
"""

_W = "f32[64,64]{1,0}"
_B = "f32[64]{0}"
_X = "f32[256,64]{1,0}"


def _layers(first: int, count: int, x: str, weight, matmul: str, prefix: str) -> tuple[list[str], str, list[str]]:
    lines, outs = [], []
    for i in range(first, first + count):
        w, b = weight(i)
        md = f', metadata={{op_name="jit(step)/layer{i}" source_file="model.py" source_line={100 + i % 400}}}'
        text = _LAYER.format(matmul=matmul.format(i=i, x=x, w=w, md=md), i=i, x=x, w=w, b=b, md=md,
                             k=f"{1 + i % 7}.5", p=prefix)
        lines.append(text)
        x = f"y{i}"
        outs += [f"o{i}", f"z{i}"]
    return lines, x, outs


def generate(instructions: int, backend: str = "gpu") -> str:
    """HLO text of a before-fusion module of about `instructions` instructions for `backend`
    (gpu: cuBLAS custom calls for the matrix multiplications; cpu: dots)."""
    fixed = _count(_module(2, backend))
    per_layer = (_count(_module(4, backend)) - fixed) / 2
    return _module(max(2, 2 + round((instructions - fixed) / per_layer)), backend)


def _count(text: str) -> int:
    return text.count(" = ")


def _module(layers: int, backend: str) -> str:
    matmul = _GPU_MATMUL if backend == "gpu" else _CPU_MATMUL
    in_loop = layers // 2
    in_entry = layers - in_loop
    # -- the loop body: state (i, x, w_0..w_{n-1}, b_0..b_{n-1}) -------------------------
    state = ["s32[]", _X] + [_W] * in_loop + [_B] * in_loop
    state_shape = "(" + ", ".join(state) + ")"
    body = [f"  st = {state_shape} parameter(0)",
            "  i = s32[] get-tuple-element(st), index=0",
            f"  x = {_X} get-tuple-element(st), index=1"]
    for j in range(in_loop):
        body.append(f"  lw{j} = {_W} get-tuple-element(st), index={2 + j}")
        body.append(f"  lb{j} = {_B} get-tuple-element(st), index={2 + in_loop + j}")
    lines, y, outs = _layers(0, in_loop, "x", lambda i: (f"lw{i}", f"lb{i}"), matmul, "l_")
    body += lines
    body += ["  one = s32[] constant(1)", "  i1 = s32[] add(i, one)",
             # the side outputs feed the next iteration's state (a scan keeps them), summed in
             f"  side = f32[1,64]{{1,0}} add(o0, o{in_loop - 1})",
             f"  sideb = {_B} bitcast(side)",
             f"  nb = {_B} add(lb0, sideb)"]
    body.append(f"  ROOT nst = {state_shape} tuple(i1, {y}, "
                + ", ".join(f"lw{j}" for j in range(in_loop)) + ", nb, "
                + ", ".join(f"lb{j}" for j in range(1, in_loop)) + ")")
    cond = ["  cst = " + state_shape + " parameter(0)",
            "  ci = s32[] get-tuple-element(cst), index=0",
            "  n = s32[] constant(100)",
            "  ROOT lt = pred[] compare(ci, n), direction=LT"]
    # -- the entry: parameters, the loop, then the other layers -------------------------
    entry = [f"  x0 = {_X} parameter(0)", "  i0 = s32[] constant(0)"]
    param = 1
    for j in range(in_loop):
        entry.append(f"  pw{j} = {_W} parameter({param})")
        entry.append(f"  pb{j} = {_B} parameter({param + 1})")
        param += 2
    entry.append(f"  init = {state_shape} tuple(i0, x0, " + ", ".join(f"pw{j}" for j in range(in_loop)) + ", "
                 + ", ".join(f"pb{j}" for j in range(in_loop)) + ")")
    entry.append(f"  loop = {state_shape} while(init), condition=cond, body=body, "
                 'backend_config={"known_trip_count":{"n":"100"}}')
    entry.append(f"  lx = {_X} get-tuple-element(loop), index=1")
    entry.append(_SHARED.format(p="").rstrip("\n"))
    ew = {}
    for i in range(in_loop, layers):
        ew[i] = (f"ew{i}", f"eb{i}")
        entry.append(f"  ew{i} = {_W} parameter({param})")
        entry.append(f"  eb{i} = {_B} parameter({param + 1})")
        param += 2
    lines, y, outs = _layers(in_loop, in_entry, "lx", lambda i: ew[i], matmul, "")
    entry += lines
    out_shapes = [_X] + ["f32[1,64]{1,0}" if o.startswith("o") else "f32[64,256]{1,0}" for o in outs]
    entry.append(f"  ROOT out = ({', '.join(out_shapes)}) tuple({y}, {', '.join(outs)})")
    return "\n".join([
        "HloModule generated, entry_computation_layout={()->()}",
        "",
        _REDUCERS,
        "cond {", *cond, "}", "",
        "body {", _SHARED.format(p="l_").rstrip("\n"), *body, "}", "",
        "ENTRY main {", *entry, "}", ""])


def generate_for(pipeline: str, instructions: int) -> str:
    """The generated module for one of PIPELINES."""
    return generate(instructions, PIPELINES[pipeline]["backend"])


def measure(pipeline: str, instructions: int, repeat: int = 1, explain: bool = False) -> dict:
    import hlofuse
    from hlofuse.pipeline import Options, replay

    text = generate_for(pipeline, instructions)
    start = time.perf_counter()
    module = hlofuse.loads(text)
    parse = time.perf_counter() - start
    best = best_cpu = None
    result = None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = replay(module, Options(**PIPELINES[pipeline]))
        took, took_cpu = time.perf_counter() - start, time.process_time() - start_cpu
        best = took if best is None else min(best, took)
        best_cpu = took_cpu if best_cpu is None else min(best_cpu, took_cpu)
    row = {"pipeline": pipeline, "instructions": module.instruction_count, "parse_s": parse, "replay_s": best,
           "cpu_s": best_cpu, "kernels": len(result.kernels), "decisions": len(result.decisions)}
    if explain:
        row.update(_explain_times(result, pipeline))
    return row


def _explain_times(result, pipeline: str) -> dict:
    """What `hlofuse explain` adds after the replay: every kernel boundary explained."""
    from hlofuse.explain import explain_result

    start, start_cpu = time.perf_counter(), time.process_time()
    explained = explain_result(result)
    return {"explain_s": time.perf_counter() - start, "explain_cpu_s": time.process_time() - start_cpu,
            "boundaries": len(explained.boundaries)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", default="all", choices=[*PIPELINES, "all"])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--explain", action="store_true", help="also time explaining every kernel boundary")
    args = parser.parse_args(argv)
    pipelines = list(PIPELINES) if args.pipeline == "all" else [args.pipeline]
    print(f"{'pipeline':>9} {'instructions':>12} {'parse s':>8} {'cpu s':>7} {'wall s':>7} {'us/instr':>9} "
          f"{'kernels':>8} {'decisions':>10}" + (f" {'explain cpu s':>14}" if args.explain else ""))
    for pipeline in pipelines:
        for size in (int(s) for s in args.sizes.split(",")):
            row = measure(pipeline, size, args.repeat, args.explain)
            per = row["cpu_s"] / row["instructions"] * 1e6
            line = (f"{pipeline:>9} {row['instructions']:>12} {row['parse_s']:>8.2f} {row['cpu_s']:>7.2f} "
                    f"{row['replay_s']:>7.2f} {per:>9.1f} {row['kernels']:>8} {row['decisions']:>10}")
            if args.explain:
                line += f" {row['explain_cpu_s']:>14.2f}"
            print(line)
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

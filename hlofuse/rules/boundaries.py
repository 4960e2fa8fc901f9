"""Boundary rules: why two kernels of an already fused module are apart when no fusion pass
made that choice — the value goes into a tuple (a buffer), crosses a while loop's iteration or
a called computation, comes from or goes into an opaque library call, or passes through a copy
that copy insertion added after fusion.

`hlofuse explain` asks these rules first for such edges; pass decisions (a concatenate with
several users, an expensive producer, a budget...) come from the pipelines' own rules through
`PipelineSpec.explain_boundary`.  No pass evaluates these rules, so they are never relaxed:
each describes a structural fact of the compiled program, not a heuristic.

A rule here receives a `Candidate` whose `producer` and `consumer` are `graph.Node`s of the
fused module (the producing kernel, and the consuming kernel or buffer): a `BoundaryCandidate`
(rules/candidates.py) carrying what the edge tracer found (`crossing`, `loop`, `bytes`, ...; see
hlofuse/explain/).
"""

from __future__ import annotations

from . import XLA_COMMITS, XlaRef, objection, rule

#: Boundary rules apply to every pipeline: they describe the program, not a pass.
ALL_PIPELINES = ("legacy", "priority", "cpu")
PASSES = ("explain",)
_P = XLA_COMMITS["legacy"]  # the paper's XLA (jaxlib 0.4.35); the same code exists at 0.10.2

#: What XLA itself says (verbatim, per pipeline) when it refuses such a pair, for comparing with
#: XLA's own fusion log; None where XLA decides it structurally, without a reason string.
#: legacy: gpu_fusible.cc IsProducerConsumerFusible / transforms/instruction_fusion.cc (jaxlib
#: 0.4.35); priority: priority_fusion.cc CanFuse (jaxlib 0.10.2); cpu: cpu_instruction_fusion.cc
#: ShouldFuse (jaxlib 0.10.2) — docs/xla/*.md quote each.
XLA_REASONS = {
    "BND-TUPLE-CONSUMER": {
        "legacy": ("the consumer is not input-fusible and not loop-fusible", "the producer is a fusion"),
        "priority": ("the consumer is not fusible",),
        "cpu": ("Not fusing: not found a fusible case", "Not fusing: producer is itself a fusion node."),
    },
    "BND-LIBRARY-PRODUCER": {
        "legacy": ("the producer is not loop-fusible", "the producer is a fusion"),
        "priority": ("the producer is not fusible",),
        "cpu": ("Producer is not loop-fusible.", "Not fusing: producer is itself a fusion node."),
    },
    "BND-LIBRARY-CONSUMER": {
        "legacy": ("the consumer is not input-fusible and not loop-fusible", "the consumer is a custom fusion",
                   "the producer is a fusion"),
        "priority": ("the consumer is not fusible",),
        "cpu": ("Not fusing: not found a fusible case", "Don't fuse instructions from custom fusions/calls",
                "Not fusing: producer is itself a fusion node."),
    },
}

#: The pass rules that refuse these structures in general terms ("the consumer is not
#: fusible", an IsFusible check without words): where a pass made that decision, the
#: boundary rule names it more precisely (explain reports it with the pass that decided).
SAME_DECISION = {
    "BND-TUPLE-CONSUMER": frozenset({"IF-CONSUMER-NOT-FUSIBLE", "GF-CONSUMER-NOT-FUSIBLE", "PF-CONSUMER-NOT-FUSIBLE",
                                     "CPU-NO-FUSIBLE-CASE", "PF-CONSTANT-USER-NOT-FUSIBLE"}),
    "BND-CONTROL-FLOW-OPERAND": frozenset({"IF-CONSUMER-NOT-FUSIBLE", "GF-CONSUMER-NOT-FUSIBLE",
                                           "PF-CONSUMER-NOT-FUSIBLE", "CPU-NO-FUSIBLE-CASE",
                                           "PF-CONSTANT-USER-NOT-FUSIBLE"}),
    "BND-LIBRARY-CONSUMER": frozenset({"IF-CONSUMER-NOT-FUSIBLE", "GF-CONSUMER-NOT-FUSIBLE", "PF-CONSUMER-NOT-FUSIBLE",
                                       "CPU-NO-FUSIBLE-CASE", "CPU-CUSTOM-FUSION-CONSUMER",
                                       "IF-GPU-CUSTOM-FUSION-CONSUMER", "FM-CUSTOM-FUSION-USER",
                                       "PF-CONSTANT-USER-NOT-FUSIBLE"}),
    "BND-LIBRARY-PRODUCER": frozenset({"IF-PRODUCER-NOT-FUSIBLE", "GF-PRODUCER-NOT-LOOP-FUSIBLE",
                                       "PF-PRODUCER-NOT-FUSIBLE", "CPU-NOT-LOOP-FUSIBLE",
                                       "MOF-PRODUCER-NOT-LOOP-FUSIBLE"}),
}

#: Rule ids in the order explain asks them (first objection wins).
ORDER = (
    "BND-LOOP-CARRIED", "BND-LOOP-INPUT", "BND-LOOP-OUTPUT", "BND-CALLED-COMPUTATION",
    "BND-TUPLE-CONSUMER", "BND-CONTROL-FLOW-OPERAND", "BND-LIBRARY-PRODUCER",
    "BND-LIBRARY-CONSUMER", "BND-COPY-INSERTED",
)


# ------------------------------------------------------------------------------------------
# Library calls: which opaque kernel a custom call or a kCustom fusion is
# ------------------------------------------------------------------------------------------

#: (substring of a custom-call target or a kCustom fusion's backend kind, short library name,
#: tag).  First match wins; the order puts the specific names first.
_LIBRARIES = (
    ("threefry", "RNG (threefry2x32)", "rng"),
    ("philox", "RNG (philox)", "rng"),
    ("rng", "RNG", "rng"),
    ("__triton_gemm", "Triton GEMM fusion", "triton"),
    ("nested_gemm", "Triton GEMM fusion", "triton"),
    ("triton", "Triton fusion", "triton"),
    ("__cublas$lt", "cuBLASLt GEMM", "cublas"),
    ("__cublas", "cuBLAS GEMM", "cublas"),
    ("gemm", "GEMM library call", "gemm"),
    ("__cudnn$conv", "cuDNN convolution", "cudnn"),
    ("cudnn", "cuDNN", "cudnn"),
    ("__ynn_fusion", "YNNPACK fusion", "ynn"),
    ("ynn", "YNNPACK", "ynn"),
    ("onednn", "oneDNN", "onednn"),
    ("lapack", "LAPACK", "lapack"),
    ("cusolver", "cuSOLVER", "cusolver"),
    ("cufft", "cuFFT", "fft"),
    ("ducc", "DUCC FFT", "fft"),
    ("topk", "TopK kernel", "topk"),
    ("sort", "sort kernel", "sort"),
    ("dynamic_slice_fusion", "dynamic-slice library fusion", "library"),
    ("address_computation", "dynamic-slice library fusion", "library"),
)


def library_of(node) -> tuple[str, str, str] | None:
    """(what it is called in XLA, library name, tag) when `node` is an opaque library kernel: a
    custom call, or a `kind=kCustom` fusion (Triton / cuBLAS / cuDNN on GPU, YNNPACK on CPU,
    sort-iota fusions), else None."""
    if node.opcode == "custom-call":
        target = (node.attr("custom_call_target") or "").strip('"')
        return target, _library_name(target), _library_tag(target)
    if node.opcode == "fusion" and node.attr("kind") == "kCustom":
        kind = _custom_fusion_kind(node)
        if not kind and node.fused is not None and node.fused.root is not None:
            kind = f"custom fusion ({node.fused.root.opcode})"
        return kind, _library_name(kind), _library_tag(kind)
    return None


def _custom_fusion_kind(node) -> str:
    import json

    text = node.attr("backend_config") or ""
    text = text.strip()
    if text.startswith('"'):
        try:
            text = json.loads(text)
        except ValueError:
            text = text.strip('"')
    try:
        config = json.loads(text) if text else {}
    except ValueError:
        return ""
    fusion = config.get("fusion_backend_config") or config.get("fusion_config") or {}
    if not isinstance(fusion, dict):
        return ""
    kind = fusion.get("kind") or ""
    custom = fusion.get("custom_fusion_config") or {}
    if isinstance(custom, dict) and custom.get("name"):
        kind = f"{kind} {custom['name']}".strip()
    return kind


def _library_name(target: str) -> str:
    low = target.lower()
    for key, name, _ in _LIBRARIES:
        if key in low:
            return name
    return "library call"


def _library_tag(target: str) -> str:
    low = target.lower()
    for key, _, tag in _LIBRARIES:
        if key in low:
            return tag
    return "library"


# ------------------------------------------------------------------------------------------
# While loops and called computations
# ------------------------------------------------------------------------------------------

_FUSIBLE_COMPUTATIONS = XlaRef(
    file="xla/service/gpu/gpu_fusible.cc",
    function="GetFusibleComputations",
    message=None,
    commit=_P,
)


@rule(id="BND-LOOP-CARRIED", name="boundary-loop-carried", passes=PASSES, pipelines=ALL_PIPELINES,
      tags=("loop", "while", "boundary"), relaxable=False, xla=_FUSIBLE_COMPUTATIONS,
      message="{consumer} reads {producer} in the next iteration of {loop}: a value crosses iterations "
              "only through the loop state ({bytes} bytes)")
def loop_carried(c):
    """A value produced in one iteration of a while loop and read in the next.

    What it checks:
        The value read by the consumer comes from the while body's root tuple (the loop state
        at the end of an iteration) through the body's or condition's parameter.

    Why XLA does this:
        Fusion passes fuse inside one computation at a time (GetFusibleComputations lists
        the entry, while bodies and conditions, and conditional branches, each on its own).
        A while loop runs its body once per iteration, launching the body's kernels anew each
        time; what one iteration leaves for the next sits in the loop-state buffers.  No
        kernel can span two iterations.

    Example:
        body {
          p = (s32[], f32[8]) parameter(0)
          x = f32[8] get-tuple-element(p), index=1
          f = f32[8] fusion(x), kind=kLoop, calls=step      <- reads the previous iteration's f
          ROOT t = (s32[], f32[8]) tuple(i, f)
        }

    Relaxing:
        Not possible: iterations are separate launches.  Unrolling the loop (JAX:
        `lax.scan(..., unroll=k)`) puts k iterations in one body, so the boundary is crossed
        k times less often and XLA can fuse across the unrolled steps.
    """
    crossing = c.crossing
    if "loop-carried" not in crossing:
        return None
    return objection(producer=c.producer_name,
                     consumer=c.consumer_name,
                     loop=c.loop, bytes=c.bytes)


@rule(id="BND-LOOP-INPUT", name="boundary-loop-input", passes=PASSES, pipelines=ALL_PIPELINES,
      tags=("loop", "while", "boundary"), relaxable=False, xla=_FUSIBLE_COMPUTATIONS,
      message="{producer} is computed before {loop} and {consumer} reads it inside: a value enters a loop "
              "only through its initial state ({bytes} bytes)")
def loop_input(c):
    """A value computed before a while loop and read inside its body or condition.

    What it checks:
        The value read by the consumer (in a while body or condition) reaches it through the
        computation's parameter from the while instruction's operand, i.e. it was produced
        before the loop started.

    Why XLA does this:
        The entry computation and the loop body are fused separately (GetFusibleComputations):
        a kernel before the loop runs once, the body's kernels run every iteration.  Fusing
        them would recompute the producer every iteration or require a kernel that spans the
        host-driven loop.

    Example:
        ENTRY e {
          a = f32[8] fusion(x), kind=kLoop, calls=prep
          init = (s32[], f32[8]) tuple(zero, a)
          w = (s32[], f32[8]) while(init), condition=cond, body=body   <- body reads a
        }

    Relaxing:
        Not possible.  Moving the producer into the loop body (in the source program) would
        let XLA fuse it there, at the cost of recomputing it every iteration.
    """
    crossing = c.crossing
    if "loop-input" not in crossing:
        return None
    return objection(producer=c.producer_name,
                     consumer=c.consumer_name,
                     loop=c.loop, bytes=c.bytes)


@rule(id="BND-LOOP-OUTPUT", name="boundary-loop-output", passes=PASSES, pipelines=ALL_PIPELINES,
      tags=("loop", "while", "boundary"), relaxable=False, xla=_FUSIBLE_COMPUTATIONS,
      message="{producer} is computed inside {loop} and {consumer} reads it after the loop: a value leaves "
              "a loop only through its final state ({bytes} bytes)")
def loop_output(c):
    """A value computed inside a while loop and read after it.

    What it checks:
        The consumer reads a get-tuple-element of the while instruction; the value comes
        from the body's root tuple, i.e. the last iteration's kernels.

    Why XLA does this:
        The loop body and the computation around the loop are fused separately
        (GetFusibleComputations); the body's kernels run once per iteration and their last
        result stays in the loop-state buffer for the code after the loop.

    Example:
        ENTRY e {
          w = (s32[], f32[8]) while(init), condition=cond, body=body
          r = f32[8] get-tuple-element(w), index=1
          ROOT n = f32[8] fusion(r), kind=kLoop, calls=post     <- reads the body's result
        }

    Relaxing:
        Not possible.  Folding the post-processing into the loop body (in the source
        program) would let XLA fuse it there, at the cost of running it every iteration.
    """
    crossing = c.crossing
    if "loop-output" not in crossing:
        return None
    return objection(producer=c.producer_name,
                     consumer=c.consumer_name,
                     loop=c.loop, bytes=c.bytes)


@rule(id="BND-CALLED-COMPUTATION", name="boundary-called-computation", passes=PASSES,
      pipelines=ALL_PIPELINES, tags=("control-flow", "conditional", "call", "boundary"), relaxable=False,
      xla=_FUSIBLE_COMPUTATIONS,
      message="{producer} and {consumer} are in different computations ({detail}): fusion never "
              "crosses a {kind} boundary ({bytes} bytes)")
def called_computation(c):
    """A value that enters or leaves a conditional branch or a called computation.

    What it checks:
        The value passes between a computation and one it calls through `conditional`,
        `call` or an async wrapper: via the callee's parameter, or via its root.

    Why XLA does this:
        Fusion passes work on one computation at a time (GetFusibleComputations fuses
        conditional branches on their own and does not fuse inside plain `call` bodies at
        all); a branch runs only when the host selects it.

    Example:
        ENTRY e {
          a = f32[8] fusion(x), kind=kLoop, calls=prep
          c = f32[8] conditional(p, a, a), branch_computations={b0, b1}   <- b0/b1 read a
        }

    Relaxing:
        Not possible.  XLA inlines plain calls (CallInliner) before fusion when it can; a
        branch computation stays separate by definition.
    """
    crossing = c.crossing
    kinds = [k for k in crossing if k in ("branch-input", "branch-output", "call-input", "call-output",
                                          "async-input", "async-output")]
    if not kinds:
        return None
    kind = kinds[0].split("-")[0]
    detail = {"branch": "a conditional branch", "call": "a called computation",
              "async": "an asynchronous computation"}[kind]
    return objection(producer=c.producer_name,
                     consumer=c.consumer_name,
                     detail=detail, kind={"branch": "conditional", "call": "call", "async": "async"}[kind],
                     bytes=c.bytes)


# ------------------------------------------------------------------------------------------
# Buffers: tuples and control-flow operands
# ------------------------------------------------------------------------------------------


@rule(id="BND-TUPLE-CONSUMER", name="boundary-tuple-consumer", passes=PASSES, pipelines=ALL_PIPELINES,
      tags=("tuple", "buffer", "boundary"), relaxable=False,
      xla=XlaRef(file="xla/service/gpu/gpu_fusible.cc", function="IsProducerConsumerFusible",
                 message="the consumer is not input-fusible and not loop-fusible", commit=_P),
      message="{consumer} is a tuple ({role}), a set of buffers and not a kernel: {producer} writes its "
              "{bytes} bytes to memory")
def tuple_consumer(c):
    """The consumer is a tuple: a list of buffers, not a kernel.

    What it checks:
        The producer kernel's value is an operand of a `tuple` instruction (looking through
        get-tuple-element and bitcast): the loop state at the end of a while body, the
        initial state of a loop, or the program's outputs.

    Why XLA does this:
        A tuple computes nothing; it groups buffers (the paper's first boundary: "a tuple is
        not a kernel operation, it is a location in global memory", used as the output of
        each loop step).  XLA's fusion predicates refuse it as a consumer: the legacy pipeline
        says "the consumer is not input-fusible and not loop-fusible" (IsProducerConsumerFusible;
        "the producer is a fusion" comes first when the producer is already a fusion),
        PriorityFusion says "the consumer is not fusible" (CanFuse), XLA:CPU
        "Not fusing: not found a fusible case".

    Example:
        body {
          f = f32[8] fusion(x), kind=kLoop, calls=step
          ROOT t = (s32[], f32[8]) tuple(i, f)       <- f is stored as the next loop state
        }

    Relaxing:
        Not possible: the value must reach memory to be the loop's state or the program's
        result.  What can change is how often: unrolling the loop writes the state once per
        k steps.
    """
    if c.consumer.opcode != "tuple":
        return None
    return objection(producer=c.producer_name, consumer=c.consumer.name,
                     role=c.tuple_role, bytes=c.bytes)


@rule(id="BND-CONTROL-FLOW-OPERAND", name="boundary-control-flow-operand", passes=PASSES,
      pipelines=ALL_PIPELINES, tags=("control-flow", "buffer", "boundary"), relaxable=False,
      xla=XlaRef(file="xla/hlo/ir/hlo_instruction.cc", function="HloInstruction::IsFusible",
                 message=None, commit=_P),
      message="{consumer} is a {opcode}: the host reads {producer} ({bytes} bytes) to run its "
              "computations; control flow is not fusible")
def control_flow_operand(c):
    """The consumer is a while, conditional or call instruction itself.

    What it checks:
        The producer kernel's value is an operand of a `while`, `conditional` or `call`
        (not through a tuple): a loop's initial state, a branch index or predicate, or a
        called computation's argument.

    Why XLA does this:
        `HloInstruction::IsFusible` is false for while, conditional and call: they run their
        computations from the host (a conditional copies its predicate back to choose the
        branch), so nothing can be fused into them.

    Example:
        ENTRY e {
          p = pred[] fusion(x), kind=kLoop, calls=test
          ROOT c = f32[8] conditional(p, a, b), true_computation=t, false_computation=f
        }

    Relaxing:
        Not possible.  `jnp.where`/`select` instead of `lax.cond` computes both sides in one
        kernel when they are cheap.
    """
    if c.consumer.opcode not in ("while", "conditional", "call", "async-start"):
        return None
    return objection(producer=c.producer_name, consumer=c.consumer.name,
                     opcode=c.consumer.opcode, bytes=c.bytes)


# ------------------------------------------------------------------------------------------
# Library calls and copies added after fusion
# ------------------------------------------------------------------------------------------


@rule(id="BND-LIBRARY-PRODUCER", name="boundary-library-producer", passes=PASSES, pipelines=ALL_PIPELINES,
      tags=("custom-call", "library", "boundary"), relaxable=False,
      xla=XlaRef(file="xla/service/gpu/gpu_fusible.cc", function="IsProducerConsumerFusible",
                 message="the producer is not loop-fusible", commit=_P),
      message="{producer} is an opaque library call ({library}: {target}); XLA cannot fuse its output "
              "into {consumer}")
def library_producer(c):
    """The producer is an opaque library kernel: a custom call or a library (kCustom) fusion.

    What it checks:
        The producer is a `custom-call` (cu_threefry2x32 random numbers, cuBLAS/cuDNN calls,
        LAPACK...) or a `kind=kCustom` fusion (Triton or cuBLAS GEMM fusions, cuDNN fusions,
        XLA:CPU's YNNPACK fusions, sort-iota fusions).

    Why XLA does this:
        XLA does not see inside a custom call: it is a precompiled kernel with its own launch.
        Its fusion predicates refuse it as a producer: legacy GPU "the producer is not
        loop-fusible" (custom-call is in no loop-fusible list), PriorityFusion "the producer
        is not fusible" (custom calls and kCustom fusions are never fusible), XLA:CPU
        "Producer is not loop-fusible.".  The paper's second boundary is of this kind: the
        `cuda_threefry2x32` random-number kernel.

    Example:
        r = (u32[5120], u32[5120]) custom-call(k0, k1, c0, c1), custom_call_target="cu_threefry2x32_ffi"
        g = u32[5120] get-tuple-element(r), index=0
        f = f32[2048,4] fusion(g, s), kind=kLoop, calls=use_random   <- cannot absorb the RNG

    Relaxing:
        Not possible.  Removing the call from the hot loop is the fix: precompute random
        numbers outside the loop (paper §V-A), or let XLA expand the RNG into HLO (current
        jax does, unless the custom-call lowering is forced).
    """
    lib = library_of(c.producer)
    if lib is None:
        return None
    target, name, _ = lib
    if target == "__triton" and c.pipeline == "priority":
        return None  # a generic Triton fusion is fusible for PriorityFusion: its rules decide
    return objection(producer=c.producer_name,
                     consumer=c.consumer_name, target=target or c.producer.opcode,
                     library=name)


@rule(id="BND-LIBRARY-CONSUMER", name="boundary-library-consumer", passes=PASSES, pipelines=ALL_PIPELINES,
      tags=("custom-call", "library", "boundary"), relaxable=False,
      xla=XlaRef(file="xla/service/gpu/gpu_fusible.cc", function="IsProducerConsumerFusible",
                 message="the consumer is not input-fusible and not loop-fusible", commit=_P),
      message="{consumer} is an opaque library call ({library}: {target}); XLA cannot fuse "
              "{producer} into it")
def library_consumer(c):
    """The consumer is an opaque library kernel: a custom call or a library (kCustom) fusion.

    What it checks:
        The consumer is a `custom-call` or a `kind=kCustom` fusion (see
        BND-LIBRARY-PRODUCER for the kinds).

    Why XLA does this:
        A library kernel reads its operands from memory; XLA cannot inline code into it.
        Legacy GPU: "the consumer is not input-fusible and not loop-fusible" (and "the
        consumer is a custom fusion" for kCustom fusions); PriorityFusion: "the consumer is not
        fusible"; XLA:CPU: "Don't fuse instructions from custom fusions/calls" for library
        fusions, "Not fusing: not found a fusible case" for custom calls.

    Example:
        a = f32[64,64] fusion(x), kind=kLoop, calls=scale
        d = f32[64,64] custom-call(a, w), custom_call_target="__cublas$gemm"   <- reads a from memory

    Relaxing:
        Not possible in XLA's pipelines.  (cuBLAS epilogues and Triton GEMM fusions absorb
        some neighbours before fusion runs; that is the GEMM rewriter's choice, not a
        fusion rule.)
    """
    lib = library_of(c.consumer)
    if lib is None:
        return None
    target, name, _ = lib
    return objection(producer=c.producer_name,
                     consumer=c.consumer_name, target=target or c.consumer.opcode,
                     library=name)


@rule(id="BND-COPY-INSERTED", name="boundary-copy-inserted", passes=PASSES, pipelines=ALL_PIPELINES,
      tags=("copy", "buffer", "boundary"), relaxable=False,
      xla=XlaRef(file="xla/service/copy_insertion.cc", function="CopyInsertion::AddCopiesToResolveInterference",
                 message=None, commit=_P),
      message="{copy} was added after fusion by copy insertion ({why}); the fusion passes never saw it, "
              "so it stays a kernel of its own between {producer} and {consumer}")
def copy_inserted(c):
    """A copy that copy insertion added after the fusion passes.

    What it checks:
        The producer or the consumer is an unfused `copy` that did not exist when fusion ran:
        it is absent from the dump's after-fusion snapshot, or (without one) carries no
        `op_name` metadata, as XLA's own copies do not.

    Why XLA does this:
        A while loop updates its state in place.  When a value of the state is still needed
        while the next one is written (or a loop's initial state is an entry parameter or a
        constant that must not be overwritten), CopyInsertion (AddCopiesForWhile,
        AddSpecialCaseCopies) inserts copies.  It runs after fusion, so the copies are
        separate kernels (on GPU, CopyFusion may later fuse some of them together).

    Example:
        body {
          f = f32[2048,4] fusion(s, a), kind=kLoop, calls=step
          c = f32[2048,4] copy(f)                      <- added by copy insertion
          ROOT t = (s32[], f32[2048,4]) tuple(i, c)
        }

    Relaxing:
        Not possible: the copy keeps a value alive that would otherwise be overwritten.
        Programs that do not read the old state after writing the new one need fewer copies.
    """
    inserted = c.inserted_copies
    for side, node in (("consumer", c.consumer), ("producer", c.producer)):
        if node.name in inserted:
            return objection(copy=node.name, side=side,
                             producer=c.producer_name,
                             consumer=c.consumer_name,
                             why=c.copy_reasons.get(node.name, "a buffer must not be shared"))
    return None

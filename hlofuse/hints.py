"""What a user can change so that a kernel boundary goes away or matters less.

Each hint fires only where its premise holds for the boundary at hand:

  * rng-in-loop (the paper's first fix, §V-A): random numbers are generated inside a loop
    body (an RNG custom call, or ops JAX's PRNG made) → precompute them before the loop.
    Premise: the random-number side of the boundary runs in a while body or condition.
  * packed-state (§V-C): state packed into one array with a concatenate → pass the arrays
    separately.  Premise: the value is (or both kernels compute) a floating-point
    concatenate that is loop state — computed in a loop body, or entering a loop — and not
    one an indexing op produced (take_along_axis, gather and scatter concatenate integer
    index arrays; XLA merges the weights of sibling matrix products with one).
  * unroll (§V-D): a scan whose body is a few tiny kernels → unroll it.  Premise: the
    boundary crosses iterations (or writes the loop state), the loop's trip count is known
    (a scan or fori_loop: a while_loop whose end depends on data cannot be unrolled) and at
    least 2, and its body launches at most FEW_KERNELS kernels of at most TINY_BYTES each.
  * xla-flag: the decision behind the boundary reads an XLA option, and changing it changes
    the decision: XLA:CPU's library (YNNPACK) fusion types for a reduction YNNPACK took
    (`xla_cpu_experimental_ynn_fusion_type`), XLA:GPU's reduction epilogue fusion when it is
    off, the legacy merger's IR-size limit doubled by the pre-MLIR emitters
    (`xla_gpu_mlir_emitter_level`).  Premise: the rule and the facts show that the option
    decided.

A hint says what to change; the triage (hlofuse/triage) computes what the change would gain
for this program and adds it.  The paper's figures on its cart-pole are cited as context,
never as the prediction.  A hint is advice about the program or its compile options, not a
claim about XLA: the boundary's rule says why XLA keeps the kernels apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

#: A loop body of at most this many kernels, each writing at most TINY_BYTES, is "a few tiny
#: kernels": launch overhead dominates and unrolling pays (the paper's cart-pole body: 2-4
#: kernels over 2048x4 floats).
FEW_KERNELS = 6
TINY_BYTES = 1 << 20
#: The unroll factor the unroll hint predicts for (the paper's), at most the trip count.
UNROLL = 10

#: Words in an instruction's op_name (JAX's name stack) that mark random-number generation.
RNG_WORDS = ("threefry", "random_bits", "random_split", "_threefry_split", "jit(_uniform)",
              "jit(_bernoulli)", "jit(_normal)", "rng_bit_generator", "philox")
#: Words in an op_name that mark a concatenate made by an indexing op (index arrays).
_INDEXING_WORDS = ("take_along_axis", "gather", "scatter", "dynamic_slice", "dynamic_update_slice", "argsort",
                   "sort", "searchsorted", "one_hot", "iota")
_FLOATING = ("f16", "bf16", "f32", "f64", "f8")

#: xla-flag hints: the rule, the flag to set, and a premise over HintInput.
YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type=INDIVIDUAL_DOT,INDIVIDUAL_CONVOLUTION"
EPILOGUE_FLAG = "--xla_gpu_enable_reduction_epilogue_fusion=true"
EMITTER_FLAG = "--xla_gpu_mlir_emitter_level=4"


@dataclass(frozen=True)
class HintInput:
    """What hint_for looks at (hlofuse/explain fills it)."""

    rule: str
    tags: tuple[str, ...]
    crossing: tuple[str, ...]
    producer_opcode: str
    producer_op_name: str
    producer_library: str | None  # library tag of the producer kernel (rng, cublas, ynn, ...)
    consumer_library: str | None
    producer_kernel_opcodes: frozenset[str]
    consumer_kernel_opcodes: frozenset[str]
    in_loop: object | None  # explain.LoopSummary of the loop whose body holds the edge
    consumer_is_buffer: bool
    #: The loops whose body (or condition) holds the producer kernel and the consumer.
    producer_loop: object | None = None
    consumer_loop: object | None = None
    producer_element_type: str = ""
    #: (element type, op_name) of each concatenate the producer kernel computes.
    producer_concatenates: tuple[tuple[str, str], ...] = ()
    #: Whether the producer's value enters a while loop's state (its initial tuple).
    producer_enters_loop: bool = False
    pipeline: str | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Hint:
    """A change to the program (or its compile options) that removes the boundary or makes it
    cheaper: `kind`, what to do (`text`), what the paper measured for it (`context`, empty for
    hints the paper did not study) and what the prediction needs (`facts`: the loop, the
    concatenate, the flag)."""

    kind: str
    text: str
    context: str = ""
    facts: Mapping[str, Any] = field(default_factory=dict)

    def words(self, prediction: str | None = None) -> str:
        """The hint as one sentence: what to do, the prediction for this program, the paper."""
        out = self.text
        if prediction:
            out += f"; predicted for this program: {prediction}"
        if self.context:
            out += f" ({self.context})"
        return out


def hint_for(h: HintInput) -> Hint | None:
    for rule in (_rng_in_loop, _packed_state, _unroll_tiny_scan, _xla_flag):
        found = rule(h)
        if found is not None:
            return found
    return None


def _rng_in_loop(h: HintInput) -> Hint | None:
    """The paper's first fix: the random-number kernel inside the loop body."""
    rng_ops = h.producer_opcode in ("rng", "rng-bit-generator") or \
        any(word in h.producer_op_name for word in RNG_WORDS)
    if h.producer_library == "rng" or rng_ops:
        loop = h.producer_loop
    elif h.consumer_library == "rng":
        loop = h.consumer_loop
    else:
        return None
    if loop is None:
        return None
    what = "the RNG custom call" if "rng" in (h.producer_library, h.consumer_library) else \
        "random-number generation"
    return Hint("rng-in-loop",
                f"{what} runs inside the loop body of {loop.name} and splits its kernels: precompute the random "
                f"numbers before the loop (draw a pool with jax.random outside the scan and index it per step)",
                "the paper measured 1.87x on its cart-pole", {"loop": loop.name})


def _packed_state(h: HintInput) -> Hint | None:
    """The paper's second fix: loop state packed into one array with concatenate."""
    producer_concat = h.producer_opcode == "concatenate"
    duplicated = "concatenate" in h.producer_kernel_opcodes and "concatenate" in h.consumer_kernel_opcodes
    if not (producer_concat or duplicated):
        return None
    loop = h.producer_loop or (h.consumer_loop if duplicated else None)
    if loop is None and not h.producer_enters_loop:
        return None  # not loop state: a concatenate computed once is no carry to split
    concats = h.producer_concatenates or ((h.producer_element_type, h.producer_op_name),)
    if not any(_packs_values(etype, op_name) for etype, op_name in concats):
        return None
    where = f"the state of {loop.name}" if loop is not None else "the state a loop starts from"
    return Hint("packed-state",
                f"the value is (or is read from) a concatenate that packs {where} into one array: pass the "
                f"variables as separate arrays (a tuple of per-variable arrays as the scan carry), so XLA need not "
                f"materialise or duplicate the packed array",
                "the paper measured 3.41x on its cart-pole",
                {"loop": loop.name if loop is not None else None})


def _packs_values(element_type: str, op_name: str) -> bool:
    """A concatenate of floating-point values that no indexing op made (take_along_axis, gather
    and scatter concatenate integer index arrays)."""
    if element_type and not element_type.startswith(_FLOATING):
        return False
    return not any(word in op_name for word in _INDEXING_WORDS)


def _unroll_tiny_scan(h: HintInput) -> Hint | None:
    """The paper's third fix: unroll a scan whose body is a few tiny kernels."""
    lp = h.in_loop
    if lp is None:
        return None
    if not ("loop-carried" in h.crossing or (h.consumer_is_buffer and not h.crossing)):
        return None
    per_iteration = getattr(lp, "kernels_per_iteration", 0)
    trip = getattr(lp, "trip_count", None)
    if per_iteration == 0 or per_iteration > FEW_KERNELS or trip is None or trip < 2:
        return None
    if getattr(lp, "max_kernel_bytes", 0) > TINY_BYTES:
        return None
    total = f" ({lp.kernels_total} launches in all)" if getattr(lp, "kernels_total", None) else ""
    k = min(UNROLL, trip)
    return Hint("unroll",
                f"{lp.name} launches {per_iteration} small kernel(s) per iteration{total}: unroll it "
                f"(jax.lax.scan(..., unroll={k}) or fori_loop(..., unroll={k})) so {k} steps share one "
                f"iteration and XLA can fuse across them",
                "the paper measured 3.5x more on its cart-pole with unroll=10", {"loop": lp.name, "unroll": k})


def _xla_flag(h: HintInput) -> Hint | None:
    """An XLA option that decided the boundary."""
    ynn_reduce = [side for side, lib, ops in (("producer", h.producer_library, h.producer_kernel_opcodes),
                                              ("consumer", h.consumer_library, h.consumer_kernel_opcodes))
                  if lib == "ynn" and ops & {"reduce", "reduce-window"} and not ops & {"dot", "convolution"}]
    if ynn_reduce:
        return Hint("xla-flag",
                    f"the {ynn_reduce[0]} is a reduction XLA:CPU gave to YNNPACK (a library fusion nothing fuses "
                    f"into or out of): XLA_FLAGS={YNN_FLAG} keeps reductions out of YNNPACK, and XLA's own "
                    f"fusion (with its tree reductions) takes them instead",
                    facts={"flag": YNN_FLAG})
    if h.rule == "GF-REDUCTION-EPILOGUE-DISABLED":
        return Hint("xla-flag",
                    f"reduction epilogue fusion is off in this compile: {EPILOGUE_FLAG} (XLA's default) lets "
                    f"the reduction's elementwise users join its kernel", facts={"flag": EPILOGUE_FLAG})
    if h.rule == "FM-HUGE-IR" and h.facts.get("splits_note"):
        return Hint("xla-flag",
                    f"the merger's IR-size limit was reached because the pre-MLIR emitters double the size per "
                    f"basic-block split: {EMITTER_FLAG} (XLA's own default) uses the MLIR emitters",
                    facts={"flag": EMITTER_FLAG})
    return None

"""What a user can change in their program so that a kernel boundary goes away or matters less.

The first hints are the paper's fixes (Snider & Liang, §V), each measured there on the
cart-pole simulator:
  * an RNG custom call inside a loop → precompute the random numbers before the loop (§V-A,
    1.87x);
  * state packed with concatenate → pass the state as separate arrays (§V-C, 3.41x);
  * a scan whose body is a few tiny kernels → unroll it (§V-D, 3.5x more).
A hint is advice about the source program, never a claim about XLA: the boundary's rule says
why XLA keeps the kernels apart.  `hint_for` returns None when no fix is known.
"""

from __future__ import annotations

from dataclasses import dataclass

#: A loop body of at most this many kernels, each writing at most TINY_BYTES, is "a few tiny
#: kernels": launch overhead dominates and unrolling pays (the paper's cart-pole body: 2-4
#: kernels over 2048x4 floats).
FEW_KERNELS = 6
TINY_BYTES = 1 << 20

#: Words in an instruction's op_name (JAX's name stack) that mark random-number generation.
_RNG_WORDS = ("threefry", "random_bits", "random_split", "_threefry_split", "jit(_uniform)",
              "jit(_bernoulli)", "jit(_normal)", "rng_bit_generator", "philox")


@dataclass(frozen=True)
class HintInput:
    """What hint_for looks at (hlofuse/explain fills it)."""

    rule: str
    tags: tuple[str, ...]
    crossing: tuple[str, ...]
    producer_opcode: str
    producer_op_name: str
    producer_library: str | None  # library tag of the producer kernel (rng, cublas, ...)
    consumer_library: str | None
    producer_kernel_opcodes: frozenset[str]
    consumer_kernel_opcodes: frozenset[str]
    in_loop: object | None  # explain.LoopSummary of the loop whose body holds the edge
    consumer_is_buffer: bool


def hint_for(h: HintInput) -> str | None:
    for rule in (_rng_in_loop, _packed_state, _unroll_tiny_scan):
        text = rule(h)
        if text:
            return text
    return None


def _rng_in_loop(h: HintInput) -> str | None:
    """The paper's first fix: the random-number kernel inside the loop body."""
    if h.in_loop is None:
        return None
    rng_call = "rng" in (h.producer_library, h.consumer_library)
    rng_ops = h.producer_opcode in ("rng", "rng-bit-generator") or \
        any(word in h.producer_op_name for word in _RNG_WORDS)
    if not (rng_call or rng_ops):
        return None
    what = "the RNG custom call" if rng_call else "random-number generation"
    return (f"{what} runs inside the loop body and splits its kernels: precompute the random numbers "
            f"before the loop (draw a pool with jax.random outside the scan and index it per step); "
            f"the paper measured 1.87x on cart-pole")


def _packed_state(h: HintInput) -> str | None:
    """The paper's second fix: state packed into one array with concatenate."""
    producer_concat = h.producer_opcode == "concatenate"
    duplicated = "concatenate" in h.producer_kernel_opcodes and "concatenate" in h.consumer_kernel_opcodes
    if not (producer_concat or duplicated or "concat" in h.tags):
        return None
    return ("the value is (or is read from) a concatenate that packs several arrays into one: pass them "
            "as separate arrays instead (e.g. a tuple of per-variable arrays as the scan carry), so XLA "
            "need not materialise or duplicate the packed array; the paper measured 3.41x on cart-pole")


def _unroll_tiny_scan(h: HintInput) -> str | None:
    """The paper's third fix: unroll a scan whose body is a few tiny kernels."""
    lp = h.in_loop
    if lp is None:
        return None
    if not ("loop-carried" in h.crossing or (h.consumer_is_buffer and not h.crossing)):
        return None
    per_iteration = getattr(lp, "kernels_per_iteration", 0)
    trip = getattr(lp, "trip_count", None)
    if per_iteration == 0 or per_iteration > FEW_KERNELS or (trip is not None and trip < 2):
        return None
    if getattr(lp, "max_kernel_bytes", 0) > TINY_BYTES:
        return None
    total = f" ({lp.kernels_total} launches in all)" if getattr(lp, "kernels_total", None) else ""
    return (f"the loop launches {per_iteration} small kernel(s) per iteration{total}: unroll it "
            f"(jax.lax.scan(..., unroll=k) or fori_loop(..., unroll=k)) so k steps share one iteration and "
            f"XLA can fuse across them; the paper measured 3.5x more on cart-pole with unroll=10")

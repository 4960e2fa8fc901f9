"""Hints fire only where their premise holds (hlofuse/hints.py): one case where it holds and
one per premise that fails, for each hint; and on real dumps, the cases the issue met."""

from __future__ import annotations

from dataclasses import replace

from hlofuse.explain import LoopSummary
from hlofuse.hints import EPILOGUE_FLAG, YNN_FLAG, HintInput, hint_for

LOOP = LoopSummary(name="w", computation="main", body="body", condition="cond", trip_count=100,
                   trip_count_from="backend_config", body_kernels=3, condition_kernels=1, condition_launched=False,
                   kernels_per_iteration=3, kernels_total=300, source=None, max_kernel_bytes=32768)


def _hint(**changes):
    fields = dict(rule="X", tags=(), crossing=(), producer_opcode="add", producer_op_name="jit(f)/add",
                  producer_library=None, consumer_library=None, producer_kernel_opcodes=frozenset({"add"}),
                  consumer_kernel_opcodes=frozenset({"slice"}), in_loop=LOOP, consumer_is_buffer=False,
                  producer_loop=LOOP, consumer_loop=LOOP, producer_element_type="f32")
    fields.update(changes)
    return hint_for(HintInput(**fields))


# -- unroll -----------------------------------------------------------------------------------


def test_unroll_a_scan_of_a_few_tiny_kernels():
    hint = _hint(rule="BND-LOOP-CARRIED", crossing=("loop-carried",))
    assert hint.kind == "unroll" and "unroll=10" in hint.text and "3 small kernel" in hint.text
    assert hint.facts == {"loop": "w", "unroll": 10}
    assert "paper" in hint.context and "paper" not in hint.text  # the paper is context, not the advice


def test_no_unroll_where_its_premise_fails():
    carried = dict(rule="BND-LOOP-CARRIED", crossing=("loop-carried",))
    assert _hint(**carried, in_loop=replace(LOOP, kernels_per_iteration=40)) is None  # not a few kernels
    assert _hint(**carried, in_loop=replace(LOOP, max_kernel_bytes=64 << 20)) is None  # not tiny
    assert _hint(**carried, in_loop=replace(LOOP, trip_count=1)) is None  # nothing to unroll
    # a while_loop that ends on data (no trip count) cannot be unrolled by jax
    assert _hint(**carried, in_loop=replace(LOOP, trip_count=None, trip_count_from=None)) is None
    assert _hint(rule="BND-LOOP-INPUT", crossing=("loop-input",)) is None  # entering once is not per step
    assert _hint(**carried, in_loop=None, producer_loop=None, consumer_loop=None) is None  # no loop


def test_unroll_factor_is_at_most_the_trip_count():
    hint = _hint(rule="BND-LOOP-CARRIED", crossing=("loop-carried",), in_loop=replace(LOOP, trip_count=4))
    assert hint.facts["unroll"] == 4 and "unroll=4" in hint.text


# -- random numbers in a loop ----------------------------------------------------------------


def test_rng_hint_for_random_numbers_made_in_the_loop():
    hint = _hint(rule="BND-LIBRARY-CONSUMER", consumer_library="rng")
    assert hint.kind == "rng-in-loop" and "precompute" in hint.text and "RNG custom call" in hint.text
    hint = _hint(producer_op_name="jit(f)/while/body/jit(_uniform)/threefry2x32")
    assert hint.kind == "rng-in-loop" and "random-number generation" in hint.text


def test_no_rng_hint_where_its_premise_fails():
    # the RNG call runs outside any loop, though its reader is in one (a loop-input crossing)
    assert _hint(rule="BND-LOOP-INPUT", crossing=("loop-input",), producer_library="rng",
                 producer_loop=None) is None
    # the consumer reads random numbers, but the RNG call (the consumer) is outside the loop
    assert _hint(rule="BND-LIBRARY-CONSUMER", consumer_library="rng", consumer_loop=None) is None
    assert _hint(rule="BND-LIBRARY-CONSUMER", consumer_library="cublas") is None  # not random numbers
    assert _hint(rule="BND-LIBRARY-CONSUMER", consumer_library="rng", in_loop=None, producer_loop=None,
                 consumer_loop=None) is None


# -- state packed with a concatenate ---------------------------------------------------------


def test_packed_state_hint_for_a_concatenate_of_loop_state():
    hint = _hint(producer_opcode="concatenate", producer_op_name="jit(f)/while/body/concatenate")
    assert hint.kind == "packed-state" and "separate arrays" in hint.text and "state of w" in hint.text
    both = frozenset({"concatenate", "reduce"})
    hint = _hint(producer_kernel_opcodes=both, consumer_kernel_opcodes=frozenset({"concatenate"}),
                 producer_element_type="pred", producer_concatenates=(("f32", "jit(f)/concatenate"),))
    assert hint.kind == "packed-state"  # computed in both kernels: the concatenate's type decides
    # a concatenate before the loop that becomes its initial state
    hint = _hint(producer_opcode="concatenate", producer_loop=None, producer_enters_loop=True)
    assert hint.kind == "packed-state" and "state a loop starts from" in hint.text


def test_no_packed_state_hint_where_its_premise_fails():
    # outside any loop and not entering one: no carry to split (the case)
    assert _hint(producer_opcode="concatenate", in_loop=None, producer_loop=None, consumer_loop=None) is None
    assert _hint(producer_opcode="concatenate", producer_loop=None, consumer_loop=LOOP) is None
    # the index arrays take_along_axis and gather concatenate: integers, named by the indexing op
    assert _hint(producer_opcode="concatenate", producer_element_type="s32") is None
    assert _hint(producer_opcode="concatenate",
                 producer_op_name="jit(f)/while/body/jit(take_along_axis)/concatenate") is None
    assert _hint(producer_kernel_opcodes=frozenset({"concatenate"}), consumer_kernel_opcodes=frozenset({"add"}),
                 producer_concatenates=(("f32", "jit(f)/concatenate"),)) is None  # in one kernel only
    assert _hint(producer_kernel_opcodes=frozenset({"concatenate", "reduce"}), producer_element_type="pred",
                 consumer_kernel_opcodes=frozenset({"concatenate"}),
                 producer_concatenates=(("s32", "jit(f)/gather"),)) is None


# -- XLA options -----------------------------------------------------------------------------


def test_flag_hint_for_a_reduction_ynnpack_took():
    hint = _hint(rule="BND-LIBRARY-PRODUCER", producer_library="ynn", in_loop=None, producer_loop=None,
                 consumer_loop=None, producer_kernel_opcodes=frozenset({"reduce", "multiply", "parameter"}))
    assert hint.kind == "xla-flag" and hint.facts["flag"] == YNN_FLAG and YNN_FLAG in hint.text
    assert not hint.context  # the paper did not study it


def test_no_flag_hint_where_the_option_did_not_decide():
    # a YNNPACK matrix product: dropping REDUCE from the fusion types would not change it
    assert _hint(rule="BND-LIBRARY-PRODUCER", producer_library="ynn", in_loop=None, producer_loop=None,
                 consumer_loop=None, producer_kernel_opcodes=frozenset({"dot", "reduce"})) is None
    assert _hint(rule="BND-LIBRARY-PRODUCER", producer_library="cublas", in_loop=None, producer_loop=None,
                 consumer_loop=None, producer_kernel_opcodes=frozenset({"reduce"})) is None
    assert _hint(rule="FM-HUGE-IR", facts={"splits_note": ""}) is None  # the MLIR emitters already


def test_flag_hints_for_gpu_options():
    assert _hint(rule="GF-REDUCTION-EPILOGUE-DISABLED").facts["flag"] == EPILOGUE_FLAG
    hint = _hint(rule="FM-HUGE-IR", facts={"splits_note": ", doubled per basic-block split (3)"})
    assert hint.kind == "xla-flag" and "mlir_emitter_level=4" in hint.facts["flag"]

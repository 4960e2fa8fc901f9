"""`explain` reads XLA's own reason for a boundary from PriorityFusion's log, on programs
compiled deviceless by jax 0.10.2 (tests/data/jax-0.10.2-explain-log, see its generate.py):

* an instruction XLA duplicated into both kernels of a boundary does not hide the producer's
  last logged reason: XLA logs a reason for the variance's reduce alone, then for the reduce
  fusion that holds the shared centring; the latter is XLA's final word and ours;
* the same for an in-place update: XLA's in-place check refuses a dynamic-update-slice alone,
  then the fusion holding it and the zero broadcast both updates share.
"""

from __future__ import annotations

import functools
from pathlib import Path

from hlofuse import xla_log
from hlofuse.explain import dump_context, explain
from hlofuse.parse import parse_text

DATA = Path(__file__).resolve().parent / "data" / "jax-0.10.2-explain-log"


@functools.lru_cache(maxsize=None)
def explained(name: str):
    dump = dump_context(str(DATA / name))
    module = parse_text(dump.chosen.path.read_text(encoding="utf-8"), str(dump.chosen.path))
    return explain(module, dump=dump, gpu="h100_sxm")


def _log(name: str):
    (path,) = (DATA / name).glob("*.priority_fusion_dump.txt")
    return xla_log.load(path)


def test_a_producer_sharing_an_instruction_with_its_consumer_gets_its_last_logged_reason():
    """normalized_sum: `adv - mean` is fused into both the variance's reduce fusion and the
    final sum's.  XLA's log names the variance's reduce first alone ("would create a loop
    fusion": its user was still a loop), last as the fusion holding the subtraction, refused
    because both it and the sum's fusion contain a reduce."""
    log = _log("normalized_sum")
    boundaries = explained("normalized_sum").boundaries
    variance = [b for b in boundaries if b.producer.startswith("reduce_sum.22.")]
    assert len(variance) == 1
    assert all(b.rule == "PF-REDUCE-INTO-REDUCE" for b in boundaries)
    for b in boundaries:
        assert b.xla_reason == "both the producer and the consumer contain a reduce", b
        assert b.agrees_with_xla is True, b
    # the earlier, smaller producer's reason is in the log too: the lookup had to pass it by
    assert "fusion into output of a reduce fusion would create a loop fusion" in log.reasons()


def test_a_shared_instruction_alone_does_not_stand_for_the_producer():
    """The same log asked directly.  The variance's kernel (XLA's `fusion`) and the sum's
    (`fusion.5`) both hold the centring `sub.2.0`, `sub.3.0` and `multiply.2` (the mean),
    which XLA fused into both."""
    log = _log("normalized_sum")
    variance = log.members("fusion")
    total = log.members("fusion.5")
    assert variance & total == {"sub.2.0", "sub.3.0", "multiply.2"}
    assert "reduce_sum.22.0" in variance and "reduce_sum.23.0" in total
    verdict = log.verdict(variance, total)
    assert verdict.status == "ineligible" and verdict.producer == "fusion"
    assert verdict.reason == "both the producer and the consumer contain a reduce"


def test_an_in_place_update_sharing_its_update_value_gets_its_last_logged_reason():
    """zero_edges: rows 0 and -1 set to zero by two dynamic-update-slices sharing the zero
    broadcast, which XLA fused into both.  XLA's in-place check first refused the first
    update alone ("unrecognized inplace update non-elementwise output pair"), last the fusion
    holding it and the broadcast, with the words of our rule; the replay's decision is that
    last one."""
    log = _log("zero_edges")
    assert "unrecognized inplace update non-elementwise output pair" in log.reasons()
    (chain,) = [b for b in explained("zero_edges").boundaries
                if b.producer.startswith("dynamic-update-slice.") and b.consumer.startswith("dynamic-update-slice.")]
    assert chain.rule == "IF-INPLACE-PRODUCER-NON-ELEMENTWISE"
    assert chain.xla_reason == "Producer fusion has multiple non-elementwise ops, bailing."
    assert chain.agrees_with_xla is True

"""Heavy computations: producers that are expensive to recompute (big elemental reductions,
large reduce-windows) and consumers that would recompute them per element they read several
times (gpu_fusible.cc: IsExpensiveToRepeat, IfFusedReadsElementsMultipleTimes,
CreatesHeavyComputation).  Legacy pipeline only; 2026 XLA deleted these."""

from __future__ import annotations

from math import prod

from ..attributes import window
from ..graph import Node
from .config import GpuConfig
from .reductions import is_contiguous_reduction
from .shapes import elements

#: kMaxInputsPerOutput: more inputs per output than this makes a reduction heavy.
MAX_INPUTS_PER_OUTPUT = 10


def reads_elements_multiple_times(node: Node) -> bool:
    """IfFusedReadsElementsMultipleTimes (unfused `node`): a gather or broadcast with more
    output than input elements, or a reduce-window whose windows overlap (size > stride)."""
    if node.opcode in ("gather", "broadcast"):
        return elements(node.shape) > elements(node.operands[0].shape)
    if node.opcode == "reduce-window":
        return any(d.size > d.stride for d in window(node))
    return False


def reduction_ratio(node: Node) -> int:
    if node.opcode == "reduce":
        return elements(node.operands[0].shape) // max(elements(node.shape), 1)
    if node.opcode == "reduce-window":
        return prod(d.size for d in window(node))
    return 0


def is_expensive_to_repeat(node: Node, cfg: GpuConfig) -> bool:
    """IsExpensiveToRepeat (unfused `node`): an elemental (non-contiguous) reduce or a
    reduce-window using more than 10 inputs per output."""
    if node.opcode == "reduce" and not is_contiguous_reduction(node, cfg):
        return reduction_ratio(node) > MAX_INPUTS_PER_OUTPUT
    if node.opcode == "reduce-window":
        return reduction_ratio(node) > MAX_INPUTS_PER_OUTPUT
    return False


def heavy_part(producer: Node, cfg: GpuConfig) -> Node | None:
    """The instruction that makes a producer heavy (itself, or one inside a fusion), if any."""
    if producer.opcode != "fusion":
        return producer if is_expensive_to_repeat(producer, cfg) else None
    return next((n for n in producer.fused.nodes() if is_expensive_to_repeat(n, cfg)), None)


def repeating_reader(producer: Node, consumer: Node) -> Node | None:
    """The instruction of the consumer that would read the producer's elements several times:
    the consumer itself, or inside a consumer fusion something reachable from the parameter
    bound to the producer."""
    if consumer.opcode != "fusion":
        return consumer if reads_elements_multiple_times(consumer) else None
    for operand in consumer.operands:
        if operand is not producer:
            continue
        start = consumer.fused_parameter(consumer.operand_index(operand))
        seen = {start.uid}
        stack = [start]
        while stack:
            node = stack.pop()
            if reads_elements_multiple_times(node):
                return node
            for user in node.users:
                if user.uid not in seen:
                    seen.add(user.uid)
                    stack.append(user)
    return None


def creates_heavy_computation(producer: Node, consumer: Node, cfg: GpuConfig) -> tuple[Node, Node] | None:
    """CreatesHeavyComputation: (heavy instruction, repeated reader) when fusing would
    recompute a heavy producer per repeated read, else None."""
    heavy = heavy_part(producer, cfg)
    if heavy is None:
        return None
    reader = repeating_reader(producer, consumer)
    return (heavy, reader) if reader is not None else None

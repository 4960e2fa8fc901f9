"""Whether a kernel's reads are coalesced (coalescing_analysis.cc IsReadCoalescedHeuristic,
the heuristic XLA:GPU uses by default), and what an uncoalesced read costs.

One answer for all of a kernel's operands: reads are uncoalesced when (outside a transpose
kernel) the producer or consumer physically transposes its minor dimension — except a
transpose of something broadcast, which XLA lets pass — or when two reductions are fused
into one reduction kernel.  An uncoalesced read uses one element of each DRAM→L2 transaction
(64 bytes on NVIDIA GPUs), so its bandwidth is `element bytes / 64` of the peak.
"""

from __future__ import annotations

from ..graph import Node
from ..gpu.config import GpuConfig
from ..gpu.fusible import is_input_fusible_reduction
from ..gpu.properties import is_elementwise
from ..gpu.transposes import transposes_minor_dimension
from .fusion_analysis import REDUCTION, TRANSPOSE

#: se::DeviceDescription::dram_to_l2_transaction_size_bytes() on CUDA devices.
DRAM_TO_L2_TRANSACTION_BYTES = 64


def _is_broadcast_chain(node: Node) -> bool:
    """A chain of one-operand elementwise ops or bitcasts ending at a broadcast or iota."""
    while True:
        if node.opcode in ("broadcast", "iota"):
            return True
        if len(node.operands) != 1:
            return False
        if node.opcode != "bitcast" and not is_elementwise(node):
            return False
        node = node.operands[0]


def _is_bad_transpose(node: Node) -> bool:
    if node.opcode == "fusion" and node.fused is not None:
        return any(transposes_minor_dimension(n) and not _is_broadcast_chain(n.operands[0])
                   for n in node.fused.nodes() if n.opcode in ("copy", "transpose"))
    return (node.opcode in ("copy", "transpose") and transposes_minor_dimension(node)
            and not _is_broadcast_chain(node.operands[0]))


def is_read_coalesced(kind: str, producer: Node, consumer: Node | None, cfg: GpuConfig) -> bool:
    """IsReadCoalescedHeuristic(kind, producer, consumer): `consumer` is None when the kernel
    is `producer` alone."""
    if kind != TRANSPOSE:
        if _is_bad_transpose(producer):
            return False
        if consumer is not None and _is_bad_transpose(consumer):
            return False
    if (kind == REDUCTION and consumer is not None and is_input_fusible_reduction(producer, cfg)
            and is_input_fusible_reduction(consumer, cfg)):
        return False
    return True


def coalescing_rate(element_type: str, coalesced: bool) -> float:
    """GetCoalescingUtilizationRate: 1, or the used fraction of each DRAM transaction."""
    if coalesced:
        return 1.0
    if element_type in ("tuple", "token"):
        size = 4
    else:
        from ..gpu.shapes import byte_width

        size = byte_width(element_type)
    return size / DRAM_TO_L2_TRANSACTION_BYTES

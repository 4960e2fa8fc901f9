"""Per-element costs of elementwise ops on a GPU (XLA's HloOpProfiles).

XLA:GPU does not count an elementwise op as one flop per element: it looks up measured clock
cycles per element for (opcode, result element type) in a table per GPU generation, and uses
3 when the pair is missing (`GpuHloCostAnalysis::GetFlopsPerElementwiseOpElement`).  The table
is chosen by the device's compute capability, `sm_<major><minor>`; a device with no table
(Blackwell here, or a non-CUDA device) uses `sm_86` (`HloOpProfiles::GetProfile`).

So on an RTX A6000 an f32 add, multiply or divide all cost 3 "flops" per element, while on an
H100 (sm_90) an f32 add costs 7, a multiply 3 and a divide 19, and an f32 exp costs 79.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Mapping

from ..device import DeviceSpec

_DATA = Path(__file__).resolve().parent / "op_profiles.tsv"

#: The table XLA falls back to when the device's compute capability has none.
DEFAULT_PROFILE = "sm_86"
#: XLA's cost of an elementwise op missing from the table (kDefaultFlopsPerElement).
DEFAULT_FLOPS_PER_ELEMENT = 3


@lru_cache(maxsize=None)
def _tables() -> Mapping[str, Mapping[tuple[str, str], int]]:
    tables: dict[str, dict[tuple[str, str], int]] = {}
    for line in _DATA.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        key, opcode, element_type, cycles = line.split("\t")
        tables.setdefault(key, {})[(opcode, element_type.lower())] = int(cycles)
    return tables


def profile_name(device: DeviceSpec) -> str:
    """`sm_<major><minor>` of a CUDA device (XLA's HloOpProfiles::GetProfileName)."""
    if device.platform.upper() != "CUDA":
        return "<unknown>"
    major, minor = device.compute_capability
    return f"sm_{major}{minor}"


def profile_for(device: DeviceSpec) -> "OpProfile":
    """The table the cost model uses on `device` (sm_86 when it has none of its own)."""
    name = profile_name(device)
    tables = _tables()
    used = name if name in tables else DEFAULT_PROFILE
    return OpProfile(used, tables[used])


class OpProfile:
    """Clock cycles per element for (opcode, element type) on one GPU generation."""

    def __init__(self, name: str, table: Mapping[tuple[str, str], int]):
        self.name = name
        self._table = table

    def flops_per_element(self, opcode: str, element_type: str) -> int:
        return self._table.get((opcode, element_type), DEFAULT_FLOPS_PER_ELEMENT)

    def __repr__(self) -> str:
        return f"<OpProfile {self.name}: {len(self._table)} entries>"


def known_profiles() -> list[str]:
    return sorted(_tables())

"""Which emitter compiles a fusion (HloFusionAnalysis::GetEmitterFusionKind): loop,
reduction, transpose, concatenate, scatter, input slices, or a library (custom, Triton,
cuDNN).  The cost model sizes launches by it."""

from __future__ import annotations

from dataclasses import dataclass

from ..attributes import backend_config, slice_dims
from ..graph import Node
from .config import GpuConfig
from .heroes import find_non_trivial_hero
from .properties import fusion_roots
from .reductions import is_real_reduction_hero, reductions_mof_compatible
from .shapes import bit_width, elements, equal_ignoring_element_type, is_reshape_or_transpose_bitcast
from .transposes import tiled_transpose

LOOP, REDUCTION, TRANSPOSE, CONCATENATE, SCATTER, INPUT_SLICES = (
    "loop", "reduction", "transpose", "concatenate", "scatter", "input_slices")
CUSTOM, TRITON, CUDNN = "custom", "triton", "cudnn"


@dataclass(frozen=True)
class FusionShape:
    """What the emitter choice looks at: the fusion's roots and their heroes, its
    parameters (inputs), and its backend-config kind."""

    roots: tuple[Node, ...]
    heroes: tuple[Node, ...]
    inputs: tuple[Node, ...]
    backend_kind: str = ""
    #: Every instruction of the kernel (what MayPreventVectorization scans).
    members: tuple[Node, ...] = ()


def analyse(node: Node, cfg: GpuConfig) -> FusionShape:
    """Roots, heroes and inputs of a fusion, or of an unfused instruction as a fusion of one."""
    if node.opcode == "fusion" and node.fused is not None:
        roots = tuple(fusion_roots(node.fused))
        heroes = tuple(find_non_trivial_hero(r, cfg) for r in roots)
        kind = str(backend_config(node).get("fusion_backend_config", {}).get("kind", ""))
        return FusionShape(roots, heroes, tuple(node.operands), kind, tuple(node.fused.nodes()))
    return FusionShape((node,), (node,), tuple(node.operands), "", (node,))


def _smallest_bits(nodes) -> int:
    bits = [8 if n.shape.element_type == "pred" else bit_width(n.shape.element_type)
            for n in nodes if n.shape.is_array]
    return min(bits) if bits else 1 << 30


def _slices_compatible(roots) -> bool:
    """Every root a unit-stride slice of operands with equal shapes (the input-slices emitter)."""
    if not all(r.opcode == "slice" and all(d.stride == 1 for d in slice_dims(r)) for r in roots):
        return False
    first = roots[0].operands[0].shape
    return all(equal_ignoring_element_type(r.operands[0].shape, first) for r in roots)


def consistent_transpose_hero(shape: FusionShape, cfg: GpuConfig) -> Node | None:
    """FindConsistentTransposeHero: one tiled transpose every other root is compatible with."""
    found = None
    found_desc = None
    others = []
    for root, hero in zip(shape.roots, shape.heroes):
        desc = tiled_transpose(hero, cfg)
        if desc is not None:
            if found is None:
                found, found_desc = hero, desc
            elif not found_desc.is_equivalent(desc, era_2026=not cfg.legacy):
                return None
        else:
            others.append(root)
    if found is None:
        return None
    source = found.operands[0].shape
    if all(is_reshape_or_transpose_bitcast(r.shape, source, ignore_element_type=True) for r in others):
        return found
    return None


def emitter_kind(shape: FusionShape, cfg: GpuConfig) -> str:
    """GetEmitterFusionKind, in XLA's order."""
    if shape.backend_kind == "__custom_fusion":
        return CUSTOM
    if shape.backend_kind.startswith("__triton"):
        return TRITON
    if shape.backend_kind == "__cudnn$fusion":
        return CUDNN
    roots, heroes = shape.roots, shape.heroes
    if _smallest_bits(shape.inputs) < 8 or _smallest_bits(roots) < 8:
        if cfg.legacy and len(roots) > 1 and _slices_compatible(roots):
            return INPUT_SLICES
        return LOOP
    first = first_reduction_hero(shape, cfg)
    if first is not None:
        valid = True
        hero_elements = elements(first.operands[0].shape)
        for root, hero in zip(roots, heroes):
            if root is first:
                continue
            if not is_real_reduction_hero(root, hero, cfg):
                if elements(root.shape) != hero_elements:
                    valid = False
                    break
            elif not reductions_mof_compatible(hero, first):
                valid = False
                break
        if valid:
            return REDUCTION
    if consistent_transpose_hero(shape, cfg) is not None:
        return TRANSPOSE
    if len(roots) > 1:
        if cfg.legacy and _slices_compatible(roots):
            return INPUT_SLICES
        return LOOP
    if roots[0].opcode == "scatter":
        return SCATTER
    if not cfg.legacy and roots[0].opcode == "sort":
        return "sort"
    if (heroes[0].opcode == "concatenate" and len(heroes[0].operands) <= 4
            and not roots[0].shape.is_tuple):
        return CONCATENATE
    return LOOP


def first_reduction_hero(shape: FusionShape, cfg: GpuConfig) -> Node | None:
    for root, hero in zip(shape.roots, shape.heroes):
        if is_real_reduction_hero(root, hero, cfg):
            return hero
    return None


def fusion_emitter_kind(node: Node, cfg: GpuConfig) -> str:
    return emitter_kind(analyse(node, cfg), cfg)

"""The pipeline's own rules asked on the fused graph (`PipelineSpec.explain_boundary`): the
answer for a boundary the replay does not explain — the replay fused what XLA kept apart, or
there is no replay — with XLA's log after it.  The graph is a copy of the module (graph.Program)."""

from __future__ import annotations

from .. import ir
from .detect import Detected


class FusedGraphRules:
    """The pipeline's explain_boundary over one fused module, set up on first use."""

    def __init__(self, module: ir.Module, detected: Detected, notes: list[str]):
        self.m = module
        self.detected = detected
        self.notes = notes
        self._program = None
        self._spec = None
        self._ctx = None
        self._ready = False

    def node(self, comp: str, name: str):
        """The graph node of instruction `name` in computation `comp` (None if absent)."""
        if self._program is None:
            from ..graph import Program

            self._program = Program.from_module(self.m)
        graph = self._program.graphs.get(comp)
        return graph.get(name) if graph is not None else None

    def program_if_built(self):
        """The graph.Program of the module, when a question built it (else None)."""
        return self._program

    def decision(self, pnode, cnode):
        """The pipeline's Decision for the two kernels, or None."""
        if pnode is None or cnode is None:
            return None
        spec, ctx = self._pipeline()
        if spec is None or spec.explain_boundary is None:
            return None
        try:
            return spec.explain_boundary(pnode, cnode, ctx)
        except Exception as err:  # noqa: BLE001 - a pipeline bug must not stop the explanation
            self.notes.append(f"the {spec.backend}/{spec.name} pipeline's explain_boundary failed "
                              f"({type(err).__name__}: {err}); such boundaries are left unknown")
            return None

    def _pipeline(self):
        if not self._ready:
            self._ready = True
            from ..errors import HlofuseError
            from ..pipeline import Options, get_pipeline, make_context

            d = self.detected
            try:
                spec = get_pipeline(d.backend, d.pipeline)
                ctx = make_context(Options(backend=d.backend, pipeline=spec.name, gpu=d.gpu))
                ctx.pipeline = spec.name
                ctx.pass_name = "explain"
                self._spec, self._ctx = spec, ctx
                if spec.explain_boundary is None:
                    self.notes.append(f"the {d.backend}/{spec.name} pipeline has no explain_boundary yet; "
                                      "boundaries decided by its passes are left unknown")
            except HlofuseError as err:
                self.notes.append(f"{err}; boundaries decided by fusion passes are left unknown")
        return self._spec, self._ctx

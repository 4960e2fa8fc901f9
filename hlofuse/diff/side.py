"""One side of a comparison, indexed by what its instructions compute: the keys of each kernel's
instructions, the kernels each key is computed in, and the totals `explain` prints."""

from __future__ import annotations

from collections import Counter, defaultdict

from .keys import Key, ModuleKeys, shape_key
from .records import KernelRef, Totals

#: Instructions a kernel is compared without: constants, broadcasts of them and views, which
#: XLA duplicates into every kernel that reads them and which jax versions give metadata or
#: not; what a kernel computes is the rest (a kernel of nothing else keeps them).
PLUMBING = frozenset({"constant", "broadcast", "bitcast", "parameter", "get-tuple-element", "tuple", "iota"})


class SideIndex:
    """Keys of one explanation's kernels and boundaries.  A kernel's instruction names are
    the fused module's (a fusion's members) or, for a replayed module, the names of the
    module the replay started from: both are looked up."""

    def __init__(self, ex):
        self.ex = ex
        modules = [ex.fused_module]
        if ex.replay_result is not None:
            modules += [ex.replay_result.input, ex.replay_result.module]
        self._modules = [ModuleKeys(m) for m in modules if m is not None]
        self.replay_keys = ModuleKeys(ex.replay_result.input) if ex.replay_result is not None else None
        #: (computation, kernel name) → the multiset of its instructions' keys
        self.kernel_keys: dict[tuple[str, str], Counter] = {}
        #: key → the kernels that compute it
        self.kernels_of: dict[Key, list[tuple[str, str]]] = defaultdict(list)
        self.kernels = {(k.computation, k.name): k for k in ex.kernels}
        self._near: dict | None = None
        for k in ex.kernels:
            every = [key for key in (self.key(name) for name in k.instructions) if key is not None]
            keys = Counter(key for key in every if key.opcode not in PLUMBING) or Counter(every)
            if not keys:
                keys = Counter([self.key(k.root) or Key(k.kind, derived=(k.name,))])
            self.kernel_keys[(k.computation, k.name)] = keys
            for key in keys:
                self.kernels_of[key].append((k.computation, k.name))

    def near(self, key: Key | None, lines: int = 8) -> Key | None:
        """The key of this side that computes what `key` names: itself, else the same op of
        the same opcode in the same file on the nearest line (within `lines`): jax versions
        attribute an op of a statement spread over several lines to different ones of them."""
        if key is None or key in self.kernels_of:
            return key
        if not key.anchored or key.line is None:
            return None
        if self._near is None:
            self._near = defaultdict(list)
            for k in self.kernels_of:
                if k.anchored and k.line is not None:
                    self._near[(k.file, k.op, k.opcode)].append(k)
        found = [k for k in self._near.get((key.file, key.op, key.opcode), ()) if abs(k.line - key.line) <= lines]
        return min(found, key=lambda k: (abs(k.line - key.line), k.line)) if found else None

    def key(self, name: str) -> Key | None:
        for keys in self._modules:
            if name in keys:
                return keys.key(name)
        return None

    def output_shape(self, kid: tuple[str, str]) -> tuple | None:
        """What a kernel writes (element types and dimensions, no layout)."""
        instr = self._instruction(kid[1])
        return shape_key(instr.shape) if instr is not None else None

    def ref(self, kid: tuple[str, str]) -> KernelRef:
        k = self.kernels[kid]
        return KernelRef(k.name, k.label, k.computation, k.launches, k.modelled_us, k.source)

    def boundary_key(self, b) -> tuple:
        """A boundary by what crosses: the producer's and the consumer's keys (a buffer
        consumer by its kind: tuples differ in metadata between jax versions), and where it
        crosses (a loop's carried value is another boundary than its input).  Not the output
        index of a multi-output producer: it numbers the fusion's outputs, which another
        compile orders otherwise."""
        if b.consumer_kernel is None:  # a buffer (a tuple of outputs or loop state): one per place it is
            instr = self._instruction(b.consumer)
            consumer = ("buffer", instr.opcode if instr is not None else b.consumer)
        else:
            consumer = self.key(b.consumer) or b.consumer
        producer = self.producer_key(b)
        if producer is not None and producer.opcode in PLUMBING:  # metadata or not by jax version
            instr = self._instruction(b.producer)
            producer = ("plumbing", producer.opcode, shape_key(instr.shape) if instr is not None else None)
        # an async wrapper (jax 0.11 runs some loops in an async computation) moves no value
        crossing = tuple(c for c in b.crossing if not c.startswith("async-"))
        return (producer or b.producer, consumer, crossing)

    def producer_key(self, b) -> Key | None:
        """The key of the value that crosses: a multi-output producer's output, not its tuple."""
        name = b.producer
        for index in b.output:
            instr = self._instruction(name)
            if instr is None or instr.opcode != "tuple" or index >= len(instr.operands):
                break
            name = instr.operands[index]
        return self.key(name)

    def _instruction(self, name: str):
        for keys in self._modules:
            if name in keys:
                return keys.instruction(name)
        return None

    def totals(self) -> Totals:
        s = self.ex.summary()
        modelled = s.get("modelled") or {}
        target = (modelled.get("target") or {}).get("description")
        return Totals(kernels=s["kernels"], launches_per_run=s["kernels_launched"], boundaries=s["boundaries"],
                      bytes_per_run=s["bytes_across_boundaries_per_run"],
                      modelled_us_per_run=modelled.get("modelled_us_per_run"), target=target)

    def runs(self, computation: str) -> int | None:
        for c in self.ex.computations:
            if c.name == computation:
                return c.runs
        return None

"""Large inputs: two processes, one half of the computations each.

Top-level computations are blank-line-separated blocks that start at column 0, so a large
module splits into two runs of whole computations.  After the parser is built, the process
forks: the child reads, assembles and checks (per instruction) the second half while the
parent does the first, then the child sends its computations back pickled.  The parent runs
the checks across computations (names, ENTRY, called computations, async pairs) on the whole.
Anything unusual -- an error in either half, a computation that refers across the split in
a way only the whole module resolves -- and the text is parsed again in one process, which
gives the same module or the same error as without the split.
"""

from __future__ import annotations

import dataclasses
import os
import re

from .. import ir
from ..errors import HloSyntaxError
from .assemble import Assembler, uses_percent
from .grammar import parser
from .records import LocatedError, RawComputation
from .sections import stack_frame_index

#: Inputs smaller than this are parsed in one process (forking costs about 20 ms).
PARALLEL_MIN_BYTES = 4_000_000
_SPLIT_RE = re.compile(r"\n\n+(?=(?:ENTRY[ \t]+)?%?[A-Za-z_][\w.\-]*[ \t]*[({])")


def jobs(text: str) -> int:
    import threading

    if len(text) < PARALLEL_MIN_BYTES or not hasattr(os, "fork"):
        return 1
    if threading.active_count() > 1:
        return 1  # forking a threaded process can leave the child holding another thread's lock
    wanted = os.environ.get("HLOFUSE_JOBS", "")
    if wanted.isdigit():
        return min(int(wanted), 2)
    cpus = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0] > cpus - 0.5  # no idle core: a second process only competes
    except (AttributeError, OSError):
        busy = False
    return 2 if cpus >= 2 and not busy else 1


class _Part:
    """What one half of a module turns into."""

    __slots__ = ("raw", "computations", "extra", "warnings", "saw_operand_shapes")

    def __init__(self, raw, computations, extra, warnings, saw_operand_shapes):
        self.raw, self.computations, self.extra = raw, computations, extra
        self.warnings, self.saw_operand_shapes = warnings, saw_operand_shapes


def _read_part(text: str, start: int, stop: int, strict: bool) -> _Part:
    from ..validate import check_module

    raw = _parse_range(text, start, stop)
    if raw.form not in ("module", "computations") or not raw.computations:
        raise _NotSplittable
    assembler = Assembler(text)
    comps = []
    for rc in raw.computations:
        comp = assembler.computation(rc, rc.is_entry)
        assembler.built[comp.name] = comp
        comps.append(comp)
    partial = ir.Module(name=raw.name, computations=tuple(assembler.extra_computations + comps),
                        entry_name=comps[-1].name)
    checked = check_module(partial, text, strict=strict, module_level=False)
    # The raw instructions are not needed any more; keep what the module-level checks use.
    for rc in raw.computations:
        rc.instrs = rc.instrs[:1]
    return _Part(raw, comps, assembler.extra_computations, list(assembler.warnings) + list(checked.warnings),
                 assembler.saw_operand_shapes)


class _NotSplittable(Exception):
    pass


def _parse_range(text: str, start: int, stop: int):
    """The raw records of text[start:stop], read by lalr.py's parser (Lark's where the tables
    do not fit the grammar).  Any failure: the text is read again in one process, which words it."""
    from . import lalr
    from .reader import forget_long_values

    fast = lalr.parser()
    try:
        if fast is not None:
            return fast.parse(text, "start", start, stop)
        import lark

        return parser().parse(lark.lexer.TextSlice(text, start, stop), start="start")
    except (HloSyntaxError, _NotSplittable, LocatedError, RecursionError):
        raise
    except Exception as err:  # noqa: BLE001 - lalr.Failed, Lark's errors: read again in one process
        raise _NotSplittable from err
    finally:
        forget_long_values()


def parse_in_two(text: str, path: str | None, strict: bool) -> ir.Module | None:
    """The module, or None when the text does not split (then it is read in one process)."""
    import pickle

    from ..validate import check_module

    # The parent also unpickles and rebuilds the child's half, so it reads a little less.
    m = _SPLIT_RE.search(text, len(text) * 9 // 20)
    if m is None:
        return None
    split = m.end()
    from . import lalr

    if lalr.parser() is None:
        parser()  # built before forking, so the child has it
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: read the second half, send it back, leave without cleanup
        code = 0
        try:
            os.close(read_fd)
            try:
                part = _read_part(text, split, len(text), strict)
                part.computations, part.extra = _pack(part.computations), _pack(part.extra)
                payload = pickle.dumps(("ok", part), pickle.HIGHEST_PROTOCOL)
            except BaseException:  # noqa: BLE001 - any failure: the parent reads it all again
                payload = pickle.dumps(("failed", None))
            with os.fdopen(write_fd, "wb") as fh:
                fh.write(payload)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    first = None
    try:
        try:
            first = _read_part(text, 0, split, strict)
        except (HloSyntaxError, _NotSplittable, LocatedError, RecursionError):
            first = None
        with os.fdopen(read_fd, "rb") as fh:
            status, second = pickle.loads(fh.read())
    finally:
        os.waitpid(pid, 0)
    if first is None or status != "ok":
        return None
    second.computations, second.extra = _unpack(second.computations), _unpack(second.extra)
    return _merge(first, second, text, path, strict, check_module)


def _pack(computations: list) -> list:
    """Computations as plain tuples: they pickle and unpickle several times faster than the
    frozen dataclasses (which unpickle through a Python __setstate__ each)."""
    return [(c.name, c.root_name, c.is_entry, c.attrs, c.span.line, c.span.column,
             [(i.name, i.opcode, i.shape, i.operands, i.attrs, i.literal, i.called, i.span.line, i.span.column)
              for i in c.instructions]) for c in computations]


def _unpack(packed: list) -> list:
    instruction, span, computation = ir.Instruction, ir.Span, ir.Computation
    return [computation(name, tuple([instruction(n, o, s, ops, at, lit, called, span(line, col))
                                     for n, o, s, ops, at, lit, called, line, col in instrs]),
                        root, is_entry, attrs, span(c_line, c_col))
            for name, root, is_entry, attrs, c_line, c_col, instrs in packed]


def _merge(first: _Part, second: _Part, text: str, path: str | None, strict: bool, check_module) -> ir.Module | None:
    raws = first.raw.computations + second.raw.computations
    assembler = Assembler(text)
    seen: dict[str, RawComputation] = {}
    entries = []
    for rc in raws:  # the same checks, in the same order, as Assembler.module
        if rc.name in seen:
            return None
        seen[rc.name] = rc
        if rc.is_entry:
            entries.append(rc)
    if len(entries) > 1:
        return None
    comps = first.computations + second.computations
    if not entries:  # the last computation is the entry
        comps[-1] = dataclasses.replace(comps[-1], is_entry=True)
    extra = first.extra + second.extra
    assembler.saw_operand_shapes = first.saw_operand_shapes or second.saw_operand_shapes
    percent = uses_percent(text, raws[0])
    module = ir.Module(
        name=first.raw.name,
        computations=tuple(extra + comps),
        entry_name=(entries[0] if entries else raws[-1]).name,
        attrs=tuple((k, v) for k, v, _, _ in first.raw.attrs),
        stack_frames=stack_frame_index(first.raw.sections),
        form=first.raw.form,
        path=path,
        warnings=tuple(first.warnings + second.warnings),
        style=assembler.style_of(percent, any(rc.params is not None for rc in raws)),
    )
    position = {comp.name: k for k, comp in enumerate(module.computations)}
    callees_first = True
    for k, comp in enumerate(module.computations):
        for instr in comp.instructions:
            for callee in instr.called:
                at = position.get(callee)
                if at is None:
                    return None
                if at >= k:
                    callees_first = False
    if not callees_first:
        assembler.check_calls(module)
    return check_module(module, text, strict=strict, instructions=False)


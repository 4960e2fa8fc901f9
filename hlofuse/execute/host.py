"""The host program of a CPU plan: its steps (launches, copies, while loops, conditionals)
generated as one C function compiled beside the kernels, so that a launch is a C call and not
a Python one.  XLA:CPU runs its thunks from C++ the same way; a Python loop of ctypes calls
would add a microsecond or two per launch, which is hlofuse's overhead and not the plan's.
"""

from __future__ import annotations

from ..errors import ExecutionError
from .emit import ctype

HOST_FUNCTION = "hf_run"


def host_source(lowered) -> str:
    """The lowered program's steps (launches, copies, while loops, conditionals) as one C
    function `hf_run(kargs, bufs, lib)`: generated kernel i is called with kargs[i] (its
    argument array), library kernel i through the callback lib[i] (NumPy, back in Python),
    a copy is a memcpy between bufs[...]."""
    from .lower import Conditional, Copy, Launch, While

    kernels = lowered.kernels
    lines = [f"void {HOST_FUNCTION}(void* const* kargs, void* const* bufs, void (*const* lib)(void)) {{"]

    def steps(items, depth):
        pad = "  " * depth
        for step in items:
            if isinstance(step, Launch):
                k = kernels[step.kernel]
                lines.append(f"{pad}{k.name}((void**)kargs[{step.kernel}]);" if k.generated
                             else f"{pad}lib[{step.kernel}]();")
            elif isinstance(step, Copy):
                n = lowered.buffers[step.src].nbytes
                lines.append(f"{pad}__builtin_memcpy(bufs[{step.dst}], bufs[{step.src}], {n});")
            elif isinstance(step, While):
                steps(step.entry, depth)
                if step.trip_count is not None:  # XLA's WhileThunk: the body that often, no condition
                    lines.append(f"{pad}for (i64 trip = 0; trip < {step.trip_count}LL; ++trip) {{")
                else:
                    lines.append(f"{pad}for (;;) {{")
                    steps(step.cond, depth + 1)
                    lines.append(f"{pad}  if (!*(const pred*)bufs[{step.pred}]) break;")
                steps(step.body + step.end, depth + 1)
                lines.append(f"{pad}}}")
            elif isinstance(step, Conditional):
                et = lowered.buffers[step.selector].shape.element_type
                if et == "pred":
                    lines.append(f"{pad}if (*(const pred*)bufs[{step.selector}]) {{")
                    steps(step.branches[0], depth + 1)
                    lines.append(f"{pad}}} else {{")
                    steps(step.branches[1] if len(step.branches) > 1 else [], depth + 1)
                    lines.append(f"{pad}}}")
                else:
                    last = len(step.branches) - 1
                    lines.append(f"{pad}{{ const i64 sel = (i64)*(const {ctype(et)}*)bufs[{step.selector}];")
                    for i, branch in enumerate(step.branches):
                        cond = f"sel == {i}" if i < last else "1"  # out of range: the last branch
                        lines.append(f"{pad}  {'if' if i == 0 else '} else if'} ({cond}) {{")
                        steps(branch, depth + 2)
                    lines.append(f"{pad}  }}")
                    lines.append(f"{pad}}}")
            else:
                raise ExecutionError(f"internal: unknown step {step!r}")

    steps(lowered.steps, 1)
    lines.append("}")
    return "\n".join(lines)

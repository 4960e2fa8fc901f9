"""How long a replay and an explanation take on one very wide concatenate (issue 17, item 8).

Two modules of N operands (default 100,000):
  fused      XLA's output shape of such a program: one kInput fusion whose computation
             concatenates N parameters (explain reads these; a replay prices the fusion)
  unfused    a concatenate of N entry parameters (the variadic-op splitter cuts it into
             concatenates of 128 operands, which the passes then price and fuse)

Prints CPU seconds of `replay` per pipeline and of `explain` (priority), and µs per operand:
the time per operand stays flat as N grows when the work is linear.

    python bench/wide_concat.py [--sizes 10000,100000] [--pipelines legacy,priority,cpu]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hlofuse  # noqa: E402
from hlofuse.explain import explain  # noqa: E402
from hlofuse.pipeline import Options, replay  # noqa: E402


def fused_module(n: int) -> str:
    body = [f"  q{i} = f32[1] parameter({i})" for i in range(n)]
    body.append(f"  c = f32[{n}] concatenate({', '.join(f'q{i}' for i in range(n))}), dimensions={{0}}")
    body.append(f"  ROOT r = f32[{n}] negate(c)")
    entry = [f"  p{i} = f32[1] parameter({i})" for i in range(n)]
    entry.append(f"  ROOT f = f32[{n}] fusion({', '.join(f'p{i}' for i in range(n))}), kind=kInput, calls=fc")
    return "HloModule wide_fused\n\nfc {\n" + "\n".join(body) + "\n}\n\nENTRY e {\n" + "\n".join(entry) + "\n}\n"


def unfused_module(n: int) -> str:
    lines = [f"  p{i} = f32[1] parameter({i})" for i in range(n)]
    lines.append(f"  c = f32[{n}] concatenate({', '.join(f'p{i}' for i in range(n))}), dimensions={{0}}")
    lines.append(f"  ROOT r = f32[{n}] negate(c)")
    return "HloModule wide_unfused\n\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--pipelines", default="legacy,priority,cpu")
    args = parser.parse_args(argv)
    print(f"{'module':<10} {'operands':>9} {'step':<18} {'CPU s':>7} {'µs/operand':>11}")
    for n in (int(s) for s in args.sizes.split(",")):
        for kind, make in (("fused", fused_module), ("unfused", unfused_module)):
            module = hlofuse.loads(make(n))
            steps = [(f"replay {p}", lambda p=p: replay(module, Options(backend="cpu" if p == "cpu" else "gpu",
                                                                        pipeline=p)))
                     for p in args.pipelines.split(",")]
            if kind == "fused":
                steps.append(("explain priority", lambda: explain(module, fused=True, backend="gpu",
                                                                  pipeline="priority")))
            for name, step in steps:
                start = time.process_time()
                step()
                seconds = time.process_time() - start
                print(f"{kind:<10} {n:>9} {name:<18} {seconds:>7.2f} {1e6 * seconds / n:>11.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

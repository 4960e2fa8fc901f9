"""Regenerate this folder: small programs where `hlofuse explain` must find XLA's logged
reason for a boundary in PriorityFusion's log, compiled deviceless for the H100 by jax 0.10.2's
XLA:GPU (XLA 5a9e73cb), one folder per program.

    .venv-samples-current/bin/python tests/data/jax-0.10.2-explain-log/generate.py

Each folder keeps the module right before the fusion passes, the last snapshot of the fusion
pipeline and PriorityFusion's log (`priority_fusion_dump.txt`), under XLA's names.

What each shows (XLA's result):
  normalized_sum  advantages centred (x - mean x), scaled by their standard deviation and summed:
                  the centring is duplicated into both the variance's reduce fusion and the
                  sum's; XLA first refuses the variance's reduce alone ("would create a loop
                  fusion", its user then a loop), last the reduce fusion holding the centring
                  ("both the producer and the consumer contain a reduce")
  zero_edges      one explicit heat-equation step whose rows 0 and -1 are then set to zero: the
                  two dynamic-update-slices share the zero broadcast, fused into both; XLA
                  first refuses the first update alone ("unrecognized inplace update
                  non-elementwise output pair"), last the fusion holding it and the broadcast
                  ("Producer fusion has multiple non-elementwise ops, bailing.")
"""

import sys
from pathlib import Path

import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import deviceless  # noqa: E402 (tests/data/deviceless.py)


def normalized_sum(adv, ratio):
    centred = adv - adv.mean()
    scale = jnp.sqrt((centred * centred).mean()) + 1e-8
    return jnp.minimum(ratio * (centred / scale), 1.2).sum()


def zero_edges(u):
    lap = jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1) + jnp.roll(u, -1, 1) - 4 * u
    u = u + 0.1 * lap
    return u.at[0, :].set(0.0).at[-1, :].set(0.0)


PROGRAMS = {
    "normalized_sum": ("h100_sxm", normalized_sum, [(256,), (256,)]),
    "zero_edges": ("h100_sxm", zero_edges, [(64, 64)]),
}


if __name__ == "__main__":
    sys.exit(deviceless.main(__file__, PROGRAMS, sys.argv[1:]))

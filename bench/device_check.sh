#!/usr/bin/env bash
# The GPU checks of one lent device session, in one call (each step time-boxed, results written
# as they come, so a step that runs out of time still leaves the others' figures):
#   1. the tests that need a GPU, CuPy or nvcc (test_bench, test_execute_kernels, test_compile_jax);
#   2. bench/gpu_vs_xla.py: hlofuse's kernels for XLA's plans of the H100 sample dumps against
#      XLA's own run of the same programs (the JAX installed there);
#   3. bench/paper_section5.py --device cuda on the paper's legacy dumps.
# Usage on the device machine, from the repository root, with lark and graphviz carried as
# wheels in .whl/ (the machine cannot reach PyPI):   bash bench/device_check.sh
# OUT (the folder for results; default out/device), PY (default python3), DEVICE (default cuda;
# `cpu` runs the same steps here, to check the script) may be set.
set -u
OUT=${OUT:-out/device}
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/hlofuse-site .whl/*.whl \
    && export PYTHONPATH=/tmp/hlofuse-site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

step() { echo; echo "=== $1 ($(date +%T))"; }

step "machine"
nvidia-smi -L 2>&1 | head -3
"$PY" -c "import sys, numpy; print(sys.version.split()[0], 'numpy', numpy.__version__)"
"$PY" -c "import cupy; print('cupy', cupy.__version__, cupy.cuda.runtime.getDeviceCount(), 'device(s)')" 2>&1 | tail -1
"$PY" -c "import jax; print('jax', jax.__version__, jax.devices())" 2>&1 | tail -1
command -v nvcc && nvcc --version | tail -1

step "tests that need a GPU, CuPy or nvcc"
timeout 170 "$PY" -m pytest -q -p no:cacheprovider -rs tests/test_bench.py tests/test_execute_kernels.py \
  tests/test_compile_jax.py --junitxml "$OUT/tests.xml" 2>&1 | tail -40

step "hlofuse's kernels for XLA's plans vs XLA's own run"
timeout 220 "$PY" bench/gpu_vs_xla.py --device "$DEVICE" --repeat 7 --xla-repeat 30 \
  --json "$OUT/gpu_vs_xla.json" --markdown "$OUT/gpu_vs_xla.md"

step "the paper's section V (legacy RTX 2080 Ti dumps)"
timeout 100 "$PY" bench/paper_section5.py --device "$DEVICE" --repeat 7 \
  --json "$OUT/section5_legacy.json" --markdown "$OUT/section5_legacy.md" 2>&1 | tail -20

step "done"

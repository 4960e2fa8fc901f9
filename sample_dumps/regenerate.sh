#!/usr/bin/env bash
# Regenerate sample_dumps/ from real XLA (what `make samples` runs).
#
# Needs network access to PyPI, no GPU: XLA:GPU compiles for a described device.
# Creates two clean virtualenvs in the repository root, installs the pinned packages,
# runs generate.py for every build, refreshes the counts table in README.md and prints
# a size summary. About ten minutes on two cores, most of it pip.
#
# Environment: PYTHON (default python3, 3.11 to 3.13), KEEP_VENVS=1 to reuse existing venvs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
HERE=sample_dumps

make_venv() {  # name requirements-file
  local venv="$1" req="$2"
  if [ "${KEEP_VENVS:-0}" = 1 ] && [ -x "$venv/bin/python" ]; then
    echo "== reusing $venv"
  else
    echo "== creating $venv from $req"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
  fi
  "$venv/bin/python" -m pip install -q -r "$req"
}

make_venv .venv-samples-current "$HERE/requirements-current.txt"
make_venv .venv-samples-legacy "$HERE/requirements-legacy.txt"

# Every folder is rebuilt from nothing; the manifest is rewritten build by build.
rm -f "$HERE/MANIFEST.json"
for d in "$HERE"/gpu-current-* "$HERE"/gpu-legacy-* "$HERE"/cpu "$HERE"/cpu-noynn; do
  [ -d "$d" ] && rm -rf "$d"
done

status=0
echo "== gpu-current (jax 0.10.2)"
.venv-samples-current/bin/python "$HERE/generate.py" --build gpu-current || status=1
echo "== gpu-legacy (jax 0.4.35)"
.venv-samples-legacy/bin/python "$HERE/generate.py" --build gpu-legacy || status=1
echo "== cpu (jax 0.10.2)"
.venv-samples-current/bin/python "$HERE/generate.py" --build cpu || status=1
echo "== cpu-noynn (jax 0.10.2)"
.venv-samples-current/bin/python "$HERE/generate.py" --build cpu-noynn || status=1

echo "== kernel counts (README.md table refreshed)"
"$PYTHON" "$HERE/summarize.py" --readme > /dev/null

echo "== sizes"
for d in "$HERE"/gpu-current-* "$HERE"/gpu-legacy-* "$HERE"/cpu "$HERE"/cpu-noynn; do
  [ -d "$d" ] || continue
  printf '%-34s %4d programs %6d files %8s\n' "$d" \
    "$(find "$d" -mindepth 1 -maxdepth 1 \( -type d -o -type l \) | wc -l)" \
    "$(find "$d" -type f | wc -l)" "$(du -sh --apparent-size "$d" | cut -f1)"
done
printf '%-34s %26s\n' "total $HERE/" "$(du -sh --apparent-size "$HERE" | cut -f1)"
exit $status

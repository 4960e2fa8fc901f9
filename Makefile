# hlofuse — the two commands a new user types: `make demo` and `make test`.
# Everything else they need (a virtualenv, the Python dependencies, Graphviz's `dot`)
# is installed here, on first use.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The extras installed into the venv: `make test EXTRAS=dev,jax` adds JAX with its CUDA plugin
# (about 1 GB, under a minute to install), so that the tests of `hlofuse compile` run instead
# of being skipped.  CI does that (.ci/run).
EXTRAS ?= dev
comma  := ,
STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
DEMO   ?= sample_dumps/gpu-legacy-rtx2080ti/cartpole_b_concat_vecdone

.PHONY: demo test venv graphviz samples bench clean

demo: $(STAMP) graphviz
	@mkdir -p out
	$(VENV)/bin/hlofuse explain $(DEMO) --html out/demo.html
	$(VENV)/bin/hlofuse render $(DEMO) -o out/demo.svg
	@echo "wrote out/demo.html and out/demo.svg"

test: $(STAMP) graphviz
	$(PY) -m pytest -q

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $(STAMP)

# Graphviz's `dot` renders SVG. Install Debian's package when it is missing and we can;
# otherwise say so once and carry on (hlofuse still writes the DOT source).
graphviz:
	@command -v dot >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's graphviz (for the dot program)"; \
	    (apt-get install -y -qq graphviz >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq graphviz >/dev/null 2>&1; }) \
	      || echo "warning: could not install graphviz; SVG rendering will write DOT only"; \
	  elif command -v sudo >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then \
	    sudo apt-get install -y -qq graphviz >/dev/null 2>&1 || echo "warning: could not install graphviz"; \
	  else echo "warning: graphviz (dot) is missing; install it with your package manager"; fi; }

# Regenerate the real XLA dumps in sample_dumps/ (needs network access to PyPI; no GPU).
samples:
	bash sample_dumps/regenerate.sh

# `make bench BENCH=--300k` adds 300k-instruction modules to the replay table (minutes more);
# XLA's parser is timed beside hlofuse's when jaxlib is installed (EXTRAS=dev,jax).
bench: $(STAMP)
	$(PY) bench/run.py $(BENCH)

clean:
	rm -rf out .pytest_cache

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
# The compiled core (hlofuse/native): the replay's hottest modules compiled with mypyc (installed
# into the venv with the other dependencies) when a C compiler is found, rebuilt when one of
# them changes.  Without a compiler, one line says so and the Python modules run, with the same
# results.  `make test` runs the suite on the compiled core and checks the Python modules
# against it (tests/test_native_core.py).
NATIVE := $(VENV)/.native-built
NATIVE_SOURCES := $(shell $(PYTHON) -c 'import runpy; m = runpy.run_path("hlofuse/native/__init__.py"); \
	print(*(m["source_path"](n).relative_to(m["PACKAGE_ROOT"]) for n in m["MODULES"]))' 2>/dev/null)

.PHONY: demo test venv native graphviz samples bench clean

demo: $(STAMP) $(NATIVE) graphviz
	@mkdir -p out
	$(VENV)/bin/hlofuse explain $(DEMO) --html out/demo.html
	$(VENV)/bin/hlofuse render $(DEMO) -o out/demo.svg
	@echo "wrote out/demo.html and out/demo.svg"

test: $(STAMP) $(NATIVE) graphviz
	$(PY) -m pytest -q

venv: $(STAMP) $(NATIVE)

native: $(NATIVE)

$(NATIVE): $(STAMP) hlofuse/native/__init__.py hlofuse/native/build.py $(NATIVE_SOURCES)
	$(PY) -m hlofuse.native.build
	touch $(NATIVE)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS),native]'
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
	rm -f hlofuse/native/built.json $(NATIVE)
	find hlofuse -name '*.cpython-*.so' -delete

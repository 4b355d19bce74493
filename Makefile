# Two commands a newcomer needs: `make demo` (main job) and `make test` (test suite).
PYTHON ?= python3
PIP = $(PYTHON) -m pip

.PHONY: install install-test kernels demo test test-slow test-debug bench bench-env bench-compare bench-history clean

# Incremental installs. `pip install -e .` builds every kernel in a fresh temporary
# environment (minutes), so it runs only when the package metadata changed (setup.py,
# pyproject.toml) or on a fresh clone; the stamp files in build/ record what is done. A
# changed kernel source (.pyx, .pxd, .pxi) is rebuilt in place by `setup.py build_ext
# --inplace`: Cython regenerates only the modules whose sources (or cimported .pxd/.pxi)
# changed and setuptools recompiles only those, so `make demo` on an installed, unchanged
# tree takes seconds. Cython and setuptools (the build requirements of pyproject.toml) are
# installed for that step; `make clean` forgets everything.
STAMPS = build/stamps
KERNEL_SOURCES := $(wildcard fastdp/_kernels/*.pyx fastdp/_kernels/*.pxd fastdp/_kernels/*.pxi)
# the requirements of pyproject.toml: `$(REQUIREMENTS) build` (build-system, without numpy:
# the installed one is kept) or `$(REQUIREMENTS) test,plot` (optional-dependencies)
# (tomllib from Python 3.11; on 3.10 the tomli that pip vendors)
REQUIREMENTS = $(PYTHON) -c 'import sys; \
	toml = __import__("tomllib") if sys.version_info >= (3, 11) else __import__("pip._vendor.tomli", fromlist=["load"]); \
	t = toml.load(open("pyproject.toml", "rb")); \
	r = [q for q in t["build-system"]["requires"] if not q.startswith("numpy")] if sys.argv[1] == "build" \
	else [q for e in sys.argv[1].split(",") for q in t["project"]["optional-dependencies"][e]]; \
	print(" ".join(chr(34) + q + chr(34) for q in r))'
TEST_EXTRAS = test,plot,ray

# (the kernels' stamp is made with the installed one and listed after it: the fresh install
# has just compiled every kernel; the first in-place rebuild then compiles each kernel once
# into build/, and later ones only what changed)
$(STAMPS)/installed: setup.py pyproject.toml
	$(PIP) install --quiet -e .
	@mkdir -p $(STAMPS) && touch $@ $(STAMPS)/kernels

$(STAMPS)/kernels: $(KERNEL_SOURCES)
	$(PIP) install --quiet $(shell $(REQUIREMENTS) build)
	$(PYTHON) setup.py --quiet build_ext --inplace
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/test-extras: $(STAMPS)/installed
	$(PIP) install --quiet $(shell $(REQUIREMENTS) $(TEST_EXTRAS))
	@touch $@

kernels: $(STAMPS)/installed $(STAMPS)/kernels

install: kernels

install-test: install $(STAMPS)/test-extras

demo: install
	$(PYTHON) -m fastdp.demo

# The default suite runs on every core (pytest-xdist; one test file per worker at a time,
# so module fixtures stay in one process; longest files first and the Ray files on one
# worker, see tests/_schedule.py). TEST_WORKERS=0 runs serially. Bytecode is written even
# where PYTHONDONTWRITEBYTECODE is set: without it each worker re-compiles and re-rewrites
# the asserts of every test module (about 8 CPU seconds a worker).
TEST_WORKERS ?= auto
test: install-test
	PYTHONDONTWRITEBYTECODE= $(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadfile

test-slow: install-test
	$(PYTHON) -m pytest -m slow

# Kernels rebuilt with bounds checking in a separate worktree, then the fuzz,
# kernel and determinism tests run against that build (see docs/auditing.md).
DEBUG_TREE ?= $(CURDIR)/build/debug-tree
test-debug: install-test
	rm -rf $(DEBUG_TREE) && git worktree prune
	git worktree add --detach $(DEBUG_TREE) HEAD
	cd $(DEBUG_TREE) && FASTDP_DEBUG_KERNELS=1 $(PYTHON) setup.py build_ext --inplace --force
	cd $(DEBUG_TREE) && NUMBA_BOUNDSCHECK=1 NUMBA_CACHE_DIR=$(DEBUG_TREE)/.numba-cache \
		PYTHONPATH=$(DEBUG_TREE) $(PYTHON) -m pytest -p no:cacheprovider tests/_kernels \
		tests/test_fuzz_validation.py tests/test_fuzz_libsvm.py tests/test_determinism.py

# asv smoke run of the suite in asv_benchmarks/ (asv.conf.json at the root); the
# side-by-side comparison with the peers is `python benchmarks/compare.py`.
bench: install
	$(PIP) install --quiet "asv>=0.6.4" "matplotlib>=3.8"
	asv machine --yes
	asv run --python=same --quick --show-stderr

# Build mode (asv.conf.json): each commit built in its own virtualenv.
# bench-compare fails (exit 1) when a benchmark of the working commit (HEAD) is slower
# than on main by more than BENCH_FACTOR; BENCH_SELECT narrows it, e.g. "-b ScdEpoch".
# bench-history benchmarks the last BENCH_COMMITS commits and publishes the HTML history
# (asv_benchmarks/html/index.html; `asv preview` serves it).
BENCH_FACTOR ?= 1.2
BENCH_COMMITS ?= 10
BENCH_SELECT ?=
bench-env:
	$(PIP) install --quiet "asv>=0.6.4" "virtualenv>=20" "matplotlib>=3.8"
	asv machine --yes

bench-compare: bench-env
	asv continuous --factor $(BENCH_FACTOR) --split --show-stderr $(BENCH_SELECT) main HEAD

bench-history: bench-env
	asv run --skip-existing-commits --show-stderr $(BENCH_SELECT) HEAD~$(BENCH_COMMITS)..HEAD
	asv publish

clean:
	rm -rf build *.egg-info fastdp/_kernels/*.c fastdp/_kernels/*.cpp fastdp/_kernels/*.so

# Two commands a newcomer needs: `make demo` (main job) and `make test` (test suite).
PYTHON ?= python3
PIP = $(PYTHON) -m pip

.PHONY: install install-test demo test test-slow bench clean

install:
	$(PIP) install --quiet -e .

install-test:
	$(PIP) install --quiet -e ".[test,plot,ray]"

demo: install
	$(PYTHON) -m fastdp.demo

test: install-test
	$(PYTHON) -m pytest

test-slow: install-test
	$(PYTHON) -m pytest -m slow

# asv smoke run of the suite in asv_benchmarks/ (asv.conf.json at the root); the
# side-by-side comparison with the peers is `python benchmarks/compare.py`.
bench: install
	$(PIP) install --quiet "asv>=0.6.4" "matplotlib>=3.8"
	asv machine --yes
	asv run --python=same --quick --show-stderr

clean:
	rm -rf build *.egg-info fastdp/_kernels/*.c fastdp/_kernels/*.so

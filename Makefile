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

bench:
	$(PIP) install --quiet -e ".[bench]"
	cd asv_benchmarks && asv run --python=same --quick --show-stderr

clean:
	rm -rf build *.egg-info fastdp/_kernels/*.c fastdp/_kernels/*.so

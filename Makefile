# `make demo` sets up .venv and runs the demo; `make test` runs every test tier.
# On machines outside this workplace, pass a CPU wheel index so pip never pulls a CUDA
# torch:  make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
PY := $(VENV)/bin/python

.PHONY: setup demo test test-fast test-main test-vllm bench mutation clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install -q -c constraints.txt -e ".[test]"
	touch $@

demo: setup
	HF_HUB_OFFLINE=1 $(VENV)/bin/agentbranch demo

test: test-main test-vllm

# The library tests on TEST_WORKERS pytest-xdist workers, a test file's tests on one worker
# (its module fixtures, cached simulations and a docs page's session are built once).
TEST_WORKERS ?= 2
test-main: setup
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The loop while you work: the library tests without the slow checks (tests/conftest.py
# SLOW_FILES/SLOW_TESTS: docs pages, simulations, examples, benchmark scripts, soaks), each
# hypothesis test on a quarter of its examples (the "fast" profile): 2,670 tests in 4:15 on a
# quiet 2-core machine (4:40 on a first run, which fills the bytecode cache). CI runs `make test`.
# Python's bytecode cache stays on (images often set PYTHONDONTWRITEBYTECODE): without it
# every worker rewrites and compiles every test file again on each run.
test-fast: setup
	HF_HUB_OFFLINE=1 PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n $(TEST_WORKERS) \
		--dist loadfile -m "not slow" --hypothesis-profile=fast

test-vllm:
	bash scripts/vllm_tier.sh

bench: setup
	$(PY) benchmarks/bench_read_vs_generate.py

# Mutation testing of the trust and read-validation code (not part of `make test`/CI):
# `make mutation` runs every module, `make mutation MODULES="trust evidence"` some.
# docs/reliability.md ("Mutation testing") gives the score and the time per module.
MODULES ?=
mutation: setup
	$(PY) -m pip install -q -c constraints.txt -e ".[mutation]"
	$(PY) scripts/mutation.py $(MODULES)

clean:
	rm -rf $(VENV) .venv-vllm .mutation

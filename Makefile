# qbench: `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# CPU wheel (small). On a GPU machine install a CUDA torch first; see README.
TORCH  ?= torch==2.13.0

.PHONY: setup test test-busy test-gradio demo lint typecheck bench clean gradio-envs nginx

$(STAMP): pyproject.toml
	$(PY) -m pip --version >/dev/null 2>&1 || $(PYTHON) -m venv --clear $(VENV)  # none, or cut short
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP) nginx

# nginx for the replicas tests (qbench serve --replicas): installed with apt-get when it is missing and
# this runs as root; otherwise (or when apt-get fails) those tests skip, saying why.
nginx:
	@command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || ! command -v apt-get >/dev/null 2>&1 \
	  || [ "$$(id -u)" != 0 ] || apt-get install -y -q nginx-light >/dev/null 2>&1 \
	  || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q nginx-light >/dev/null 2>&1) \
	  || echo "nginx: not installed (apt-get failed): the replicas tests will skip"

# Six pytest workers on 2 cores: most tests wait on sleeping servers, and six keep both cores busy 90% of
# a quiet run where three left them 62% busy. Eight left them idle ~18 core-s of ~950 (pytest 8:13 against
# 8:38 at six), but beside four busy loops three tests then got too little CPU to measure what they
# check (docs/development.md). One file per worker (module fixtures stay shared), the slowest files
# first (--no-loadscope-reorder keeps the order tests/timing.py sets). PYTEST_WORKERS=0 runs it serially.
PYTEST_WORKERS ?= 6
# The project's bytecode first: with PYTHONDONTWRITEBYTECODE set (this machine sets it) each of the
# suite's few hundred server and CLI processes would compile qbench and reference_server again (~0.5 s of
# CPU each); a stale .pyc is never used (Python checks each source's size and time). The test modules'
# rewritten asserts are written once by the controller before its workers start (tests/rewrite_cache.py).
test: lint nginx
	$(PY) -m compileall -q qbench reference_server tests bench examples >/dev/null
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The suite on a deliberately slowed machine, run before every submission: BUSY busy loops
# (`yes > /dev/null`) beside `make test` the whole time, stopped when it ends (4 on a 2-core box: about a
# box 2.5x slower per core). Its exit status is make test's (BUSY_TARGET: another target beside them).
BUSY ?= 4
test-busy:
	@bash -c 'pids=(); for _ in $$(seq $(BUSY)); do yes >/dev/null & pids+=($$!); done; \
	  trap "kill $${pids[*]} 2>/dev/null" EXIT; echo "$(BUSY) busy loops beside the suite (pids $${pids[*]})"; \
	  $(MAKE) $(BUSY_TARGET)'
BUSY_TARGET ?= test

lint: $(STAMP)
	$(PY) -m ruff check qbench reference_server tests bench examples
	$(PY) -m mypy

# One cached virtualenv per verified Gradio release (~/.cache/qbench/gradio-envs/<version>/, shared by
# every clone on the machine); tests build them on demand.
gradio-envs: $(STAMP)
	$(PY) tests/gradio_versions/envs.py

# The whole release matrix: `make test`'s releases (3.50.2, 4.44.1, 5.50.0; 6.31 is the main venv's)
# plus one release of each 4.x wire family.
GRADIO_MATRIX ?= 4.8.0,4.16.0,4.20.1,4.21.0,4.22.0
test-gradio: $(STAMP)
	QBENCH_GRADIO_VERSIONS=$(GRADIO_MATRIX) $(PY) -m pytest -q tests/gradio_versions tests/conformance

demo: $(STAMP)
	$(PY) -m qbench demo

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) bench/server_vs_gradio.py

clean:
	rm -rf $(VENV) reports/*/

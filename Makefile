# Two commands do all the set-up on a fresh machine:
#   make demo   serve the tickets demo on SQLite at http://127.0.0.1:8000
#   make test   run every test (ruff, mypy, generate --check, PostgreSQL and Chromium included)

VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
EXAMPLES := $(wildcard examples/*/app.py)
ADDR ?= 127.0.0.1:8000
# The suite runs on 3 workers, each module's tests on one worker so they share its module
# fixtures (the browser modules all on one, sharing Playwright's driver: tests/conftest.py).
# 3 on 2 cores: many tests wait on a server, Chromium or PostgreSQL; a fourth
# worker cost more CPU (its own collection, one more process on each core) than its waits
# gave back (docs/performance.md, stop 22). The modules are handed out in the order
# tests/conftest.py gives them, the slowest first (xdist would otherwise hand out the
# modules of most tests first, and so the slow ones of few tests last, when the other
# workers have finished). `make test PYTEST_ARGS=` runs it in one process.
PYTEST_ARGS ?= -n 3 --dist loadscope --no-loadscope-reorder
# The suite's temporary files (each test's app folder and SQLite database, Chromium's
# profiles) live in memory where the machine has /dev/shm: SQLite's commits and the
# removal of old folders then wait on no disk. Still real files and real SQLite.
TEST_TMPDIR := $(shell test -d /dev/shm -a -w /dev/shm && echo /dev/shm || echo "$${TMPDIR:-/tmp}")
UV := uv>=0.9,<1
NOT_COMPILED := /site-packages/(anthropic|openai|google|pydantic_ai|fastmcp|beartype|authlib|key_value|pip|pygments)/

.PHONY: demo test suite check ts-sdk collected bench clean

# Python caches bytecode here even where the environment sets PYTHONDONTWRITEBYTECODE:
# the suite starts hundreds of Python processes, and each would otherwise compile the
# framework again, and each pytest worker rewrite every test module again.
unexport PYTHONDONTWRITEBYTECODE

# uv installs the project: it downloads in parallel, about 5 s where pip took about a
# minute. The machine's pip puts uv into the venv (no ensurepip); pip is installed too,
# for `.venv/bin/pip`.
$(VENV)/.deps: pyproject.toml
	python3 -m venv --without-pip $(VENV)
	python3 -m pip --python $(PY) install --quiet --disable-pip-version-check '$(UV)'
	$(BIN)/uv pip install --quiet --python $(PY) pip -e '.[test]'
	touch $@

# The bytecode, on every core, of all but the packages only a test or two import (the
# model providers' SDKs and pydantic-ai's, pip, pygments: three quarters of the 11,000
# files), for a venv used outside make, where a PYTHONDONTWRITEBYTECODE environment would
# have each process compile all it imports. make's own targets need only .deps: under
# make the first process to import a module writes its bytecode, and `make test`'s one
# collection, beside mypy, compiles the third of these files the suite imports (about
# 3 s of CPU, where compiling them all took 10 s before anything else could start).
$(VENV)/.installed: $(VENV)/.deps
	$(PY) -m compileall -q -j 0 -x '$(NOT_COMPILED)' $(VENV)/lib >/dev/null
	touch $@

demo: $(VENV)/.deps
	cd examples/tickets && RASTRILLO_DEV=1 ../../$(PY) app.py --addr $(ADDR)

# Under CI (a fresh clone, thrown away after) mypy writes no cache: nothing reads it again,
# and writing it took about 2 s of a cold run's 14 s of CPU (docs/performance.md, stop 27).
MYPY_CACHE := $(if $(filter true 1,$(CI)),--cache-dir=/dev/null)

check: $(VENV)/.deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy $(MYPY_CACHE)
	@for app in $(dir $(EXAMPLES)); do echo "generate --check $$app"; $(BIN)/rastrillo generate --check $$app || exit 1; done

# Two jobs at a time, so that `make test` (not only `make -j2 test`) installs Debian's
# packages (one apt-get run, for what is missing) and then the TypeScript SDK while uv
# installs the venv, collects the suite while `make check` runs, and starts the suite as
# soon as it is collected: mypy's last seconds run beside the workers' start, not before
# it (one after another, `make check` and the SDK's `npm ci` came before the first test).
# `make test` fails if either fails.
MAKEFLAGS += --jobs=2

test: check suite

suite: ts-sdk collected
	TMPDIR=$(TEST_TMPDIR) bash scripts/with-postgres $(BIN)/pytest $(PYTEST_ARGS)

# pytest rewrites the asserts of each test module it imports and caches the result in
# __pycache__. From a fresh clone the workers would each rewrite all of them at
# once, about 5 s of CPU apiece; one collection first writes the cache they then read
# (the run itself reports any error of collection).
collected: $(VENV)/.deps
	@$(BIN)/pytest --collect-only -q | tail -n 1

ts-sdk:
	bash scripts/ensure-node-mcp

bench: $(VENV)/.installed
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache

# Every target bootstraps its own virtualenv on first use (.venv, from pyproject.toml).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BUILD_STAMP := $(VENV)/.build-installed
TEST_STAMP := $(VENV)/.test-installed
LINT_STAMP := $(VENV)/.lint-installed
EXTRAS_STAMP := $(VENV)/.extras-installed

.PHONY: compile compile-all check test test-full test-wheel extras bench bench-oneshot bench-streaming bench-hostile bench-batch bench-stream bench-ab clean-venv test-engines bench-peers

$(BUILD_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[build]'
	touch $@

$(TEST_STAMP): $(BUILD_STAMP)
	$(PY) -m pip install --quiet -e '.[build,test,cli]'
	touch $@

# Ray and Dask (the ray and dask extras): their tests are skipped without them.
$(EXTRAS_STAMP): $(TEST_STAMP)
	$(PY) -m pip install --quiet -e '.[build,test,cli,ray,dask]'
	touch $@

$(LINT_STAMP): $(BUILD_STAMP)
	$(PY) -m pip install --quiet -e '.[build,lint]'
	touch $@

## make compile MODEL=name: write generated/NAME.py from templates_catalog/NAME.json
compile: $(BUILD_STAMP)
	@test -n "$(MODEL)" || { echo "usage: make compile MODEL=<catalog entry>" >&2; exit 2; }
	$(PY) -m compiler compile $(MODEL)

## make compile-all: rebuild every catalog entry
compile-all: $(BUILD_STAMP)
	$(PY) -m compiler compile-all

## make check: fail when generated/ is stale or orphaned, the catalog has lint findings,
## or the code fails ruff, black or mypy
check: $(LINT_STAMP)
	$(PY) -m compiler check
	$(PY) -m compiler lint
	$(PY) -m ruff check .
	$(PY) -m black --check --quiet .
	$(PY) -m mypy

## make test: the test suite on every core (pytest-xdist), differential tests against
## transformers included, property tests at the "ci" hypothesis profile; not the wheel test
test: $(TEST_STAMP)
	$(PY) -m pytest -n auto -m "not wheel"

## make test-full: the same with the "deep" hypothesis profile (many more examples), and the wheel
test-full: $(TEST_STAMP)
	HYPOTHESIS_PROFILE=deep $(PY) -m pytest -n auto

## make test-wheel: build the wheel, install it into a fresh virtualenv, run every CLI verb there
test-wheel: $(TEST_STAMP)
	$(PY) -m pytest -m wheel

## make extras: install the ray and dask extras, so that their tests run
extras: $(EXTRAS_STAMP)

## make bench: compiled parsers vs the reference vs the floor (writes bench/results.json),
## then one-shot parse() and streaming on every catalog entry and workload (bench/oneshot.json,
## bench/streaming.json)
bench: $(TEST_STAMP)
	$(PY) bench/run.py
	$(PY) bench/oneshot.py
	$(PY) bench/streaming.py

## make bench-oneshot: one-shot parse() vs the reference, every catalog entry and workload,
## with linearity checks (writes bench/oneshot.json)
bench-oneshot: $(TEST_STAMP)
	$(PY) bench/oneshot.py

## make bench-streaming: per-chunk cost over the floor, every catalog entry and workload, prose
## and `<`-dense, 80K and 1.3M (writes bench/streaming.json)
bench-streaming: $(TEST_STAMP)
	$(PY) bench/streaming.py

## make bench-hostile: time per chunk on hostile outputs, and a 10 MB stream (writes bench/hostile.json)
bench-hostile: $(TEST_STAMP)
	$(PY) bench/hostile.py

## make bench-batch: records/s of parse-jsonl, Ray Data and Dask on 100,000 records (writes bench/batch.json)
bench-batch: $(EXTRAS_STAMP)
	$(PY) bench/batch.py

## make bench-stream: time per chunk of the OpenAI stream and the reasoning half over one long
## region (a tool-call argument, a reasoning), 256K and 1M characters (writes bench/stream.json)
bench-stream: $(TEST_STAMP)
	$(PY) bench/stream.py

clean-venv:
	rm -rf $(VENV)

## The engines virtualenv: vLLM and SGLang (--no-deps) with what their parser modules import,
## CPU torch, and this package (editable). Not part of .venv: the engines are optional.
ENGINES_VENV := .venv-engines
ENGINES_PY := $(ENGINES_VENV)/bin/python
ENGINES_STAMP := $(ENGINES_VENV)/.installed
SHELL := /bin/bash

$(ENGINES_STAMP): requirements/engines.txt pyproject.toml
	test -x $(ENGINES_PY) || $(PYTHON) -m venv $(ENGINES_VENV)
	$(ENGINES_PY) -m pip install --quiet --upgrade pip
	$(ENGINES_PY) -m pip install --quiet torch==2.13.0
	$(ENGINES_PY) -m pip install --quiet -r requirements/engines.txt
	$(ENGINES_PY) -m pip install --quiet --no-deps vllm==0.33.0 sglang==0.5.23
	$(ENGINES_PY) -m pip install --quiet --no-deps -e .
	touch $@

## make test-engines: the vLLM and SGLang plugins against the real packages
## (writes bench/engines.txt: where our parsers and the engines' own disagree)
test-engines: $(ENGINES_STAMP)
	set -o pipefail; $(ENGINES_PY) -m pytest -q -p no:cacheprovider tests/test_engines.py \
		| tail -n 1 | tee bench/engines-tests.txt
	$(ENGINES_PY) bench/engines.py > bench/engines.txt 2> /dev/null  # the peers log their own failures

## make bench-ab BASE=REV: per-chunk time of this checkout against revision REV (default HEAD),
## both in one process, fed the same streams in turn (optional, not in make bench)
bench-ab: $(TEST_STAMP)
	$(PY) bench/ab.py --base $(or $(BASE),HEAD)

## make bench-peers: our plugins vs vLLM's and SGLang's own parsers in their serving paths,
## same outputs, answers checked; per-chunk and one-shot time ratios (writes bench/peers.txt)
bench-peers: $(ENGINES_STAMP)
	$(ENGINES_PY) bench/peers.py > bench/peers.txt
	cat bench/peers.txt

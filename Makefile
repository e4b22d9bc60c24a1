# glassllm — the two commands: `make run` and `make test`.
#
#   make run    create .venv, install glassllm with its service extra, start the sandbox
#               at http://127.0.0.1:8000 (HOST / PORT / WORKERS override)
#   make test   create/update .venv with the test extras, install Debian's Chromium when
#               missing, run the whole suite and the reference examples

SHELL := /bin/bash
.DEFAULT_GOAL := help

# The first Python >= 3.11 found on PATH (override: make PYTHON=/path/to/python3.12 ...).
PYTHON ?= $(shell for p in python3 python3.13 python3.12 python3.11; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
	2>/dev/null && { echo $$p; break; }; done)
VENV := .venv
VPY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
WORKERS ?= 1
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: help run test lint bench mutation clean

help:
	@echo "make run    start the gradient sandbox at http://$(HOST):$(PORT)"
	@echo "make test   run the whole test suite (installs what it needs)"
	@echo "make lint   ruff check"
	@echo "make bench  service latency / throughput benchmark"
	@echo "make mutation  mutation testing (mutmut, ~30 min on 2 cores; not part of make test)"

$(VPY):
	@test -n "$(PYTHON)" || { echo "error: Python >= 3.11 not found on PATH"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip

# Stamp files: reinstall only when pyproject.toml changes.
$(VENV)/.stamp-service: pyproject.toml | $(VPY)
	$(VPY) -m pip install --quiet -e '.[service]'
	touch $@

$(VENV)/.stamp-test: pyproject.toml | $(VPY)
	$(VPY) -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.stamp-service

run: $(VENV)/.stamp-service
	$(VENV)/bin/glassllm-sandbox --host $(HOST) --port $(PORT) --workers $(WORKERS)

$(CHROMIUM):
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium

# The reference examples run first; pytest's summary stays the last line CI reads.
test: $(VENV)/.stamp-test | $(CHROMIUM)
	@if [ -f ../shared/checks/reference_examples.py ]; then \
		$(VPY) ../shared/checks/reference_examples.py; fi
	$(VPY) -m pytest -q

lint: $(VENV)/.stamp-test
	$(VENV)/bin/ruff check .

bench: $(VENV)/.stamp-service
	$(VPY) bench/service.py

$(VENV)/.stamp-mutation: pyproject.toml | $(VPY)
	$(VPY) -m pip install --quiet -e '.[mutation]'
	touch $@ $(VENV)/.stamp-test $(VENV)/.stamp-service

# Mutation testing of the core and the service's limits (tools/mutation.py says how it
# samples); MUTATION_ARGS="--all" runs every mutant, "--seed N" another sample.
mutation: $(VENV)/.stamp-mutation
	$(VPY) tools/mutation.py $(MUTATION_ARGS)

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache test-artifacts mutants

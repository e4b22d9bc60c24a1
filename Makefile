# glassllm — the two commands: `make run` and `make test`.
#
#   make run    create .venv, install glassllm with its service extra, start the sandbox
#               at http://127.0.0.1:8000 (HOST / PORT / WORKERS override)
#   make test   create/update .venv with the test extras, install Debian's Chromium when
#               missing, run the whole suite
#   make lint / doctest   ruff; every docstring example of both packages (CI runs both)
#   make lint-js          ESLint on the page's modules (npm ci: package.json's pins)
#   make commits          every commit after .ci/commit-base: a subject of at most 72
#                         characters, the why in its body
#   make docker / docker-test / docker-save / lock   the course image, below

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

.PHONY: help run test lint lint-js commits doctest bench load mutation clean

help:
	@echo "make run    start the gradient sandbox at http://$(HOST):$(PORT)"
	@echo "make test   run the whole test suite (installs what it needs)"
	@echo "make lint   ruff check"
	@echo "make lint-js  ESLint on static/js (npm ci from package-lock.json)"
	@echo "make commits  commit subjects of at most 72 characters, a body (after .ci/commit-base)"
	@echo "make doctest  every docstring example of glassllm and glassllm_service"
	@echo "make bench  service latency / throughput benchmark"
	@echo "make load   a class at once: bench/load.py (Locust, about 4 minutes)"
	@echo "make mutation  mutation testing (mutmut, ~30 min on 2 cores; not part of make test)"
	@echo "make docker / docker-test / docker-save / lock   the course image (docs/deploy.md)"
	@echo "make gradescope-autograder SALT_FILE=... ROSTER=... [EXERCISE=...]   Gradescope's autograder zip (docs/grading.md)"

$(VPY):
	@test -n "$(PYTHON)" || { echo "error: Python >= 3.11 not found on PATH"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip

# Stamp files: reinstall only when pyproject.toml or a lock changes. Dependencies come
# from the locks (exact versions, hashes: `make lock` rewrites them), then glassllm itself.
$(VENV)/.stamp-service: pyproject.toml requirements/service.lock | $(VPY)
	$(VPY) -m pip install --quiet --require-hashes --no-deps -r requirements/service.lock
	$(VPY) -m pip install --quiet --no-deps -e .
	touch $@

$(VENV)/.stamp-test: pyproject.toml requirements/test.lock | $(VPY)
	$(VPY) -m pip install --quiet --require-hashes --no-deps -r requirements/test.lock
	$(VPY) -m pip install --quiet --no-deps -e .
	touch $@ $(VENV)/.stamp-service

run: $(VENV)/.stamp-service
	$(VENV)/bin/glassllm-sandbox --host $(HOST) --port $(PORT) --workers $(WORKERS)

# tools/apt_get.sh waits (up to 10 minutes) for another apt or dpkg's lock instead of failing:
# right after a machine boots, unattended upgrades hold it
$(CHROMIUM):
	$(SUDO) sh tools/apt_get.sh update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive sh tools/apt_get.sh install -y chromium

# Debian's PostgreSQL server, for the class record's tests against a real one (each test
# starts its own cluster in a temporary directory: tests/postgres_server.py); the cluster
# the package makes and starts is not used. Its directory stands for the package.
POSTGRES := /usr/lib/postgresql

$(POSTGRES):
	$(SUDO) sh tools/apt_get.sh update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive sh tools/apt_get.sh install -y \
		--no-install-recommends postgresql

# openapi-python-client (a venv of its own) and openapi-typescript (npm), pinned in
# tools/client_generators.py, under .tools/ (ignored); the OpenAPI client tests run them
# offline (docs/openapi-clients.md). Without npm the TypeScript test skips.
.tools/.stamp-generators: tools/client_generators.py | $(VPY)
	$(VPY) tools/client_generators.py install
	touch $@

# otter-grader (PyPI, pinned in tools/otter_grader.py) in .tools/otter: the tests that run
# the real `otter run` with glassllm's otter plugin (docs/grading.md#otter-grader)
.tools/.stamp-otter: tools/otter_grader.py | $(VPY)
	$(VPY) tools/otter_grader.py install
	touch $@

# nbgrader (PyPI, pinned in tools/nbgrader_grader.py) in .tools/nbgrader: the test that runs
# nbgrader's real autograde with glassllm's preprocessor (docs/grading.md#nbgrader)
.tools/.stamp-nbgrader: tools/nbgrader_grader.py | $(VPY)
	$(VPY) tools/nbgrader_grader.py install
	touch $@

# pytest's summary stays the last line CI reads.
test: $(VENV)/.stamp-test .tools/.stamp-generators .tools/.stamp-otter .tools/.stamp-nbgrader \
		| $(CHROMIUM) $(POSTGRES)
	$(VPY) -m pytest -q

lint: $(VENV)/.stamp-test
	$(VENV)/bin/ruff check .

# ESLint from npm (package.json, package-lock.json), in node_modules/; npm from Debian
# where the machine has none (tools/apt_get.sh waits for a held apt lock)
NPM := $(shell command -v npm || echo /usr/bin/npm)

$(NPM):
	$(SUDO) sh tools/apt_get.sh update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive sh tools/apt_get.sh install -y \
		--no-install-recommends nodejs npm

node_modules/.package-lock.json: package.json package-lock.json | $(NPM)
	$(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

lint-js: node_modules/.package-lock.json
	node_modules/.bin/eslint static/js

commits:
	$(PYTHON) tools/commit_subjects.py

doctest: $(VENV)/.stamp-test
	$(VPY) -m pytest -q -p no:cacheprovider --doctest-modules glassllm service/glassllm_service

bench: $(VENV)/.stamp-bench
	$(VPY) bench/service.py

$(VENV)/.stamp-bench: pyproject.toml | $(VPY)
	$(VPY) -m pip install --quiet -e '.[bench]'
	touch $@

load: $(VENV)/.stamp-bench
	$(VPY) bench/load.py

$(VENV)/.stamp-mutation: pyproject.toml | $(VPY)
	$(VPY) -m pip install --quiet -e '.[mutation]'
	touch $@ $(VENV)/.stamp-test $(VENV)/.stamp-service

# Mutation testing of the core and the service's limits (tools/mutation.py says how it
# samples); MUTATION_ARGS="--all" runs every mutant, "--seed N" another sample.
mutation: $(VENV)/.stamp-mutation
	$(VPY) tools/mutation.py $(MUTATION_ARGS)

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache test-artifacts mutants .tools

# --- the course image (docs/deploy.md) ---------------------------------------
#   make docker       build glassllm:latest (official slim base if pullable, else a local
#                     Debian base made with mmdebstrap from this machine's apt mirror)
#   make docker-test  install/start the engine if needed, build, check the real container
#   make docker-save  the image as dist/glassllm-image.tar.gz, for `docker load` offline
#   make lock         rewrite requirements/*.lock (hashes) from pyproject.toml
#   make gradescope-autograder   Gradescope's autograder zip (docs/grading.md)
IMAGE ?= glassllm:latest
# --unsafe-package=glassllm: the test extra names glassllm[service,train]; the lock must
# not pin the working tree itself (make test installs it with `pip install --no-deps -e .`)
PIP_COMPILE := $(VENV)/bin/pip-compile -q --generate-hashes --strip-extras \
	--unsafe-package=glassllm --no-emit-index-url --no-emit-find-links

.PHONY: docker docker-test docker-save lock gradescope-autograder

docker:
	sh docker/build.sh $(IMAGE)

docker-test: $(VENV)/.stamp-test
	sh docker/test.sh $(VPY) $(IMAGE)

# Gradescope's autograder zip for one exercise file (docs/grading.md):
#   make gradescope-autograder SALT_FILE=course-salt ROSTER=students.csv \
#       [EXERCISE=course/rmsnorm-backward.toml]   (or PRACTICE=1 instead of the two)
#   → dist/gradescope-autograder.zip (setup.sh, run_autograder, the exercise, the salt,
#     the roster, wheels)
EXERCISE ?= examples/softmax-backward.toml
gradescope-autograder: $(VENV)/.stamp-service
	SALT_FILE="$(SALT_FILE)" ROSTER="$(ROSTER)" PRACTICE="$(PRACTICE)" \
		sh docker/grader/zip.sh $(VPY) $(EXERCISE)

docker-save:
	sh docker/save.sh $(IMAGE)

lock: | $(VPY)
	$(VPY) -m pip install --quiet pip-tools
	$(PIP_COMPILE) --extra service --extra dev -o requirements/service.lock pyproject.toml
	$(PIP_COMPILE) --extra test --extra dev -o requirements/test.lock pyproject.toml

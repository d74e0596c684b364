# tilec: `make demo` and `make test` are the whole set-up (see README.md).
# Both create .venv with Python 3.11 and install tilec into it (editable, with
# the dev tools); a stamp file makes the set-up a no-op until pyproject.toml changes.

PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.tilec-installed
ARCH   ?= sm_80

.PHONY: all setup demo lint format test fast fuzz clean

all: demo

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

setup: $(STAMP)

demo: $(STAMP)
	@mkdir -p build
	$(BIN)/tilec build examples/gemm.tile -o build/gemm.cu --header build/gemm.h \
	    --arch $(ARCH) --cubin build/gemm.cubin
	@echo
	@echo "tilec compiled examples/gemm.tile for $(ARCH):"
	@echo "  CUDA C++  $(CURDIR)/build/gemm.cu     ($$(wc -l < build/gemm.cu) lines)"
	@echo "  header    $(CURDIR)/build/gemm.h"
	@echo "  cubin     $(CURDIR)/build/gemm.cubin  ($$(wc -c < build/gemm.cubin) bytes)"
	@echo "Try: $(BIN)/tilec build examples/gemm.tile --arch sm_90a | less"

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy

# Rewrite src/ and tests/ in the house format and apply ruff's safe fixes.
format: $(STAMP)
	$(BIN)/ruff format src tests
	$(BIN)/ruff check --fix src tests

test: lint
	$(BIN)/python -m pytest -q

# The fast path for local iteration: no nvcc, Make/CMake or tilec subprocesses, on both cores.
fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not toolchain"

# 10,000 mutants of the examples built for sm_80, sm_90a and gfx90a (10 s each at most), then 300
# of the compiled CUDA ones through nvcc; failures land in build/fuzz (bench/fuzz.py).
fuzz: $(STAMP)
	$(BIN)/python bench/fuzz.py --mutants 10000 --nvcc 300

clean:
	rm -rf build .pytest_cache .ruff_cache .mypy_cache

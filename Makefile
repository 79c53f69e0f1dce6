# hroofline: `make demo` runs the main job, `make test` runs the tests. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SHARED ?= ../shared
DEMO_STORE ?= demo-runs
DEMO_REPORT ?= demo-report
# The README's chart: written by `make demo`, committed, so the README shows what the demo makes.
README_CHART := docs/deepcam-amp-o1-forward.png
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: help venv browser demo test lint bench clean

help:
	@echo "make demo    import Yang et al.'s DeepCAM V100 data from $(SHARED): phases, top kernels, charts, report"
	@echo "make test    run the test suite (ruff, then pytest)"
	@echo "make bench   run the benchmarks under bench/"
	@echo "make clean   remove .venv and the demo store"

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	@test -d $(SHARED)/fixtures/deepcam || { echo "make demo: needs the DeepCAM data in $(SHARED)/fixtures/deepcam" >&2; exit 1; }
	rm -rf $(DEMO_STORE)
	@for p in fw bw opt; do \
	  $(BIN)/hroofline import $(SHARED)/fixtures/deepcam/pt-O0-Adam-$$p --run deepcam-fp32 --gpu v100 --phase $$p --precision fp32 --store $(DEMO_STORE) || exit 1; \
	  $(BIN)/hroofline import $(SHARED)/fixtures/deepcam/pt-O1-Adam-$$p --run deepcam-amp-o1 --gpu v100 --phase $$p --precision amp-o1 --store $(DEMO_STORE) || exit 1; \
	done
	@echo; echo "== runs"; $(BIN)/hroofline runs --store $(DEMO_STORE)
	@echo; echo "== deepcam-fp32: phases"; $(BIN)/hroofline summary deepcam-fp32 --store $(DEMO_STORE)
	@echo; echo "== deepcam-amp-o1: phases"; $(BIN)/hroofline summary deepcam-amp-o1 --store $(DEMO_STORE)
	@echo; echo "== deepcam-amp-o1: top forward kernels"; $(BIN)/hroofline top deepcam-amp-o1 --phase forward -n 8 --ceilings v100-yang-ert --store $(DEMO_STORE)
	@echo; echo "== charts and report"
	@mkdir -p docs
	$(BIN)/hroofline chart deepcam-amp-o1 --phase forward --ceilings v100-yang-ert --out $(README_CHART) --store $(DEMO_STORE)
	$(BIN)/hroofline report deepcam-fp32 deepcam-amp-o1 --ceilings v100-yang-ert --title "DeepCAM on V100: FP32 and AMP O1" --out $(DEMO_REPORT) --store $(DEMO_STORE)
	@echo; echo "open $(DEMO_REPORT)/index.html in a browser (it works offline)"

# The browser test needs a headless chromium: install Debian's when missing (CI sets
# HROOFLINE_REQUIRE_BROWSER=1, so there a failed install fails the test instead of skipping it).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser test (apt-get)"; \
	  { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; } \
	  || echo "make: could not install chromium; the browser tests will be skipped" >&2; }

test: $(STAMP) browser
	$(BIN)/ruff check hroofline tests bench
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check hroofline tests bench
	$(BIN)/ruff format --check hroofline tests bench

bench: $(STAMP)
	$(BIN)/python bench/import_speed.py
	$(BIN)/python bench/chart_scale.py

clean:
	rm -rf $(VENV) $(DEMO_STORE) $(DEMO_REPORT)

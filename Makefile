# hroofline: `make demo` runs the main job, `make test` runs the tests. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SHARED ?= ../shared
DEMO_STORE ?= demo-runs

.PHONY: help venv demo test lint bench clean

help:
	@echo "make demo    import Yang et al.'s DeepCAM V100 data from $(SHARED) and show phases and top kernels"
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
	@echo; echo "== deepcam-amp-o1: top forward kernels"; $(BIN)/hroofline kernels deepcam-amp-o1 --group-by name --phase forward --top 8 --store $(DEMO_STORE)

test: $(STAMP)
	$(BIN)/ruff check hroofline tests bench
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check hroofline tests bench
	$(BIN)/ruff format --check hroofline tests bench

bench: $(STAMP)
	$(BIN)/python bench/import_speed.py

clean:
	rm -rf $(VENV) $(DEMO_STORE)

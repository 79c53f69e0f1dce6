# hroofline: `make demo` runs the main job, `make test` runs the tests. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SHARED ?= ../shared
DEMO_STORE ?= demo-runs
# make profile: what to profile, where (GPU=cpu profiles this machine's CPU), and into which run.
ARCH ?= resnet18
GPU ?= cpu
PRECISION ?= fp32
BATCH ?= 32
STEPS ?= 1
# COMPILE=default|max-autotune|reduce-overhead: the model torch.compile'd in that mode (empty: eager)
COMPILE ?=
# A run name's -bN, as hroofline names runs: a batch size other than DEFAULT_BATCH_SIZE (32,
# hroofline/collect/workload.py) is in the name
batch_suffix = $(if $(filter 32,$(1)),,-b$(1))
# RUN: as hroofline profile names its ncu runs
compiled_suffix = $(if $(1),-compiled$(if $(filter default,$(1)),,-$(1)))
RUN ?= $(ARCH)-$(PRECISION)-$(GPU)$(call batch_suffix,$(BATCH))$(call compiled_suffix,$(COMPILE))
STORE ?= hroofline-runs
# The PyTorch this project is tested with (pip takes it from the machine's wheel cache when present).
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
# Where pip takes PyTorch from: empty is PyPI (its Linux wheels bring CUDA libraries, about 3 GB of the 6 GB
# .venv); TORCH_INDEX=https://download.pytorch.org/whl/cpu takes PyTorch's CPU-only wheels where that is reachable (on a
# new .venv: make clean first).
TORCH_INDEX ?=
DEMO_REPORT ?= demo-report
# The README's chart: written by `make demo`, committed, so the README shows what the demo makes.
README_CHART := docs/deepcam-amp-o1-forward.png
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

# The seed studies: predicted here; MEASURE_GPU=a100 (a catalog name) also profiles them on this machine's GPU.
STUDY_STORE ?= study-runs
STUDY_BATCH ?= 256
MEASURE_GPU ?=
RESNETS := resnet18 resnet34 resnet50
STUDY_SUFFIX := $(call batch_suffix,$(STUDY_BATCH))

.PHONY: help venv browser spark test-spark demo demo-deepcam profile ceilings samples test check-figures lint bench \
	clean study-resnets study-memory study-deepcam docs docs-extra docs-reference

help:
	@echo "make demo    import Yang et al.'s DeepCAM V100 data from $(SHARED): phases, top kernels, charts, report"
	@echo "make profile ARCH=resnet34 GPU=v100 [PRECISION=fp32|tf32|amp|amp-bf16|o2] [BATCH=32] [STEPS=1] [COMPILE=default|max-autotune|reduce-overhead] [RUN=name]"
	@echo "             profile a training step (GPU=cpu: on this CPU) into a run, then summary and chart"
	@echo "make ceilings  measure this machine's roofs (matmul FLOP/s, bandwidth per cache level)"
	@echo "make study-resnets  ResNet-18/34/50 on a V100 and an A100: one roofline per GPU and the table"
	@echo "make study-memory   ResNet-18, AlexNet, VGG16 at batch 256 on an A100 and a T4: FLOPs, time, memory, fits"
	@echo "make study-deepcam  Yang et al.'s DeepCAM on a V100, FP32 against AMP O1 (measured, from $(SHARED))"
	@echo "             (studies predict here; MEASURE_GPU=NAME also profiles them on this machine's GPU)"
	@echo "make test    run the test suite (ruff, then pytest; the figure checks under tests/figures left out)"
	@echo "make check-figures  recompute the validation figures (docs/validation.md) from the measured steps and check them"
	@echo "             against the page; run the guides' shell sessions (docs/guides) and compare what they print"
	@echo "make test-spark  read a store with Spark (installs PySpark and a Java runtime when missing)"
	@echo "make docs    build the documentation site into site/ (strict, offline) and check its links"
	@echo "make docs-reference  regenerate the CLI and API reference pages (docs/reference/) from the code"
	@echo "make bench   run the benchmarks under bench/"
	@echo "make clean   remove .venv and the demo store"

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) $(TORCH_PINS)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# The demo's commands run in one process (hroofline/cli/demo.py): each stage prints the commands a reader would
# type, what they print and its time. This CPU's ceilings are measured by the first demo and cached
# (~/.cache/hroofline); later demos read them.
demo: $(STAMP)
	rm -rf $(DEMO_STORE) $(DEMO_REPORT)
	@$(BIN)/python -m hroofline.cli.demo --store $(DEMO_STORE) --report $(DEMO_REPORT) --shared $(SHARED) \
	  --chart $(README_CHART)

# Yang et al.'s DeepCAM V100 runs (FP32 and AMP O1) from ../shared, and the README's chart.
demo-deepcam: $(STAMP)
	@for p in fw bw opt; do \
	  $(BIN)/hroofline import $(SHARED)/fixtures/deepcam/pt-O0-Adam-$$p --run deepcam-fp32 --gpu v100 --phase $$p --precision fp32 --store $(DEMO_STORE) || exit 1; \
	  $(BIN)/hroofline import $(SHARED)/fixtures/deepcam/pt-O1-Adam-$$p --run deepcam-amp-o1 --gpu v100 --phase $$p --precision amp-o1 --store $(DEMO_STORE) || exit 1; \
	done
	@echo; echo "== deepcam-fp32: phases"; $(BIN)/hroofline summary deepcam-fp32 --store $(DEMO_STORE)
	@echo; echo "== deepcam-amp-o1: phases"; $(BIN)/hroofline summary deepcam-amp-o1 --store $(DEMO_STORE)
	@echo; echo "== deepcam-amp-o1: top forward kernels"; $(BIN)/hroofline top deepcam-amp-o1 --phase forward -n 8 --ceilings v100-yang-ert --store $(DEMO_STORE)
	@echo; $(BIN)/hroofline compare deepcam-fp32 deepcam-amp-o1 -n 4 --store $(DEMO_STORE)
	@mkdir -p docs
	$(BIN)/hroofline chart deepcam-amp-o1 --phase forward --ceilings v100-yang-ert --out $(README_CHART) --store $(DEMO_STORE)

study-resnets: $(STAMP)
	$(BIN)/hroofline predict --arch resnet18,resnet34,resnet50 --gpu v100,a100 --batch-size $(STUDY_BATCH) --replace --store $(STUDY_STORE)
	@echo; $(BIN)/hroofline chart $(foreach g,v100-sxm2 a100-40gb,$(foreach m,$(RESNETS),$(m)-fp32-$(g)$(STUDY_SUFFIX)-predicted)) \
	  --title "ResNet-18/34/50, batch $(STUDY_BATCH), predicted" --out study-resnets.html --store $(STUDY_STORE)
	@if [ -n "$(MEASURE_GPU)" ]; then \
	  for m in $(RESNETS); do $(BIN)/hroofline profile --arch $$m --gpu $(MEASURE_GPU) --batch-size $(STUDY_BATCH) \
	    --run $$m-fp32-$(MEASURE_GPU)-measured --replace --store $(STUDY_STORE) || exit 1; done; \
	  $(BIN)/hroofline chart $(foreach m,$(RESNETS),$(m)-fp32-$(MEASURE_GPU)-measured) --title "ResNet-18/34/50, measured" \
	    --out study-resnets-measured.html --store $(STUDY_STORE); fi
	@echo "open study-resnets.html (one roofline per GPU; the table above is the course reports' Table 1)"

study-memory: $(STAMP)
	$(BIN)/hroofline predict --arch resnet18,alexnet,vgg16 --gpu a100,t4 --batch-size 256 --replace --store $(STUDY_STORE)
	@if [ -f $(SHARED)/background/004_247ed1562cabaee4.txt ]; then echo; \
	  echo "measured by the course report (forward pass at batch 256; Memory Usage: what torch.cuda.memory_allocated grew by):"; \
	  sed -n '/^NVIDIA A100-SXM4-40GB :/,/cuda out of memory/p' $(SHARED)/background/004_247ed1562cabaee4.txt | grep -v '^ *$$'; fi
	@if [ -n "$(MEASURE_GPU)" ]; then \
	  for m in resnet18 alexnet vgg16; do $(BIN)/hroofline profile --arch $$m --gpu $(MEASURE_GPU) --batch-size 256 \
	    --run $$m-fp32-$(MEASURE_GPU)-measured --replace --store $(STUDY_STORE) || true; done; fi

study-deepcam: $(STAMP)
	$(MAKE) --no-print-directory -o $(STAMP) demo-deepcam DEMO_STORE=$(STUDY_STORE)

profile: $(STAMP)
	$(BIN)/hroofline profile --arch $(ARCH) --gpu $(GPU) --precision $(PRECISION) --batch-size $(BATCH) --steps $(STEPS) $(if $(COMPILE),--compile $(COMPILE)) --run $(RUN) --replace --store $(STORE)
	$(BIN)/hroofline summary $(RUN) --store $(STORE)
	$(BIN)/hroofline chart $(RUN) --out $(RUN).html --store $(STORE)

# samples/store: predicted runs kept in the repository, golden files of tests/test_samples.py.
samples: $(STAMP)
	rm -rf samples/store
	for p in fp32 amp; do $(BIN)/hroofline predict --arch resnet50 --gpu v100 --precision $$p --run resnet50-$$p-v100-predicted --store samples/store || exit 1; done

ceilings: $(STAMP)
	$(BIN)/hroofline ceilings --measure --out ceilings-$$(hostname).toml

# The browser test needs a headless chromium: install Debian's when missing (CI sets
# HROOFLINE_REQUIRE_BROWSER=1, so there a failed install fails the test instead of skipping it).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser test (apt-get)"; \
	  { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; } \
	  || echo "make: could not install chromium; the browser tests will be skipped" >&2; }

# Two test processes (pytest-xdist): the suite is CPU-bound in Python, and the machines it runs on have two cores.
# A test file stays on one worker (--dist loadfile): its module fixtures are made once. The files take turns in the
# order tests/conftest.py gives (the longest first; --no-loadscope-reorder keeps it, where xdist would start the
# files with the most tests), and each worker's PyTorch computes on one thread (tests/conftest.py).
TEST_WORKERS ?= 2

PYTEST_XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# tests/test_docs.py builds the site: the docs extra is installed here when missing, as the browser is (CI sets
# HROOFLINE_REQUIRE_DOCS=1, so there a failed install fails the test instead of skipping it).
# The tests start many short hroofline processes: each reads the package's bytecode from __pycache__ (ignored by git)
# instead of compiling it anew, also where the environment says not to write bytecode (PYTHONDONTWRITEBYTECODE: a
# clean clone's make test took 311 s with the cache written against 329 s without, back to back, 2 cores).
KEEP_BYTECODE := PYTHONDONTWRITEBYTECODE=

test: DOCS_OPTIONAL = 1
test: $(STAMP) browser docs-extra
	$(BIN)/ruff check hroofline tests bench tools
	$(KEEP_BYTECODE) $(BIN)/python -m pytest -q $(PYTEST_XDIST) --ignore=tests/test_spark.py --ignore=tests/figures

# The figures of the validation page (docs/validation.md), recomputed and checked: the estimate's held-out protocols
# and the sweeps over hundreds of steps measured on GPUs, each step traced on the meta device (about a second or
# more each), compared with the page where it reads them (tests/figures/test_validation_page.py); and the guides'
# `$ command` sessions run after `make demo` (tests/figures/test_guides.py). Out of `make test`, which checks
# behaviour on a few real steps; CI runs both. The CI recipe's gate (tests/figures/test_ci_recipe.py) times a
# model's steps before and after a change: run alone, after the rest, not beside a worker whose load comes and goes
# between its two jobs (beside one, the same model once measured 2.4 ms, then 5.0 ms, and failed its gate).
SERIAL_FIGURES := tests/figures/test_ci_recipe.py
check-figures: $(STAMP)
	$(KEEP_BYTECODE) $(BIN)/python -m pytest -q $(PYTEST_XDIST) tests/figures --ignore=$(SERIAL_FIGURES)
	$(KEEP_BYTECODE) $(BIN)/python -m pytest -q $(SERIAL_FIGURES)

# The store read by Spark (tests/test_spark.py): PySpark from PyPI and a Java runtime from Debian, installed
# here when missing (as the browser is); a failed installation fails the target. CI runs it after `make test`.
SPARK_PIN := pyspark==4.0.5
spark: $(STAMP)
	@$(BIN)/python -c "import pyspark" 2>/dev/null || { echo "installing $(SPARK_PIN) for the Spark test (PyPI)"; \
	  $(BIN)/python -m pip install -q $(SPARK_PIN) || { echo "make: could not install $(SPARK_PIN)" >&2; exit 1; }; }
	@command -v java >/dev/null 2>&1 || [ -n "$$JAVA_HOME" ] || { echo "installing Debian's Java runtime for the Spark test (apt-get)"; \
	  { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends default-jre-headless >/dev/null; } \
	  || { echo "make: could not install a Java runtime (default-jre-headless)" >&2; exit 1; }; }

test-spark: spark
	HROOFLINE_REQUIRE_SPARK=1 $(BIN)/python -m pytest -q tests/test_spark.py

lint: $(STAMP)
	$(BIN)/ruff check hroofline tests bench tools
	$(BIN)/ruff format --check hroofline tests bench tools

# The documentation site (mkdocs.yml, docs/): pyproject.toml's docs extra, installed when missing (as PySpark is
# for `make spark`; the venv's stamp stays as it is); the CLI and API reference regenerated from the parsers and the
# API (commit what changes); a strict build into site/ (broken links and anchors fail it); then every local link,
# image and anchor of the built site checked offline (links to other sites are listed, not fetched).
docs: docs-extra docs-reference
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --clean
	$(BIN)/python tools/check_site.py site
	@echo "open site/index.html in a browser (it works offline, search included)"

docs-reference: $(STAMP)
	$(BIN)/python tools/docs_reference.py

docs-extra: $(STAMP)
	@missing="$$($(BIN)/python tools/docs_extra.py)"; [ -z "$$missing" ] || { \
	  echo "installing the docs extra for the documentation site (PyPI): $$missing"; \
	  $(BIN)/python -m pip install -q $$missing || { echo "make: could not install the docs extra ($$missing)" >&2; \
	  $(if $(DOCS_OPTIONAL),echo "make: the site's tests will be skipped" >&2,exit 1); }; }

bench: $(STAMP)
	$(BIN)/python bench/import_speed.py
	$(BIN)/python bench/big_import.py
	$(BIN)/python bench/chart_scale.py
	$(BIN)/python bench/cpu_overhead.py
	$(BIN)/python bench/predict_speed.py
	$(BIN)/python bench/estimate_error.py
	$(BIN)/python bench/host_overlap.py
	$(BIN)/python bench/cli_startup.py
	$(BIN)/python bench/collection_cost.py
	$(BIN)/python bench/many_ranks.py --ranks 100 --no-spark
	$(BIN)/python bench/report_speed.py

clean:
	rm -rf $(VENV) $(DEMO_STORE) $(STUDY_STORE) $(DEMO_REPORT) site

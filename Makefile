# Punctual's build, test and local-cluster targets. `make help` lists them all.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CLUSTER_DIR := .cluster
KUBECTL := $(CLUSTER_DIR)/bin/kubectl
HELM := $(CLUSTER_DIR)/bin/helm
IMAGE ?= punctual:dev
export KUBECONFIG_LOCAL := $(abspath $(CLUSTER_DIR)/kubeconfig)

.PHONY: help
help: ## List every target with what it does
	@awk 'BEGIN {FS = ":.*?## "} /^[a-zA-Z0-9_-]+:.*?## / {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(BIN)/.installed: requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $@

.PHONY: venv
venv: $(BIN)/.installed ## Create .venv and install the locked dependencies and Punctual

# The other Pythons Punctual supports (requires-python): the unit suite and the package
# run on each, in .venv-3.12 and .venv-3.13 (3.14 too where an interpreter is found). The
# venv, the linters and the image stay on $(PYTHON), 3.11. An interpreter is looked for in
# pyenv's versions, then on PATH; PYTHON312=/path/to/python3.12 (and so on) overrides.
SUPPORTED_PYTHONS := 3.11 3.12 3.13 3.14
find_python = $(or $(PYTHON$(subst .,,$(1))),$(firstword \
  $(wildcard $(HOME)/.pyenv/versions/$(1).*/bin/python$(1)) \
  $(shell command -v python$(1) 2>/dev/null)))
EXTRA_PYTHONS := 3.12 3.13 $(if $(call find_python,3.14),3.14)
EXTRA_VENVS := $(EXTRA_PYTHONS:%=.venv-%/.installed)

.venv-%/.installed: requirements.lock pyproject.toml
	@e2e/pythons.sh venv $* "$(call find_python,$*)" .venv-$*
	@touch $@

.PHONY: unit-pythons
unit-pythons: $(EXTRA_VENVS) ## Unit tests on Python 3.12 and 3.13 too (3.14 where found), in .venv-3.12, .venv-3.13
	@$(if $(filter 3.14,$(EXTRA_PYTHONS)),,echo "Python 3.14: no interpreter found, its unit run skipped")
	@for v in $(EXTRA_PYTHONS); do echo "unit tests on Python $$v"; \
	  .venv-$$v/bin/pytest tests/unit -q -p no:cacheprovider || exit 1; done

.PHONY: package
package: venv $(EXTRA_VENVS) ## Build the wheel and sdist into dist/; install each in a clean venv on every supported Python, run punctual --version
	@e2e/pythons.sh package dist $(BIN)/python $(EXTRA_PYTHONS:%=.venv-%/bin/python)

.PHONY: lock
lock: ## Re-resolve requirements.lock from pyproject.toml (needs uv on PATH); check it fits every supported Python
	uv pip compile pyproject.toml --extra dev --generate-hashes --python-version 3.11 \
	  --quiet --output-file requirements.lock
	@# One lock serves 3.11 to 3.14 while every version resolves to the same pins and hashes
	@# (the hashes name every wheel of a version). If one does not, it needs a lock of its own.
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; for v in $(SUPPORTED_PYTHONS); do \
	  cp requirements.lock $$tmp/$$v.lock; \
	  uv pip compile pyproject.toml --extra dev --generate-hashes --python-version $$v \
	    --quiet --output-file $$tmp/$$v.lock; \
	  diff -q <(grep -v '^ *#' requirements.lock) <(grep -v '^ *#' $$tmp/$$v.lock) >/dev/null || \
	    { echo "requirements.lock does not fit Python $$v (uv pip compile --python-version $$v differs)"; exit 1; }; \
	done; echo "requirements.lock fits Python $(SUPPORTED_PYTHONS)"

.PHONY: binaries
binaries: ## Build (once, cached in ~/.cache/punctual) etcd, the control plane, kubelet, kube-proxy, kwok, helm
	e2e/build-binaries.sh $(CLUSTER_DIR)/bin

.PHONY: workload-crds
workload-crds: venv ## Fetch (once, cached in ~/.cache/punctual/crds) the RayJob and Argo Workflow CRDs the e2e tests install; print every workload CRD with its size
	$(BIN)/python e2e/workloadcrds.py --sizes

.PHONY: cluster-up
cluster-up: venv binaries ## Start a local control plane, and as root a real node, in the background (state in .cluster/)
	$(BIN)/python e2e/localcluster.py up --state-dir $(CLUSTER_DIR)

.PHONY: cluster-down
cluster-down: ## Stop the processes cluster-up started, undo the real node's host changes, remove the state
	@if [ -x $(BIN)/python ]; then $(BIN)/python e2e/localcluster.py down --state-dir $(CLUSTER_DIR); fi

.PHONY: check-reclaim
check-reclaim: venv binaries ## As root: a real node whose cluster was killed without cluster-down is undone by the next cluster-up (about 20 s)
	$(BIN)/python e2e/reclaimcheck.py

.PHONY: demo
demo: venv binaries ## Start the local control plane and the operator, apply a sample, watch Jobs appear
	e2e/demo.sh

.PHONY: image
image: ## Build the operator image with Docker, podman or buildah (IMAGE=..., default punctual:dev)
	operator/image/build.sh $(IMAGE)

.PHONY: e2e-kind
e2e-kind: venv ## e2e suite on a kind cluster with the chart installed (needs Docker and kind)
	e2e/kind/run.sh

.PHONY: helm-lint
helm-lint: binaries ## helm lint and template the chart in both RBAC modes, with and without monitoring and workloadKinds
	$(HELM) lint --strict charts/punctual
	$(HELM) lint --strict charts/punctual --set 'watchNamespaces={team-a,team-b}' \
	  --set serviceMonitor.enabled=true --set prometheusRule.enabled=true --set dashboard.enabled=true
	$(HELM) template punctual charts/punctual --include-crds >/dev/null
	$(HELM) template punctual charts/punctual --include-crds --set 'watchNamespaces={team-a}' >/dev/null
	$(HELM) lint --strict charts/punctual --set 'workloadKinds={workflows.v1alpha1.argoproj.io}'
	$(HELM) lint --strict charts/punctual --set 'workloadKinds={workflows.v1alpha1.argoproj.io}' \
	  --set 'watchNamespaces={team-a}'

.PHONY: test-tools
test-tools: binaries ## promtool and prometheus (Debian's package, installed as root when missing) and kube-score (built once from the Go module proxy)
	e2e/build-test-tools.sh $(CLUSTER_DIR)/bin

.PHONY: alerts
alerts: venv test-tools ## promtool check rules and test rules (tests/alerts/) on the chart's rendered PrometheusRule
	$(BIN)/python e2e/alert_rules.py --helm $(HELM)

# The alert tests run in `make test`; the e2e monitoring and manifest tests need test-tools.
test: alerts
e2e: test-tools

.PHONY: lint
lint: venv ## ruff (lint and format), mypy --strict, and the import-linter layer contracts
	$(BIN)/ruff check operator tests e2e bench
	$(BIN)/ruff format --check operator tests e2e bench
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

.PHONY: fmt
fmt: venv ## Format the code with ruff
	$(BIN)/ruff format operator tests e2e bench
	$(BIN)/ruff check --fix operator tests e2e bench

.PHONY: unit
unit: venv ## Unit tests of the pure core (no cluster), and the simulator's fixed seeds (tests/sim)
	$(BIN)/pytest tests/unit tests/sim -q

# The simulator's campaign: each seed runs HOURS simulated hours (tests/sim/__main__.py).
SEEDS ?= 1-10
HOURS ?= 24

.PHONY: sim
sim: venv ## The deterministic simulator on many seeds (SEEDS=1-50 HOURS=24, optional STATUS_DELAY=seconds): prints simulated hours/s, steps/s, promises checked; fails on a broken promise
	$(BIN)/python -m tests.sim SEEDS=$(SEEDS) HOURS=$(HOURS) $(if $(QUIET),QUIET=$(QUIET)) \
	  $(if $(AVOID_KNOWN),AVOID_KNOWN=$(AVOID_KNOWN)) $(if $(STATUS_DELAY),STATUS_DELAY=$(STATUS_DELAY))

.PHONY: e2e
e2e: venv binaries image ## End-to-end tests against a real control plane (started if not running), the image included
	PUNCTUAL_IMAGE=$(IMAGE) $(BIN)/pytest tests/e2e -q --durations=30

.PHONY: test
test: lint unit unit-pythons package e2e ## Everything CI runs: lint, unit (3.11, then 3.12 and 3.13), package, then e2e tests

.PHONY: chaos
chaos: venv binaries ## A ~30-minute fault campaign (150 faults of 9 kinds, fencing bound, audit-log oracle, as root); prints its table
	CHAOS_CAMPAIGN=1 CHAOS_FAULTS=$${CHAOS_FAULTS:-150} CHAOS_INTERVAL=$${CHAOS_INTERVAL:-8} \
	  $(BIN)/pytest tests/e2e/test_chaos_campaign.py -q -s

.PHONY: soak
soak: venv binaries ## An hour (SOAK_MINUTES=60) of 2000 schedules under periodic faults: memory and heap by role, descriptors, 0 dup / 0 lost; writes bench/results-soak/
	SOAK_MINUTES=$${SOAK_MINUTES:-60} $(BIN)/pytest tests/e2e/test_soak.py -q -s

.PHONY: bench
bench: venv binaries ## Punctual vs the CronJob controller on a local control plane (BENCH_SIZES=100,1000); writes bench/results/
	@$(BIN)/python -c "import matplotlib" 2>/dev/null || $(BIN)/python -m pip install --quiet matplotlib || \
	  echo "matplotlib unavailable: results without the plot"
	$(BIN)/python bench/run.py

.PHONY: bench-scaleout
bench-scaleout: venv binaries ## The scale-out rows in one run (about 45 min): herds of 1000 and 10000 vs raw and CronJob, 1/2/4 replicas on 16 shards, a kill, an overloaded API server; writes bench/results-scaleout/ with the targets table
	@$(BIN)/python -c "import matplotlib" 2>/dev/null || $(BIN)/python -m pip install --quiet matplotlib || \
	  echo "matplotlib unavailable: results without the plot"
	BENCH_RESULTS=bench/results-scaleout $(BIN)/python bench/run.py --sizes 1000,10000 \
	  --scenarios punctual-herd-defaults,cronjob-herd-same,raw-same
	BENCH_RESULTS=bench/results-scaleout $(BIN)/python bench/run.py --sizes 1000 \
	  --scenarios punctual-herd-same,punctual-herd-defaults-r1s16,punctual-herd-defaults-r2s16,punctual-herd-defaults-r4s16,punctual-spread-defaults-r2s16-kill,punctual-herd-overload,raw-overload

.PHONY: bench-scale
bench-scale: venv binaries ## The scale rows: 5 min of sustained load (N = 2000, 10000) and a start on 100 000 schedules; writes bench/results-scale/
	$(BIN)/python bench/scale.py sustained --n $${SCALE_SUSTAINED:-2000,10000}
	$(BIN)/python bench/scale.py startup --n $${SCALE_STARTUP:-100000}

.PHONY: bench-ramp
bench-ramp: venv binaries ## The plain client and Punctual at the same steady rates (RAMP_RATES=50,100,150 firings/s, 5 min a step, about 45 min); writes bench/results-ramp/
	$(BIN)/python bench/ramp.py --rates $${RAMP_RATES:-50,100,150} --step-minutes $${RAMP_STEP_MINUTES:-5}

.PHONY: ui-screenshots
ui-screenshots: venv binaries test-tools ## Retake the README's screenshots of punctual ui (docs/ui-*.png) in headless Chromium
	PUNCTUAL_UI_SCREENSHOTS=1 $(BIN)/pytest tests/e2e/test_ui.py -q -k trigger_makes_one_job

.PHONY: bench-render
bench-render: venv ## Rebuild a results folder's results.md (and skew.png, shards.md) from its raw JSON alone (RESULTS=bench/results)
	$(BIN)/python bench/render.py $${RESULTS:-bench/results}

.PHONY: bench-planning
bench-planning: venv ## Print the planner's cost per schedule (µs)
	$(BIN)/python bench/planning_bench.py

.PHONY: bench-memory
bench-memory: venv ## Print a schedule's cost to a replica's heap and the CPU of packing it, this tree against a baseline commit (BASELINE=rev); no cluster
	$(BIN)/python bench/memory_bench.py $(if $(BASELINE),--baseline $(BASELINE))

.PHONY: bench-json
bench-json: venv ## Print the client's JSON cost (orjson) against the standard library's on a firing's bodies, in one run; no cluster
	$(BIN)/python bench/json_bench.py

.PHONY: bench-writes
bench-writes: venv ## Print a firing's writes by verb once every Job has been deleted and let go (the simulator, hours of simulated time); no cluster
	$(BIN)/python bench/writes_bench.py

.PHONY: clean
clean: cluster-down ## Remove the virtualenv and local state (the binary cache stays)
	rm -rf $(VENV) .venv-3.* dist build $(CLUSTER_DIR) .pytest_cache .mypy_cache .ruff_cache

# Runway: every tool the build needs is installed by these targets, at pinned versions.
SHELL := /bin/bash
BIN   := $(CURDIR)/bin
GO    ?= go
export PATH := $(BIN):$(PATH)
# go-nvml's cgo prolog warns about every deprecated NVML call; the warnings
# are NVML's, not ours.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

# All packages of every workspace module (go.work root is not itself a package pattern).
PKGS = $(shell $(GO) list -m -f '{{.Dir}}/...')

.DEFAULT_GOAL := help

include make/proto.mk
include make/testbin.mk
include make/ui.mk
include make/podman.mk

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/runway
	$(GO) build -o $(BIN)/runway ./cmd/runway

# Every service, an embedded etcd (data kept in .cache/dev) and 2 simulated
# nodes with 2 GPUs each, in one process; it prints the RUNWAY_SERVER line.
.PHONY: run
run: build ## start Runway on this machine (runway dev: 2 nodes x 2 GPUs)
	$(BIN)/runway dev --data-dir $(CURDIR)/.cache/dev --nodes 2 --gpus-per-node 2

.PHONY: test
# The repository's scenarios/ are played always; the shared contract
# (../shared/scenarios, beside the clone in CI) when it is there: each of its
# files must have an identical copy in scenarios/. CONTRACT_SUBDIRS names the
# contract's subfolders whose rules are built (a next*/ folder joins when its issue is done).
CONTRACT         ?= ../shared/scenarios
CONTRACT_SUBDIRS ?= next next-elastic
# The time-slicing enforcement tests measure CPU-time ratios, so they run
# alone, after the rest, not beside other packages' tests on the same CPUs.
MEASURED = TestRun_strictRatio|TestRun_fairIdleLeasesGoToBusy
# The packages with concurrency run again under the race detector: the
# store's watches and compactor, the scheduler's cache and loop, group
# commit and the status controller, the node agent. (The time-slicing
# enforcer's only tests are the CPU-time measurements above, which the
# detector's overhead would distort.)
# The strict plan's pauses of podman containers follow lease timing, which
# the detector's overhead stretches past the test's wait; that test runs in
# the plain pass above.
RACE_SKIP = TestRun_containerTimeSlicingPauses
RACE_PKGS = ./pkg/etcdstore/... ./services/scheduler/ ./services/workload/ ./services/nodemanager/...

test: build check $(BIN)/etcd podman test-ui ## run the whole test suite (checks, unit, property, scenarios, the short chaos run, the web UI in Chromium, containers on podman)
	$(GO) test -count=1 -skip '$(MEASURED)' $(PKGS)
	$(GO) test -count=1 -race -skip '$(RACE_SKIP)' $(RACE_PKGS)
	$(GO) test -count=1 -run '$(MEASURED)' ./pkg/runner/timeslicer/
	./scripts/check-scenarios.sh $(BIN)/runway scenarios $(CONTRACT) $(CONTRACT_SUBDIRS)
	$(MAKE) fuzz FUZZTIME=2s

# Every fuzz target, as package:Target (their seed corpora also run in the
# plain `go test` above); `make fuzz FUZZTIME=1m` searches longer.
FUZZTIME ?= 3s
FUZZ_TARGETS = ./pkg/bounds:FuzzRequestDecoders ./pkg/auth:FuzzTokens ./pkg/policy:FuzzPolicy \
	./services/workload:FuzzParseFilter ./services/workload:FuzzNames \
	./services/identity:FuzzParseFilter ./services/identity:FuzzSSOUserID

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (3s)
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t#*:} ($${t%%:*}) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done

# The chaos run (services/e2e/chaos): every service, a 3-member etcd, two
# scheduler replicas and three agents as processes, SIGKILLed at random
# under load; it prints "chaos: N acked, 0 lost, 0 doubled, failover ...".
# `make test` runs its short form (40 s).
CHAOS_DURATION ?= 5m
.PHONY: chaos
chaos: $(BIN)/etcd ## the chaos run for CHAOS_DURATION (default 5m)
	CHAOS_DURATION=$(CHAOS_DURATION) $(GO) test -count=1 -run TestChaos -v -timeout 30m ./services/e2e/chaos/

.PHONY: bench
bench: ## run the benchmarks
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x $(PKGS)

.PHONY: check
check: lint-proto check-generated check-ui ## vet, import boundaries, buf lint, generated code and the UI bundle in sync
	$(GO) vet $(PKGS)
	./scripts/check-imports.sh

# Berth — the front door. `make run` brings up the whole local platform;
# `make test` brings up what the tests need and runs them.
SHELL := /bin/bash
STACK := deploy/local/stack.sh
GO ?= go
GOTEST_FLAGS ?= -count=1 -timeout 40m
ENV := set -a; source .local/env; set +a

.PHONY: help up down run status deps build test test-race test-short lint bench txcost cpu-per-hold aims check-in-morning scenarios fuzz loadtest chaos drill clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

run: ## the whole local platform in the foreground, with logs; Ctrl-C stops it (WAN=1: with the simulated WAN; LAYOUT=split|together, ADR 0022)
	@WAN=$(WAN) LAYOUT=$(LAYOUT) bash $(STACK) run

up: ## the whole local platform in the background (idempotent); WAN=1 adds the simulated WAN between regions; LAYOUT=split|together: routers apart or inside their booking services (ADR 0022)
	@WAN=$(WAN) LAYOUT=$(LAYOUT) bash $(STACK) up

down: ## stop everything `make up` started
	@bash $(STACK) down

status: ## what runs
	@bash $(STACK) status

deps: ## PostgreSQL, Redis and NATS only (what the tests need)
	@bash $(STACK) deps

build: ## build the binaries into .local/bin
	$(GO) build -o .local/bin/ ./cmd/booking ./cmd/router ./cmd/readmodel

test: deps ## everything the tests need, then every test (race detector on)
	@$(ENV); export BERTH_REQUIRE_DB=1; $(GO) vet ./... && $(GO) test -race $(GOTEST_FLAGS) ./...

test-short: deps ## the quick tests
	@$(ENV); export BERTH_REQUIRE_DB=1; $(GO) test -short $(GOTEST_FLAGS) ./...

lint: ## vet and gofmt
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }

bench: deps ## benchmarks: HTTP paths against the same transactions as raw SQL
	@$(ENV); export BERTH_REQUIRE_DB=1; $(GO) test -run '^$$' -bench . -benchtime 3s -benchmem ./internal/... | tee .local/bench.txt

txcost: deps ## the write path's yardstick: minimal hold transaction vs the store's hold, one run, ratios (ROUNDS=2: the legs A B … B A, ratios averaged)
	@$(ENV); $(GO) run ./loadtest txcost --rounds $(or $(ROUNDS),1)

cpu-per-hold: deps ## CPU per hold of every process (routers, services, read model, NATS, Redis, PostgreSQL) on a platform of its own, and the ratio to the minimal transaction
	@LAYOUT=$(LAYOUT) bash deploy/local/cpu-per-hold.sh

aims: deps ## issue 17's write-path aims in one run (flash sales and clinic opening on an idle machine, then txcost and cpu-per-hold; about 4 min): one table, kept in .local/aims/
	@LAYOUT=$(LAYOUT) bash deploy/local/aims.sh

check-in-morning: deps ## a check-in morning (arrivals, walks under 10 % overbooking) through the routers of a whole platform of its own, its saga consumers relocating; then booking verify (ARRIVALS=200)
	@LAYOUT=$(LAYOUT) bash deploy/local/check-in-morning.sh

scenarios: deps ## loadtest scenarios through a whole platform of its own with CPU per request of every process (SCENARIOS="flash-sale --clients 1000 --rooms 1 --rate 2000; clinic-opening")
	@LAYOUT=$(LAYOUT) bash deploy/local/scenarios.sh

fuzz: deps ## run every fuzz target for FUZZTIME each (a duration, default 20s, or a count such as 1000x); CI runs each 1000 inputs
	@set -e; $(ENV); export BERTH_REQUIRE_DB=1; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' cmd internal loadtest api schema 2>/dev/null | sort); do \
	  pkg=./$$(dirname $$f); \
	  for t in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | cut -d' ' -f2); do \
	    echo "fuzz $$pkg $$t ($${FUZZTIME:-20s})"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $${FUZZTIME:-20s} $$pkg; \
	  done; \
	done

clean: down ## stop and delete .local
	rm -rf .local

loadtest: ## a short flash-sale and hotel-mix against `make up`; reports in .local/loadtest/
	@$(ENV); $(GO) run ./loadtest flash-sale --clients 500 --rooms 5 --rate 1000 --quiet --name make-flash-sale && \
	  $(GO) run ./loadtest hotel-mix --duration 15s --rate 200 --hotels 12 --quiet --name make-hotel-mix

drill: ## the region outage drill, long version (~2 min): kill a region under load, drain it, bring it back; report in .local/chaos/
	@mkdir -p .local/chaos; set -o pipefail; BERTH_CHAOS_LONG=1 $(GO) test -count=1 -timeout 20m -run '^TestRegionOutage$$' -v ./internal/chaos/ 2>&1 | tee .local/chaos/make-drill.log

chaos: ## the long fault-injection suite (each fault ~15 s under load; ~8 min); report in .local/chaos/
	@mkdir -p .local/chaos; set -o pipefail; BERTH_CHAOS_LONG=1 $(GO) test -count=1 -timeout 40m -run '^TestChaos$$' -v ./internal/chaos/ 2>&1 | tee .local/chaos/make-chaos.log

# Conveyor's developer commands. `make help` lists them.
# Tools are pinned here and installed into ./bin by `make tools`.

BUF_VERSION            := v1.75.0
PROTOC_GEN_GO_VERSION  := v1.36.12
PROTOC_GEN_CONNECT_GO_VERSION := v1.21.1
GOLANGCI_LINT_VERSION  := v2.15.0

BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## Run the server on 127.0.0.1:7420 with data in ./conveyor-data.
	go run ./cmd/conveyor server

.PHONY: build
build: ## Build the conveyor binary into ./bin.
	go build -o $(BIN)/conveyor ./cmd/conveyor

.PHONY: test
test: ts ## Run the whole test suite with the race detector, on both engines (starts a throwaway PostgreSQL unless CONVEYOR_TEST_DATABASE_URL names one), and the TypeScript SDK's.
	./scripts/with-pg.sh $(MAKE) --no-print-directory test-go
	$(MAKE) --no-print-directory test-ts

# The suite runs once on the embedded engine (with the PostgreSQL engine's
# own conformance tests), then the server-level tests again with every test
# server on PostgreSQL.
.PHONY: test-go
test-go:
	go test -race -count=1 -timeout 20m ./...
	CONVEYOR_TEST_BROKER=postgres go test -race -count=1 -timeout 20m ./server/... ./sdks/go/...

# The TypeScript SDK's tests (node --test), each against a real server
# process built from this checkout.
.PHONY: test-ts
test-ts: ts
	cd $(TS_DIR) && node --test --test-concurrency=1 test/*.test.mjs

.PHONY: pg
pg: ## Start a throwaway PostgreSQL on loopback for local work: eval "$$(make -s pg)" sets CONVEYOR_TEST_DATABASE_URL.
	@./scripts/with-pg.sh env

.PHONY: pg-stop
pg-stop: ## Stop the PostgreSQL `make pg` started, and remove its files.
	@./scripts/with-pg.sh stop

# Fuzz targets, as package:Target:budget. The budgets are execution counts
# (a few seconds each here), not durations: Go 1.26's fuzz coordinator can
# fail a run with a bare "context deadline exceeded" when a -fuzztime
# duration ends while a worker is mid-input (go.dev/issue/75804, fixed in
# Go 1.27), which a count cannot hit. FUZZTIME=1m make fuzz overrides every
# budget, for a longer local run.
FUZZ_TARGETS := ./server:FuzzNewTask:20000x ./server:FuzzSessionFrames:100x \
	./broker/bolt:FuzzStoredRecords:4000x ./scheduler:FuzzCronSpec:100000x
FUZZTIME ?=

.PHONY: fuzz
fuzz: ## Run every fuzz target for its budget (FUZZTIME=1m to run each for a minute).
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$${FUZZTIME:-$${rest#*:}}; \
		echo "fuzz $$pkg $$name ($$budget)"; \
		go test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $$budget || exit 1; \
	done

.PHONY: bench
bench: ## Run the Go micro-benchmarks once each.
	go test -run '^$$' -bench . -benchtime 1x ./...

$(BIN)/buf:
	GOBIN=$(BIN) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/protoc-gen-connect-go:
	GOBIN=$(BIN) go install connectrpc.com/connect/cmd/protoc-gen-connect-go@$(PROTOC_GEN_CONNECT_GO_VERSION)
$(BIN)/golangci-lint:
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: tools
tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-connect-go $(BIN)/golangci-lint ## Install the pinned tools into ./bin.

.PHONY: gen
gen: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-connect-go ## Regenerate gen/ from protos/.
	rm -rf gen
	buf generate

.PHONY: gen-check
gen-check: gen ## Fail if gen/ is not what protos/ generate.
	@git diff --exit-code --stat -- gen || (echo "gen/ is stale: run 'make gen' and commit" && exit 1)
	@test -z "$$(git status --porcelain -- gen)" || (git status --porcelain -- gen; echo "gen/ has untracked files: run 'make gen' and commit"; exit 1)

# The dashboard (admin/web, TypeScript). Its built files (admin/dist) and
# the TypeScript generated from protos/ (admin/web/src/gen) are committed,
# so `go build` needs no Node; these targets rebuild them.
UI_DIR := admin/web

.PHONY: ui
ui: $(BIN)/buf ## Build the dashboard: npm ci, generate its TypeScript, bundle into admin/dist.
	cd $(UI_DIR) && npm ci --no-audit --no-fund
	$(MAKE) ui-gen
	cd $(UI_DIR) && npm run build

.PHONY: ui-gen
ui-gen: $(BIN)/buf ## Regenerate admin/web/src/gen from protos/ (after npm ci in admin/web).
	rm -rf $(UI_DIR)/src/gen
	buf generate --template $(UI_DIR)/buf.gen.yaml --path protos/conveyor/v1

.PHONY: ui-check
ui-check: ui ## Fail if admin/dist or admin/web/src/gen are not what admin/web builds.
	@git diff --exit-code --stat -- admin/dist $(UI_DIR)/src/gen || (echo "admin/dist or admin/web/src/gen is stale: run 'make ui' and commit" && exit 1)
	@test -z "$$(git status --porcelain -- admin/dist $(UI_DIR)/src/gen)" || (git status --porcelain -- admin/dist $(UI_DIR)/src/gen; echo "admin/dist or admin/web/src/gen has untracked files: run 'make ui' and commit"; exit 1)

# The TypeScript SDK (sdks/ts). Its TypeScript generated from protos/
# (sdks/ts/src/gen) is committed; its compiled files (sdks/ts/dist) are not.
TS_DIR := sdks/ts

$(TS_DIR)/node_modules/.package-lock.json: $(TS_DIR)/package-lock.json
	cd $(TS_DIR) && npm ci --no-audit --no-fund

.PHONY: ts
ts: $(TS_DIR)/node_modules/.package-lock.json ## Compile the TypeScript SDK into sdks/ts/dist (npm ci first when its lock changed).
	cd $(TS_DIR) && npm run build

.PHONY: ts-gen
ts-gen: $(BIN)/buf $(TS_DIR)/node_modules/.package-lock.json ## Regenerate sdks/ts/src/gen from protos/.
	rm -rf $(TS_DIR)/src/gen
	buf generate --template $(TS_DIR)/buf.gen.yaml --path protos/conveyor/v1

.PHONY: ts-check
ts-check: ts-gen ## Fail if sdks/ts/src/gen is not what protos/ generate.
	@git diff --exit-code --stat -- $(TS_DIR)/src/gen || (echo "sdks/ts/src/gen is stale: run 'make ts-gen' and commit" && exit 1)
	@test -z "$$(git status --porcelain -- $(TS_DIR)/src/gen)" || (git status --porcelain -- $(TS_DIR)/src/gen; echo "sdks/ts/src/gen has untracked files: run 'make ts-gen' and commit"; exit 1)

.PHONY: screenshots
screenshots: ## Retake docs/screenshots with the dashboard's browser test (needs Chromium).
	CONVEYOR_SCREENSHOTS=$(CURDIR)/docs/screenshots go test -count=1 -run '^TestDashboard(TaskBrowser|AcrossQueues|DependencyGraph|QueueStats)?$$' ./admin/

.PHONY: lint
lint: $(BIN)/buf $(BIN)/golangci-lint ## Lint the protos (buf) and the Go code (golangci-lint).
	buf lint
	buf format --diff --exit-code
	golangci-lint run ./...

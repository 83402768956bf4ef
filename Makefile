# afe sandbox controller. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint
# The Ginkgo CLI, of the version go.mod names: it runs the controllers'
# suite in parallel processes (TEST_PROCS).
GINKGO ?= $(LOCALBIN)/ginkgo
TEST_PROCS ?= 3
GOLANGCI_LINT_VERSION ?= v2.15.0
KUBE_VERSION ?= v1.37.2
ETCD_VERSION ?= v3.6.16
# gVisor's runsc, built from source by make runsc: gVisor's `go` branch (its
# Go-buildable copy) as the Go module proxy serves it. The pseudo-version
# was @latest on 2026-09-05, the date it carries.
RUNSC_VERSION ?= v0.0.0-20260905035102-160fafc42237
ENVTEST_DIR = $(LOCALBIN)/envtest/$(KUBE_VERSION:v%=%)
IMG ?= afe/controller:dev
PROXY_IMG ?= afe/egress-proxy:dev
RUN_ARGS ?=
# make run NODES=3: one manager per node (the per-node mode) on the local
# control plane, with kube-scheduler and the Nodes node-1..node-3.
NODES ?=

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate CRDs and RBAC from the markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: controller-gen ## Generate the deepcopy code.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: docs
docs: manifests build ## Write docs/reference.md from the CRDs and the manager's flags.
	go run ./hack/gendocs --crds config/crd/bases --manager $(LOCALBIN)/manager --out docs/reference.md

.PHONY: verify-generated
verify-generated: manifests generate docs ## Fail when committed generated files are stale.
	@git diff --exit-code -- config/crd config/rbac api docs/reference.md || { echo "generated files are stale: run 'make manifests generate docs' and commit"; exit 1; }

.PHONY: fmt
fmt: ## go fmt.
	go fmt ./...

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: lint
lint: golangci-lint ## golangci-lint.
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...

##@ Test

.PHONY: envtest
envtest: ## Build (once, offline) the kube-apiserver, etcd and kube-scheduler of the test control plane.
	@KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) hack/build-envtest.sh >/dev/null

.PHONY: images
images: ## Build the egress proxy image and the test images, offline.
	hack/build-images.sh

.PHONY: runsc
runsc: ## Build gVisor's runsc at RUNSC_VERSION (once, cached in bin/), install it and register it with the local engine as the runtime runsc (daemon.json, SIGHUP).
	RUNSC_VERSION=$(RUNSC_VERSION) hack/install-runsc.sh

.PHONY: nft
nft: ## Install Debian's nftables (nft) when missing: the manager run as root bounds each sandbox's share of the host's conntrack table with it (--sandbox-conn-rate).
	hack/install-nft.sh

.PHONY: promtool
promtool: ## Install Debian's prometheus package (promtool, prometheus) when missing.
	hack/install-prometheus.sh

.PHONY: prometheus-rule
prometheus-rule: ## Write config/prometheus/prometheus_rule.yaml (the PrometheusRule) from the plain rules file.
	go run ./hack/genrule

.PHONY: python-deps
python-deps: ## Install Debian's python3-kubernetes and python3-pytest (with pip, setuptools, wheel, venv) when /usr/bin/python3 lacks them: the Python client and its tests.
	hack/install-python-deps.sh

.PHONY: test-rules
test-rules: promtool ## The alerts' tests: promtool on config/prometheus/tests (series that fire and series that must not), in seconds.
	promtool check rules config/prometheus/afe-sandbox.rules.yaml
	promtool test rules config/prometheus/tests/*.yaml

# The runtimes the boundary specs run under, each one (a runtime the engine
# lacks fails them).
TEST_RUNTIMES ?= runc,runsc

.PHONY: test
test: test-clock manifests generate docs fmt vet lint test-rules python-deps nft envtest images runsc build crash-manager docker-build kubectl-afe ginkgo ## The whole suite: unit, docker, envtest + Docker, e2e; then what it cost against its budget.
	@if [ -n "$$CI" ]; then git diff --exit-code -- config/crd config/rbac api docs/reference.md || { echo "generated files are stale: run 'make manifests generate docs' and commit"; exit 1; }; fi
	@echo "prerequisites $$(date +%s)" >> $(LOCALBIN)/test-stamps
	@# The controllers' suite runs its specs in TEST_PROCS processes (each
	@# with its own API server, manager and --instance), its Serial specs
	@# last on the first alone. The e2e suite, the longest of the other
	@# packages, starts as the Serial specs do (the suite makes
	@# AFE_SERIAL_MARKER then), in two processes (its own-plane specs in the
	@# second: test/e2e/e2e_suite_test.go), and the other packages, three
	@# at a time, and the fuzz targets beside them, as the controllers'
	@# suite ends: not before, as several of them start an API server, a
	@# manager and containers of their own, and beside the controllers'
	@# three processes on two cores every suite starved (Runs of `true`
	@# took 49 s under runsc, the access suite 12 minutes instead of 2).
	@# Beside the e2e suite they left the cores half idle (vmstat).
	@# Each spec's time is in bin/controllers-report.json and
	@# bin/e2e-report.json; hack/testbudget prints them against the budget,
	@# red or green.
	export KUBEBUILDER_ASSETS=$(ENVTEST_DIR) AFE_MANAGER_BIN=$(LOCALBIN)/manager AFE_KUBECTL_AFE_BIN=$(LOCALBIN)/kubectl-afe \
		AFE_E2E_REPORT=$(LOCALBIN)/e2e-report.json AFE_SERIAL_MARKER=$(LOCALBIN)/controllers-serial \
		AFE_MANAGER_CRASHPOINTS_BIN=$(LOCALBIN)/manager-crashpoints \
		AFE_CONTROLLER_IMAGE=$(IMG) AFE_REQUIRE_DOCKER=1 AFE_TEST_RUNTIMES=$(TEST_RUNTIMES); \
	rm -f $$AFE_SERIAL_MARKER $(LOCALBIN)/*-report.json; \
	{ $(GINKGO) -p --procs=$(TEST_PROCS) --timeout=35m --no-color --output-dir=$(LOCALBIN) \
		--json-report=controllers-report.json ./controllers > $(LOCALBIN)/controllers-test.log 2>&1 \
		&& echo 0 > $(LOCALBIN)/controllers-exit || echo $$? > $(LOCALBIN)/controllers-exit; } & ginkgo=$$!; \
	while [ ! -e $$AFE_SERIAL_MARKER ] && kill -0 $$ginkgo 2>/dev/null; do sleep 1; done; \
	go test ./test/e2e -count=1 -timeout 25m -args -ginkgo.label-filter='!own-plane' > $(LOCALBIN)/go-test-e2e.log 2>&1 & e2e=$$!; \
	AFE_E2E_REPORT=$(LOCALBIN)/e2e-own-plane-report.json go test ./test/e2e -count=1 -timeout 25m -args -ginkgo.label-filter=own-plane \
		> $(LOCALBIN)/go-test-e2e-own-plane.log 2>&1 & e2e_own=$$!; \
	wait $$ginkgo; controllers=$$(cat $(LOCALBIN)/controllers-exit); cat $(LOCALBIN)/controllers-test.log; \
	echo "controllers $$(date +%s)" >> $(LOCALBIN)/test-stamps; \
	$(MAKE) --no-print-directory fuzz > $(LOCALBIN)/fuzz.log 2>&1 & fuzz_pid=$$!; \
	others=0; go test -p 3 $$(go list ./... | grep -v -e '/controllers$$' -e '/test/e2e$$') -count=1 -timeout 25m 2>&1 | tee $(LOCALBIN)/go-test.log || others=$$?; \
	echo "packages $$(date +%s)" >> $(LOCALBIN)/test-stamps; \
	fuzz=0; wait $$fuzz_pid || fuzz=$$?; cat $(LOCALBIN)/fuzz.log; \
	echo "fuzz $$(date +%s)" >> $(LOCALBIN)/test-stamps; \
	e2e_exit=0; wait $$e2e || e2e_exit=$$?; wait $$e2e_own || e2e_exit=$$?; cat $(LOCALBIN)/go-test-e2e.log $(LOCALBIN)/go-test-e2e-own-plane.log; \
	echo "e2e $$(date +%s)" >> $(LOCALBIN)/test-stamps; \
	echo "controllers (ginkgo, $(TEST_PROCS) processes): exit $$controllers; e2e: exit $$e2e_exit; the other packages: exit $$others; fuzz: exit $$fuzz"; \
	go run ./hack/testbudget -stamps $(LOCALBIN)/test-stamps -go-test $(LOCALBIN)/go-test.log \
		-go-test test/e2e=$(LOCALBIN)/go-test-e2e.log -go-test "test/e2e own-plane=$(LOCALBIN)/go-test-e2e-own-plane.log" \
		-ginkgo controllers=$(LOCALBIN)/controllers-report.json -ginkgo test/e2e=$(LOCALBIN)/e2e-report.json \
		-ginkgo "test/e2e own-plane=$(LOCALBIN)/e2e-own-plane-report.json" || true; \
	[ $$controllers = 0 ] && [ $$e2e_exit = 0 ] && [ $$others = 0 ] && [ $$fuzz = 0 ]

# test-clock starts the clock of make test's budget (bin/test-stamps):
# named first, it runs before the other prerequisites.
.PHONY: test-clock
test-clock:
	@mkdir -p $(LOCALBIN) && echo "start $$(date +%s)" > $(LOCALBIN)/test-stamps

# Each target runs for a number of executions (a few seconds each here), not
# a duration: Go 1.26 can fail a duration-bound run with a spurious "context
# deadline exceeded" when the machine is busy (go.dev/issue/75804).
# FUZZTIME=1m (or 1000000x) runs every target for that instead.
FUZZTIME ?=
FUZZ_TARGETS = internal/sandboxspec:FuzzValidateEgressHost:100000 internal/sandboxspec:FuzzParseUser:100000 \
	internal/naming:FuzzKey:100000 internal/runexec:FuzzResults:50000 internal/runexec:FuzzTail:50000 \
	docker/egress-proxy:FuzzRendererHeldToTheProxy:1500 internal/egress:FuzzParseHostAgreesWithAdmission:100000 \
	internal/builtin:FuzzReport:50000 internal/egresslog:FuzzParseURL:100000

.PHONY: fuzz
fuzz: ## Run every fuzz target (its own count of executions, or FUZZTIME); the corpus is in testdata/fuzz.
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget="$(FUZZTIME)"; \
		[ -n "$$budget" ] || budget="$${rest##*:}x"; \
		go test ./$$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $$budget >/tmp/afe-fuzz.log 2>&1 || { cat /tmp/afe-fuzz.log; exit 1; }; \
		echo "fuzz $$name: ok ($$budget)"; \
	done

.PHONY: test-chaos
test-chaos: envtest images nft build ## A longer crash-convergence churn (CHURN_SEED, CHURN_TICKETS, CHURN_STEPS, CHURN_KILLS).
	KUBEBUILDER_ASSETS=$(ENVTEST_DIR) AFE_MANAGER_BIN=$(LOCALBIN)/manager \
	CHURN_TICKETS=$${CHURN_TICKETS:-60} CHURN_STEPS=$${CHURN_STEPS:-400} CHURN_KILLS=$${CHURN_KILLS:-15} \
		go test ./test/e2e/ -count=1 -timeout 30m -v -ginkgo.focus="Crash convergence" -ginkgo.v 2>&1 | grep -E "churn:|SUCCESS|FAIL|Passed"

BENCH_ARGS ?=
.PHONY: bench
bench: manifests envtest images nft runsc build kubectl-afe ## The benchmark: the controller against the docker CLI, and runsc against runc, as bin/bench/results.md, results.json and figures (PNG, SVG) (BENCH_ARGS, e.g. "-idle 200 -profile").
	go run ./hack/bench -assets $(ENVTEST_DIR) -manager $(LOCALBIN)/manager -plugin $(LOCALBIN)/kubectl-afe -out $(LOCALBIN)/bench $(BENCH_ARGS)

# The fast tier: what needs neither Docker nor images, in well under 90 s.
# The proxy's entrypoint is tested with sh: its checks of a configuration
# (TestEntrypoint*) and the renderer held to it (Fuzz*'s seeds).
# The fake engine's tests stay in `make test` too (go test ./...).
FAST_PKGS = ./api/... ./internal/... ./hack/controlplane/... ./test/fakeengine/... ./test/fast/...

.PHONY: test-fast
test-fast: envtest ## Unit tests, fuzz seeds, the fake engine and the controllers on envtest against it; no Docker.
	KUBEBUILDER_ASSETS=$(ENVTEST_DIR) AFE_NO_DOCKER=1 go test -count=1 -timeout 5m $(FAST_PKGS)
	go test -count=1 ./docker/egress-proxy -run '^(TestEntrypoint|Fuzz)'

.PHONY: test-unit
test-unit: ## Only the tests that need neither Docker nor an API server.
	go test -count=1 ./api/... ./internal/...

##@ Build

.PHONY: build
build: ## Build the manager binary.
	go build -o $(LOCALBIN)/manager ./cmd/manager

.PHONY: crash-manager
crash-manager: ## Build the crash tests' manager: with the tag crashpoints, it kills itself at the point AFE_CRASHPOINT names (internal/crashpoint).
	go build -tags crashpoints -o $(LOCALBIN)/manager-crashpoints ./cmd/manager

# What localcp does for `make run` besides the CRDs: it installs the
# ClusterRoles an admin binds for a team (docs/access.md), and mounts the Folder
# workspace root nosuid,nodev for the run (the manager refuses Folder
# workspaces on a root mounted otherwise; RUN_ARGS may name another).
LOCAL_WORKSPACES ?= $(LOCALBIN)/local/workspaces
LOCALCP_ARGS = --manifests config/rbac/access_roles.yaml --workspace-root $(LOCAL_WORKSPACES)

# make run lets sandboxes name runsc when the engine has it (make runsc);
# RUN_ARGS="--default-runtime=runsc" puts every sandbox that names none on it.
RUN_RUNTIMES ?= $(shell docker info --format '{{range $$k, $$v := .Runtimes}}{{$$k}} {{end}}' 2>/dev/null | grep -qw runsc && echo --runtimes=runc,runsc)

.PHONY: run
run: manifests generate build kubectl-afe envtest images nft ## Run the controller; without KUBECONFIG on a local control plane kept under bin/local (NODES=3: a manager per node).
ifeq ($(KUBECONFIG),)
	go build -o $(LOCALBIN)/localcp ./hack/localcp
ifeq ($(filter-out 0,$(NODES)),)
	@# The access API (kubectl afe exec, shell, cp, logs -f) through the local
	@# API server: an ExternalName Service to localhost at a free port.
	exec $(LOCALBIN)/localcp --assets $(ENVTEST_DIR) --dir $(LOCALBIN)/local --crds config/crd/bases $(LOCALCP_ARGS) -- $(LOCALBIN)/manager \
		--workspace-root=$(LOCAL_WORKSPACES) --access-bind-address=127.0.0.1:0 --access-register --access-external-name=localhost --access-service=afe-local/access \
		--run-log-dir=$(LOCALBIN)/local/run-logs --telemetry-db $(LOCALBIN)/local/telemetry.db $(RUN_RUNTIMES) $(RUN_ARGS)
else
	@# localcp runs the manager once per node, appending --per-node
	@# --instance=node-i, with {node} replaced by the node's name and an
	@# argument {node-1}ARG given (as ARG) to node-1's manager only. Each has
	@# its own Run logs and telemetry. node-1's alone serves metrics and
	@# probes at the ports of a single manager (its flags come later and
	@# win); the others serve neither, so none collide. Every manager
	@# serves the access API and the other managers at free ports; node-1's
	@# registers it, and forwards a request about another node's sandbox to
	@# that node's manager (docs/per-node.md).
	exec $(LOCALBIN)/localcp --assets $(ENVTEST_DIR) --dir $(LOCALBIN)/local --crds config/crd/bases $(LOCALCP_ARGS) --nodes $(NODES) -- $(LOCALBIN)/manager \
		--workspace-root=$(LOCAL_WORKSPACES) --metrics-bind-address=0 --health-probe-bind-address=0 '{node-1}--metrics-bind-address=:8080' '{node-1}--health-probe-bind-address=:8081' \
		--access-bind-address=127.0.0.1:0 --peer-bind-address=127.0.0.1:0 --access-service=afe-local/access '{node-1}--access-register' '{node-1}--access-external-name=localhost' \
		--run-log-dir=$(LOCALBIN)/local/run-logs-{node} --telemetry-db $(LOCALBIN)/local/telemetry-{node}.db $(RUN_RUNTIMES) $(RUN_ARGS)
endif
else
	exec $(LOCALBIN)/manager $(RUN_ARGS)
endif

.PHONY: docker-build
docker-build: ## Build the controller image $(IMG) offline: a static binary in an image from scratch.
	mkdir -p $(LOCALBIN)/image
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o $(LOCALBIN)/image/manager ./cmd/manager
	DOCKER_BUILDKIT=0 docker build -q -f hack/Dockerfile.scratch -t $(IMG) $(LOCALBIN)/image >/dev/null
	@echo "built $(IMG)"

.PHONY: kubectl-afe
kubectl-afe: ## Build the kubectl plugin and kubectl_complete-afe, through which kubectl completes it (put bin/ on your PATH).
	go build -o $(LOCALBIN)/kubectl-afe ./cmd/kubectl-afe
	printf '#!/bin/sh\n# kubectl afe <TAB>: kubectl asks the plugin for its completions through this.\nexec "$$(dirname "$$0")/kubectl-afe" __complete "$$@"\n' > $(LOCALBIN)/kubectl_complete-afe
	chmod +x $(LOCALBIN)/kubectl_complete-afe

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster of KUBECONFIG.
	kubectl apply -k config/crd

.PHONY: uninstall
uninstall: manifests ## Remove the CRDs (and every Ticket, Sandbox and Run) from the cluster.
	kubectl delete -k config/crd --ignore-not-found

.PHONY: deploy
deploy: manifests ## Deploy the controller (image $(IMG)) to the cluster of KUBECONFIG.
	kubectl kustomize config/default | sed 's|afe/controller:dev|$(IMG)|' | kubectl apply -f -

.PHONY: undeploy
undeploy: ## Remove the controller from the cluster.
	kubectl kustomize config/default | kubectl delete --ignore-not-found -f -

.PHONY: build-installer
build-installer: manifests ## Write dist/install.yaml: CRDs, RBAC and the Deployment of $(IMG) in one file.
	mkdir -p dist
	kubectl kustomize config/default | sed 's|afe/controller:dev|$(IMG)|' > dist/install.yaml

##@ Tools

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN)
$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

.PHONY: ginkgo
ginkgo: $(GINKGO)
$(GINKGO): go.mod
	GOBIN=$(LOCALBIN) go install github.com/onsi/ginkgo/v2/ginkgo

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT)
$(GOLANGCI_LINT):
	GOBIN=$(LOCALBIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# featuregate-operator. `make help` lists the targets.

IMG ?= controller:latest
# Arguments passed to the operator by `make run` and `make run-local`.
ARGS ?=
FEATURE_SET ?= Default

# Linker flags of bin/manager, as the Dockerfile builds it: no symbol table
# and no DWARF (a third of the file; panics still print their stacks).
LDFLAGS ?= -s -w

LOCALBIN ?= $(shell pwd)/bin
# etcd, kube-apiserver and kubectl, built from source by envtest-assets;
# the node's kubelet, kube-controller-manager, kube-scheduler and kube-proxy,
# by cluster-assets, beside them.
ENVTEST_ASSETS ?= $(LOCALBIN)/k8s
ENVTEST_CMDS = etcd kube-apiserver kubectl
CLUSTER_CMDS = kubelet kube-controller-manager kube-scheduler kube-proxy
GOTEST_FLAGS ?= -timeout 30m

CONTROLLER_TOOLS_VERSION ?= v0.23.0
KUSTOMIZE_VERSION ?= v5.8.1
GOLANGCI_LINT_VERSION ?= v2.12.2
APIDIFF_VERSION ?= v0.0.0-20261113113407-e3970619a1a4
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
APIDIFF ?= $(LOCALBIN)/apidiff-$(APIDIFF_VERSION)

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate RBAC: config/rbac/role.yaml and the guard's own pkg/featuregate/config/rbac/role.yaml from +kubebuilder markers, config/payload/role.yaml from the payload.
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths="./controllers/...;./internal/clusterinputs/...;./pkg/featuregate/..." output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=featuregate-guard paths="./pkg/featuregate/..." output:rbac:artifacts:config=pkg/featuregate/config/rbac
	go run . manifests --manifests-dir config/payload/manifests --rbac > config/payload/role.yaml

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods for api/.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: fmt
fmt: ## Run go fmt (the operator, and pkg/featuregate, test/bench and test/conformance, modules of their own).
	go fmt ./...
	cd pkg/featuregate && go fmt ./...
	cd pkg/featuregate/librarygo && go fmt ./...
	cd test/bench && go fmt ./...
	cd test/conformance && go fmt ./...

.PHONY: vet
vet: ## Run go vet (the operator, and pkg/featuregate, examples/consumer and test/bench, modules of their own).
	go vet ./...
	cd pkg/featuregate && go vet ./...
	cd pkg/featuregate/librarygo && go vet ./...
	cd examples/consumer && go vet ./...
	cd test/bench && go vet ./...

.PHONY: envtest-assets
envtest-assets: $(ENVTEST_ASSETS)/kube-apiserver ## Build etcd, kube-apiserver and kubectl from source into bin/k8s.
	@echo $(ENVTEST_ASSETS)

# Built with the tests' own flags (no -trimpath): hack/k8s requires the same
# k8s.io versions as the operator, so the packages `go run . manifests` has
# compiled are reused (459 s cold with -trimpath, 291 s without, measured).
$(ENVTEST_ASSETS)/kube-apiserver: hack/k8s/go.mod hack/k8s/go.sum $(foreach c,$(ENVTEST_CMDS),hack/k8s/cmd/$(c)/main.go)
	@mkdir -p $(ENVTEST_ASSETS)
	cd hack/k8s && go build -o $(ENVTEST_ASSETS)/ $(foreach c,$(ENVTEST_CMDS),./cmd/$(c))
	@touch $@

.PHONY: cluster-assets
cluster-assets: envtest-assets $(ENVTEST_ASSETS)/kubelet ## Build kubelet, kube-controller-manager, kube-scheduler and kube-proxy from source into bin/k8s.
	@echo $(ENVTEST_ASSETS)

$(ENVTEST_ASSETS)/kubelet: hack/k8s/go.mod hack/k8s/go.sum $(foreach c,$(CLUSTER_CMDS),hack/k8s/cmd/$(c)/main.go)
	@mkdir -p $(ENVTEST_ASSETS)
	cd hack/k8s && go build -o $(ENVTEST_ASSETS)/ $(foreach c,$(CLUSTER_CMDS),./cmd/$(c))
	@touch $@

.PHONY: test
test: manifests generate fmt vet envtest-assets kustomize test-library test-librarygo ## Run all tests against a real API server: the library at each controller-runtime minor it supports, the operator, and the unit tests of examples/consumer and test/bench.
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test $(GOTEST_FLAGS) ./...
	cd examples/consumer && go test $(GOTEST_FLAGS) ./...
	cd test/bench && go test $(GOTEST_FLAGS) ./...
	$(MAKE) test-conformance

.PHONY: test-conformance
test-conformance: envtest-assets ## Run controller-runtime's own pkg/manager specs (test/conformance, a module of its own) against a stock and a guarded manager, at controller-runtime v0.25 and at the library's floor v0.23 (docs/conformance.md).
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" test/conformance/run.sh

.PHONY: test-librarygo
test-librarygo: envtest-assets ## Check the guard against library-go: its FeatureGateAccess (pkg/featuregate/librarygo) against a real API server with library-go's own test tables, and test/librarygo (featuregate.Snapshot is a featuregates.FeatureGate; library-go behaves as docs/migrating-from-library-go.md says). Each is a module of its own.
	cd pkg/featuregate/librarygo && KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test $(GOTEST_FLAGS) ./...
	cd test/librarygo && go test $(GOTEST_FLAGS) ./...

.PHONY: test-library
test-library: envtest-assets ## Run the library module's tests (pkg/featuregate) at controller-runtime v0.23 (its floor), v0.24 and v0.25, each with its k8s.io minor, side by side once built (LIBRARY_MATRIX=floor for one, LIBRARY_SERIAL=1 in turn).
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" hack/test-library.sh

.PHONY: test-faults
FAULTS ?= TestFault
FAULTS_LOG ?= $(LOCALBIN)/test-faults.log
test-faults: envtest-assets ## Run only the fault suite, one line per scenario (FAULTS=TestFaultWatchCut for one; full log in bin/test-faults.log).
	@mkdir -p $(LOCALBIN); rc=0; KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test $(GOTEST_FLAGS) -count=1 -run '^$(FAULTS)' -v ./test/e2e/ > $(FAULTS_LOG) 2>&1 || rc=$$?; \
	sed -nE 's/^FAULT //p; /^[0-9]+ passed, [0-9]+ failed$$/p' $(FAULTS_LOG); \
	if [ $$rc -ne 0 ]; then grep -E '^(--- FAIL|FAIL|panic:)' $(FAULTS_LOG) || tail -20 $(FAULTS_LOG); echo "test-faults: go test exited $$rc; full log: $(FAULTS_LOG)"; fi; \
	exit $$rc

# Robustness campaigns (test/robustness): random FeatureGate changes and
# random, overlapping faults against the real binaries, then every exposure
# (a situation made to happen, waiting on events: test/robustness/exposure.go),
# each history judged by a checker. test-robustness is CI's bounded run, with
# the check that each planted bug is caught at 5 seeds; robustness a long one.
ROBUSTNESS_LOG ?= $(LOCALBIN)/test-robustness.log
ROBUSTNESS_FAULTS ?=
DURATION ?= 30m
SEED ?=
# PLANTED_SEEDS is how many seeds each planted bug runs with: 5 here, each
# caught at every one by construction; CI runs the first of each (a
# quarter of the time), the check that the checker works, kept apart from
# the check that it works whatever the seed.
PLANTED_SEEDS ?= 5
.PHONY: test-robustness
test-robustness: envtest-assets ## Two seeded 40 s campaigns with every exposure, and 5 planted bugs x PLANTED_SEEDS (5) seeds (about 20 min; full log in bin/test-robustness.log).
	@mkdir -p $(LOCALBIN)
	FEATUREGATE_ROBUSTNESS=1 KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test -count=1 -timeout 40m -v ./test/robustness/ \
		-args -robustness.seed=1 -robustness.campaigns=2 -robustness.duration=40s -robustness.planted-seeds=$(PLANTED_SEEDS) 2>&1 | tee $(ROBUSTNESS_LOG) | grep -E '^(=== RUN|--- |PASS|FAIL|ok )|campaign_test.go'

.PHONY: robustness
robustness: envtest-assets ## One long campaign, then every exposure: DURATION=30m SEED=n (random when empty) ROBUSTNESS_FAULTS=kind,...; its table in bin/robustness.md, its directory (history.jsonl, logs) kept.
	@mkdir -p $(LOCALBIN)
	FEATUREGATE_ROBUSTNESS=1 KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test -count=1 -timeout 0 -v -run '^TestCampaigns$$' ./test/robustness/ \
		-args -robustness.campaigns=1 -robustness.duration=$(DURATION) $(if $(SEED),-robustness.seed=$(SEED)) \
		$(if $(ROBUSTNESS_FAULTS),-robustness.faults=$(ROBUSTNESS_FAULTS)) -robustness.report=$(LOCALBIN)/robustness.md -robustness.keep

# What the node of test-cluster needs from the distribution (Debian).
CLUSTER_PACKAGES = containerd runc containernetworking-plugins iptables
CLUSTER_TEST_LOG ?= $(LOCALBIN)/test-cluster.log
# Where bench-cluster leaves the real-kubelet measurement for bench.
KUBELET_BENCH ?= $(LOCALBIN)/bench-kubelet.json

# test/framework/node's root-only test proves the leftover check and the sweep on
# a few planted leftovers; -p 1 keeps it apart from test/cluster's node.
.PHONY: test-cluster
test-cluster: ## Run the operator on a real single-node cluster: kubelet, containerd, kustomize + kubectl apply (root; ~5 min warm).
	@$(call need-root,test-cluster)
	$(MAKE) cluster-deps cluster-assets kustomize
	@mkdir -p $(LOCALBIN)
	FEATUREGATE_TEST_CLUSTER=1 KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test -p 1 -count=1 -timeout 40m -v ./test/framework/node/ ./test/cluster/ 2>&1 | tee $(CLUSTER_TEST_LOG)

.PHONY: cluster-deps
cluster-deps: ## Install containerd, runc, the CNI plugins and iptables with apt-get, when missing (root).
	@missing=; for b in containerd containerd-shim-runc-v2 runc ctr iptables-save ip6tables-restore; do command -v $$b >/dev/null || missing="$$missing $$b"; done; \
	[ -x /usr/lib/cni/bridge ] || missing="$$missing cni-plugins"; \
	if [ -n "$$missing" ]; then \
		echo "cluster-deps: missing$$missing: apt-get install $(CLUSTER_PACKAGES)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(CLUSTER_PACKAGES); \
	fi

# need-root fails the target $(1) with a message unless make runs as root.
define need-root
if [ "$$(id -u)" != 0 ]; then echo "$(1): needs root: it runs containerd and a kubelet, and creates a network bridge and iptables rules (it puts the host back as it was); run 'sudo make $(1)'" >&2; exit 1; fi
endef

.PHONY: fuzz
fuzz: ## Fuzz every target for FUZZTIME (20s) each, printing its rate; fails under FUZZ_MIN_RATE (100) executions per second.
	hack/fuzz-selftest.sh
	hack/fuzz.sh ./pkg/manifest/:FuzzInclude ./pkg/manifest/:FuzzLoad

.PHONY: lint
lint: large-files golangci-lint apidiff ## Check for large tracked files, run golangci-lint (the operator, pkg/featuregate, its librarygo module and test/bench), and apidiff of the library against its last release tag.
	$(GOLANGCI_LINT) run
	cd pkg/featuregate && $(GOLANGCI_LINT) run
	cd pkg/featuregate/librarygo && $(GOLANGCI_LINT) run
	APIDIFF=$(APIDIFF) hack/apidiff.sh
	cd test/bench && $(GOLANGCI_LINT) run

.PHONY: large-files
large-files: ## Fail on a tracked file over 1 MiB that hack/large-files.sh does not list as a fixture, with its reason.
	hack/large-files.sh

# test/bench is a module of its own (gonum.org/v1/plot stays out of go.mod)
# and runs from its directory; from-bench is path $(1) as seen from there,
# relative when under the repository (the report prints the arguments).
from-bench = $(if $(filter $(CURDIR)/%,$(1)),../../$(patsubst $(CURDIR)/%,%,$(1)),$(1))

.PHONY: bench
bench: build envtest-assets ## Run the benchmarks and write BENCHMARKS.md (not part of test); as root, bench-cluster first for the real-kubelet row.
	@rm -f $(KUBELET_BENCH)
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) bench-cluster; else echo "bench: not root: the real-kubelet row is not measured"; fi
	cd test/bench && KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go run . -out ../../BENCHMARKS.md -manager ../../bin/manager -kubelet $(call from-bench,$(KUBELET_BENCH))

# library-go's FeatureGateAccess beside librarygo.Access, the same program
# (test/librarygo/cmd/idle) run with each on one control plane.
LIBRARYGO_COMPARE ?= $(LOCALBIN)/librarygo-compare.md
.PHONY: bench-librarygo
bench-librarygo: envtest-assets ## Measure library-go's FeatureGateAccess and librarygo.Access side by side (ready after the API returns, a change during an outage, exits per change, API requests/s idle and busy) into bin/librarygo-compare.md, for BENCHMARKS.md (~10 min).
	@mkdir -p $(LOCALBIN)
	cd pkg/featuregate/librarygo && FEATUREGATE_COMPARE=1 KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test -count=1 -timeout 30m -v -run '^TestCompareWithLibraryGo$$' . -args -compare.report=$(LIBRARYGO_COMPARE)

# The fleet (test/fleet): FLEET_N adopters on one control plane through a
# TechPreviewNoUpgrade switch, an upgrade, a CustomNoUpgrade gate flip and a
# stampede, then the idle and busy cost beside library-go's
# FeatureGateAccess; `make test` runs its 10-adopter restart test.
FLEET_N ?= 60
FLEET_SEED ?=
FLEET_WINDOW ?= 60s
FLEET_REPORT ?= $(LOCALBIN)/fleet.md
.PHONY: fleet
fleet: envtest-assets ## Run the fleet at FLEET_N (60) adopters, FLEET_SEED=n to repeat one: restarts vs library-go, stampede, idle/busy cost into bin/fleet.md and bin/fleet.json, and (when it passes) BENCHMARKS.md's Fleet section (~15 min).
	@mkdir -p $(LOCALBIN)
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test -count=1 -timeout 60m -v -run '^TestFleetReport$$' ./test/fleet/ \
		-args -fleet.n=$(FLEET_N) $(if $(FLEET_SEED),-fleet.seed=$(FLEET_SEED)) -fleet.window=$(FLEET_WINDOW) -fleet.report=$(FLEET_REPORT) -fleet.benchmarks=$(CURDIR)/BENCHMARKS.md

.PHONY: fleet-render
fleet-render: ## Write bin/fleet.md and BENCHMARKS.md's Fleet section again from bin/fleet.json (a report's wording changed; no fleet runs).
	go test -count=1 -run '^TestFleetRender$$' ./test/fleet/ -args -fleet.render=$(basename $(FLEET_REPORT)).json -fleet.benchmarks=$(CURDIR)/BENCHMARKS.md

.PHONY: bench-cluster
bench-cluster: ## Measure a FeatureGate change until the replacement pod is Ready on a real kubelet, into bin/bench-kubelet.json (root).
	@$(call need-root,bench-cluster)
	$(MAKE) cluster-deps cluster-assets kustomize
	FEATUREGATE_TEST_CLUSTER=1 FEATUREGATE_BENCH_KUBELET=$(KUBELET_BENCH) KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" \
		go test -count=1 -timeout 30m -v -run '^TestBenchKubeletRestart$$' ./test/cluster/

##@ Build

.PHONY: build
build: fmt vet ## Build the manager binary into bin/manager (LDFLAGS= keeps symbols and DWARF for a debugger).
	CGO_ENABLED=0 go build -trimpath -ldflags="$(LDFLAGS)" -o bin/manager .

.PHONY: run
run: build ## Run the operator against the cluster of the current kubeconfig.
	bin/manager $(ARGS)

.PHONY: run-local
run-local: build envtest-assets ## Run the operator against a local etcd + kube-apiserver (FEATURE_SET=..., ARGS=...).
	go build -o bin/run-local ./hack/run-local
	FEATURE_SET=$(FEATURE_SET) bin/run-local -manager bin/manager -- $(ARGS)

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build -t $(IMG) .

.PHONY: build-installer
build-installer: manifests kustomize ## Render dist/install.yaml from config/default.
	mkdir -p dist
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default > dist/install.yaml

##@ Deployment

.PHONY: deploy
deploy: manifests kustomize ## Deploy to the cluster of the current kubeconfig.
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default | kubectl apply --server-side -f -

.PHONY: undeploy
undeploy: kustomize ## Remove the operator from the cluster of the current kubeconfig.
	$(KUSTOMIZE) build config/default | kubectl delete --ignore-not-found -f -

##@ Tools (pinned; `go install`ed into bin/ with the version in the name)

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN)
$(CONTROLLER_GEN):
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

.PHONY: kustomize
kustomize: $(KUSTOMIZE)
$(KUSTOMIZE):
	$(call go-install-tool,$(KUSTOMIZE),sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION))

.PHONY: apidiff
apidiff: $(APIDIFF)
$(APIDIFF):
	$(call go-install-tool,$(APIDIFF),golang.org/x/exp/cmd/apidiff,$(APIDIFF_VERSION))

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT)
$(GOLANGCI_LINT):
	$(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

# go-install-tool installs package $2 at version $3 as $1 (<name>-<version>),
# and links <name> to it (kubebuilder's recipe).
define go-install-tool
@[ -f "$(1)" ] || { \
set -e; \
package=$(2)@$(3) ;\
echo "Downloading $${package}" ;\
rm -f $(1) || true ;\
GOBIN=$(LOCALBIN) go install $${package} ;\
mv $(LOCALBIN)/$$(basename "$(1)" | sed "s/-$(3)$$//") $(1) ;\
} ;\
ln -sf $$(realpath $(1)) $(LOCALBIN)/$$(basename "$(1)" | sed "s/-$(3)$$//")
endef

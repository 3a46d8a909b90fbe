# policyhub — see README.md. `make test` runs every test; `make demo` runs policyhub on a local fleet.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

# controller-gen is pinned here and run with `go run`, so nothing is installed by hand.
CONTROLLER_GEN ?= go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.1

# Where the test binaries (kube-apiserver, cluster-gateway, Kyverno) are cached: outside the clone,
# so a fresh clone on the same machine reuses them.
POLICYHUB_TESTBIN ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/policyhub/testbin
export POLICYHUB_TESTBIN

GO_TEST_FLAGS ?= -count=1 -timeout 60m
# How many of the e2e tests that run side by side on the one local fleet run at once.
E2E_PARALLEL ?= 8

.PHONY: all build generate manifests verify-generated testbin test unit fuzz lint fmt vet staticcheck leftovers bench-sync bench-agent bench-vap bench-inventory bench-preview bench-scale bench-summary-write demo images push release actionlint help
all: build

help: ## Show the targets.
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## Build every package and command.
	go build ./...

# Where `make images` writes the images (one OCI layout each) and the registry they are named under
# (the charts' default); `make push REGISTRY=...` pushes them there.
IMAGES_DIR ?= _output/images
REGISTRY ?= ghcr.io/policyhub

images: ## Build the policyhub-hub and policyhub-agent images (linux/amd64+arm64) without Docker, into $(IMAGES_DIR).
	go run ./hack/images -out $(IMAGES_DIR) -registry $(REGISTRY)

push: ## Build the images and push them to $(REGISTRY) (docker login's credentials); prints the digests.
	go run ./hack/images -out $(IMAGES_DIR) -registry $(REGISTRY) -push

release: images ## Package the charts into _output/charts with the images just built pinned by digest (push them with make push, the charts with helm push).
	go run ./hack/release -images $(IMAGES_DIR) -registry $(REGISTRY) -out _output/charts

generate: ## Generate deepcopy code for the APIs (controller-gen).
	$(CONTROLLER_GEN) object paths=./apis/...

manifests: ## Generate the CRDs into config/crd (controller-gen), and copy them into the hub chart.
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=config/crd
	cp config/crd/*.yaml charts/policyhub-hub/crds/

GENERATED = apis/policyhub/v1alpha1/zz_generated.deepcopy.go config/crd/*.yaml charts/policyhub-hub/crds/*.yaml

verify-generated: ## Fail if the generated deepcopy code or CRDs were not regenerated after an API change.
	@before=$$(cat $(GENERATED) | sha256sum); \
	$(MAKE) -s generate manifests; \
	if [ "$$before" != "$$(cat $(GENERATED) | sha256sum)" ]; then \
		echo "generated code was stale and has now been regenerated: review and commit it"; exit 1; fi

verify-tracked: ## Fail if a tracked file over 1 MiB lives outside a testdata directory (a committed binary, say).
	@big=$$(git ls-files -z | xargs -0 -r stat -c '%s %n' -- | awk '$$1 > 1048576 && $$2 !~ /(^|\/)testdata\// {print "  " $$2 " (" $$1 " bytes)"}'); \
	if [ -n "$$big" ]; then echo "tracked files over 1 MiB outside testdata (build them, do not commit them):"; echo "$$big"; exit 1; fi

testbin: ## Build every binary the tests run from the Go module proxy into $(POLICYHUB_TESTBIN); install Prometheus and Chromium.
	hack/testbin.sh

# What each target runs, and so builds (hack/testbin.sh's components): a newcomer's `make demo`
# builds neither KubeVela, Flux, the Kyverno CLI nor kubectl.
TESTBIN_FLEET = etcd kube-apiserver cluster-gateway
TESTBIN_DEMO = $(TESTBIN_FLEET) kube-controller-manager kyverno

test: testbin verify-generated verify-tracked ## Run every test: the e2e tests on a local fleet, and beside them the other packages' tests and the fuzz targets.
	# The e2e package is the long pole, and its tests mostly wait (half the time or more of both
	# cores idle): the other packages' tests (unit tests, the local fleet's own, the image test's
	# cross-compile) and then make fuzz run beside it at the lowest CPU priority (nice 19), on the
	# CPU it leaves idle; the fuzz targets count executions, not seconds, so they fuzz as much as
	# alone. Their output follows the e2e tests'. Packages run one at a time in each (go test -p 1):
	# two fleets starting at the same priority slow each other past the tests' deadlines. Within
	# the e2e package, the tests that mostly wait run side by side (e2e/doc.go), up to E2E_PARALLEL.
	@others=$$(mktemp); \
	( nice -n 19 go test -p 1 -parallel $(E2E_PARALLEL) $(GO_TEST_FLAGS) $$(go list ./... | grep -v '/e2e$$') && \
	  nice -n 19 $(MAKE) --no-print-directory fuzz ) > $$others 2>&1 & pid=$$!; \
	echo "the other packages' tests, then make fuzz, run beside the e2e tests (nice 19); their output follows"; \
	e2e=0; go test -parallel $(E2E_PARALLEL) $(GO_TEST_FLAGS) ./e2e || e2e=$$?; \
	rest=0; wait $$pid || rest=$$?; echo "--- the other packages' tests, then make fuzz:"; cat $$others; rm -f $$others; \
	if [ $$rest -ne 0 ]; then echo "the other packages' tests or make fuzz failed"; fi; \
	[ $$e2e -eq 0 ] && [ $$rest -eq 0 ]
	hack/leftovers.sh

unit: ## Run only the tests that need no fleet.
	go test $(GO_TEST_FLAGS) -short ./...

# How much each fuzz target runs in `make fuzz` (and so in `make test`): by default a number of
# executions, what each did in 10 s alone on the project's 2-core machine, so that a target fuzzes
# as much on a busy machine as on an idle one; FUZZTIME=30s (say) runs each for a time instead.
# Their seed corpora (f.Add and testdata/fuzz) run in every `go test` as ordinary tests.
FUZZTIME ?=
# -timeout: beside the tests, a target may wait long for idle CPU (go test's default is 10 min).

# The fuzz targets run with Go 1.27: Go 1.26's fuzz coordinator can fail a target with a bare
# "context deadline exceeded" at the end of -fuzztime on a loaded machine, with no input to
# blame (golang/go#75804, fixed in 1.27); it did in a fresh-clone make test here.
FUZZ_GO ?= GOTOOLCHAIN=go1.27.3 go

fuzz: ## Fuzz what an agent's summary, a policy library, a tenant's CEL and a source can do to the hub (see FUZZTIME).
	# -fuzz takes one target at a time.
	$(FUZZ_GO) test -timeout 50m -run '^$$' -fuzz '^FuzzSummaryValidation$$' -fuzztime $(or $(FUZZTIME),50000x) ./apis/policyhub/v1alpha1
	$(FUZZ_GO) test -timeout 50m -run '^$$' -fuzz '^FuzzSummaryEngineValidation$$' -fuzztime $(or $(FUZZTIME),25000x) ./apis/policyhub/v1alpha1
	$(FUZZ_GO) test -timeout 50m -run '^$$' -fuzz '^FuzzCheckAllowed$$' -fuzztime $(or $(FUZZTIME),100000x) ./apis/policyhub/v1alpha1
	$(FUZZ_GO) test -timeout 50m -run '^$$' -fuzz '^FuzzAggregate$$' -fuzztime $(or $(FUZZTIME),250000x) ./hub/aggregate
	$(FUZZ_GO) test -timeout 50m -run '^$$' -fuzz '^FuzzMetricsExport$$' -fuzztime $(or $(FUZZTIME),35000x) ./hub/metrics
	$(FUZZ_GO) test -timeout 50m -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime $(or $(FUZZTIME),35000x) ./hub/render/tenantcel
	$(FUZZ_GO) test -timeout 50m -run '^$$' -fuzz '^FuzzReadArchive$$' -fuzztime $(or $(FUZZTIME),2500x) ./hub/source
	$(FUZZ_GO) test -timeout 50m -run '^$$' -fuzz '^FuzzFluxFenceCheckURL$$' -fuzztime $(or $(FUZZTIME),60000x) ./hub/source

# staticcheck (pinned) finds what vet does not: unused code, deprecated APIs, a package
# imported twice under two names.
STATICCHECK ?= go run honnef.co/go/tools/cmd/staticcheck@v0.8.2

# actionlint (a Go module, pinned) checks the GitHub workflows.
ACTIONLINT ?= go run github.com/rhysd/actionlint/cmd/actionlint@v1.7.12

lint: fmt vet staticcheck actionlint ## gofmt, go vet, staticcheck, and actionlint on .github/workflows.

staticcheck:
	$(STATICCHECK) ./...

actionlint:
	$(ACTIONLINT) .github/workflows/*.yml

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: not formatted:"; echo "$$out"; exit 1; fi

vet:
	go vet ./...

BENCH_SYNC_FLAGS ?= -clusters 4 -policies 200 -parallel 8
BENCH_SCALE_FLAGS ?= -real 16 -virtual 1000 -policies 50

demo: ## Run policyhub on a local fleet (hub + 2 clusters, real gateway and Kyverno) and its web view until Ctrl-C; DEMO_ONESHOT=1 exits after printing.
	hack/testbin.sh $(TESTBIN_DEMO)
	go run ./e2e/demo

bench-sync: ## Benchmark: policyhub vs a kubectl loop vs a bare SSA loop on a local fleet (prints a table).
	hack/testbin.sh $(TESTBIN_FLEET) kyverno kubectl
	go run ./e2e/bench/syncbench $(BENCH_SYNC_FLAGS)

bench-agent: ## Benchmark: policyhub-agent on a cluster of 100,000 report results: memory, CPU, summary latency, metric series (prints a table).
	hack/testbin.sh $(TESTBIN_FLEET)
	go run ./e2e/bench/agentbench $(BENCH_AGENT_FLAGS)

bench-vap: ## Benchmark: the agent's background evaluation of ValidatingAdmissionPolicies, 10,000 Deployments × 20 policies on a local fleet: time per evaluation, heap, RSS (prints a table).
	hack/testbin.sh $(TESTBIN_FLEET)
	go run ./e2e/bench/vapbench $(BENCH_VAP_FLAGS)

bench-inventory: ## Benchmark: the legacy inventory's cost per cluster at 1,000 clusters × 200 unowned legacy objects: summary bytes, hub memory, series, CLI and view (prints a table).
	go run ./e2e/bench/inventorybench $(BENCH_INVENTORY_FLAGS)

bench-preview: ## Benchmark: a preview's cost at 1,000 clusters: agent bytes per push, hub memory and status bytes per cluster, hub CPU per status pass (prints a table; runs two go test benchmarks).
	go run ./e2e/bench/previewbench $(BENCH_PREVIEW_FLAGS)

bench-scale: ## Benchmark: the hub binary at fleet scale (real, virtual and dark clusters) on a local fleet (prints a table).
	hack/testbin.sh $(TESTBIN_FLEET)
	go run ./e2e/bench/scalebench $(BENCH_SCALE_FLAGS)

bench-summary-write: ## Benchmark: what one summary write costs the hub's kube-apiserver and etcd, by shape (agent patch, apply, status, fail-only, no CEL, ConfigMap, aggregated API, Lease) on a local fleet (prints a table).
	hack/testbin.sh $(TESTBIN_FLEET)
	go run ./e2e/bench/summarywrite $(BENCH_SUMMARY_WRITE_FLAGS)

leftovers: ## Fail if a process started by a local fleet is still running.
	hack/leftovers.sh

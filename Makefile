# kube-reclaim. Everything needs only Go; the control-plane binaries the tests
# and the demo run are built from the Go module proxy and cached in .cache/
# (or $KUBE_RECLAIM_CACHE), keyed by version.

GO        ?= go
CACHE     ?= $(if $(KUBE_RECLAIM_CACHE),$(KUBE_RECLAIM_CACHE),$(CURDIR)/.cache)
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The repository is the one deploy/ names (deploy/components/version sets its tag).
IMAGE     ?= ghcr.io/kube-reclaim/kube-reclaim:$(VERSION)
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
LDFLAGS   := -s -w -X github.com/kube-reclaim/kube-reclaim/internal/version.Version=$(VERSION)
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(CACHE)/tools/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
# Integration tests start real clusters and mostly wait on them (docs/CONVENTIONS.md
# has the measured CPU of each suite), so test/e2e runs beside
# test/integration: two packages at a time, tests inside a package one by one.
INTEGRATION_FLAGS ?= -p 2 -timeout 60m
FUZZTIME ?= 30s
# make test runs every fuzz target this long: a smoke pass that the targets
# and their seed corpora still run (make fuzz is the longer search).
FUZZTIME_SHORT ?= 3s
BENCH_FLAGS ?=
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /test/)

.PHONY: all build test test-unit test-integration lint fuzz-short fmt vet tools cluster-up cluster-down clean image image-push manifests demo docs bench fuzz

all: build

build: ## Build bin/kube-reclaim and bin/kubectl-reclaim
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...

image: ## Build the image (linux/amd64 and linux/arm64, one OCI index) without Docker: dist/kube-reclaim.oci (OCI layout) and dist/kube-reclaim.oci.tar (for ctr image import); IMAGE=name:tag names it
	$(GO) run ./hack/image -version '$(VERSION)' -name '$(IMAGE)' -platforms '$(IMAGE_PLATFORMS)'

image-push: ## Build the image as make image does and push it to IMAGE=registry/name:tag (credentials of docker login's config)
	$(GO) run ./hack/image -version '$(VERSION)' -name '$(IMAGE)' -platforms '$(IMAGE_PLATFORMS)' -push

manifests: ## Render every deploy/ overlay to dist/<overlay>.yaml (kustomize Go API; no kubectl needed)
	$(GO) run ./hack/manifests -o dist

test: vet lint test-unit fuzz-short test-integration ## Everything CI runs (.ci/run)

test-unit: ## Unit tests with the race detector (the main module and the nested scheduler/ module)
	$(GO) test -race -count=1 $(UNIT_PKGS)
	cd scheduler && GOWORK=off $(GO) test -race -count=1 ./...

test-integration: tools ## Integration tests against the real local cluster
	$(GO) test -count=1 $(INTEGRATION_FLAGS) ./test/...

tools: ## Build and cache etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, metrics-server, kubelet, kube-proxy, kubectl, kube-reclaim-scheduler, promtool, prometheus, cert-manager (controller, CA injector, CRDs); install containerd, runc and CNI plugins (Debian packages, needs root) for real nodes
	$(GO) run ./hack/tools

lint: $(GOLANGCI_LINT) ## golangci-lint (pinned) with .golangci.yml: gofmt, go vet, staticcheck, errcheck, funlen (80 lines), gocognit, ...
	$(GOLANGCI_LINT) run ./...
	cd scheduler && GOWORK=off $(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT):
	GOBIN=$(dir $@) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

fmt: ## gofmt every Go file
	gofmt -w $(shell git ls-files '*.go')

vet: ## go vet and a gofmt check
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd scheduler && GOWORK=off $(GO) vet ./...

demo: ## Run the whole system on a local cluster and watch batch pods use reclaimed capacity (DEMO_KEEP=1 keeps it running; DEMO_REAL_NODE=1 adds a real kubelet running a batch pod, needs root)
	$(GO) run ./hack/demo

bench: ## Every performance goal of docs/design.md (P1-P4) measured next to its baseline: one table, also written to bench-results.json (about 25 minutes before P2 ran both scheduler topologies, not timed since; BENCH_FLAGS=-quick for a try-out)
	$(GO) run ./hack/bench all -o bench-results.json $(BENCH_FLAGS)

# Every fuzz target runs: the packages whose test files declare a Fuzz
# function, then the targets go test -list finds there, so that a new target
# needs no line here.
# go1.26's fuzz coordinator can end a clean run with "context deadline exceeded"
# at the -fuzztime deadline without any failing input (golang/go#75804, fixed in
# go1.27): such a run counts as passed when it wrote no input under testdata/fuzz.
fuzz: ## Run every fuzz target of the repository, found by go test -list, for FUZZTIME each (default 30s)
	@out=$$(mktemp); trap 'rm -f $$out' EXIT; \
	pkgs=$$($(GO) list -f '{{$$d := .Dir}}{{range .TestGoFiles}}{{$$d}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$$d}}/{{.}} {{end}}' ./... | \
		xargs -r grep -l '^func Fuzz' | xargs -r -n1 dirname | sort -u | sed "s|^$(CURDIR)/||"); \
	targets=; \
	for pkg in $$pkgs; do \
		list=$$($(GO) test -list '^Fuzz' ./$$pkg/ 2>&1) || { echo "$$list"; echo "listing the fuzz targets of ./$$pkg/ failed"; exit 1; }; \
		for fn in $$(echo "$$list" | grep '^Fuzz'); do targets="$$targets $$pkg/$$fn"; done; \
	done; \
	[ -n "$$targets" ] || { echo "no fuzz targets found"; exit 1; }; \
	echo "fuzz targets:$$targets"; \
	for t in $$targets; do \
		pkg=$${t%/*}; fn=$${t##*/}; \
		echo "$(GO) test -run '^\$$' -fuzz '^$$fn\$$' -fuzztime $(FUZZTIME) ./$$pkg/"; \
		before=$$(ls $$pkg/testdata/fuzz/$$fn 2>/dev/null | wc -l); \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) ./$$pkg/ >$$out 2>&1; rc=$$?; cat $$out; \
		after=$$(ls $$pkg/testdata/fuzz/$$fn 2>/dev/null | wc -l); \
		if [ $$rc -ne 0 ]; then \
			if [ "$$after" = "$$before" ] && grep -q 'context deadline exceeded' $$out; then \
				echo "$$fn: no failing input; the error is the fuzz coordinator's at the -fuzztime deadline (golang/go#75804)"; \
			else exit 1; fi; \
		fi; \
	done

fuzz-short: ## Every fuzz target for FUZZTIME_SHORT (default 3s), as make test runs them
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

docs: ## Regenerate docs/reference.md from the flags and the policy schema
	$(GO) run ./hack/docgen

cluster-up: ## Start a local cluster in the background (prints KUBECONFIG)
	$(GO) build -o bin/localcluster ./hack/localcluster && bin/localcluster up

cluster-down: ## Stop the local cluster
	@if [ -x bin/localcluster ]; then bin/localcluster down; else $(GO) run ./hack/localcluster down; fi

clean: ## Remove build outputs (the binary cache stays: make clean-cache)
	rm -rf bin dist

clean-cache: ## Remove the cached control-plane binaries
	rm -rf $(CACHE)

help:
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

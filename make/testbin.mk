# Test-only binaries, built from their own tools modules kept out of go.work
# (GOWORK=off): etcd's and Kubernetes' go.mod have replace directives, so
# `go install ...@version` cannot build them.
#   testbin/       etcd (services/e2e), kube-apiserver v1.37.2 (the k8s
#                  tests, services/e2e/kube) and kube-scheduler v1.37.2 (make
#                  bench-k8s); its replace block pins every Kubernetes staging
#                  module to v0.37.2 (../shared/TOOLCHAIN.md §4)
#   kwok           sigs.k8s.io/kwok v0.8.0, the fake kubelets (go install works:
#                  its go.mod has no replace directives)
#   testbin/helm/  helm v3, which lints and renders deploy/runway
#   testbin/prometheus/  Prometheus v0.316.0's cmd/prometheus (the module
#                  go.mod pins for the TSDB), which scrapes runway dev in
#                  services/metrics' comparison of the embedded history
#                  with a real server
#   testbin/versitygw/  Versity Gateway (Apache-2.0), the S3 server that
#                  pkg/blob's S3 store is tested against (posix backend)
#   testbin/registry/  the CNCF Distribution registry v3.1.2 (Apache-2.0),
#                  the OCI registry with htpasswd auth that the container
#                  runtime's registry credentials are tested against
#                  (pkg/runner/container/registrytest)
#   testbin/kwok/  KWOK v0.8.0, the kubelets of the k8s tests' fake GPU nodes
#                  (services/nodemanager/kube/kwoktest)
# Each binary is a file target on its module's go.mod/go.sum: built once
# (kube-apiserver takes minutes cold), rebuilt only when a pin changes.

KUBE_VERSION := v1.37.2
KUBE_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION)

$(BIN)/etcd: testbin/go.mod testbin/go.sum
	cd testbin && GOWORK=off $(GO) build -o $(BIN)/etcd go.etcd.io/etcd/server/v3

$(BIN)/etcdctl: testbin/go.mod testbin/go.sum
	cd testbin && GOWORK=off $(GO) build -o $(BIN)/etcdctl go.etcd.io/etcd/etcdctl/v3

$(BIN)/kube-apiserver: testbin/go.mod testbin/go.sum
	cd testbin && GOWORK=off $(GO) build -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver

$(BIN)/kube-scheduler: testbin/go.mod testbin/go.sum
	cd testbin && GOWORK=off $(GO) build -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler

$(BIN)/helm: testbin/helm/go.mod testbin/helm/go.sum
	cd testbin/helm && GOWORK=off $(GO) build -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v3.22.0" -o $(BIN)/helm helm.sh/helm/v3/cmd/helm

$(BIN)/prometheus: testbin/prometheus/go.mod testbin/prometheus/go.sum
	cd testbin/prometheus && GOWORK=off $(GO) build -ldflags "-s -w" -o $(BIN)/prometheus github.com/prometheus/prometheus/cmd/prometheus

$(BIN)/versitygw: testbin/versitygw/go.mod testbin/versitygw/go.sum
	cd testbin/versitygw && GOWORK=off $(GO) build -ldflags "-s -w" -o $(BIN)/versitygw github.com/versity/versitygw/cmd/versitygw

$(BIN)/registry: testbin/registry/go.mod testbin/registry/go.sum
	cd testbin/registry && GOWORK=off $(GO) build -ldflags "-s -w" -o $(BIN)/registry github.com/distribution/distribution/v3/cmd/registry

# As pinned in testbin/kwok/go.mod: the bench reads KWOK's stages from the module cache.
KWOK_VERSION := v0.8.0
$(BIN)/kwok: testbin/kwok/go.mod testbin/kwok/go.sum
	cd testbin/kwok && GOWORK=off $(GO) build -ldflags "-s -w" -o $(BIN)/kwok sigs.k8s.io/kwok/cmd/kwok

.PHONY: test-bins kube-apiserver helm kwok
test-bins: $(BIN)/etcd $(BIN)/kube-apiserver $(BIN)/kwok $(BIN)/helm $(BIN)/prometheus $(BIN)/versitygw $(BIN)/registry ## build the test-only binaries (bin/etcd, bin/kube-apiserver, bin/kwok, bin/helm, bin/prometheus, bin/versitygw, bin/registry)
kube-apiserver: $(BIN)/kube-apiserver ## build bin/kube-apiserver for the k8s tests
kwok: $(BIN)/kwok ## build bin/kwok (KWOK v0.8.0) for the k8s tests
helm: $(BIN)/helm ## build bin/helm for the chart checks

# The Kubernetes tests alone: the runtime against a real kube-apiserver.
.PHONY: test-k8s
test-k8s: $(BIN)/kube-apiserver $(BIN)/kwok $(BIN)/helm ## run the Kubernetes runtime tests (real kube-apiserver + etcd, KWOK nodes)
	$(GO) test -count=1 ./services/nodemanager/kube/... ./services/e2e/kube/

# Runway's Kubernetes runtime beside kube-scheduler (services/e2e/kubebench):
# the same PODS one-GPU pods on NODES KWOK nodes of 8 GPUs, through one real
# kube-apiserver; it prints "k8s-bench: nodes=N pods=P runway=X/s
# kube-scheduler=Y/s ratio=R" and leaves Runway's CPU profile in
# BENCH_K8S_PROFILE (go tool pprof -top bin/kubebench.test PROFILE).
NODES ?= 1000
PODS  ?= 10000
BENCH_K8S_PROFILE ?= $(CURDIR)/.cache/bench-k8s/runway.cpu.pprof
BENCH_K8S_MEMPROFILE ?= $(CURDIR)/.cache/bench-k8s/runway.allocs.pprof
.PHONY: bench-k8s
bench-k8s: $(BIN)/etcd $(BIN)/kube-apiserver $(BIN)/kube-scheduler $(BIN)/kwok ## Runway's Kubernetes runtime beside kube-scheduler (NODES=1000 PODS=10000)
	mkdir -p $(dir $(BENCH_K8S_PROFILE))
	$(GO) test -c -tags k8sbench -o $(BIN)/kubebench.test ./services/e2e/kubebench/
	cd services/e2e/kubebench && RUNWAY_BENCH_NODES=$(NODES) RUNWAY_BENCH_PODS=$(PODS) \
		RUNWAY_KWOK_STAGES=$$(GOWORK=off $(GO) env GOMODCACHE)/sigs.k8s.io/kwok@$(KWOK_VERSION)/kustomize/stage \
		RUNWAY_BENCH_CPUPROFILE=$(BENCH_K8S_PROFILE) RUNWAY_BENCH_MEMPROFILE=$(BENCH_K8S_MEMPROFILE) \
		$(BIN)/kubebench.test -test.run '^$$' -test.bench '^BenchmarkK8sScheduling$$' -test.benchtime 1x -test.timeout 90m

# The Helm chart: lint, and render with the defaults and with TLS to etcd.
.PHONY: test-chart
test-chart: $(BIN)/helm ## lint and render the Helm chart (deploy/runway)
	./scripts/check-chart.sh $(BIN)/helm deploy/runway

test: test-bins test-chart

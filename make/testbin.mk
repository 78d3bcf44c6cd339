# Test-only binaries: a standalone etcd for the multi-process end-to-end test
# (services/e2e). They are built from their own tools module, testbin/, kept out
# of go.work (GOWORK=off): etcd's go.mod has replace directives, so
# `go install ...@version` cannot build it.

$(BIN)/etcd: testbin/go.mod testbin/go.sum
	cd testbin && GOWORK=off $(GO) build -o $(BIN)/etcd go.etcd.io/etcd/server/v3

$(BIN)/etcdctl: testbin/go.mod testbin/go.sum
	cd testbin && GOWORK=off $(GO) build -o $(BIN)/etcdctl go.etcd.io/etcd/etcdctl/v3

.PHONY: test-bins
test-bins: $(BIN)/etcd ## build the test-only binaries (bin/etcd for services/e2e)

test: test-bins

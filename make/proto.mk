# make/proto.mk: the API contract (proto/ -> gen/). Included by the root
# Makefile (`include make/proto.mk`); also works standalone from any directory:
#   make -f make/proto.mk tools generate lint-proto check-generated
#
# Every tool is pinned here and installed into $(BIN) with `go install`, one
# dependency graph per tool (buf and protoc-gen-go cannot share a `tool`
# module: buf needs a newer protobuf pseudo-version; see shared/TOOLCHAIN.md).

# Repository root = the folder above this file, so paths do not depend on the
# directory make was started from.
PROTO_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
# Standalone when this is the only makefile read so far.
PROTO_STANDALONE := $(if $(filter-out $(lastword $(MAKEFILE_LIST)),$(strip $(MAKEFILE_LIST))),,yes)

BIN ?= $(PROTO_ROOT)/bin
GO  ?= go

BUF_VERSION                  := v1.75.0
PROTOC_GEN_GO_VERSION        := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION   := v1.6.2
GRPC_GATEWAY_VERSION         := v2.33.0
GRPCURL_VERSION              := v1.9.4

BUF := $(BIN)/buf

# tool binary -> go install path@version. A version bump changes the stamp
# name, so the next `make tools` reinstalls; otherwise a present binary is kept.
PROTO_TOOL_buf                     := github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
PROTO_TOOL_protoc-gen-go           := google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
PROTO_TOOL_protoc-gen-go-grpc      := google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
PROTO_TOOL_protoc-gen-grpc-gateway := github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$(GRPC_GATEWAY_VERSION)
PROTO_TOOL_protoc-gen-openapiv2    := github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@$(GRPC_GATEWAY_VERSION)
PROTO_TOOL_grpcurl                 := github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

PROTO_TOOL_NAMES := buf protoc-gen-go protoc-gen-go-grpc protoc-gen-grpc-gateway protoc-gen-openapiv2 grpcurl
PROTO_TOOLS      := $(addprefix $(BIN)/,$(PROTO_TOOL_NAMES))
# The plugins buf generate runs (everything but buf itself and grpcurl).
PROTO_PLUGINS    := $(addprefix $(BIN)/,protoc-gen-go protoc-gen-go-grpc protoc-gen-grpc-gateway protoc-gen-openapiv2)

# googleapis google/api/{annotations,http}.proto, copied from the module cache
# of grpc-gateway v1 (v2 does not ship them; the BSR is unreachable here).
GATEWAY_V1      := github.com/grpc-ecosystem/grpc-gateway@v1.16.0
GOOGLEAPIS_DIR  := $(PROTO_ROOT)/third_party/googleapis
GOOGLEAPIS_SRC   = $$($(GO) env GOMODCACHE)/$(GATEWAY_V1)/third_party/googleapis
# The copy is complete once annotations.proto (copied last) is there.
GOOGLEAPIS      := $(GOOGLEAPIS_DIR)/google/api/annotations.proto

# Local plugins must be found on PATH by buf.
PROTO_ENV := PATH="$(BIN):$$PATH"

.PHONY: tools
tools: $(PROTO_TOOLS) ## install the pinned proto tools (buf, protoc-gen-*, grpcurl) into ./bin

define proto_tool_rule
$(BIN)/$(1): $(BIN)/.versions/$(1)@$(lastword $(subst @, ,$(PROTO_TOOL_$(1))))
	GOBIN=$(BIN) $(GO) install $(PROTO_TOOL_$(1))
	@touch $$@
endef
$(foreach t,$(PROTO_TOOL_NAMES),$(eval $(call proto_tool_rule,$(t))))

$(BIN)/.versions/%:
	@mkdir -p $(@D)
	@rm -f $(@D)/$(firstword $(subst @, ,$*))@*
	@touch $@

$(GOOGLEAPIS):
	cd $(PROTO_ROOT) && $(GO) mod download $(GATEWAY_V1)
	mkdir -p $(GOOGLEAPIS_DIR)/google/api
	cp "$(GOOGLEAPIS_SRC)/google/api/http.proto" "$(GOOGLEAPIS_SRC)/google/api/annotations.proto" $(GOOGLEAPIS_DIR)/google/api/
	chmod -R u+w $(GOOGLEAPIS_DIR)

.PHONY: generate
generate: $(BUF) $(PROTO_PLUGINS) $(GOOGLEAPIS) ## format the protos, regenerate gen/go and gen/openapi
	cd $(PROTO_ROOT) && $(BUF) format -w proto
	# Start from an empty output so that a deleted .proto leaves no stale file
	# (buf's `clean: true` would delete gen/go/go.mod too).
	cd $(PROTO_ROOT) && rm -rf gen/openapi && if [ -d gen/go ]; then find gen/go -name '*.go' -delete; fi
	cd $(PROTO_ROOT) && $(PROTO_ENV) $(BUF) generate
	cd $(PROTO_ROOT)/gen/go && GOWORK=off $(GO) mod tidy

.PHONY: lint-proto
lint-proto: $(BUF) $(GOOGLEAPIS) ## buf lint (STANDARD + COMMENTS) and buf format check
	cd $(PROTO_ROOT) && $(BUF) lint
	cd $(PROTO_ROOT) && $(BUF) format --diff --exit-code proto

.PHONY: check-generated
check-generated: $(BUF) $(PROTO_PLUGINS) $(GOOGLEAPIS) ## fail if proto/ or gen/ differ from a fresh generate
	cd $(PROTO_ROOT) && BIN="$(BIN)" GO="$(GO)" ./scripts/check-generated.sh

# The ref the contract must stay compatible with (buf.yaml breaking: FILE).
PROTO_BREAKING_AGAINST ?= main

.PHONY: breaking-proto
breaking-proto: $(BUF) $(GOOGLEAPIS) ## buf breaking against the main branch (skipped until main has buf.yaml)
	@cd $(PROTO_ROOT) && if git cat-file -e $(PROTO_BREAKING_AGAINST):buf.yaml 2>/dev/null; then \
	  echo "$(BUF) breaking --against .git#branch=$(PROTO_BREAKING_AGAINST)"; \
	  $(BUF) breaking --against '.git#branch=$(PROTO_BREAKING_AGAINST)'; \
	else echo "breaking-proto: $(PROTO_BREAKING_AGAINST) has no buf.yaml yet; nothing to compare"; fi

ifeq ($(PROTO_STANDALONE),yes)
SHELL := /bin/bash
.DEFAULT_GOAL := help
.PHONY: help
help: # list the targets (standalone only; the root Makefile has its own)
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'
endif

# Plait. `make demo` runs the main job, `make test` the tests; both install what they need.
SHELL := /bin/bash
GO ?= go
BIN := bin/plait
ARCH_INCLUDE := /usr/include/$(shell uname -m)-linux-gnu

.PHONY: all deps generate build test bench bench-model demo demo-veth p4 clean

all: build

deps:
	@scripts/deps.sh

# eBPF objects (bpf2go) and gRPC stubs are checked in; this regenerates them from source.
generate: deps
	cd ebpf/datapath && BPF_CFLAGS="-I$(ARCH_INCLUDE)" $(GO) generate ./...
	cd api/plait/v1 && PATH="$$PATH:$$(dirname $$($(GO) tool -n protoc-gen-go)):$$(dirname $$($(GO) tool -n protoc-gen-go-grpc))" $(GO) generate ./...

# -buildvcs=auto over a GOFLAGS=-buildvcs=false: lab results name the commit they ran.
build: generate
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/plait

# One package at a time: several tests time real traffic through namespaces, and two
# cores shared between them would make the timings lie.
test: build p4
	$(GO) vet ./...
	$(GO) test -p 1 -count=1 -timeout 25m ./...
	cd topo && /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider tests

bench: build
	$(GO) test -p 1 -count=1 -run '^$$' -bench . -benchtime 1x -timeout 60m ./...

# Prediction accuracy (eq. 24) of seed 002's model and Plait's predictor against the lab:
# S1 with 2 to 8 links, and S1-4 with its delays spread to five ADAs. Root, like the lab;
# about half an hour. Results in results/validate/<time>/
bench-model: build
	$(BIN) model validate s1-2 s1-3 s1-4 s1-5 s1-6 s1-7 s1-8 --ada-sweep 0,10,20,40,80ms --sweep-base s1-4 --repeat 3

demo: build p4
	$(BIN) lab run default

demo-veth: build
	scripts/demo-veth.sh

# Compiles p4/plait.p4 for BMv2 (p4/build/plait.json, which BMv2 labs push) when p4c is
# installed; p4c's P4Info goes beside it and must be the checked-in one (go test
# ./p4/p4src compares them as messages; this shows any difference in the text).
p4:
	@if ! command -v p4c-bm2-ss >/dev/null; then \
		echo "p4: p4c-bm2-ss is not installed: BMv2 labs and tests are skipped; p4/build/plait.p4info.txtpb is the P4Info p4c writes"; \
	else \
		set -e; mkdir -p p4/build; \
		echo "p4c-bm2-ss --arch v1model -o p4/build/plait.json p4/plait.p4"; \
		p4c-bm2-ss --arch v1model -o p4/build/plait.json --p4runtime-files p4/build/plait.p4c.p4info.txtpb p4/plait.p4; \
		diff -u p4/build/plait.p4info.txtpb p4/build/plait.p4c.p4info.txtpb || echo "p4: p4c's P4Info differs from the checked-in one (above); go test ./p4/p4src says whether as a message"; \
	fi

clean:
	rm -rf bin

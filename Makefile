# Wingman: a drop-in replacement for Istio's pilot-agent.
GO        ?= go
TAGS      ?= disable_pgv,grpcnotrace
BIN       ?= out/pilot-agent
FUZZTIME  ?= 5s
BENCHTIME ?= 1x
COUNT     ?= 1

.PHONY: all build test vet unit race gate fuzz fuzz-long bench lint demo perf perf-gate perf-gate-short pprof clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -tags $(TAGS) -trimpath -ldflags='-s -w' -o $(BIN) ./cmd/pilot-agent

# The README's test command: vet, every test under the race detector, every fuzz target briefly.
test: lint race gate fuzz

vet:
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./...

race:
	$(GO) test -race -count=1 -timeout 20m ./...

# Allocation, heap and same-run ratio gates: they need a build without the race detector.
gate:
	$(GO) test -count=1 -run Gate ./...

# Runs each native fuzz target for FUZZTIME (committed crashers in testdata/fuzz run as regression
# cases in every plain `go test` too).
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

fuzz-long:
	scripts/fuzz.sh 5m

# Benchmarks with allocation counts; see bench/README.md for how the figures are taken.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(COUNT) ./...

# The whole agent on one machine against meshlab, a local control plane (see lab/demo/).
demo:
	$(GO) run ./lab/demo

# End-to-end performance against the reference agent (see perf/README or perf/results/report.md).
SCENARIO ?= large_4mb
perf: build
	$(GO) run ./perf/cmd/perf -agent $(BIN) -runs 5 -dense 50 -out perf/results

perf-gate: build
	$(GO) run ./perf/cmd/perf -agent $(BIN) -runs 3 -scenarios startup,large_4mb,many_1500,downstreams_10 -gate -baseline perf/baseline.json -out out/perf-gate

perf-gate-short:
	$(GO) test -count=1 -run '^TestPerfGate$$' -v ./perf/

pprof: build
	$(GO) run ./perf/cmd/perf -agent $(BIN) -scenarios $(SCENARIO) -runs 1 -pprof out/pprof -out ''

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean:
	rm -rf out

# Wingman: a drop-in replacement for Istio's pilot-agent.
GO        ?= go
TAGS      ?= disable_pgv,grpcnotrace
BIN       ?= out/pilot-agent
FUZZTIME  ?= 30s
BENCHTIME ?= 1x
COUNT     ?= 1
# The Istio release whose agent behaviour Wingman follows, reported to Istiod as ISTIO_VERSION and
# by `pilot-agent version`: by default the version of istio.io/api in go.mod (Istio tags its API
# with its release number). VERSION is Wingman's own. GIT_REVISION and BUILD_STATUS are stamped
# as Istio's common/scripts/report_build_info.sh stamps them: the commit, with "-dirty" when the
# tree has changes, and Clean or Modified (both empty outside a git checkout).
ISTIO_VERSION ?= $(shell $(GO) list -m -f '{{.Version}}' istio.io/api 2>/dev/null | sed 's/^v//')
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null)
GIT_REVISION  ?= $(shell r=$$(git rev-parse HEAD 2>/dev/null) && { if [ -n "$$(git status --porcelain 2>/dev/null)" ]; then echo "$$r-dirty"; else echo "$$r"; fi; })
BUILD_STATUS  ?= $(if $(GIT_REVISION),$(if $(filter %-dirty,$(GIT_REVISION)),Modified,Clean))
VERSION_LDFLAGS = -X main.istioVersion=$(ISTIO_VERSION) -X main.version=$(VERSION) -X main.gitRevision=$(GIT_REVISION) -X main.buildStatus=$(BUILD_STATUS)

.PHONY: all setup build test vet unit race gate faults fuzz fuzz-long bench lint demo perf perf-gate perf-gate-short pprof profile-binary clean

all: build

# What the tests need on a fresh machine with Go (scripts/setup.sh says what it checks).
setup:
	scripts/setup.sh

build:
	CGO_ENABLED=0 $(GO) build -tags $(TAGS) -trimpath -ldflags='-s -w $(VERSION_LDFLAGS)' -o $(BIN) ./cmd/pilot-agent

# The README's test command: set-up (installs what the tests need), vet, every test under the race
# detector, the gates, the fault scenarios, every fuzz target briefly. Each step says what it does before it starts
# (compiling is silent otherwise); the first failing step ends the run, and the run ends with one
# summary line.
test:
	@start=$$(date +%s); for s in setup lint race gate faults fuzz; do \
	  case $$s in \
	    setup) what="Go version, module download, Debian packages and namespaces for capture's tests (scripts/setup.sh)";; \
	    lint) what="go vet ./... and gofmt (compiles every package first: minutes on a cold cache)";; \
	    race) what="every test under the race detector (compiles again with -race; one line per package)";; \
	    gate) what="allocation, heap and same-run ratio gates (go test -run Gate ./...)";; \
	    faults) what="the agent binary through network faults in namespaces: loss and delay, half-open, GOAWAY/restart/garbage, stalled Envoy, stream churn, restart from the last state with Istiod down (perf/faults; about 4 minutes; skipped, saying why, when not root)";; \
	    fuzz) what="every fuzz target for $(FUZZTIME) each (scripts/fuzz.sh)";; \
	  esac; \
	  echo "== make test [$$s] $$what ($$(( $$(date +%s) - start ))s elapsed)"; \
	  if ! $(MAKE) --no-print-directory $$s; then \
	    echo "make test: FAILED at step $$s after $$(( $$(date +%s) - start ))s"; exit 1; \
	  fi; \
	done; \
	echo "make test: PASS (setup, lint, race, gate, faults, fuzz) in $$(( $$(date +%s) - start ))s"

vet:
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./...

race:
	$(GO) test -race -count=1 -timeout 20m ./...

# Allocation, heap and same-run ratio gates: they need a build without the race detector.
gate:
	$(GO) test -count=1 -run Gate ./...

# The fault scenarios of issue 23 (perf/faults): the real agent binary and the Envoy stand-in in
# one network namespace, the control plane and CA in another, joined by lab/netem's user-space
# link (this kernel has no tc netem). Each scenario prints a FIGURES line; the closing table is
# also written to out/faults.md. Needs root; otherwise it skips and says why.
faults:
	@mkdir -p out
	$(GO) test -count=1 -timeout 15m -run '^TestFaults$$' -v ./perf/faults -args -faults -table $(CURDIR)/out/faults.md

# Runs each native fuzz target for FUZZTIME (committed crashers in testdata/fuzz run as regression
# cases in every plain `go test` too).
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

fuzz-long:
	scripts/fuzz.sh 5m

# Benchmarks with allocation counts; see bench/README.md for how the figures are taken.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(COUNT) ./...

# The whole agent on one machine against meshlab, a local control plane (see lab/demo/). The time
# it prints covers its whole run: the agent's build (make build) is timed too.
demo:
	@start=$$(date +%s); \
	echo "== make demo: building the agent (make build: $(BIN))"; \
	$(MAKE) --no-print-directory build || { echo "make demo: FAILED after $$(( $$(date +%s) - start ))s (building the agent)"; exit 1; }; \
	echo "== make demo: compiling the demo driver (./lab/demo; on a cold cache minutes on 2 cores)"; \
	$(GO) build -o out/demo ./lab/demo || { echo "make demo: FAILED after $$(( $$(date +%s) - start ))s (compiling the demo driver)"; exit 1; }; \
	echo "== make demo: running it with $(BIN) (built above, as make build) and the Envoy stand-in it builds"; \
	if out/demo -agent $(BIN); then echo "make demo: PASS in $$(( $$(date +%s) - start ))s"; \
	else echo "make demo: FAILED after $$(( $$(date +%s) - start ))s (see the step above)"; exit 1; fi

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

# The shipped binary's CPU profile under 20 s of 4 MB pushes beside the floor forwarder of the same
# run: top functions and flame graphs in out/profile-binary (perf/results/profile-binary.md).
profile-binary: build
	BIN=$(BIN) scripts/profile-binary.sh out/profile-binary 20 $(SCENARIO)

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean:
	rm -rf out

# monolith-go — developer targets. `make test` is exactly what CI runs (see .ci/run).
GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        ?= ./...
FUZZTIME    ?= 1s

.PHONY: all build deps test lint proto bench microbench fuzz inspect train

all: build test

build:
	$(GO) build $(PKGS)

# RACE_PKGS run under -race only, every other package without it. They are the packages
# whose code starts goroutines (internal/repolint's test checks that each is listed here,
# but for the benchmark harness, and checks leaks with goleak), the Beam transforms and
# pipelines, whose DoFns run in concurrent bundles, the readers and allocator that decode
# workers share (io/dataset, internal/arrowpool), and the PS tables, filters and barrier
# and the ZooKeeper users, which their servers call concurrently. Pure formats, configs
# and file code (ps/export, ps/checkpoint, serving/config, …) run without it.
# NORACE_RUN names tests of NORACE_PKG (one of RACE_PKGS) that the race phase skips (their
# files are built with !race) and the non-race phase runs: end-to-end runs of child
# processes, which -race in the test binary slows by a minute and does not check.
NORACE_PKG  ?= ./cmd/monolith
NORACE_RUN  ?= ^(TestOutOfProcess|TestBench|TestAgentDemo|TestServeDemo|TestCtlAgainstTrain|TestCluster|TestClusterInterrupt|TestClusterZooKeeper|TestClusterChildFails|TestClusterSurvivesPSKill|TestTLSCommands|TestServeEndToEnd|TestHandStartedProcesses)$$
RACE_PKGS   ?= ./benchmarks ./io/synth ./io/fileops ./kernels/layout ./kernels/shard ./transforms/... \
	./pipelines/readlayout ./pipelines/validate ./pipelines/train ./pipelines/train/controller ./runners/... \
	./ps/client ./ps/discovery ./ps/filter ./ps/pause ./ps/server ./ps/server/codec ./ps/servingmodel ./ps/table \
	./serving/agent ./serving/agentctl ./serving/modelmgr ./serving/replica ./serving/tfs ./serving/zk \
	./internal/zktest ./internal/zkserver ./internal/zk ./internal/ordered ./internal/metricsrv ./internal/arrowpool \
	./io/dataset ./cmd/...

## deps: install the Debian packages the tests and the benchmark suite need, only those
## missing (protoc with its well-known types, ZooKeeper, NumPy); apt-get, through sudo when
## not root. See scripts/deps.sh.
deps:
	./scripts/deps.sh

## test: lint, unit, golden and integration tests (RACE_PKGS under -race), and a short fuzz pass of every parser.
test: deps lint
	@echo "== go test $$(date +%T)"
	$(GO) test -count=1 $$($(GO) list $(PKGS) | grep -vxF "$$($(GO) list $(RACE_PKGS))")
	$(GO) test -count=1 -run '$(NORACE_RUN)' $(NORACE_PKG)
	@echo "== go test -race $$(date +%T)"
	$(GO) test -count=1 -race $(RACE_PKGS)
	@echo "== fuzz $$(date +%T)"
	FUZZ_COVERAGE=0 ./scripts/fuzz.sh $(FUZZTIME)
	@echo "== done $$(date +%T)"

## train: the main job: planted FM data (monolith gen --planted), then monolith train on prism.
PLANTED ?= /tmp/monolith-planted
train:
	$(GO) run ./cmd/monolith gen --planted fm --seed 1 --out $(PLANTED)
	rm -rf $(PLANTED)/checkpoints
	$(GO) run ./cmd/monolith train --config pipelines/train/configs/planted_fm.yaml --data $(PLANTED) --checkpoint-dir $(PLANTED)/checkpoints --plot

## cluster: the same job as monolith cluster: 2 worker and 2 PS processes on this machine.
cluster:
	$(GO) run ./cmd/monolith gen --planted fm --seed 1 --out $(PLANTED)
	rm -rf $(PLANTED)/cluster
	$(GO) run ./cmd/monolith cluster --config pipelines/train/configs/planted_fm.yaml --data $(PLANTED) --checkpoint-dir $(PLANTED)/cluster --workers 2 --ps 2

## lint: gofmt, go vet and staticcheck must all be clean.
lint:
	@echo "== lint $$(date +%T)"
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

## proto: regenerate the committed Go code from schemas/proto (needs protoc; protoc-gen-go and protoc-gen-go-grpc are pinned in go.mod).
proto:
	protoc -I schemas/proto \
		--plugin=protoc-gen-go=$$($(GO) tool -n protoc-gen-go) \
		--plugin=protoc-gen-go-grpc=$$($(GO) tool -n protoc-gen-go-grpc) \
		--go_out=. --go_opt=module=github.com/monolith-go/monolith \
		--go-grpc_out=. --go-grpc_opt=module=github.com/monolith-go/monolith \
		$$(find schemas/proto -name '*.proto' | sort)

## bench: the full benchmark suite; regenerates benchmarks/RESULTS.md, results.json and the plots (BENCH_SUITE=quick for the 2-minute run).
BENCH_SUITE ?= full
bench: deps
	$(GO) run ./cmd/monolith bench --suite $(BENCH_SUITE) --out benchmarks

## microbench: the go test micro-benchmarks with memory statistics.
microbench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./benchmarks/... ./kernels/... ./ps/...

## fuzz: longer fuzzing of every parser (FUZZTIME=5m make fuzz).
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

## inspect: the README's first command.
inspect:
	$(GO) run ./cmd/monolith inspect ../shared/testdata/monolith/example_batch.pbtxt

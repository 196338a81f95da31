# redis-ratelimit: `make run` starts redis-server with the module,
# `make test` runs every check CI runs.

MODULE  := target/release/libredis_ratelimit.so
PORT    ?= 6379
PREFIX  ?= /usr/local
MODULEDIR ?= $(PREFIX)/lib/redis/modules
SUDO    := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: run test test-valkey test-matrix build install deps deps-valkey lint unit bench bench-wait bench-stall demo fuzz clean

## Install what a fresh Debian machine lacks (redis-server, libclang for bindgen).
deps:
	@if ! command -v redis-server >/dev/null || ! dpkg -s libclang-dev >/dev/null 2>&1; then \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq redis-server redis-tools libclang-dev; \
	fi

build: deps
	cargo build --release

## Copy the module to $(DESTDIR)$(MODULEDIR) (with sudo only where that is
## not writable) and print the line that loads it.
install: build
	@dest="$(DESTDIR)$(MODULEDIR)"; \
	if mkdir -p "$$dest" 2>/dev/null && [ -w "$$dest" ]; then s=; else s="$(SUDO)"; fi; \
	$$s install -D -m 0755 $(MODULE) "$$dest/libredis_ratelimit.so" && \
	echo "Installed $$dest/libredis_ratelimit.so. Add to redis.conf:" && \
	echo "  loadmodule $(MODULEDIR)/libredis_ratelimit.so"

## Start redis-server in the foreground with the module loaded (real clock).
run: build
	redis-server redis.conf --port $(PORT)

## Formatting, lints, unit and property tests, and integration tests
## against real redis-server processes.
test: deps lint
	cargo test --workspace

## The same suite against Valkey 8 (from Debian's bookworm-backports suite,
## enabled from the machine's own Debian source if it is missing).
test-valkey: deps deps-valkey
	RL_SERVER=valkey-server cargo test --workspace

## The same suite against servers built from source (outside the
## repository): SERVERS="path/to/redis-server dir/with/servers ...".
## `make test-matrix` without SERVERS says how to obtain and build them.
test-matrix: deps
	SERVERS="$(SERVERS)" ./scripts/test_matrix.sh

deps-valkey:
	@if ! command -v valkey-server >/dev/null; then \
		if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then \
			if [ -f /etc/apt/sources.list.d/debian.sources ]; then \
				sed -n '1,/^$$/p' /etc/apt/sources.list.d/debian.sources \
					| sed 's/^Suites:.*/Suites: bookworm-backports/' \
					| $(SUDO) tee /etc/apt/sources.list.d/backports.sources >/dev/null; \
			else \
				grep -E '^deb .* bookworm main' /etc/apt/sources.list | head -n 1 \
					| sed 's/ bookworm main/ bookworm-backports main/' \
					| $(SUDO) tee /etc/apt/sources.list.d/backports.list >/dev/null; \
			fi; \
		fi; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq -t bookworm-backports valkey-server; \
	fi

lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings -D clippy::undocumented_unsafe_blocks

## Unit and property tests only (no server).
unit:
	cargo test --lib

## Throughput, latency and memory against INCR/SET baselines (see README).
bench: build
	cargo build --release --example lease_bench
	./scripts/bench.sh

## WAIT timeout: retry storms against waiting (200 and 1,000 clients on one
## key), 10,000 waiters on as many keys, 1,000 in one key's line.
bench-wait: build
	./scripts/bench_wait.sh

## Main-thread time of every command class at 10 to 10,000 waiters, 100,000
## leases, the largest sliding log and sketch, with a PING probe (see
## docs/performance.md#stalls).
bench-stall: build
	./scripts/bench_stall.sh

## Replays classic traffic traces against every algorithm; writes an SVG chart.
demo: build
	./scripts/demo.sh

## Bounded coverage-guided fuzzing of the parsers and the state decoders.
fuzz: deps
	./scripts/fuzz.sh

clean:
	cargo clean

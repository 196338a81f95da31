# redis-ratelimit: `make run` starts redis-server with the module,
# `make test` runs every check CI runs.

MODULE  := target/release/libredis_ratelimit.so
PORT    ?= 6379
SUDO    := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: run test build deps lint unit bench demo fuzz clean

## Install what a fresh Debian machine lacks (redis-server, libclang for bindgen).
deps:
	@if ! command -v redis-server >/dev/null || ! dpkg -s libclang-dev >/dev/null 2>&1; then \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq redis-server redis-tools libclang-dev; \
	fi

build: deps
	cargo build --release

## Start redis-server in the foreground with the module loaded (real clock).
run: build
	redis-server redis.conf --port $(PORT)

## Formatting, lints, unit and property tests, and integration tests
## against real redis-server processes.
test: deps lint
	cargo test

lint:
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings

## Unit and property tests only (no server).
unit:
	cargo test --lib

## Throughput, latency and memory against INCR/SET baselines (see README).
bench: build
	./scripts/bench.sh

## Replays classic traffic traces against every algorithm; writes an SVG chart.
demo: build
	./scripts/demo.sh

## Bounded coverage-guided fuzzing of the parsers and the state decoders.
fuzz:
	./scripts/fuzz.sh

clean:
	cargo clean

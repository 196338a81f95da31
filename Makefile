# redis-ratelimit: `make run` starts redis-server with the module,
# `make test` runs every check CI runs.

MODULE  := target/release/libredis_ratelimit.so
PORT    ?= 6379
ARGS    ?=
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
PREFIX  ?= /usr/local
MODULEDIR ?= $(PREFIX)/lib/redis/modules
SUDO    := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: run test test-python test-python-venv limits-suite test-node bench-node test-valkey test-repeat test-matrix build install dist test-dist deps deps-valkey lint unit bench bench-summary bench-parts bench-wait bench-stall bench-fair bench-overhead bench-waiters bench-herd bench-hot-leasing demo fuzz clean

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

## The release tarball in dist/: the module (linked for glibc 2.17 and
## newer), README, LICENSE, CHANGELOG, ratelimit.conf and SHA-256 sums.
dist: deps
	./scripts/dist.sh

## Extract the tarball and load its module into a plain redis-server.
test-dist: dist
	./scripts/test_dist.sh

## Start redis-server in the foreground with the module loaded (real clock).
## ARGS are the module's arguments: `make run ARGS="policies on"`.
run: build
	sed 's|^loadmodule .*|& $(ARGS)|' redis.conf | redis-server - --port $(PORT)

## Formatting, lints, unit and property tests, and integration tests
## against real redis-server processes.
test: deps lint
	cargo test --workspace
	$(MAKE) test-dist
	$(MAKE) test-python
	$(MAKE) test-node
	$(MAKE) test-dashboard

PYTHON  ?= python3
PYVENV  := clients/python/.venv

## The Python client (clients/python): ruff, mypy --strict and pytest against
## real redis-server processes loaded with the debug module, then its wheel,
## in a venv of its own with the versions pinned in clients/python/pyproject.toml.
test-python: deps
	cargo build -p redis-ratelimit --lib
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq python3-venv; }
	@[ -x $(PYVENV)/bin/python ] || $(PYTHON) -m venv $(PYVENV)
	$(PYVENV)/bin/pip install -q --disable-pip-version-check -e 'clients/python[test]'
	cd clients/python && .venv/bin/ruff format --check . && .venv/bin/ruff check . && \
		.venv/bin/mypy && .venv/bin/pytest -q && \
		rm -rf dist && .venv/bin/python -m build --outdir dist . >/dev/null && ls dist/*
	@# Each artifact installed into an empty venv, then a smoke test there.
	@for pkg in clients/python/dist/*.whl clients/python/dist/*.tar.gz; do \
		env=$$(mktemp -d) && $(PYTHON) -m venv $$env && \
		$$env/bin/pip install -q --disable-pip-version-check $$pkg && \
		(cd $$env && RL_MODULE=$(CURDIR)/target/debug/libredis_ratelimit.so \
			$$env/bin/python $(CURDIR)/clients/python/smoke/installed.py) && \
		rm -rf $$env || { rm -rf $$env; exit 1; }; \
	done

## limits' own strategy and storage tests, from its sdist fetched now, against
## redis+ratelimit:// and limits' own redis:// storage: the counts of both.
limits-suite: test-python-venv
	cargo build -p redis-ratelimit --lib
	clients/python/bench/limits_suite.sh

test-python-venv:
	@[ -x $(PYVENV)/bin/python ] || $(PYTHON) -m venv $(PYVENV)
	$(PYVENV)/bin/pip install -q --disable-pip-version-check -e 'clients/python[test]'

## The dashboard (dashboard/): a read-only live page and Prometheus /metrics
## on http://127.0.0.1:8080/ for the server at DASHBOARD_URL (a password in
## the URL stays in the dashboard). Options: docs/operations.md#dashboard.
DASHBOARD_URL ?= redis://localhost:6379
DASHVENV := dashboard/.venv
.PHONY: dashboard test-dashboard dashboard-venv
dashboard: dashboard-venv
	$(DASHVENV)/bin/python -m rl_dashboard --url '$(DASHBOARD_URL)'

dashboard-venv:
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq python3-venv; }
	@[ -x $(DASHVENV)/bin/python ] || $(PYTHON) -m venv $(DASHVENV)
	$(DASHVENV)/bin/pip install -q --disable-pip-version-check -e 'dashboard[test]'

## The dashboard's ruff, mypy --strict and pytest: a real server with the
## debug module, the page in headless Chromium, /metrics scraped by a real
## Prometheus (both from Debian, installed when missing). With
## DASHBOARD_SCREENSHOT=$$PWD/docs/dashboard.png it renews the screenshot.
test-dashboard: deps dashboard-venv
	cargo build -p redis-ratelimit --lib
	@command -v chromium >/dev/null && command -v prometheus >/dev/null || { \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) \
		apt-get install -y -qq --no-install-recommends chromium prometheus; }
	cd dashboard && .venv/bin/ruff format --check . && .venv/bin/ruff check . && \
		.venv/bin/mypy && .venv/bin/pytest -q

## The Node package (clients/node): installed from its lockfile, built with
## tsc (ESM and CommonJS), type-checked and linted, then its node:test
## suites against real servers with the module (debug build).
test-node: deps
	cargo build
	cd clients/node && npm ci --no-audit --no-fund && npm run build && npm run lint && \
		npm run build:test && node --test --test-concurrency=1 build/test/*.test.js

## The Node package's measurements: a typed call's client CPU beside the
## raw command, and commands per hit beside rate-limit-redis.
bench-node: deps
	cargo build
	cd clients/node && npm ci --no-audit --no-fund && npm run bench

## The same suite against Valkey 8 (from Debian's bookworm-backports suite,
## enabled from the machine's own Debian source if it is missing).
test-valkey: deps deps-valkey
	RL_SERVER=valkey-server cargo test --workspace

## The suite N times (default 10), then how many runs failed and which
## tests, with counts; RL_SERVER=valkey-server runs it against Valkey. Each
## run draws property-test cases from its own seed (SEED+i, printed); plain
## `cargo test` uses the fixed seed in .cargo/config.toml.
N ?= 10
test-repeat: deps
	./scripts/test_repeat.sh $(N)
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

## The one-screen summary at the top of docs/performance.md, in about 3
## minutes: req/s, p99, bytes per key and instructions per request beside
## SET, INCR, a Lua script and redis-cell (REDIS_CELL=path/to/libredis_cell.so,
## built from its own clone; its row is skipped without), and a waiter's
## memory beside BLPOP's. Prints Markdown with the load average.
REDIS_CELL ?=
bench-summary: build
	cargo build --release --example waiters_bench
	REDIS_CELL="$(REDIS_CELL)" ./scripts/bench_summary.sh

## Where an admission's instructions go (callgrind, random keys): RL.GCRA,
## RL.BUCKET, RL.FIXED, RL.SLIDING in each mode and RL.ALL of two, split
## into networking, module frame, command code, key access, reply,
## replication and allocation, beside SET PX, INCR + PEXPIRE and the least a
## module command can spend (see docs/performance.md#where-an-admission-goes).
bench-parts: build
	./scripts/admission_parts.sh

## WAIT timeout: retry storms against waiting (200 and 1,000 clients on one
## key), 10,000 waiters on as many keys, 1,000 in one key's line.
bench-wait: build
	./scripts/bench_wait.sh

## Main-thread time of every command class at 10 to 10,000 waiters, 100,000
## leases, the largest sliding log and sketch, with a PING probe (see
## docs/performance.md#stalls).
bench-stall: build
	./scripts/bench_stall.sh

## What waiting promises: told ÷ truth behind shrinking lines per algorithm,
## closed-loop fair shares on the manual and the real clock.
bench-fair:
	./scripts/bench_fair.sh

## What loading the module adds to Redis's own commands (GET, SET, INCR,
## DEL, EXPIRE, SET PX, LPUSH), in instructions per request counted by
## callgrind: loaded, with policies on, used, while clients wait, after
## (see docs/performance.md#what-loading-the-module-costs).
bench-overhead: build
	./scripts/bench_overhead.sh

## Waiters beside Redis's own blocked BLPOP clients: memory per waiter at
## 10 to 10,000, and what a role change costs at 10,000 (callgrind).
bench-waiters: build
	cargo build --release --example waiters_bench
	./scripts/bench_waiters.sh

## A retry herd: 1,000 closed-loop clients on one key (100 per 1 s) for
## 20 s per mode: retrying at once, at the told wait, jittered, reserving,
## and waiting (see docs/performance.md#a-retry-herd).
bench-herd: build
	./scripts/bench_herd.sh

## Leasing exactly the hot keys: 3 processes of the Rust client, 50 in flight
## each, 100,000 keys at Zipf s = 1.1, the hottest key moving halfway (see
## docs/performance.md#leasing-exactly-the-hot-keys).
bench-hot-leasing: build
	./scripts/bench_hot_leasing.sh

## Replays classic traffic traces against every algorithm; writes an SVG chart.
demo: build
	./scripts/demo.sh

## Bounded coverage-guided fuzzing of the parsers and the state decoders.
fuzz: deps
	./scripts/fuzz.sh

clean:
	cargo clean

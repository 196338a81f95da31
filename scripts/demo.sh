#!/usr/bin/env bash
# Replays classic traffic traces against every algorithm on a redis-server
# with the release module and the manual clock; prints what each admitted
# and writes docs/demo.svg. `make demo` builds the module first.
set -euo pipefail
cd "$(dirname "$0")/.."
module="${RL_MODULE:-target/release/libredis_ratelimit.so}"
[ -f "$module" ] || cargo build --release
exec cargo run --quiet --example demo -- --module "$module" --out "${1:-docs/demo.svg}"

#!/usr/bin/env bash
# Leasing exactly the hot keys, with clients/rust/examples/hot_leasing.rs:
# PROCESSES (3) processes, 50 requests in flight each, 100,000 keys at Zipf
# s = 1.1, a per-key `GCRA LIMIT 1s` (1000) leased in blocks of 20 only
# while the server names the key hot (a poll a second), for RUN_SECONDS
# (12) against a fresh real-clock server with the module's defaults (hot
# keys counted). Prints the machine, the load (`uptime`) before and after,
# and the tables (also saved under target/bench-hot-leasing/). Knobs:
# MODULE (the .so), PROFILE (release; debug builds faster), HOT_KEY_COUNTERS
# (the server's ratelimit.hot-key-counters; its default unless set).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
PROCESSES=${PROCESSES:-3}
RUN_SECONDS=${RUN_SECONDS:-12}
LIMIT=${LIMIT:-1000}
PROFILE=${PROFILE:-release}
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
OUT=${OUT:-$PWD/target/bench-hot-leasing}

[ -f "$MODULE" ] || { echo "bench_hot_leasing: $MODULE is missing: make build" >&2; exit 1; }
if [ "$PROFILE" = release ]; then
    cargo build --release --quiet -p redis-ratelimit-client --example hot_leasing
else
    cargo build --quiet -p redis-ratelimit-client --example hot_leasing
fi
BENCH=$PWD/target/$PROFILE/examples/hot_leasing
mkdir -p "$OUT"
pin_cores

{
    echo "$(nproc) cores, $(uname -sr), $(redis-server --version | cut -d' ' -f3), client built $PROFILE"
    echo "load before: $(uptime | sed 's/.*load average: //')"
    echo
    start_server
    if [ -n "${HOT_KEY_COUNTERS:-}" ]; then
        redis-cli -p "$PORT" CONFIG SET ratelimit.hot-key-counters "$HOT_KEY_COUNTERS" >/dev/null
        echo "ratelimit.hot-key-counters $HOT_KEY_COUNTERS"
        echo
    fi
    "${CLIENT_PIN[@]}" "$BENCH" "redis://127.0.0.1:$PORT/" "$PROCESSES" "$RUN_SECONDS" "$LIMIT"
    stop_server
    echo
    echo "load after: $(uptime | sed 's/.*load average: //')"
} | tee "$OUT/hot_leasing.md"

#!/usr/bin/env bash
# A retry herd on one key, with examples/herd.rs: CLIENTS (1000) closed-loop
# clients on `RL.GCRA herd 100 1s` for RUN_SECONDS (20) of real time in
# each mode (MODES: now told jitter reserve wait), each against a fresh
# real-clock server (server on core 0, clients on core 1 where there are
# two). Prints the machine, the load (`uptime`) before and after, and one
# Markdown table (also saved under target/bench-herd/). Knobs: MODULE (the .so).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
CLIENTS=${CLIENTS:-1000}
RUN_SECONDS=${RUN_SECONDS:-20}
MODES=${MODES:-now told jitter reserve wait}
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
OUT=${OUT:-$PWD/target/bench-herd}

[ -f "$MODULE" ] || { echo "bench_herd: $MODULE is missing: make build" >&2; exit 1; }
cargo build --release --quiet --example herd
BENCH=$PWD/target/release/examples/herd
# A connection per client in `wait` needs as many descriptors.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
mkdir -p "$OUT"
pin_cores

{
    echo "$(nproc) cores, $(uname -sr), $(redis-server --version | cut -d' ' -f3)"
    echo "load before: $(uptime | sed 's/.*load average: //')"
    echo
    echo "$CLIENTS clients, one key \`RL.GCRA herd 100 1s\`, ${RUN_SECONDS} s per mode"
    echo
    echo "| mode | admissions/s | commands/admission | mean commands/10 ms | busiest 10 ms | busiest 10 ms after 1 s | p99 ask → admission (ms) | start error p50 / p99 |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    for mode in $MODES; do
        start_server
        "${CLIENT_PIN[@]}" "$BENCH" "127.0.0.1:$PORT" "$mode" "$CLIENTS" "$RUN_SECONDS"
        stop_server
    done
    echo
    echo "load after: $(uptime | sed 's/.*load average: //')"
} | tee "$OUT/herd.md"

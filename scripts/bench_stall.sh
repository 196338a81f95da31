#!/usr/bin/env bash
# Does any command stall the server? With examples/stall_bench.rs:
#
#   scripts/bench_stall.sh                          # every case at full size
#   CASES="gcra acquire-short" SIZES="10 100" scripts/bench_stall.sh
#
# Each case and size gets a fresh `clock manual` server (the module from
# MODULE). Cases: gcra fixed sliding all acquire-short acquire-long (SIZES
# waiters on one key; ACQUIRE_SIZES for the two acquire cases), keys
# (KEYS_SIZE waiters on as many keys), leases (LEASES_SIZE leases on one
# key), log (an RL.SLIDING EXACT log of LOG_SIZE entries), sketch (RL.SKETCH
# of WIDTH SKETCH_WIDTH, DEPTH 8). A run that takes longer than GUARD
# seconds is recorded as stalled and its server killed. The tables go to
# target/bench-stall/report.md (rows in rows.tsv) and to stdout.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
CASES=${CASES:-"gcra fixed sliding all acquire-short acquire-long keys leases log sketch"}
SIZES=${SIZES:-"10 100 1000 10000"}
ACQUIRE_SIZES=${ACQUIRE_SIZES:-$SIZES}
KEYS_SIZE=${KEYS_SIZE:-10000}
LEASES_SIZE=${LEASES_SIZE:-100000}
LOG_SIZE=${LOG_SIZE:-1000000}
SKETCH_WIDTH=${SKETCH_WIDTH:-262144}
GUARD=${GUARD:-60}
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
OUT=${OUT:-$PWD/target/bench-stall}

[ -f "$MODULE" ] || { echo "bench_stall: $MODULE is missing: make build" >&2; exit 1; }
cargo build --release --quiet --example stall_bench
BENCH=$PWD/target/release/examples/stall_bench
# 10,000 blocked clients need as many connections, here and in the server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
pin_cores
mkdir -p "$OUT"
ROWS=$OUT/rows.tsv
: >"$ROWS"

SERVER_PREFIX=("${SERVER_PIN[@]}")

# One case at one size on a fresh server.
run_case() {
    local case=$1 size=$2 rc=0
    start_server clock manual --maxclients 20000
    echo "== $case $size" >&2
    # The bench's own watchdog fires at GUARD; this one only if that fails.
    timeout -s KILL $((GUARD + 30)) "${CLIENT_PIN[@]}" "$BENCH" "$case" "127.0.0.1:$PORT" "$size" "$ROWS" "$GUARD" || rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
        printf '%s\t%s\t?\t\t\t\t\t\t\t\t\tfailed (exit %s)\n' "$case" "$size" "$rc" >>"$ROWS"
    fi
    stop_server
}

start=$(date +%s)
for case in $CASES; do
    case $case in
        acquire-*) sizes=$ACQUIRE_SIZES ;;
        keys) sizes=$KEYS_SIZE ;;
        leases) sizes=$LEASES_SIZE ;;
        log) sizes=$LOG_SIZE ;;
        sketch) sizes=$SKETCH_WIDTH ;;
        *) sizes=$SIZES ;;
    esac
    for size in $sizes; do run_case "$case" "$size"; done
done

{
    echo "# Stalls"
    echo
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit: $(git rev-parse --short HEAD), module: $MODULE"
    echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $("$RL_SERVER" --version | awk '{print $1, $2, $3}')"
    echo "guard: $GUARD s per case and size; total run: $(( $(date +%s) - start )) s; load: $(uptime | sed 's/.*load/load/')"
    "$BENCH" report "$ROWS"
} | tee "$OUT/report.md"

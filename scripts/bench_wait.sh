#!/usr/bin/env bash
# What `WAIT timeout` buys, with examples/wait_bench.rs:
#
#   scripts/bench_wait.sh             # contend (retry, then WAIT) and waiters
#   BENCH_ONLY=contend scripts/bench_wait.sh
#   BENCH_ONLY=waiters scripts/bench_wait.sh
#   BENCH_ONLY=fair scripts/bench_wait.sh
#
# contend: one key at 50/s, CLIENTS (200), then CLIENTS_LARGE (1000)
# closed-loop clients for RUN_SECONDS (20) of real time, first sleeping
# retry_after_ms and retrying, then with WAIT 30s, each against a fresh
# real-clock server: admissions, commands and server CPU per admission. waiters: WAITERS (10000)
# connections blocked on as many keys on a `clock manual` server, server
# CPU over IDLE_SECONDS (10) against an idle server and idle connections,
# memory, and the time RL.CLOCK ADVANCE takes to admit them all; with
# WAITERS_CLOCK=real, the same on a real-clock server, admitted when due.
# Then WAITERS_ONE_KEY (1000) connections waiting in one line on one key
# (manual clock), admitted one RL.CLOCK ADVANCE at a time: memory per
# waiter and server CPU per admission.
# fair: CLIENTS (200) clients on one key at 50/s for FAIR_SECONDS (10),
# every 11th light (offered load 10:1), with WAIT 30s, then with WAIT 30s
# FLOW light|heavy: each group's share and time to admission, and server
# CPU per admission. With CALLGRIND=1, the server runs under callgrind and
# each mode also prints the server's instructions per admission (counted
# from before the clients connect to after the last reply).
# Prints the machine, the load (`uptime`) before and after, and the figures
# (also saved under target/bench-wait/). Knobs: MODULE (the .so).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
CLIENTS=${CLIENTS:-200}
CLIENTS_LARGE=${CLIENTS_LARGE:-1000}
WAITERS_ONE_KEY=${WAITERS_ONE_KEY:-1000}
RUN_SECONDS=${RUN_SECONDS:-20}
FAIR_SECONDS=${FAIR_SECONDS:-10}
WAITERS=${WAITERS:-10000}
IDLE_SECONDS=${IDLE_SECONDS:-10}
WAITERS_CLOCK=${WAITERS_CLOCK:-manual}
BENCH_ONLY=${BENCH_ONLY:-all}
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
OUT=${OUT:-$PWD/target/bench-wait}

[ -f "$MODULE" ] || { echo "bench_wait: $MODULE is missing: make build" >&2; exit 1; }
cargo build --release --quiet --example wait_bench
BENCH=$PWD/target/release/examples/wait_bench
# 10,000 connections need as many descriptors, here and in the server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
mkdir -p "$OUT"

# instructions_per_admission DIR REPORT: the server's instructions in the
# callgrind dump written to DIR, over the admissions REPORT counts.
instructions_per_admission() {
    local dump total admitted
    for _ in $(seq 1 100); do
        dump=$(find "$1" -maxdepth 1 -name 'callgrind.out.*.*' | head -n 1)
        [ -n "$dump" ] && total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}') && [ -n "$total" ] && break
        sleep 0.1
    done
    admitted=$(awk '/^admitted:/ {print $2}' "$2")
    echo "server instructions: $total in all, $((total / admitted)) per admitted request"
}

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "commit: $(git rev-parse --short HEAD)"
    echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $("$RL_SERVER" --version | awk '{print $1, $2, $3}')"
    echo "uptime before: $(uptime)"
    if [ "$BENCH_ONLY" = fair ]; then
        for mode in wait fair; do
            echo
            if [ "${CALLGRIND:-0}" = 1 ]; then
                rm -f "$OUT"/callgrind.out.*
                SERVER_PREFIX=(valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out.%p")
            fi
            start_server
            [ "${CALLGRIND:-0}" = 1 ] && callgrind_control -z "$SERVER_PID" >/dev/null 2>&1
            "$BENCH" contend "127.0.0.1:$PORT" "$mode" "$CLIENTS" "$FAIR_SECONDS" | tee "$OUT/fair-$mode.txt"
            if [ "${CALLGRIND:-0}" = 1 ]; then
                callgrind_control -d "$mode" "$SERVER_PID" >/dev/null 2>&1
                instructions_per_admission "$OUT" "$OUT/fair-$mode.txt"
            fi
            stop_server
            SERVER_PREFIX=()
        done
    fi
    if [ "$BENCH_ONLY" = all ] || [ "$BENCH_ONLY" = contend ]; then
        for clients in $CLIENTS $CLIENTS_LARGE; do
            for mode in retry wait; do
                echo
                start_server --maxclients 20000
                "$BENCH" contend "127.0.0.1:$PORT" "$mode" "$clients" "$RUN_SECONDS"
                stop_server
            done
        done
    fi
    if [ "$BENCH_ONLY" = all ] || [ "$BENCH_ONLY" = waiters ]; then
        echo
        if [ "$WAITERS_CLOCK" = manual ]; then start_server clock manual --maxclients 20000; else start_server --maxclients 20000; fi
        "$BENCH" waiters "127.0.0.1:$PORT" "$WAITERS" "$IDLE_SECONDS" "$WAITERS_CLOCK"
        stop_server
        echo
        start_server clock manual --maxclients 20000
        "$BENCH" waiters "127.0.0.1:$PORT" "$WAITERS_ONE_KEY" "$IDLE_SECONDS" manual one-key
        stop_server
    fi
    echo
    echo "uptime after: $(uptime)"
} | tee "$OUT/report.txt"

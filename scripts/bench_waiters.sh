#!/usr/bin/env bash
# What waiting clients cost the server beside Redis's own blocked BLPOP
# clients, with examples/waiters_bench.rs, in one run:
#
#   scripts/bench_waiters.sh          # or: make bench-waiters
#
# memory: COUNTS (10 1000 10000) connections, each blocked in
# `RL.GCRA k:i 1 1h WAIT 100000h` on its own exhausted key, or in
# `BLPOP k:i 0`, on a fresh server each: `used_memory` growth per blocked
# client (from no connection: the whole client; from the same connections
# idle: the blocking alone) and the module's own heap per waiter
# (`ratelimit_heap_bytes`, outside `used_memory`); then the same with every
# waiter on one key (`one-key`), and both with each waiter in a flow of its
# own (`keys-flows`, `one-key-flows`: `… WAIT 100000h FLOW tenant:i`; the
# BLPOP clients as without flows).
# role: ROLE_WAITERS (10000) such clients, then `REPLICAOF` (to a port where
# nothing listens) and `FAILOVER` (to a replica started for it), the server
# under callgrind, counted from just before the command until the server
# has freed every client it unblocked: every instruction but Redis's
# `listSearchKey` (when a freed client's reply is still pending, Redis
# looks it up in the list of all such clients: quadratic in them, and hit
# or missed by either kind of client from run to run, with the timing),
# the ratio RL ÷ BLPOP, that search apart, and the module's work counters
# moved meanwhile; ROUNDS (3) times, each kind on a fresh server (jemalloc's
# time-driven housekeeping moves a round by up to 15 %), then the ratio of
# the sums. Knobs: MODULE, COUNTS, SHAPES, ROLE_WAITERS, ROUNDS, ONLY
# (memory or role), OUT (target/bench-waiters).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
COUNTS=${COUNTS:-10 1000 10000}
SHAPES=${SHAPES:-keys one-key keys-flows one-key-flows}
ROLE_WAITERS=${ROLE_WAITERS:-10000}
ROUNDS=${ROUNDS:-3}
ONLY=${ONLY:-all}
OUT=${OUT:-$PWD/target/bench-waiters}
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
BENCH=${BENCH:-$PWD/target/release/examples/waiters_bench}
[ -f "$MODULE" ] || { echo "bench_waiters: $MODULE is missing: make build" >&2; exit 1; }
[ -x "$BENCH" ] || { echo "bench_waiters: $BENCH is missing: cargo build --release --example waiters_bench" >&2; exit 1; }
mkdir -p "$OUT"
rm -f "$OUT"/callgrind.out.* "$OUT"/*.out
# Many connections: the server's and this shell's limits.
ulimit -n 65536 2>/dev/null || true
MAXCLIENTS=$((ROLE_WAITERS + 1000))
for n in $COUNTS; do [ $((n + 1000)) -gt $MAXCLIENTS ] && MAXCLIENTS=$((n + 1000)); done

field() { echo "$1" | awk -F= -v k="$2" '$1 == k {print $2}'; }

echo "machine: $(nproc) cores, load: $(uptime | sed 's/.*load average: //'), $(redis-server --version | awk '{print $1, $3}')"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo none), date: $(date -u '+%Y-%m-%d %H:%M UTC')"

if [ "$ONLY" = all ] || [ "$ONLY" = memory ]; then
    printf '\n| waiters | shape | BLPOP: used_memory per client (blocking alone) | RL WAIT: used_memory per client (blocking alone) | RL WAIT: module heap per waiter |\n|---:|---|---:|---:|---:|\n'
    for shape in $SHAPES; do
        for n in $COUNTS; do
            declare -A used=() block=() heap=()
            for kind in blpop rl; do
                start_server --maxclients "$MAXCLIENTS"
                r=$("$BENCH" memory "127.0.0.1:$PORT" "$n" "$kind" "$shape")
                used[$kind]=$(field "$r" used_memory_per_client)
                block[$kind]=$(field "$r" used_memory_per_block)
                heap[$kind]=$(field "$r" module_heap_per_client)
                stop_server
            done
            printf '| %d | %s | %s (%s) | %s (%s) | %s |\n' "$n" "$shape" "${used[blpop]}" "${block[blpop]}" \
                "${used[rl]}" "${block[rl]}" "${heap[rl]}"
        done
    done
fi

if [ "$ONLY" = all ] || [ "$ONLY" = role ]; then
    command -v valgrind >/dev/null || { echo "bench_waiters: valgrind is not installed" >&2; exit 1; }
    printf '\n| %d blocked clients, round | BLPOP: instructions | RL WAIT: instructions | RL ÷ BLPOP | listSearchKey: BLPOP, RL | RL: module work |\n|---|---:|---:|---:|---|---|\n' "$ROLE_WAITERS"
    for change in replicaof failover; do
      declare -A sum=([blpop]=0 [rl]=0)
      for round in $(seq 1 "$ROUNDS"); do
        declare -A count=() total=() search=() work=()
        for kind in blpop rl; do
            replica=() pids=()
            SERVER_PREFIX=(valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out.%p")
            start_server --maxclients "$MAXCLIENTS"
            VG_PID=$SERVER_PID
            PRIMARY=$PORT
            pids+=("$SERVER_PID")
            SERVER_PREFIX=()
            if [ "$change" = failover ]; then
                start_server --replicaof 127.0.0.1 "$PRIMARY"
                replica=("127.0.0.1:$PORT")
                pids+=("$SERVER_PID")
                for _ in $(seq 1 600); do
                    [ "$(cli INFO replication | tr -d '\r' | awk -F: '/^master_link_status:/ {print $2}')" = up ] && break
                    sleep 0.1
                done
            fi
            r=$(CALLGRIND_PID=$VG_PID "$BENCH" role "127.0.0.1:$PRIMARY" "$ROLE_WAITERS" "$kind" "$change" "${replica[@]}")
            for _ in $(seq 1 100); do
                dump=$(find "$OUT" -maxdepth 1 -name "callgrind.out.$VG_PID.*" | head -n 1)
                [ -n "$dump" ] && callgrind_annotate "$dump" >/dev/null 2>&1 && break
                sleep 0.1
            done
            mv "$dump" "$OUT/$change.$kind.out"
            report=$(callgrind_annotate --threshold=100 --inclusive=yes "$OUT/$change.$kind.out" 2>/dev/null)
            total[$kind]=$(echo "$report" | awk '/PROGRAM TOTALS/ && !d {gsub(",", "", $1); print $1; d = 1}')
            search[$kind]=$(echo "$report" | awk '/:listSearchKey / {gsub(",", "", $1); s += $1} END {print s + 0}')
            count[$kind]=$((total[$kind] - search[$kind]))
            sum[$kind]=$((sum[$kind] + count[$kind]))
            work[$kind]=$(echo "$r" | grep '^work_' | sed 's/^work_//' | paste -sd, -)
            for pid in "${pids[@]}"; do
                kill -KILL "$pid" 2>/dev/null || true
                wait "$pid" 2>/dev/null || true
            done
        done
        awk -v c="$change" -v n="$round" -v b="${count[blpop]}" -v r="${count[rl]}" -v w="${work[rl]}" \
            -v tb="${search[blpop]}" -v tr="${search[rl]}" \
            'BEGIN { printf "| `%s`, %d | %d | %d | %.2f | %d, %d | %s |\n", (c == "replicaof" ? "REPLICAOF" : "FAILOVER"), n, b, r, r / b, tb, tr, w }'
      done
      awk -v c="$change" -v b="${sum[blpop]}" -v r="${sum[rl]}" \
          'BEGIN { printf "| `%s`, all rounds | %d | %d | **%.2f** | | |\n", (c == "replicaof" ? "REPLICAOF" : "FAILOVER"), b, r, r / b }'
    done
fi
echo
echo "load after: $(uptime | sed 's/.*load average: //')"

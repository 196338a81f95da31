#!/usr/bin/env bash
# RL.SKETCH against one RL.SLIDING APPROX key per item: memory at 10^4,
# 10^5 and 10^6 distinct items, and requests per second on one sketch, on
# 100 sketches and on per-item APPROX keys (with SET PX as the baseline of
# the same round). Limits are high, so every request takes the write path.
#
#   scripts/sketch_bench.sh      # knobs: ROUNDS (3), REQUESTS (200000), MODULE,
#                                # ITEMS (the distinct-item counts: 10000 100000 1000000)
#
# Needs redis-server, redis-cli, redis-benchmark and the release build.
# Prints Markdown tables (also saved as target/bench/sketch.md).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-200000}
ITEMS=${ITEMS:-10000 100000 1000000}
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
OUT=${OUT:-$PWD/target/bench}
mkdir -p "$OUT"
[ -f "$MODULE" ] || { echo "sketch_bench: build the module first (cargo build --release)" >&2; exit 1; }

pin_cores
SERVER_PREFIX=("${SERVER_PIN[@]}")
start_server

used() { cli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}'; }

# used_memory after `n` calls of the command printed by awk program $2
# for i = 0..n-1 (RESP through redis-cli --pipe), minus before.
mem_of() {
    local n=$1 program=$2 before after
    cli FLUSHALL >/dev/null
    sleep 0.2
    before=$(used)
    awk -v n="$n" "BEGIN { for (i = 0; i < n; i++) { $program } }" | cli --pipe >/dev/null
    sleep 0.5
    after=$(used)
    echo $((after - before))
}

# The awk programs below print RESP; their $ are RESP's, not the shell's.
# shellcheck disable=SC2016
# RESP for: RL.SLIDING item:<i> 1000000 1h APPROX
APPROX='k = "item:" i; printf "*5\r\n$10\r\nRL.SLIDING\r\n$%d\r\n%s\r\n$7\r\n1000000\r\n$2\r\n1h\r\n$6\r\nAPPROX\r\n", length(k), k'
# RESP for: RL.SKETCH rl:sketch item:<i> 1000000 1h
# shellcheck disable=SC2016
SKETCH='k = "item:" i; printf "*5\r\n$9\r\nRL.SKETCH\r\n$9\r\nrl:sketch\r\n$%d\r\n%s\r\n$7\r\n1000000\r\n$2\r\n1h\r\n", length(k), k'

{
    echo "#### Memory: one sketch (default 2048 × 4) against one APPROX key per item"
    echo
    echo "| distinct items | APPROX keys: used_memory | per item | one sketch: used_memory | sketch / APPROX |"
    echo "|---:|---:|---:|---:|---:|"
    for n in $ITEMS; do
        a=$(mem_of "$n" "$APPROX")
        s=$(mem_of "$n" "$SKETCH")
        awk -v n="$n" -v a="$a" -v s="$s" \
            'BEGIN { printf "| %d | %d | %.1f | %d | %.4f |\n", n, a, a / n, s, s / a }'
    done
} | tee "$OUT/sketch.md"

bench() {
    "${CLIENT_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "$PORT" -c 50 -P 16 -n "$REQUESTS" \
        -r "$1" --csv "${@:2}" | tail -n 1 | awk -F'"' '{print $4}'
}

# The median of the numbers on stdin (separated by spaces).
med() {
    tr ' ' '\n' | grep -v '^$' | sort -g |
        awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

declare -A rps
labels=("SET PX" "APPROX per-item keys" "RL.SKETCH one sketch" "RL.SKETCH 100 sketches")
for round in $(seq 1 "$ROUNDS"); do
    for label in "${labels[@]}"; do
        cli FLUSHALL >/dev/null
        case $label in
        "SET PX") r=$(bench 100000 SET k:__rand_int__ v PX 3600000) ;;
        "APPROX per-item keys") r=$(bench 100000 RL.SLIDING item:__rand_int__ 1000000 1h APPROX) ;;
        "RL.SKETCH one sketch") r=$(bench 100000 RL.SKETCH rl:sketch __rand_int__ 1000000 1h) ;;
        # Key and item each drawn from 0..99: 100 sketches, and limits
        # high enough that every request still writes.
        "RL.SKETCH 100 sketches") r=$(bench 100 RL.SKETCH rl:sketch:__rand_int__ __rand_int__ 1000000 1h) ;;
        esac
        rps["$label,$round"]=$r
        echo "sketch_bench: round $round $label: $r req/s" >&2
    done
done

{
    echo
    echo "#### Throughput (req/s, median of $ROUNDS rounds; ratio to SET PX per round, then median)"
    echo
    echo "| command | req/s | × SET PX |"
    echo "|---|---:|---:|"
    for label in "${labels[@]}"; do
        vals=""
        ratios=""
        for round in $(seq 1 "$ROUNDS"); do
            vals="$vals ${rps[$label,$round]}"
            ratios="$ratios $(awk -v a="${rps[$label,$round]}" -v b="${rps[SET PX,$round]}" 'BEGIN { print a / b }')"
        done
        printf '| %s | %.0f | %.2f |\n' "$label" "$(echo "$vals" | med)" "$(echo "$ratios" | med)"
    done
} | tee -a "$OUT/sketch.md"

#!/usr/bin/env bash
# What the largest states the operator bounds allow cost one command: the
# server-side time of each (SLOWLOG, µs, the median and largest of RUNS
# fresh keys) on a primary and on its replica, and the replication bytes.
#
#   scripts/bounds_cost.sh      # knobs: RUNS (7), LOG (100000), MODULE
#
# - RL.SKETCH's first call on a new key at the largest sketch the default
#   ratelimit.max-sketch-bytes allows (21844 × 4, 1 MiB), and at 262144 × 8
#   (24 MiB, with the bound raised) for comparison;
# - RL.SLIDING EXACT at ratelimit.max-log-entries = LOG (the default,
#   100000), 1h window: a first call of COST LOG (the largest write, one
#   stamp per unit), REFUND 1 and a denial on a full log, a call with
#   another stamp width (a 2h window: the whole log rewritten), and a
#   raised limit that grows a full ring of LOG - 2 8-byte slots wrapped at
#   its middle (the largest move: LOG / 2 - 1 entries).
#
# Needs redis-server, redis-cli and the release build.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
RUNS=${RUNS:-7}
LOG=${LOG:-100000}
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
[ -f "$MODULE" ] || { echo "bounds_cost: build the module first (cargo build --release)" >&2; exit 1; }

pin_cores
SERVER_PREFIX=("${SERVER_PIN[@]}")
SLOWLOG=(--slowlog-log-slower-than 0 --slowlog-max-len 1024)
start_server clock manual "${SLOWLOG[@]}" --ratelimit.max-log-entries "$LOG"
PRIMARY=$PORT
start_server clock manual "${SLOWLOG[@]}" --replicaof 127.0.0.1 "$PRIMARY"
REPLICA=$PORT
p() { redis-cli -p "$PRIMARY" "$@"; }
r() { redis-cli -p "$REPLICA" "$@"; }
for _ in $(seq 1 100); do
    r INFO replication | grep -q 'master_link_status:up' && break
    sleep 0.1
done
offset() { p INFO replication | tr -d '\r' | awk -F: '$1 == "master_repl_offset" {print $2}'; }
synced() {
    for _ in $(seq 1 200); do
        [ "$(r INFO replication | tr -d '\r' | awk -F: '$1 == "slave_repl_offset" {print $2}')" = "$(offset)" ] && return
        sleep 0.05
    done
}
# The summed µs of the commands in the SLOWLOG since the last reset (the
# replica logs each replicated command, MULTI and EXEC included), less
# this script's own INFO, SLOWLOG and PING.
took() {
    "$1" --no-raw SLOWLOG GET 1024 | tr -d '\r' | awk '
        /^ *([0-9]+\) )?3\) \(integer\) [0-9]+$/ { d = $NF }
        /^ *4\) 1\) "/ {
            c = toupper($3); gsub(/"/, "", c)
            if (c != "INFO" && c != "SLOWLOG" && c != "PING" && c != "REPLCONF") s += d
        }
        END { print s + 0 }'
}
median_max() { sort -n | awk '{ v[NR] = $1 } END { printf "%s / %s", v[int((NR + 1) / 2)], v[NR] }'; }

# Runs setup (not measured) then the measured command RUNS times on fresh
# keys; prints primary µs, replica µs (median / largest) and bytes.
measure() {
    local name=$1 setup=$2 call=$3 i prim=() repl=() bytes=0 before
    for i in $(seq 1 "$RUNS"); do
        p RL.CLOCK SET 1767225600000000 >/dev/null
        eval "${setup//KEY/k$i}"
        synced
        p SLOWLOG RESET >/dev/null
        r SLOWLOG RESET >/dev/null
        before=$(offset)
        eval "${call//KEY/k$i}" >/dev/null
        synced
        bytes=$(($(offset) - before))
        prim+=("$(took p)")
        repl+=("$(took r)")
        p DEL "k$i" >/dev/null
    done
    printf '| %s | %s | %s | %s |\n' "$name" \
        "$(printf '%s\n' "${prim[@]}" | median_max)" \
        "$(printf '%s\n' "${repl[@]}" | median_max)" "$bytes"
}

fill() { # a full EXACT log of LOG entries at KEY, 1h window, then 1 s later
    local key=$1 i
    for i in $(seq 0 99); do
        printf 'RL.CLOCK SET %d\nRL.SLIDING %s %d 1h COST %d\n' \
            $((1767225600000000 + i * 1000)) "$key" "$LOG" $((LOG / 100))
    done | p >/dev/null
    p RL.CLOCK SET 1767225601000000 >/dev/null
}
wrapped() { # a ring of LOG - 2 8-byte slots (2h window), full, wrapped at its middle
    local key=$1 ring=$((LOG - 2))
    p RL.SLIDING "$key" "$ring" 2h COST $((ring / 2)) >/dev/null
    p RL.CLOCK SET 1767225601000000 >/dev/null
    p RL.SLIDING "$key" "$ring" 2h COST $((ring / 2)) >/dev/null
    p RL.CLOCK SET 1767232800500000 >/dev/null
    p RL.SLIDING "$key" "$ring" 2h COST $((ring / 2)) >/dev/null
}

echo "| command | primary µs (median / largest) | replica µs (median / largest) | replication bytes |"
echo "|---|---|---|---|"
measure "RL.SKETCH first call, 21844 × 4 (1 MiB)" ":" \
    "p RL.SKETCH KEY ip 100 1m WIDTH 21844 DEPTH 4"
p CONFIG SET ratelimit.max-sketch-bytes 1073741824 >/dev/null
measure "RL.SKETCH first call, 262144 × 8 (24 MiB)" ":" \
    "p RL.SKETCH KEY ip 100 1m WIDTH 262144 DEPTH 8"
p CONFIG SET ratelimit.max-sketch-bytes 1048576 >/dev/null
measure "RL.SLIDING EXACT first call, COST $LOG" ":" \
    "p RL.SLIDING KEY $LOG 1h COST $LOG"
measure "RL.SLIDING EXACT REFUND 1, full log" "fill KEY" \
    "p RL.SLIDING KEY $LOG 1h REFUND 1"
measure "RL.SLIDING EXACT denial, full log" "fill KEY" \
    "p RL.SLIDING KEY $LOG 1h"
measure "RL.SLIDING EXACT denial, log of 10 (for comparison)" "p RL.SLIDING KEY 10 1h COST 10 >/dev/null" \
    "p RL.SLIDING KEY 10 1h"
measure "RL.SLIDING EXACT limit cut, REFUND 1, full log" "fill KEY" \
    "p RL.SLIDING KEY $((LOG * 3 / 5)) 1h REFUND 1"
measure "RL.SLIDING EXACT other stamp width (2h), full log" "fill KEY" \
    "p RL.SLIDING KEY $LOG 2h REFUND 1"
measure "RL.SLIDING EXACT raised limit growing a wrapped ring ($((LOG / 2 - 1)) moved)" "wrapped KEY" \
    "p RL.SLIDING KEY $LOG 2h COST 1"

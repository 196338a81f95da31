#!/usr/bin/env bash
# Instructions per request, counted exactly by callgrind on redis-server:
# immune to other processes' load, so two builds compare to the instruction.
#
#   scripts/callgrind.sh                      # the default set of commands
#   scripts/callgrind.sh 'RL.GCRA KEY 10 1h'  # any commands (KEY = the key;
#                                             # SHA_GCRA, SHA_BUCKET = the Lua scripts)
#
# For each command, one hot key and random keys (-r KEYSPACE): total
# instructions per request in redis-server (networking, parsing, command),
# those inside processCommand (lookup, ACL, the command, propagation), and
# the top functions. Needs valgrind. Knobs: REQUESTS (20000), KEYSPACE
# (100000), MODULE, MODULE_ARGS (e.g. "policies on"), SETUP (commands run
# first, separated by ";"), TOP (functions listed, 25), OUT
# (target/callgrind).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
REQUESTS=${REQUESTS:-20000}
KEYSPACE=${KEYSPACE:-100000}
TOP=${TOP:-25}
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
OUT=${OUT:-$PWD/target/callgrind}

command -v valgrind >/dev/null || {
    echo "callgrind: valgrind is not installed" >&2
    exit 1
}
[ "$MODULE" = none ] || [ -f "$MODULE" ] || {
    echo "callgrind: $MODULE is missing: cargo build --release" >&2
    exit 1
}
if [ $# -eq 0 ]; then
    set -- 'INCR KEY' 'SET KEY v PX 60000' 'RL.GCRA KEY 10 1h' 'RL.BUCKET KEY 10 10 1h' \
        'RL.SLIDING KEY 10 1h APPROX' 'RL.FIXED KEY 10 1h' 'CL.THROTTLE KEY 9 10 3600' \
        'EVALSHA SHA_GCRA 1 KEY 10 3600000' 'EVALSHA SHA_BUCKET 1 KEY 10 10 3600000'
fi
mkdir -p "$OUT"
rm -f "$OUT"/callgrind.out.*

SERVER_PREFIX=(valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out.%p")
# shellcheck disable=SC2086 # MODULE_ARGS: words for the module
start_server ${MODULE_ARGS:-}
VG_PID=$SERVER_PID

IFS=';' read -ra setup <<<"${SETUP:-}"
for line in "${setup[@]}"; do
    # shellcheck disable=SC2086 # split the command into words
    [ -n "${line// /}" ] && cli $line >/dev/null
done

SHA_GCRA=$(cli SCRIPT LOAD "$(cat scripts/lua/gcra.lua)")
SHA_BUCKET=$(cli SCRIPT LOAD "$(cat scripts/lua/token_bucket.lua)")

printf '| command | keys | instructions per request | in processCommand |\n|---|---|---:|---:|\n'
n=0
for template in "$@"; do
    cmd=${template//SHA_GCRA/$SHA_GCRA}
    cmd=${cmd//SHA_BUCKET/$SHA_BUCKET}
    for scenario in hot random; do
        if [ $scenario = hot ]; then key=cg:hot range=(); else key=cg:__rand_int__ range=(-r "$KEYSPACE"); fi
        cli FLUSHALL >/dev/null
        # Warm up (first key creation, dict growth), then count.
        # shellcheck disable=SC2086 # split the command into words
        redis-benchmark -h 127.0.0.1 -p "$PORT" -c 50 -P 16 -n "$REQUESTS" "${range[@]}" -q ${cmd//KEY/$key} >/dev/null
        callgrind_zero "$VG_PID"
        # shellcheck disable=SC2086
        redis-benchmark -h 127.0.0.1 -p "$PORT" -c 50 -P 16 -n "$REQUESTS" "${range[@]}" -q ${cmd//KEY/$key} >/dev/null
        n=$((n + 1))
        callgrind_dump "$VG_PID" "$OUT" "$n.$scenario" >/dev/null
        report=$(callgrind_annotate --threshold=100 --inclusive=yes "$OUT/$n.$scenario.out" 2>/dev/null)
        total=$(echo "$report" | awk '/PROGRAM TOTALS/ && !d {gsub(",", "", $1); print $1; d = 1}')
        inproc=$(echo "$report" | awk '/:processCommand / && !d {gsub(",", "", $1); print $1; d = 1}')
        printf '| %s | %s | %d | %d |\n' "$template" "$scenario" $((total / REQUESTS)) $((${inproc:-0} / REQUESTS))
        callgrind_annotate --threshold=100 "$OUT/$n.$scenario.out" 2>/dev/null |
            awk -v top="$TOP" -v n="$REQUESTS" 'f && NF && $2 !~ /100.0%/ && k < top {
                c = $1; gsub(",", "", c); printf "%8.1f  %s\n", c / n, $0; k++ } /file:function/ { getline; f = 1 }' \
            >"$OUT/$n.$scenario.top.txt"
    done
done
echo
echo "Top functions (self instructions per request first): $OUT/*.top.txt"

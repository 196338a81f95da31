#!/usr/bin/env bash
# Where the instructions of an admission go: RL.GCRA, RL.BUCKET, RL.FIXED,
# RL.SLIDING (each mode) and RL.ALL of two limits on random keys (the
# allow-and-write path), beside Redis's own SET PX and INCR + PEXPIRE, in
# one run of redis-server under callgrind:
#
#   scripts/admission_parts.sh        # or: make bench-parts
#
# Each row is sent with redis-benchmark -c 50 -P 16, REQUESTS requests on
# KEYSPACE random keys after a warm-up of as many (as scripts/callgrind.sh),
# and split by scripts/callgrind_parts.py into: outside the command
# (networking, parsing, call()), the module command frame, the command's
# own code, other module API calls, key access, reply, replication and
# allocation (inside call()). A row "A + B" is two commands per admission
# (PEXPIRE on keys that exist, set before it is counted). FLOOR.ADMIT is
# the least a module command can spend on an admission through the module
# API (benches/floor/floor.c, built here with the C compiler, CC), sent
# with the arguments RL.GCRA has. Prints Markdown. Knobs: REQUESTS (5000),
# KEYSPACE (100000), MODULE, MODULE_ARGS (words for the module, then server
# options such as --appendonly yes), RL_SERVER (redis-server, or
# valkey-server), OUT (target/admission-parts).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
REQUESTS=${REQUESTS:-5000}
KEYSPACE=${KEYSPACE:-100000}
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
OUT=${OUT:-$PWD/target/admission-parts}

command -v valgrind >/dev/null || {
    echo "admission_parts: valgrind is not installed" >&2
    exit 1
}
[ -f "$MODULE" ] || {
    echo "admission_parts: $MODULE is missing: cargo build --release" >&2
    exit 1
}
if [ $# -eq 0 ]; then
    set -- 'SET KEY v PX 60000' 'INCR KEY + PEXPIRE KEY 60000' 'RL.GCRA KEY 10 1h' \
        'RL.BUCKET KEY 10 10 1h' 'RL.FIXED KEY 10 1h' 'RL.SLIDING KEY 10 1h EXACT' \
        'RL.SLIDING KEY 10 1h APPROX' 'RL.SLIDING KEY 10 1h BUCKETS 6' \
        'RL.ALL 2 KEY KEY:g GCRA 10 1h GCRA 100 1h' 'FLOOR.ADMIT KEY 10 1h'
fi
mkdir -p "$OUT"
rm -f "$OUT"/callgrind.out.* "$OUT"/*.out
FLOOR=$(build_floor "$OUT") || { echo "admission_parts: the floor module did not build" >&2; exit 1; }

SERVER_PREFIX=(valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out.%p")
# shellcheck disable=SC2086 # MODULE_ARGS: words for the module and server
start_server ${MODULE_ARGS:-} --loadmodule "$FLOOR"
VG_PID=$SERVER_PID

# bench CMD...: the command on random keys, as scripts/callgrind.sh sends it.
bench() {
    redis-benchmark -h 127.0.0.1 -p "$PORT" -c 50 -P 16 -n "$REQUESTS" -r "$KEYSPACE" -q "$@" >/dev/null
}

# Every key of the key space (as redis-benchmark names them) holding 1.
fill() {
    awk -v n="$KEYSPACE" 'BEGIN { for (i = 0; i < n; i++) {
        k = sprintf("cg:%012d", i)
        printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\n1\r\n", length(k), k } }' |
        redis-cli -h 127.0.0.1 -p "$PORT" --pipe >/dev/null
}

printf '| command, random keys | instructions per admission | × SET PX | outside the command | module frame | command code | other API | key access | reply | replication | allocation |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
n=0
set_px=
for row in "$@"; do
    IFS='+' read -ra cmds <<<"$row"
    files=()
    first=1
    for cmd in "${cmds[@]}"; do
        cmd=$(echo "$cmd" | xargs)
        # shellcheck disable=SC2206 # split the command into words
        words=(${cmd//KEY/cg:__rand_int__})
        if [ $first = 1 ]; then
            cli FLUSHALL >/dev/null
            bench "${words[@]}"
        else
            fill
        fi
        first=0
        callgrind_zero "$VG_PID"
        bench "${words[@]}"
        n=$((n + 1))
        callgrind_dump "$VG_PID" "$OUT" "$n" >/dev/null
        files+=("$OUT/$n.out")
    done
    python3 scripts/callgrind_parts.py "$REQUESTS" "$(basename "$MODULE"),floor.so" "${files[@]}" |
        awk -F'\t' -v row="$row" -v set_px="$set_px" '
            { for (i = 2; i <= NF; i++) s[i] += $i; nf = NF }
            END {
                ratio = set_px ? sprintf("%.2f", s[2] / set_px) : "1.00"
                printf "| `%s` | %d | %s |", row, s[2], ratio
                for (i = 3; i <= nf; i++) printf " %d |", s[i]
                printf "\n"
                print s[2] > "/dev/stderr"
            }' 2>"$OUT/total"
    [ -n "$set_px" ] || set_px=$(cat "$OUT/total")
done

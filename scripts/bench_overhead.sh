#!/usr/bin/env bash
# What loading the module costs Redis's own commands, in instructions per
# request counted by callgrind (immune to other processes' load), in one run:
#
#   scripts/bench_overhead.sh          # or: make bench-overhead
#
# Each case is a fresh redis-server under callgrind:
#   without      no module
#   loaded       the module, nothing else
#   policies     the module with `policies on`
#   used         the module after RL.GCRA calls (no client ever waited)
#   waiting      WAITERS (10) clients blocked in `RL.GCRA … WAIT 1000h`
#                (no command filter; the expiry and eviction events on)
#   after        the same clients admitted and gone (nobody waits any more;
#                the expiry and eviction events stay)
# Commands: GET, SET, INCR, EXPIRE, SET … PX and LPUSH on one hot key (that
# exists: EXPIRE sets its TTL each time) and DEL of as many keys that exist,
# each REQUESTS (20000) times on one connection (`redis-cli --pipe`: the
# server reads full buffers, so the counts repeat), after a warm-up of the
# same; the module's keys (waiters, `used`) are in database 1. Prints, per
# command, the whole request's instructions without the module and what
# each case adds to the command's execution (`call`: the command and its
# keyspace events) and the command filters, which is where a module can
# add anything and which repeats exactly between runs; then every
# instruction per request, which also moves with timing (how much one read
# brings, the allocator's time-based housekeeping) by a few %. Knobs: REQUESTS, WAITERS, MODULE, CASES (a subset, in order;
# `without` first for the ratios), OUT (target/bench-overhead).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
REQUESTS=${REQUESTS:-20000}
WAITERS=${WAITERS:-10}
CASES=${CASES:-without loaded policies used waiting after}
OUT=${OUT:-$PWD/target/bench-overhead}
MODULE_SO=${MODULE:-$PWD/target/release/libredis_ratelimit.so}

command -v valgrind >/dev/null || { echo "bench_overhead: valgrind is not installed" >&2; exit 1; }
[ -f "$MODULE_SO" ] || { echo "bench_overhead: $MODULE_SO is missing: make build" >&2; exit 1; }
mkdir -p "$OUT"
rm -f "$OUT"/callgrind.out.* "$OUT"/*.out

COMMANDS=('GET' 'SET' 'INCR' 'DEL' 'EXPIRE' 'SET PX' 'LPUSH')
# The words of each command (KEY: the key), and what runs before it.
words() {
    case $1 in
        GET) echo 'GET KEY' ;;
        SET) echo 'SET KEY 1' ;;
        INCR) echo 'INCR KEY' ;;
        EXPIRE) echo 'EXPIRE KEY 100' ;;
        'SET PX') echo 'SET KEY v PX 60000' ;;
        LPUSH) echo 'LPUSH KEY v' ;;
    esac
}

# The client pids of the waiting case.
WAITER_PIDS=()
stop_waiters() {
    local pid
    for pid in "${WAITER_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    WAITER_PIDS=()
}

ratelimit_waiting() { cli INFO ratelimit | tr -d '\r' | awk -F: '/^ratelimit_waiting:/ {print $2}'; }
ratelimit_hooks() { cli INFO ratelimit | tr -d '\r' | awk -F: '/^ratelimit_hooks:/ {print $2}'; }

# Blocks WAITERS clients on one exhausted key (1 per hour), and returns once
# the server counts them all.
start_waiters() {
    cli -n 1 RL.GCRA ov:wait 1 1h >/dev/null
    for _ in $(seq 1 "$WAITERS"); do
        redis-cli -h 127.0.0.1 -p "$PORT" -n 1 RL.GCRA ov:wait 1 1h WAIT 1000h >/dev/null 2>&1 &
        WAITER_PIDS+=($!)
    done
    for _ in $(seq 1 600); do
        [ "$(ratelimit_waiting)" = "$WAITERS" ] && return 0
        sleep 0.1
    done
    echo "bench_overhead: the waiters did not block" >&2
    exit 1
}

# Prepares the server of case $1 (running) before any count.
prepare() {
    case $1 in
        used) for _ in 1 2 3; do cli -n 1 RL.GCRA ov:used 2 1h >/dev/null; done ;;
        waiting) start_waiters ;;
        after)
            start_waiters
            # Each round deletes the key; the module's next command on it
            # admits the first waiter (and is denied after it).
            for _ in $(seq 1 600); do
                [ "$(ratelimit_waiting)" = 0 ] && break
                cli -n 1 DEL ov:wait >/dev/null
                cli -n 1 RL.GCRA ov:wait 1 1h >/dev/null
            done
            [ "$(ratelimit_waiting)" = 0 ] || { echo "bench_overhead: waiters left" >&2; exit 1; }
            cli -n 1 FLUSHDB >/dev/null
            stop_waiters
            # A command filter (Redis 7.0, while an admitted reply is
            # pending) leaves in an event-loop iteration after the last reply.
            for _ in $(seq 1 600); do
                ratelimit_hooks | grep -q 'command_filter=0' && break
                sleep 0.1
            done
            ratelimit_hooks | grep -q 'command_filter=0' || { echo "bench_overhead: the filter stayed" >&2; exit 1; }
            ;;
    esac
}

# REQUESTS commands (KEY: the hot key; ITEM: key i of REQUESTS keys) in
# RESP, as clients send them, for `redis-cli --pipe`.
stream() {
    awk -v n="$REQUESTS" -v cmd="$1" 'BEGIN {
        for (i = 0; i < n; i++) {
            c = cmd; gsub(/KEY/, "ov:hot", c); gsub(/ITEM/, "ov:del:" i, c)
            k = split(c, w, " "); printf "*%d\r\n", k
            for (j = 1; j <= k; j++) printf "$%d\r\n%s\r\n", length(w[j]), w[j]
        } }'
}

# Counts command $1 on the server of $VG_PID: instructions per request.
count() {
    local name=$1 label=$2 cmd total own
    # No FLUSHDB: it would wake the waiters' line.
    cli DEL ov:hot >/dev/null
    case $name in GET | EXPIRE) cli SET ov:hot v >/dev/null ;; esac
    if [ "$name" = DEL ]; then
        cmd='DEL ITEM'
        stream 'SET ITEM v' | cli --pipe >/dev/null
    else
        cmd=$(words "$name")
    fi
    # Warm up (first key creation, dict growth), then count.
    stream "$cmd" | cli --pipe >/dev/null
    [ "$name" = DEL ] && stream 'SET ITEM v' | cli --pipe >/dev/null
    callgrind_zero "$VG_PID"
    stream "$cmd" | cli --pipe >/dev/null
    total=$(callgrind_dump "$VG_PID" "$OUT" "$label")
    # What the module can add runs in `call` (the command, its keyspace
    # events) and in the command filters; the command table lookup for
    # EXPIRE's propagation (in `call`) is left out: its hash chains, and so
    # its cost, change with the hash seed each server draws at start.
    own=$(callgrind_annotate --threshold=100 --inclusive=yes "$OUT/$label.out" 2>/dev/null |
        awk '/\?\?\?:(call|moduleCallCommandFilters) / {gsub(",", "", $1); s += $1}
             /\?\?\?:lookupCommandOrOriginal / {gsub(",", "", $1); s -= $1} END {print s + 0}')
    echo "$((own / REQUESTS)) $((total / REQUESTS))"
}

declare -A PER ALL
echo "machine: $(nproc) cores, load: $(uptime | sed 's/.*load average: //'), $(redis-server --version | awk '{print $1, $3}')"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo none), date: $(date -u '+%Y-%m-%d %H:%M UTC')"
for case_ in $CASES; do
    SERVER_PREFIX=(valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out.%p")
    args=()
    [ "$case_" = policies ] && args=(policies on)
    if [ "$case_" = without ]; then MODULE=none; else MODULE=$MODULE_SO; fi
    start_server "${args[@]}"
    VG_PID=$SERVER_PID
    prepare "$case_"
    [ "$MODULE" = none ] || echo "$case_: ratelimit_hooks:$(ratelimit_hooks)"
    for c in "${COMMANDS[@]}"; do
        read -r net all < <(count "$c" "$case_.${c// /_}")
        PER[$case_:$c]=$net
        ALL[$case_:$c]=$all
    done
    [ "$case_" = waiting ] && { [ "$(ratelimit_waiting)" = "$WAITERS" ] || { echo "bench_overhead: waiters left early" >&2; exit 1; }; }
    stop_waiters
    stop_server
done
echo "load after: $(uptime | sed 's/.*load average: //')"

read -ra cases <<<"$CASES"
header() {
    printf '\n%s\n\n| command |' "$1"
    for case_ in "${cases[@]}"; do printf ' %s |' "$case_"; done
    printf '\n|---|'
    for _ in "${cases[@]}"; do printf -- '---:|'; done
    printf '\n'
}
name_of() {
    if [ "$1" = DEL ]; then echo '`DEL k` (k exists)'; else echo "\`$(words "$1" | sed 's/KEY/k/')\`"; fi
}
header "Instructions per request: the first case's whole request, then what each case adds in the command's execution and the command filters (% of that whole request):"
for c in "${COMMANDS[@]}"; do
    base=${PER[${cases[0]}:$c]} whole=${ALL[${cases[0]}:$c]}
    line="| $(name_of "$c") | $whole |"
    for case_ in "${cases[@]:1}"; do
        line+=$(awk -v v="${PER[$case_:$c]}" -v b="$base" -v w="$whole" 'BEGIN { printf " %+d (%+.1f %%) |", v - b, (v - b) * 100 / w }')
    done
    echo "$line"
done
header "Every instruction per request (also networking, parsing, the allocator's housekeeping: these move with timing by a few %):"
for c in "${COMMANDS[@]}"; do
    line="| $(name_of "$c") |"
    for case_ in "${cases[@]}"; do line+=" ${ALL[$case_:$c]} |"; done
    echo "$line"
done

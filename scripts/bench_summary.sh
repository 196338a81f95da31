#!/usr/bin/env bash
# The one-screen summary at the top of docs/performance.md, from one run:
#
#   scripts/bench_summary.sh       # or: make bench-summary [REDIS_CELL=...]
#
# For SET, INCR, the usual Lua GCRA script, redis-cell's CL.THROTTLE and the
# module's RL.GCRA, RL.BUCKET, RL.SLIDING, RL.FIXED and CL.THROTTLE, and
# FLOOR.ADMIT (benches/floor/floor.c: the least a module command spends on
# an admission, built with CC; its row is skipped without a compiler):
# requests per second and p99 latency (redis-benchmark, the same clients and
# pipeline for every row, rounds interleaved, medians), each as a ratio to
# SET in the same round, on 100,000 random keys and on one hot key; bytes
# per key (used_memory growth over MEM_KEYS distinct keys); instructions per
# request counted by callgrind (which the machine's load does not change);
# and what a client waiting in `RL.GCRA … WAIT` costs beside one in BLPOP.
# Prints Markdown (progress goes to stderr), with the load average at the
# start and at the end. Takes about 3.5 minutes on 2 cores at load average 10.
#
# redis-cell (https://github.com/brandur/redis-cell) is not part of this
# repository: build it elsewhere (`cargo build --release` in its clone) and
# pass REDIS_CELL=/path/to/libredis_cell.so. It runs on a server of its own
# (its CL.THROTTLE clashes with the module's), the same redis-server binary
# with the same core pinning. A row whose module or command is missing is
# skipped, and the output says so.
#
# Knobs (environment): REDIS_CELL, ROUNDS (5), REQUESTS per measurement
# (60000), KEYSPACE (100000), CLIENTS (50), PIPELINE (16), MEM_KEYS
# (100000), CG_REQUESTS for callgrind (3000; 0 skips it), WAITERS (1000; 0
# skips them), MODULE, OUT (target/bench-summary).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ROUNDS=${ROUNDS:-5}
REQUESTS=${REQUESTS:-60000}
KEYSPACE=${KEYSPACE:-100000}
CLIENTS=${CLIENTS:-50}
PIPELINE=${PIPELINE:-16}
MEM_KEYS=${MEM_KEYS:-100000}
CG_REQUESTS=${CG_REQUESTS:-3000}
WAITERS=${WAITERS:-1000}
REDIS_CELL=${REDIS_CELL:-}
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
WAITERS_BENCH=${WAITERS_BENCH:-$PWD/target/release/examples/waiters_bench}
OUT=${OUT:-$PWD/target/bench-summary}

# The rows: label | server (rl: the module's, cell: redis-cell's) | command.
# KEY stands for the key, SHA_GCRA for scripts/lua/gcra.lua. Limits of 10
# an hour: random keys (about one request each) take the allow-and-write
# path, the hot key the deny path after its first 10 requests.
ROWS='
`SET k v PX 60000`                | rl   | SET KEY v PX 60000
`INCR k`                          | rl   | INCR KEY
Lua GCRA script (`EVALSHA`)       | rl   | EVALSHA SHA_GCRA 1 KEY 10 3600000
redis-cell `CL.THROTTLE k 9 10 3600` | cell | CL.THROTTLE KEY 9 10 3600
`RL.GCRA k 10 1h`                 | rl   | RL.GCRA KEY 10 1h
`RL.BUCKET k 10 10 1h`            | rl   | RL.BUCKET KEY 10 10 1h
`RL.SLIDING k 10 1h` (EXACT)      | rl   | RL.SLIDING KEY 10 1h
`RL.FIXED k 10 1h`                | rl   | RL.FIXED KEY 10 1h
module `CL.THROTTLE k 9 10 3600`  | rl   | CL.THROTTLE KEY 9 10 3600
`FLOOR.ADMIT k 10 1h` (the floor) | rl   | FLOOR.ADMIT KEY 10 1h
'
BASE='`SET k v PX 60000`'

say() { echo "bench-summary: $*" >&2; }
die() {
    say "$*"
    exit 1
}
load() { awk '{print $1, $2, $3}' /proc/loadavg; }

for tool in "$RL_SERVER" redis-cli redis-benchmark awk; do
    command -v "$tool" >/dev/null || die "$tool is not installed (make deps)"
done
[ -f "$MODULE" ] || die "$MODULE is missing: cargo build --release (or make bench-summary)"
mkdir -p "$OUT"
LOAD_START=$(load)
DATE_START=$(date -u '+%Y-%m-%d %H:%M')
SKIPPED=()

pin_cores
SERVER_PREFIX=("${SERVER_PIN[@]}")
# The floor (FLOOR.ADMIT) loads beside the module: what any module command
# costs at the least, on the same server.
FLOOR_ARGS=()
if FLOOR=$(build_floor "$OUT/floor" 2>"$OUT/floor.err"); then
    FLOOR_ARGS=(--loadmodule "$FLOOR")
fi
start_server "${FLOOR_ARGS[@]}"
PORT_RL=$PORT
PORT_CELL=
if [ -z "$REDIS_CELL" ]; then
    SKIPPED+=("redis-cell: REDIS_CELL is not set (build github.com/brandur/redis-cell with cargo build --release, pass REDIS_CELL=path/to/libredis_cell.so)")
elif [ ! -f "$REDIS_CELL" ]; then
    SKIPPED+=("redis-cell: $REDIS_CELL does not exist")
else
    MODULE=$REDIS_CELL start_server
    PORT_CELL=$PORT
fi
PORT=$PORT_RL
SHA_GCRA=$(cli SCRIPT LOAD "$(cat scripts/lua/gcra.lua)")

# cli_on SERVER ARGS...: redis-cli against the row's server.
cli_on() {
    local server=$1
    shift
    if [ "$server" = cell ]; then PORT=$PORT_CELL; else PORT=$PORT_RL; fi
    cli "$@"
}

# Expands a row's command for one key.
expand() {
    local t=${1//SHA_GCRA/$SHA_GCRA}
    printf '%s' "${t//KEY/$2}"
}

# The rows whose server runs and accepts the command: "label|server|command".
mapfile -t CASES < <(
    while IFS='|' read -r label server cmd; do
        label=$(echo "$label" | sed 's/^ *//; s/ *$//')
        server=$(echo "$server" | xargs)
        cmd=$(echo "$cmd" | xargs)
        [ -n "$label" ] || continue
        if [ "$server" = cell ] && [ -z "$PORT_CELL" ]; then continue; fi
        cli_on "$server" FLUSHALL >/dev/null
        # shellcheck disable=SC2046 # split the command into words
        reply=$(cli_on "$server" $(expand "$cmd" probe:key) 2>&1 | head -n 1)
        case $reply in
        ERR* | WRONGTYPE* | NOSCRIPT* | "(error)"*)
            say "skipping $label (the server replies: $reply)"
            echo "SKIP|$label|$reply"
            ;;
        *) echo "$label|$server|$cmd" ;;
        esac
    done <<<"$ROWS"
)
for i in "${!CASES[@]}"; do
    if [[ ${CASES[$i]} == SKIP\|* ]]; then
        IFS='|' read -r _ label reply <<<"${CASES[$i]}"
        SKIPPED+=("$label: the server replies $reply")
        unset 'CASES[i]'
    fi
done
CASES=("${CASES[@]}")

# Speed: every row on both keyspaces, round after round (interleaved; each
# round starts one row further on, so that no row always follows the same
# one), each measurement after a FLUSHALL. speed.tsv: round, scenario,
# label, rps, p99.
speed() {
    local round i line label server cmd scenario key range csv n=${#CASES[@]}
    : >"$OUT/speed.tsv"
    for round in $(seq 1 "$ROUNDS"); do
        for i in $(seq 0 $((n - 1))); do
            line=${CASES[$(((i + round - 1) % n))]}
            IFS='|' read -r label server cmd <<<"$line"
            for scenario in random hot; do
                if [ $scenario = hot ]; then key=bench:hot range=(); else key=bench:__rand_int__ range=(-r "$KEYSPACE"); fi
                cli_on "$server" FLUSHALL >/dev/null
                # shellcheck disable=SC2046 # split the command into words
                csv=$("${CLIENT_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "$PORT" -c "$CLIENTS" \
                    -P "$PIPELINE" -n "$REQUESTS" "${range[@]}" --csv $(expand "$cmd" "$key") | tail -n 1)
                # "test","rps","avg","min","p50","p95","p99","max"
                echo "$csv" | awk -F'"' -v r="$round" -v s="$scenario" -v l="$label" \
                    '{ printf "%s\t%s\t%s\t%s\t%s\n", r, s, l, $4, $14 }' >>"$OUT/speed.tsv"
                say "round $round $scenario $(echo "$csv" | awk -F'"' '{print $4}') req/s: $label"
            done
        done
    done
}

# Memory: MEM_KEYS distinct keys sent with redis-cli --pipe after a
# FLUSHALL; used_memory growth per key. memory.tsv: label, bytes per key.
used_memory() { cli_on "$1" INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}'; }
memory() {
    local line label server cmd before after keys piped
    : >"$OUT/memory.tsv"
    for line in "${CASES[@]}"; do
        IFS='|' read -r label server cmd <<<"$line"
        cli_on "$server" FLUSHALL >/dev/null
        sleep 0.2
        before=$(used_memory "$server")
        # One string per command: printf per word is slow in mawk.
        piped=$(awk -v n="$MEM_KEYS" -v cmd="$(expand "$cmd" KEY)" 'BEGIN {
            nw = split(cmd, w, " ")
            for (j = 1; j <= nw; j++) {
                k = index(w[j], "KEY")
                if (k) { pre[j] = substr(w[j], 1, k - 1); post[j] = substr(w[j], k + 3) }
                else fixed[j] = "$" length(w[j]) "\r\n" w[j] "\r\n"
            }
            ORS = ""
            for (i = 0; i < n; i++) {
                s = "*" nw "\r\n"
                for (j = 1; j <= nw; j++) {
                    if (j in fixed) s = s fixed[j]
                    else { x = pre[j] "mem:" i post[j]; s = s "$" length(x) "\r\n" x "\r\n" }
                }
                print s
            }
        }' | cli_on "$server" --pipe 2>&1 | tail -n 1)
        case $piped in
        *"errors: 0,"*) ;;
        *) die "memory: $label: $piped" ;;
        esac
        sleep 0.5 # let incremental rehashing finish
        after=$(used_memory "$server")
        keys=$(cli_on "$server" DBSIZE)
        printf '%s\t%s\n' "$label" "$(awk -v a="$after" -v b="$before" -v k="$keys" 'BEGIN {printf "%.1f", (a - b) / k}')" >>"$OUT/memory.tsv"
        say "memory $(tail -n 1 "$OUT/memory.tsv")"
    done
}

# Instructions per request: scripts/callgrind.sh on a server of each kind
# (its own, under valgrind). callgrind.tsv: label, random keys, hot key.
instructions() {
    : >"$OUT/callgrind.tsv"
    if [ "$CG_REQUESTS" = 0 ]; then
        SKIPPED+=("instructions per request: CG_REQUESTS=0")
        return
    fi
    if ! command -v valgrind >/dev/null; then
        SKIPPED+=("instructions per request: valgrind is not installed")
        return
    fi
    local kind line label server cmd templates module table args
    for kind in rl cell; do
        templates=()
        for line in "${CASES[@]}"; do
            IFS='|' read -r label server cmd <<<"$line"
            [ "$server" = "$kind" ] && templates+=("$cmd")
        done
        [ ${#templates[@]} -gt 0 ] || continue
        if [ "$kind" = cell ]; then module=$REDIS_CELL; else module=$MODULE; fi
        say "callgrind: ${#templates[@]} commands on the $kind server, $CG_REQUESTS requests each"
        args=""
        [ "$kind" = rl ] && args="${FLOOR_ARGS[*]}"
        table=$(MODULE=$module MODULE_ARGS=$args REQUESTS=$CG_REQUESTS OUT=$OUT/callgrind-$kind scripts/callgrind.sh "${templates[@]}")
        for line in "${CASES[@]}"; do
            IFS='|' read -r label server cmd <<<"$line"
            [ "$server" = "$kind" ] || continue
            echo "$table" | awk -F' *[|] *' -v t="$cmd" -v l="$label" '
                $2 == t && $3 == "random" { r = $4 } $2 == t && $3 == "hot" { h = $4 }
                END { printf "%s\t%s\t%s\n", l, r, h }' >>"$OUT/callgrind.tsv"
        done
    done
}

# Waiters: WAITERS clients, each blocked on its own key, in BLPOP and in
# RL.GCRA … WAIT, a fresh server each (examples/waiters_bench.rs).
waiters() {
    : >"$OUT/waiters.tsv"
    if [ "$WAITERS" = 0 ]; then
        SKIPPED+=("waiters: WAITERS=0")
        return
    fi
    if [ ! -x "$WAITERS_BENCH" ]; then
        SKIPPED+=("waiters: $WAITERS_BENCH is missing (cargo build --release --example waiters_bench)")
        return
    fi
    ulimit -n $((WAITERS + 1000)) 2>/dev/null || true
    local kind r
    for kind in blpop rl; do
        start_server --maxclients $((WAITERS + 1000))
        r=$("$WAITERS_BENCH" memory "127.0.0.1:$PORT" "$WAITERS" "$kind" keys)
        stop_server
        printf '%s\t%s\n' "$kind" "$(echo "$r" | tr '\n' ' ')" >>"$OUT/waiters.tsv"
        say "waiters $kind: $(echo "$r" | tr '\n' ' ')"
    done
}

speed
memory
instructions
waiters
LOAD_END=$(load)

# The report (Markdown).
{
    echo "Run of $DATE_START UTC, \`make bench-summary\` (\`scripts/bench_summary.sh\`), commit" \
        "$(git rev-parse --short HEAD 2>/dev/null || echo none)$(git diff --quiet HEAD -- src scripts Cargo.toml Cargo.lock 2>/dev/null || echo ' with changes')," \
        "load average $LOAD_START at the start and $LOAD_END at the end;" \
        "$(nproc) cores ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $("$RL_SERVER" --version | awk '{print $1, $3}' | sed 's/v=//')," \
        "server and client pinned to different cores: $([ ${#SERVER_PIN[@]} -gt 0 ] && echo yes || echo no)." \
        "\`redis-benchmark -c $CLIENTS -P $PIPELINE -n $REQUESTS\`, medians of $ROUNDS interleaved rounds;" \
        "p99 per pipelined batch; instructions by callgrind ($CG_REQUESTS requests after as many);" \
        "$SECONDS s in all."
    echo
    awk -F'\t' -v base="$BASE" -v keys="$(echo "$KEYSPACE" | sed ':a; s/\B[0-9]\{3\}\>/,&/; ta')" '
    function median(arr, n,    i, j, t) {
        for (i = 2; i <= n; i++) { t = arr[i]; for (j = i - 1; j >= 1 && arr[j] > t; j--) arr[j + 1] = arr[j]; arr[j + 1] = t }
        if (n == 0) return 0
        return (n % 2) ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
    }
    function stat(s, l, what,    r, k, x) {
        k = 0
        for (r = 1; r <= rounds; r++) {
            if (!((r, s, l) in rps)) continue
            if (what == "rps") x[++k] = rps[r, s, l]
            else if (what == "p99") x[++k] = p99[r, s, l]
            else if ((r, s, base) in rps) x[++k] = rps[r, s, l] / rps[r, s, base]
        }
        return median(x, k)
    }
    function ratio(a, b) { return (a && b) ? sprintf(" (%.2f)", a / b) : "" }
    FILENAME ~ /speed/ {
        if (!($3 in seen)) { seen[$3] = 1; order[++n] = $3 }
        rps[$1, $2, $3] = $4; p99[$1, $2, $3] = $5
        if ($1 > rounds) rounds = $1
        next
    }
    FILENAME ~ /memory/ { mem[$1] = $2; next }
    FILENAME ~ /callgrind/ { cgr[$1] = $2; cgh[$1] = $3; next }
    END {
        print "| command | req/s, " keys " keys | × SET | p99 ms | one hot key: req/s × SET | bytes per key (× SET) | instructions per request, keys / hot key (× SET, keys) |"
        print "|---|---:|---:|---:|---:|---:|---:|"
        for (i = 1; i <= n; i++) {
            l = order[i]
            cg = (l in cgr && cgr[l]) ? sprintf("%d / %d%s", cgr[l], cgh[l], ratio(cgr[l], cgr[base])) : "–"
            mm = (l in mem) ? sprintf("%.0f%s", mem[l], ratio(mem[l], mem[base])) : "–"
            printf "| %s | %.0f | %.2f | %.2f | %.2f | %s | %s |\n", l, stat("random", l, "rps"), \
                stat("random", l, "x"), stat("random", l, "p99"), stat("hot", l, "x"), mm, cg
        }
    }' "$OUT/speed.tsv" "$OUT/memory.tsv" "$OUT/callgrind.tsv"
    if [ -s "$OUT/waiters.tsv" ]; then
        echo
        awk -F'\t' -v n="$(echo "$WAITERS" | sed ':a; s/\B[0-9]\{3\}\>/,&/; ta')" '
        function field(s, k,    a, i, m, kv) { m = split(s, a, " "); for (i = 1; i <= m; i++) { split(a[i], kv, "="); if (kv[1] == k) return kv[2] } return 0 }
        { used[$1] = field($2, "used_memory_per_client"); block[$1] = field($2, "used_memory_per_block"); heap[$1] = field($2, "module_heap_per_client") }
        END {
            printf "| %s clients blocked, each on its own key | used_memory per client (the blocking alone) | module heap per waiter |\n", n
            print "|---|---:|---:|"
            printf "| `BLPOP k 0` | %d (%d) | – |\n", used["blpop"], block["blpop"]
            printf "| `RL.GCRA k 1 1h WAIT 100000h` | %d (%d) | %d |\n", used["rl"], block["rl"], heap["rl"]
        }' "$OUT/waiters.tsv"
    fi
    if [ ${#SKIPPED[@]} -gt 0 ]; then
        echo
        for s in "${SKIPPED[@]}"; do echo "- Skipped: $s"; done
    fi
} | tee "$OUT/summary.md"

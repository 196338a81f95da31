#!/usr/bin/env bash
# Throughput, latency and memory of every RL.* decision against Redis's own
# INCR and SET, redis-cell's CL.THROTTLE and the usual Lua scripts.
#
#   scripts/bench.sh               # speed (interleaved rounds) and memory
#   BENCH_ONLY=speed scripts/bench.sh
#   BENCH_ONLY=memory scripts/bench.sh
#   BENCH_ONLY=leases scripts/bench.sh  # acquire-then-release pairs and bytes per lease
#   BENCH_ONLY=report scripts/bench.sh  # the speed tables of the last run again
#
# Needs only redis-server, redis-cli, redis-benchmark (Redis 7.0+) and the
# release build (target/release/libredis_ratelimit.so). Starts its own
# server (start_server in scripts/lib.sh), pins server and client to
# different cores when there are two or more, and prints Markdown tables
# (also saved under target/bench/). Commands the loaded module does not
# have (or that reply an error) are skipped, so one script measures any
# build (MODULE).
#
# Knobs (environment): ROUNDS (5), REQUESTS per measurement (200000),
# KEYSPACE for the random-key runs (100000), MEM_KEYS (200000),
# CLIENTS (50), PIPELINE (16), MODULE (path to the .so), FILTER (a regex:
# only the commands whose label matches, besides the baselines).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ROUNDS=${ROUNDS:-5}
REQUESTS=${REQUESTS:-200000}
KEYSPACE=${KEYSPACE:-100000}
MEM_KEYS=${MEM_KEYS:-200000}
CLIENTS=${CLIENTS:-50}
PIPELINE=${PIPELINE:-16}
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
BENCH_ONLY=${BENCH_ONLY:-all}
FILTER=${FILTER:-.}
OUT=${OUT:-$PWD/target/bench}

# The commands, one per line: label | where (speed, memory, both) | command.
# KEY stands for the key; SHA_GCRA/SHA_BUCKET for the loaded Lua scripts;
# ";;" separates commands sent per key (memory only). Periods are long so
# that no key expires while it is measured; limits of 10 make one hot key
# the deny path and 100,000 random keys (about two requests each) the
# allow-and-write path. RL.SKETCH takes KEY as its item, in one sketch
# (speed only: a sketch per key would be 96 KiB each; its memory is in
# scripts/sketch_bench.sh). Adding a command or mode is one line.
CASES='
INCR               | speed  | INCR KEY
SET PX             | speed  | SET KEY v PX 60000
INCR+PEXPIRE       | memory | INCR KEY ;; PEXPIRE KEY 60000
SET int PX         | memory | SET KEY 1764460000000000 PX 60000
RL.GCRA            | both   | RL.GCRA KEY 10 1h
RL.BUCKET          | both   | RL.BUCKET KEY 10 10 1h
RL.SLIDING EXACT   | both   | RL.SLIDING KEY 10 1h EXACT
RL.SLIDING APPROX  | both   | RL.SLIDING KEY 10 1h APPROX
RL.SLIDING BUCKETS | both   | RL.SLIDING KEY 10 1h BUCKETS 10
RL.FIXED           | both   | RL.FIXED KEY 10 1h
RL.FIXED ALIGNED   | both   | RL.FIXED KEY 10 1h ALIGNED
RL.ALL GCRA+BUCKET | both   | RL.ALL 2 KEY:a KEY:b GCRA 10 1h BUCKET 10 10 1h
RL.SKETCH          | speed  | RL.SKETCH bench:sketch KEY 10 1h
CL.THROTTLE        | both   | CL.THROTTLE KEY 9 10 3600
Lua GCRA           | both   | EVALSHA SHA_GCRA 1 KEY 10 3600000
Lua token bucket   | both   | EVALSHA SHA_BUCKET 1 KEY 10 10 3600000
'

die() {
    echo "bench: $*" >&2
    exit 1
}

for tool in "$RL_SERVER" redis-cli redis-benchmark awk; do
    command -v "$tool" >/dev/null || die "$tool is not installed (make deps)"
done
[ -f "$MODULE" ] || die "$MODULE is missing: run 'cargo build --release' (or 'make bench')"
mkdir -p "$OUT"

# Server on core 0, clients on core 1, when there are two cores.
pin_cores

SERVER_PREFIX=("${SERVER_PIN[@]}")
start_server

SHA_GCRA=$(cli SCRIPT LOAD "$(cat scripts/lua/gcra.lua)")
SHA_BUCKET=$(cli SCRIPT LOAD "$(cat scripts/lua/token_bucket.lua)")

# Expands a template: KEY -> $2, script names -> their SHA1s.
expand() {
    local t=${1//SHA_GCRA/$SHA_GCRA}
    t=${t//SHA_BUCKET/$SHA_BUCKET}
    printf '%s' "${t//KEY/$2}"
}

# Keeps the cases of one kind whose every command the server accepts:
# prints "label|command" lines.
available_cases() {
    local kind=$1 label where cmd part reply
    while IFS='|' read -r label where cmd; do
        label=$(echo "$label" | xargs)
        where=$(echo "$where" | xargs)
        cmd=$(echo "$cmd" | xargs)
        [ -n "$label" ] || continue
        [ "$where" = both ] || [ "$where" = "$kind" ] || continue
        case $label in
        INCR* | SET*) ;; # the baselines always run
        *) [[ $label =~ $FILTER ]] || continue ;;
        esac
        local ok=1
        cli FLUSHALL >/dev/null
        while read -r part; do
            [ -n "$part" ] || continue
            # shellcheck disable=SC2046 # split the command into words
            reply=$(cli $(expand "$part" probe:key) 2>&1 | head -n 1)
            case $reply in
            ERR* | WRONGTYPE* | NOSCRIPT* | "(error)"*) ok=0 ;;
            esac
        done <<<"${cmd// ;; /$'\n'}"
        if [ $ok = 1 ]; then
            echo "$label|$cmd"
        else
            echo "bench: skipping $label (the server replies: $reply)" >&2
        fi
    done <<<"$CASES"
}

# awk: the median of arr[1..n] (sorts it in place).
AWK_LIB='
function median(arr, n,    i, j, t) {
    for (i = 2; i <= n; i++) { t = arr[i]; for (j = i - 1; j >= 1 && arr[j] > t; j--) arr[j + 1] = arr[j]; arr[j + 1] = t }
    if (n == 0) return "";
    return (n % 2) ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}'

speed() {
    local results=$OUT/speed.tsv
    : >"$results"
    mapfile -t cases < <(available_cases speed)
    echo "bench: speed: ${#cases[@]} commands x 2 keyspaces x $ROUNDS rounds, $REQUESTS requests each" >&2
    local round line label cmd scenario key range name stats csv rps p50 p99 usec
    for round in $(seq 1 "$ROUNDS"); do
        for line in "${cases[@]}"; do
            label=${line%%|*}
            cmd=${line#*|}
            name=$(echo "$cmd" | awk '{print tolower($1)}')
            for scenario in hot random; do
                if [ $scenario = hot ]; then
                    key=bench:hot
                    range=()
                else
                    key=bench:__rand_int__
                    range=(-r "$KEYSPACE")
                fi
                cli FLUSHALL >/dev/null
                cli CONFIG RESETSTAT >/dev/null
                # shellcheck disable=SC2046 # split the command into words
                csv=$("${CLIENT_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "$PORT" \
                    -c "$CLIENTS" -P "$PIPELINE" -n "$REQUESTS" "${range[@]}" --csv \
                    $(expand "$cmd" "$key") | tail -n 1)
                # "test","rps","avg","min","p50","p95","p99","max"
                rps=$(echo "$csv" | awk -F'"' '{print $4}')
                p50=$(echo "$csv" | awk -F'"' '{print $10}')
                p99=$(echo "$csv" | awk -F'"' '{print $14}')
                stats=$(cli INFO commandstats | tr -d '\r')
                usec=$(echo "$stats" | awk -F'usec_per_call=' -v n="cmdstat_$name:" \
                    'index($0, n) == 1 { split($2, a, ","); print a[1] }')
                printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
                    "$scenario" "$label" "$round" "$rps" "$p50" "$p99" "${usec:-0}" >>"$results"
                printf 'bench: round %s %-19s %-6s %10s req/s\n' "$round" "$label" "$scenario" "$rps" >&2
            done
        done
    done
    report_speed "$results" | tee "$OUT/speed.md"
}

# Medians over rounds; ratios are per round (same round, same keyspace)
# and then their median; spread is (max - min) / median of req/s.
report_speed() {
    awk -F'\t' "$AWK_LIB"'
    {
        s = $1; l = $2; r = $3
        if (!((s, l) in seen)) { seen[s, l] = 1; order[s, ++n[s]] = l }
        rps[s, l, r] = $4; p50[s, l, r] = $5; p99[s, l, r] = $6; us[s, l, r] = $7
        rounds[r] = 1
    }
    END {
        title["hot"] = "One hot key (deny path after the first requests)"
        title["random"] = "100,000 random keys (mostly the allow-and-write path)"
        for (si = 1; si <= 2; si++) {
            s = (si == 1) ? "hot" : "random"
            if (!n[s]) continue
            printf "\n#### %s\n\n", title[s]
            print "| command | req/s | × INCR | × SET PX | p50 ms | p99 ms | usec_per_call | usec × INCR | usec × SET PX | req/s spread |"
            print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            for (i = 1; i <= n[s]; i++) {
                l = order[s, i]; k = 0
                delete a; delete b; delete c; delete d; delete e; delete f; delete g; delete h
                lo = 1e18; hi = 0
                for (r in rounds) {
                    if (!((s, l, r) in rps)) continue
                    k++
                    a[k] = rps[s, l, r]; b[k] = p50[s, l, r]; c[k] = p99[s, l, r]; d[k] = us[s, l, r]
                    e[k] = rps[s, l, r] / rps[s, "INCR", r]; f[k] = rps[s, l, r] / rps[s, "SET PX", r]
                    g[k] = us[s, "INCR", r] ? us[s, l, r] / us[s, "INCR", r] : 0
                    h[k] = us[s, "SET PX", r] ? us[s, l, r] / us[s, "SET PX", r] : 0
                    if (a[k] < lo) lo = a[k]
                    if (a[k] > hi) hi = a[k]
                }
                m = median(a, k)
                med_rps[s, l] = m; med_x_incr[s, l] = median(e, k); med_x_set[s, l] = median(f, k)
                printf "| %s | %.0f | %.2f | %.2f | %.3f | %.3f | %.2f | %.2f | %.2f | %.0f%% |\n", \
                    l, m, med_x_incr[s, l], med_x_set[s, l], median(b, k), median(c, k), median(d, k), \
                    median(g, k), median(h, k), m ? 100 * (hi - lo) / m : 0
            }
        }
        print "\n#### Targets\n"
        target("random", "RL.GCRA", "SET PX", 0.9, med_x_set)
        target("random", "RL.BUCKET", "SET PX", 0.9, med_x_set)
        target("hot", "RL.GCRA", "INCR", 0.8, med_x_incr)
        for (si = 1; si <= 2; si++) {
            s = (si == 1) ? "hot" : "random"
            lua_target(s, "RL.GCRA", "Lua GCRA")
            lua_target(s, "RL.BUCKET", "Lua token bucket")
        }
    }
    function target(s, l, base, want, ratios,    got) {
        if (!((s, l) in ratios)) return
        got = ratios[s, l]
        printf "- %s, %s keys: %.2f × %s (target ≥ %.1f): %s\n", l, s, got, base, want, (got >= want ? "met" : "MISSED")
    }
    function lua_target(s, l, lua,    got, r, k, x) {
        if (!((s, l) in med_rps) || !((s, lua) in med_rps)) return
        k = 0
        for (r in rounds)
            if (((s, l, r) in rps) && ((s, lua, r) in rps)) x[++k] = rps[s, l, r] / rps[s, lua, r]
        got = median(x, k)
        printf "- %s, %s keys: %.2f × %s (target ≥ 3): %s\n", l, s, got, lua, (got >= 3 ? "met" : "MISSED")
    }
    ' "$1"
}

# Sends `count` commands per case line with distinct keys through
# redis-cli --pipe (RESP), after FLUSHALL; used_memory delta / keys.
memory() {
    local results=$OUT/memory.tsv
    : >"$results"
    mapfile -t cases < <(available_cases memory)
    echo "bench: memory: ${#cases[@]} commands x $MEM_KEYS keys" >&2
    local line label cmd before after keys piped
    for line in "${cases[@]}"; do
        label=${line%%|*}
        cmd=${line#*|}
        cli FLUSHALL >/dev/null
        sleep 0.2
        before=$(cli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}')
        piped=$(awk -v n="$MEM_KEYS" -v cmd="$(expand "$cmd" KEY)" '
            BEGIN {
                ncmd = split(cmd, parts, / ;; /)
                for (p = 1; p <= ncmd; p++) {
                    nw[p] = split(parts[p], word, " ")
                    for (j = 1; j <= nw[p]; j++) {
                        k = index(word[j], "KEY")
                        pre[p, j] = k ? substr(word[j], 1, k - 1) : word[j]
                        post[p, j] = k ? substr(word[j], k + 3) : ""
                        has[p, j] = k > 0
                    }
                }
                for (i = 0; i < n; i++) {
                    key = "mem:" i
                    for (p = 1; p <= ncmd; p++) {
                        printf "*%d\r\n", nw[p]
                        for (j = 1; j <= nw[p]; j++) {
                            x = has[p, j] ? pre[p, j] key post[p, j] : pre[p, j]
                            printf "$%d\r\n%s\r\n", length(x), x
                        }
                    }
                }
            }' | cli --pipe 2>&1 | tail -n 1)
        case $piped in
        *"errors: 0,"*) ;;
        *) die "memory: $label: $piped" ;;
        esac
        sleep 0.5 # let incremental rehashing finish
        after=$(cli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}')
        keys=$(cli DBSIZE)
        printf '%s\t%s\t%s\n' "$label" "$keys" "$((after - before))" >>"$results"
        printf 'bench: memory %-19s %s keys, %s bytes\n' "$label" "$keys" "$((after - before))" >&2
    done
    awk -F'\t' '
    { label[NR] = $1; keys[NR] = $2; per[NR] = $3 / $2; if ($1 == "SET int PX") base = $3 / $2 }
    END {
        printf "\n#### Memory: used_memory per key after %d distinct keys\n\n", keys[1]
        print "| command | keys | bytes per key | × SET int PX |"
        print "|---|---:|---:|---:|"
        for (i = 1; i <= NR; i++)
            printf "| %s | %d | %.1f | %.2f |\n", label[i], keys[i], per[i], base ? per[i] / base : 0
        print ""
        for (i = 1; i <= NR; i++) {
            want = 0
            if (label[i] == "RL.GCRA" || label[i] == "RL.BUCKET") want = 1.15
            if (label[i] == "RL.SLIDING APPROX" || label[i] ~ /^RL.FIXED/) want = 1.3
            if (want && base)
                printf "- %s: %.2f × SET int PX (target ≤ %.2f): %s\n", label[i], per[i] / base, want, \
                    (per[i] / base <= want ? "met" : "MISSED")
        }
    }' "$results" | tee "$OUT/memory.md"
}

# Leases: pairs need the lease id of each acquire, which redis-benchmark
# cannot pass on, so a small client (examples/lease_bench.rs) drives them:
# RL.ACQUIRE + RL.RELEASE against scripts/lua/lease_acquire.lua + ZREM, on
# one hot key and 100,000 keys, and used_memory per held lease.
leases() {
    local bin=$PWD/target/release/examples/lease_bench
    [ -x "$bin" ] || die "$bin is missing: run 'cargo build --release --example lease_bench' (or 'make bench')"
    cli FLUSHALL >/dev/null
    "${CLIENT_PIN[@]}" "$bin" "$PORT" "$ROUNDS" | tee "$OUT/leases.md"
}

{
    echo "Machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $("$RL_SERVER" --version | awk '{print $3}'); server pinned: ${SERVER_PIN[*]:-no}, client pinned: ${CLIENT_PIN[*]:-no}"
    echo "redis-benchmark -c $CLIENTS -P $PIPELINE -n $REQUESTS (random: -r $KEYSPACE), medians of $ROUNDS interleaved rounds"
} | tee "$OUT/machine.md"

case $BENCH_ONLY in
speed) speed ;;
memory) memory ;;
leases) leases ;;
report) report_speed "$OUT/speed.tsv" ;; # again, from the last speed run
all)
    speed
    memory
    leases
    ;;
*) die "BENCH_ONLY must be speed, memory, leases or all" ;;
esac

#!/usr/bin/env bash
# A call by name against the same literal call: throughput and the server's
# CPU per request, the two alternated on one server (pinned to core 0,
# redis-benchmark to core 1), FLUSHALL before each run.
#
#   scripts/bench_named.sh            # ROUNDS alternations of each case
#
# Knobs: ROUNDS (7), REQUESTS (1000000 per run), MODULE, ONLY (the cases
# whose name holds it). Prints, per case, the median requests per second
# and CPU microseconds per request of each side, the median of the
# back-to-back pairs' ratios (named / literal: what a run's load shifts
# least), and every pair's throughput ratio.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ROUNDS=${ROUNDS:-7}
REQUESTS=${REQUESTS:-1000000}
pin_cores
SERVER_PREFIX=("${SERVER_PIN[@]}")
start_server policies on
cli RL.POLICY SET big GCRA 1000000000 1s >/dev/null
cli RL.POLICY SET p GCRA 1 1h >/dev/null

# CPU seconds the server has used (user + system).
server_cpu() {
    cli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.6f", s}'
}

# run ARGS...: prints "requests-per-second cpu-us-per-request".
run() {
    local before after rps
    cli FLUSHALL >/dev/null
    before=$(server_cpu)
    rps=$("${CLIENT_PIN[@]}" redis-benchmark -h 127.0.0.1 -p "$PORT" -P 16 -c 50 -n "$REQUESTS" \
        --csv "$@" | tail -n 1 | cut -d, -f2 | tr -d '"')
    after=$(server_cpu)
    echo "$rps $(echo "($after - $before) * 1000000 / $REQUESTS" | bc -l)"
}

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

printf '| case | named rps | literal rps | named / literal | named CPU µs | literal CPU µs | named / literal | rps pairs |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---|\n'
while IFS='|' read -r name range named literal; do
    [[ -n "${ONLY:-}" && "$name" != *"$ONLY"* ]] && continue
    pairs= ; rr= ; cr=
    named_rps=() literal_rps=() named_cpu=() literal_cpu=() rps_ratios=() cpu_ratios=()
    for _ in $(seq 1 "$ROUNDS"); do
        # shellcheck disable=SC2086 # words of the commands
        read -r nr nc <<<"$(run $range $named)"
        # shellcheck disable=SC2086
        read -r lr lc <<<"$(run $range $literal)"
        named_rps+=("$nr") literal_rps+=("$lr") named_cpu+=("$nc") literal_cpu+=("$lc")
        rps_ratios+=("$(echo "$nr / $lr" | bc -l)")
        cpu_ratios+=("$(echo "$nc / $lc" | bc -l)")
        pairs+=$(printf '%.2f ' "${rps_ratios[-1]}")
    done
    nr=$(printf '%s\n' "${named_rps[@]}" | median)
    lr=$(printf '%s\n' "${literal_rps[@]}" | median)
    nc=$(printf '%s\n' "${named_cpu[@]}" | median)
    lc=$(printf '%s\n' "${literal_cpu[@]}" | median)
    rr=$(printf '%.3f' "$(printf '%s\n' "${rps_ratios[@]}" | median)")
    cr=$(printf '%.3f' "$(printf '%s\n' "${cpu_ratios[@]}" | median)")
    printf '| %s | %.0f | %.0f | %s | %.3f | %.3f | %s | %s|\n' "$name" "$nr" "$lr" "$rr" "$nc" "$lc" "$cr" "$pairs"
done <<'CASES'
one hot key, allowed||RL.CHECK k big|RL.GCRA k 1000000000 1s
100,000 random keys, allowed|-r 100000|RL.CHECK key:__rand_int__ big|RL.GCRA key:__rand_int__ 1000000000 1s
1,000 random keys, all denied|-r 1000|RL.CHECK key:__rand_int__ p|RL.GCRA key:__rand_int__ 1 1h
CASES

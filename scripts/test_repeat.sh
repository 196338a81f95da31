#!/usr/bin/env bash
# Runs the whole test suite N times and tallies the failures: how many runs
# failed, and each failed test (binary and name) with how often it failed.
# A test that fails now and then depends on timing or load: a test bug.
#
#   scripts/test_repeat.sh [N]                    (default 10)
#   RL_SERVER=valkey-server scripts/test_repeat.sh 5
#
# Each run's full output is kept in target/test-repeat/<server>/run-<i>.log.
# Run i draws its property-test cases from seed SEED+i (SEED defaults to the
# time), printed beside its result: `PROPTEST_RNG_SEED=<seed> cargo test`
# repeats a run's cases.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=${1:-10}
server=${RL_SERVER:-redis-server}
first_seed=${SEED:-$(date +%s)}
logs=target/test-repeat/$(basename "$server")
mkdir -p "$logs"
rm -f "$logs"/run-*.log

# Build once, so that every run only runs.
cargo test --workspace --no-run --quiet || exit 1

# The failures of one run's log, one per line: "<binary> <test>", or
# "<binary> (the binary failed)" where it failed without naming a test
# (a crash, an abort, a failed build).
failures_of() {
    awk '
        /^ *Running / { binary = $2; next }
        /^ *Doc-tests / { binary = "doc-tests:" $2; next }
        /^test .* \.\.\. FAILED$/ {
            name = $0; sub(/^test /, "", name); sub(/ \.\.\. FAILED$/, "", name)
            print binary, name; named[binary] = 1; next
        }
        /^error: test failed, to rerun pass / { failed[binary] = 1 }
        END { for (b in failed) if (!(b in named)) print b, "(the binary failed)" }
    ' "$1"
}

# A failing property test saves its case under proptest-regressions/, and
# every later run would replay it first: each run starts from the saved
# cases as they were, and what a run saved is kept beside its log.
saved_cases=$(mktemp)
tar -cf "$saved_cases" proptest-regressions 2>/dev/null || tar -cf "$saved_cases" -T /dev/null

failed_runs=0
all_failures=$(mktemp)
trap 'rm -f "$all_failures" "$saved_cases"' EXIT
for i in $(seq 1 "$runs"); do
    log="$logs/run-$i.log"
    start=$(date +%s)
    seed=$((first_seed + i))
    PROPTEST_RNG_SEED=$seed cargo test --workspace --no-fail-fast >"$log" 2>&1
    status=$?
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    if [ -d proptest-regressions ]; then
        rm -rf "$logs/run-$i-cases"
        cp -r proptest-regressions "$logs/run-$i-cases"
        rm -rf proptest-regressions
    fi
    tar -xf "$saved_cases"
    failures=$(failures_of "$log")
    if [ "$status" -ne 0 ]; then
        failed_runs=$((failed_runs + 1))
        [ -n "$failures" ] || failures="(the run failed: see $log)"
        printf '%s\n' "$failures" >>"$all_failures"
    fi
    printf 'run %d/%d (%s, seed %d): %s in %ds, load average %s\n' "$i" "$runs" "$server" "$seed" \
        "$([ "$status" -eq 0 ] && echo passed || echo FAILED)" "$(($(date +%s) - start))" "$load"
    [ -z "$failures" ] || printf '%s\n' "$failures" | sed 's/^/    /'
done

echo
echo "$failed_runs of $runs runs failed ($server)"
if [ -s "$all_failures" ]; then
    echo "failed tests (times failed, binary, test):"
    sort "$all_failures" | uniq -c | sort -rn
fi
[ "$failed_runs" -eq 0 ]

#!/usr/bin/env bash
# Bounded coverage-guided fuzzing (cargo fuzz / libFuzzer) of the argument
# parsers, the state decoders (state; sketch: RL.SKETCH's) and the core:
# each target in fuzz/ runs for FUZZ_SECONDS (default 60). Exits non-zero
# on the first crash; the input is kept in fuzz/artifacts/<target>/ and the
# command that replays it is printed.
# Usage: scripts/fuzz.sh [target ...]   (default: all targets)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-60}

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz from crates.io"
    cargo install cargo-fuzz --locked
fi

# libFuzzer's coverage instrumentation needs -Z flags; this machine has only
# the stable toolchain, which accepts them with RUSTC_BOOTSTRAP. No
# sanitizer: the fuzzed code is safe Rust; overflow checks stay on (-a).
export RUSTC_BOOTSTRAP=1
flags=(--sanitizer none --debug-assertions)

cd fuzz
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list)
fi

cargo fuzz build "${flags[@]}"
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "seeds/$t"
    echo "fuzz: $t for ${seconds}s"
    # corpus/<t> grows across runs (not committed); seeds/<t> is read only.
    log="artifacts/$t.log"
    mkdir -p artifacts
    status=0
    cargo fuzz run "${flags[@]}" "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1 || status=$?
    grep -E '^stat::(number_of_executed_units|new_units_added)' "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -n 40 "$log"
        echo "fuzz: $t FAILED (input in fuzz/artifacts/$t/, log in fuzz/$log)"
        exit 1
    fi
done
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, no crash"

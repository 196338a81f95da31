#!/usr/bin/env bash
# What waiting promises, measured (release builds):
#
#   scripts/bench_fair.sh
#
# 1. told ÷ truth: the retry_after_ms a request without WAIT is told behind
#    a line that shrinks (half its waiters leave mid-line), against the
#    first instant the same request is really admitted, 500 trials per
#    algorithm and for RL.ALL and RL.SHARE paths, in the queue itself with
#    time passed in
#    (src/engine/queue/line_tests.rs, bench_told_over_truth).
# 2. closed-loop shares, manual clock: real servers, clients re-sending as
#    soon as answered (tests/fair_wait.rs, printed with each shape).
# 3. closed-loop shares, real clock: RL.GCRA k 100 1s, 15 s per shape
#    (tests/fair_wait.rs, real_clock_closed_loop_shares).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== told / truth behind lines that shrink"
cargo test --release --quiet --lib bench_told_over_truth -- --ignored --nocapture 2>&1 \
    | grep -E '^(algorithm|GCRA|BUCKET|FIXED|SLIDING|RL\.)'
echo "== closed-loop shares, manual clock (flows, then admissions by flow)"
cargo test --release --quiet --test fair_wait -- one_client five_backlogged --nocapture --test-threads 1 2>&1 \
    | grep -E '^closed loops'
echo "== closed-loop shares, real clock"
cargo test --release --quiet --test fair_wait real_clock -- --ignored --nocapture 2>&1 \
    | grep -E '^(real clock|  )'

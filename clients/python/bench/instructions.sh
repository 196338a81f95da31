#!/usr/bin/env bash
# Client instructions per call of RateLimiter.decide beside execute_command
# (callgrind; the difference of 4,000 and 2,000 calls, so start-up cancels).
#   clients/python/bench/instructions.sh
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="$(mktemp -d)"
trap 'kill "$(cat "$work/redis.pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$work"' EXIT
port="$("$here/.venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
redis-server --port "$port" --save '' --daemonize yes --pidfile "$work/redis.pid" --dir "$work" \
    --loadmodule "${RL_MODULE:-$repo/target/debug/libredis_ratelimit.so}" >/dev/null
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
count() {  # kind calls protocol -> instructions
    cd "$here" && valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
        .venv/bin/python -m bench.instructions "$1" "$2" "$port" "$3" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for protocol in 2 3; do
    for kind in raw typed; do
        low=$(count "$kind" 2000 "$protocol")
        high=$(count "$kind" 4000 "$protocol")
        echo "RESP$protocol $kind: $(( (high - low) / 2000 )) instructions per call"
    done
done

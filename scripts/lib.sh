# shellcheck shell=bash disable=SC2034 # the variables set here are read by the scripts
# Shared by the measurement scripts (sourced, not run): core pinning, a free
# port, and start_server, the one way they start a server with the module.

# Sets SERVER_PIN and CLIENT_PIN: the server on core 0 and the clients on
# core 1 when there are two cores (and taskset), so that they do not take
# turns on one; empty (no pinning) otherwise. Use as "${SERVER_PIN[@]}" cmd.
pin_cores() {
    SERVER_PIN=()
    CLIENT_PIN=()
    if [ "$(nproc 2>/dev/null || echo 1)" -ge 2 ] && command -v taskset >/dev/null; then
        SERVER_PIN=(taskset -c 0)
        CLIENT_PIN=(taskset -c 1)
    fi
}

# Prints a loopback port below 32768 that nothing listens on; fails if none
# is found in 50 tries.
free_port() {
    local candidate
    for _ in $(seq 1 50); do
        candidate=$((20000 + RANDOM % 12000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

# build_floor DIR: builds benches/floor/floor.c (FLOOR.ADMIT, the least a
# module command can spend on an admission) with the C compiler (CC) against
# the redismodule.h the redis-module crate ships, into DIR/floor.so, and
# prints that path; fails, saying why, without a compiler or the header.
build_floor() {
    local header
    header=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -path '*redis-module-*/src/include/redismodule.h' 2>/dev/null | sort | tail -n 1)
    [ -n "$header" ] || { echo "redismodule.h not found (cargo fetch)" >&2; return 1; }
    command -v "${CC:-cc}" >/dev/null || { echo "no C compiler (${CC:-cc})" >&2; return 1; }
    mkdir -p "$1"
    "${CC:-cc}" -O2 -fPIC -shared -I "$(dirname "$header")" -o "$1/floor.so" benches/floor/floor.c || return 1
    echo "$1/floor.so"
}

# The server the scripts start: redis-server, or another one such as
# valkey-server (RL_SERVER=valkey-server, as for the tests).
RL_SERVER=${RL_SERVER:-redis-server}
# A command start_server runs the server under (core pinning, valgrind).
SERVER_PREFIX=()
SERVER_PIDS=()
SERVER_WORKDIR=

# start_server [MODULE_ARG ...] [--option value ...]
# Starts $RL_SERVER on a free loopback port with the module $MODULE (default:
# the release build; MODULE=none: no module) loaded with the given arguments
# (module arguments first, then any server options), no persistence, its
# files in a fresh
# directory; waits up to 60 s for its PONG. Sets PORT and SERVER_PID. Every
# server started is killed when the script exits.
# shellcheck disable=SC2120 # the arguments are optional
start_server() {
    local module=${MODULE:-$PWD/target/release/libredis_ratelimit.so} dir load=()
    [ "$module" = none ] || load=(--loadmodule "$module")
    if [ -z "$SERVER_WORKDIR" ]; then
        SERVER_WORKDIR=$(mktemp -d)
        trap stop_all_servers EXIT
    fi
    PORT=$(free_port) || { echo "no free loopback port found" >&2; exit 1; }
    dir=$SERVER_WORKDIR/$PORT
    mkdir -p "$dir"
    "${SERVER_PREFIX[@]}" "$RL_SERVER" --bind 127.0.0.1 --port "$PORT" --save '' \
        --appendonly no --dir "$dir" "${load[@]}" "$@" >"$dir/server.log" 2>&1 &
    SERVER_PID=$!
    SERVER_PIDS+=("$SERVER_PID")
    for _ in $(seq 1 600); do
        [ "$(redis-cli -h 127.0.0.1 -p "$PORT" PING 2>/dev/null)" = PONG ] && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$dir/server.log" >&2
    echo "$RL_SERVER did not answer on port $PORT" >&2
    exit 1
}

# Kills the server start_server started last (SIGKILL: a stalled server
# does not get to its SIGTERM handler; nothing is persisted).
stop_server() {
    if [ -n "${SERVER_PID:-}" ]; then
        kill -KILL "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=
    fi
}

stop_all_servers() {
    local pid
    for pid in "${SERVER_PIDS[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ -n "$SERVER_WORKDIR" ]; then rm -rf "$SERVER_WORKDIR"; fi
}

# redis-cli against the server start_server started last.
cli() { redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }

# callgrind_zero VG_PID: zeroes the counts of the server running under
# callgrind (SERVER_PREFIX=(valgrind --tool=callgrind
# --callgrind-out-file=DIR/callgrind.out.%p)).
callgrind_zero() { callgrind_control -z "$1" >/dev/null 2>&1; }

# callgrind_dump VG_PID DIR NAME: dumps the counts since the last zero to
# DIR/NAME.out (waiting up to 60 s for the asynchronous dump) and prints the
# instructions counted.
callgrind_dump() {
    local pid=$1 dir=$2 name=$3 dump=
    # The hint is prefixed: callgrind_control takes one that starts with a
    # digit for a process.
    callgrind_control -d "dump:$name" "$pid" >/dev/null 2>&1
    # The dump is written asynchronously (slowly on a loaded machine).
    for _ in $(seq 1 600); do
        dump=$(find "$dir" -maxdepth 1 -name 'callgrind.out.*.*' | head -n 1)
        [ -n "$dump" ] && callgrind_annotate "$dump" >/dev/null 2>&1 && break
        dump=
        sleep 0.1
    done
    [ -n "$dump" ] || { echo "callgrind: no dump for $name" >&2; return 1; }
    mv "$dump" "$dir/$name.out"
    callgrind_annotate --threshold=100 "$dir/$name.out" 2>/dev/null |
        awk '/PROGRAM TOTALS/ && !d {gsub(",", "", $1); print $1; d = 1}'
}

#!/usr/bin/env bash
# Runs the `limits` package's own strategy and storage tests (from its sdist,
# at the installed version) against this package's storage, with every other
# storage removed from their parametrisation, then the same tests against
# `limits`' own Redis storage on the same server. Needs the venv of
# `make test-python`; installs the suite's own test plugins into it.
#
# Prints the counts for both storages (`make limits-suite` in the repository).
#
#   clients/python/bench/limits_suite.sh
#   RL_SERVER_ARGS="--ratelimit.max-log-entries 1000000" clients/python/bench/limits_suite.sh -k huge_cost
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
repo="$(cd "$here/../.." && pwd)"
py="$here/.venv/bin/python"
version="$("$py" -c 'import limits; print(limits.__version__)')"
work="$(mktemp -d)"
trap 'kill "$(cat "$work/redis.pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$work"' EXIT
"$py" -m pip install -q --disable-pip-version-check pytest-lazy-fixtures flaky hiro pytest-mock
"$py" -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps "limits==$version" -d "$work"
port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
redis-server --port "$port" --save '' --daemonize yes --pidfile "$work/redis.pid" --dir "$work" \
    --loadmodule "${RL_MODULE:-$repo/target/debug/libredis_ratelimit.so}" ${RL_SERVER_ARGS:-} >/dev/null
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done

# One copy of the suite per storage: `redis+ratelimit://` (this package) and
# `redis://` (limits' own Redis storage), on the same server (their keys'
# prefixes differ, and each test empties the database).
prepare() { # dir, sync URI, async URI, sync class, async class, id, async options
    local dir="$1"
    mkdir -p "$dir"
    tar xzf "$work/limits-$version.tar.gz" -C "$dir"
    local src="$dir/limits-$version"
    # Their conftest starts docker services: keep only the plain Redis client,
    # pointed at the server above.
    cat > "$src/tests/conftest.py" <<PY
import pytest, redis
import redis_ratelimit.limits_storage  # registers redis+ratelimit://

@pytest.fixture(scope="session")
def redis_basic_client():
    return redis.StrictRedis("localhost", $port)

@pytest.fixture
def redis_basic(redis_basic_client):
    redis_basic_client.flushall()
    return redis_basic_client
PY
    # Every parametrisation over storages becomes this storage alone.
    cat >> "$src/tests/utils.py" <<PY

OURS = pytest.param("$2", {}, lf("redis_basic"), id="$6")
OURS_ASYNC = pytest.param("$3", $7, lf("redis_basic"), id="async_$6")
all_storage = moving_window_storage = sliding_window_counter_storage = pytest.mark.parametrize("uri, args, fixture", [OURS])
async_all_storage = async_moving_window_storage = async_sliding_window_counter_storage = pytest.mark.parametrize("uri, args, fixture", [OURS_ASYNC])
PY
    # The storage tests name their storages themselves: the plain Redis one
    # becomes this storage, and only it runs.
    "$py" - "$src" "$2" "$3" "$4" "$5" "$6" "$7" <<'PY'
import sys
src, sync_uri, async_uri, sync_cls, async_cls, ident, async_options = sys.argv[1:]
for path, scheme, uri, cls, options in [
    ("tests/test_storage.py", "redis", sync_uri, sync_cls, "{}"),
    ("tests/aio/test_storage.py", "async+redis", async_uri, async_cls, async_options),
]:
    with open(f"{src}/{path}") as f:
        text = f.read()
    old = f'"{scheme}://localhost:7379",\n            {{}},\n            RedisStorage,'
    new = f'"{uri}",\n            {options},\n            {cls},'
    assert old in text, path
    text = text.replace(old, new).replace('id="redis",', f'id="{ident}",')
    text = text.replace(
        "from __future__ import annotations\n",
        "from __future__ import annotations\n"
        "from redis_ratelimit.limits_storage import AsyncRateLimitStorage, RateLimitStorage\n"
        "from limits.storage import RedisStorage\n"
        "from limits.aio.storage import RedisStorage as AsyncRedisStorage\n",
    )
    with open(f"{src}/{path}", "w") as f:
        f.write(text)
PY
}
run() { # dir, id, pytest arguments...
    local dir="$1" ident="$2"
    shift 2
    (cd "$dir/limits-$version" && "$py" -m pytest -p no:cacheprovider -o addopts="" -o filterwarnings="" \
        -m "not benchmark" -q -rfE -k "not TestConcreteStorages or $ident" \
        tests/test_strategy.py tests/aio/test_strategy.py tests/test_storage.py tests/aio/test_storage.py "$@") \
        | tee "$dir/out.txt" || true
}
prepare "$work/ours" "redis+ratelimit://localhost:$port" "async+redis+ratelimit://localhost:$port" \
    RateLimitStorage AsyncRateLimitStorage redis_ratelimit '{}'
# limits' asyncio Redis storage over redis-py (its default, coredis, is not installed).
prepare "$work/stock" "redis://localhost:$port" "async+redis://localhost:$port" \
    RedisStorage AsyncRedisStorage redis_stock '{"implementation": "redispy"}'
run "$work/ours" redis_ratelimit "$@"
if [ -z "${RL_ONLY_OURS:-}" ]; then run "$work/stock" redis_stock "$@"; fi
echo
echo "limits $version, its own strategy and storage tests:"
echo "  redis+ratelimit:// (this package): $(tail -n 1 "$work/ours/out.txt")"
if [ -z "${RL_ONLY_OURS:-}" ]; then
    echo "  redis:// (limits' Redis storage): $(tail -n 1 "$work/stock/out.txt")"
fi

#!/usr/bin/env bash
# Runs the `limits` package's own strategy and storage tests (from its sdist,
# at the installed version) against this package's storage, with every other
# storage removed from their parametrisation. Needs the venv of
# `make test-python`; installs the suite's own test plugins into it.
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
tar xzf "$work/limits-$version.tar.gz" -C "$work"
src="$work/limits-$version"
port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
redis-server --port "$port" --save '' --daemonize yes --pidfile "$work/redis.pid" --dir "$work" \
    --loadmodule "${RL_MODULE:-$repo/target/debug/libredis_ratelimit.so}" ${RL_SERVER_ARGS:-} >/dev/null
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done

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

OURS = pytest.param("redis+ratelimit://localhost:$port", {}, lf("redis_basic"), id="redis_ratelimit")
OURS_ASYNC = pytest.param("async+redis+ratelimit://localhost:$port", {}, lf("redis_basic"), id="async_redis_ratelimit")
all_storage = moving_window_storage = sliding_window_counter_storage = pytest.mark.parametrize("uri, args, fixture", [OURS])
async_all_storage = async_moving_window_storage = async_sliding_window_counter_storage = pytest.mark.parametrize("uri, args, fixture", [OURS_ASYNC])
PY
# The storage tests name their storages themselves: the plain Redis one
# becomes this storage, and only it runs.
"$py" - "$src" "$port" <<'PY'
import sys
src, port = sys.argv[1], sys.argv[2]
for path, scheme, cls in [
    ("tests/test_storage.py", "redis", "RateLimitStorage"),
    ("tests/aio/test_storage.py", "async+redis", "AsyncRateLimitStorage"),
]:
    with open(f"{src}/{path}") as f:
        text = f.read()
    old = f'"{scheme}://localhost:7379",\n            {{}},\n            RedisStorage,'
    new = f'"{scheme}+ratelimit://localhost:{port}",\n            {{}},\n            {cls},'
    assert old in text, path
    text = text.replace(old, new).replace('id="redis",', 'id="redis_ratelimit",')
    text = text.replace(
        "from __future__ import annotations\n",
        "from __future__ import annotations\n"
        "from redis_ratelimit.limits_storage import AsyncRateLimitStorage, RateLimitStorage\n",
    )
    with open(f"{src}/{path}", "w") as f:
        f.write(text)
PY
cd "$src"
"$py" -m pytest -p no:cacheprovider -o addopts="" -o filterwarnings="" -m "not benchmark" -q -rfE \
    -k "not TestConcreteStorages or redis_ratelimit" \
    tests/test_strategy.py tests/aio/test_strategy.py tests/test_storage.py tests/aio/test_storage.py "$@"

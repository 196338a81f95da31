#!/usr/bin/env bash
# `make test-dist`: the release tarball as a user gets it. Checks its sums,
# the glibc it needs against the one it was built for, then loads the
# extracted module into a plain redis-server (no repository paths) and makes
# one decision. Ends with a plain "N passed, N failed" line.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
tarball="dist/redis-ratelimit-$version-linux-$(uname -m).tar.gz"
glibc=${GLIBC:-2.17}
server=${RL_SERVER:-redis-server}
passed=0
failed=0
check() { # name, then the command that must succeed
    local what=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
        echo "ok: $what"
    else
        failed=$((failed + 1))
        echo "FAILED: $what"
    fi
}

work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

check "the tarball's sum" bash -c "cd dist && sha256sum --quiet -c '$(basename "$tarball").sha256'"
tar -C "$work" -xzf "$tarball"
dir="$work/redis-ratelimit-$version-linux-$(uname -m)"
check "the files' sums" bash -c "cd '$dir' && sha256sum --quiet -c SHA256SUMS"
for f in libredis_ratelimit.so README.md LICENSE CHANGELOG.md ratelimit.conf; do
    check "$f is in the tarball" test -f "$dir/$f"
done
needs=$(objdump -T "$dir/libredis_ratelimit.so" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)
newest=$(printf '%s\n%s\n' "$needs" "$glibc" | sort -V | tail -n 1)
check "the module needs glibc $needs, at most $glibc" test "$newest" = "$glibc"

"$server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
    --dir "$work" --logfile "$work/server.log" \
    --loadmodule "$dir/libredis_ratelimit.so" >/dev/null
for _ in $(seq 1 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
done
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}
patch=${rest#*.}
number=$((major * 10000 + minor * 100 + patch))
check "MODULE LIST names ratelimit $version ($number)" \
    bash -c "redis-cli -p $port MODULE LIST | tr '\n' ' ' | grep -q 'name ratelimit ver $number '"
check "RL.GCRA decides" \
    bash -c "test \"\$(redis-cli -p $port RL.GCRA rl:key:alice 100 1m | head -n 3 | tr '\n' ' ')\" = '1 100 99 '"
echo "dist: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

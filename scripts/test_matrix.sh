#!/usr/bin/env bash
# The integration suite against each server of SERVERS (paths to
# redis-server or valkey-server binaries, or directories searched for them),
# then one table: server, version, tests passed and failed.
#
# Servers are built from source once, outside the repository, e.g.:
#   mkdir -p ~/srcs && cd ~/srcs
#   curl -LO https://download.redis.io/releases/redis-7.4.1.tar.gz
#   tar xzf redis-7.4.1.tar.gz && make -C redis-7.4.1 -j"$(nproc)"
#   (Valkey: https://github.com/valkey-io/valkey/archive/refs/tags/8.0.1.tar.gz)
#   make test-matrix SERVERS="$HOME/srcs"
# Each server runs the whole suite once (the module is built once).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${SERVERS:-}" ]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    echo "SERVERS is empty: give server binaries or directories holding them." >&2
    exit 2
fi

binaries=()
for s in $SERVERS; do
    if [ -d "$s" ]; then
        while IFS= read -r b; do binaries+=("$b"); done < <(
            find "$s" -type f \( -name redis-server -o -name valkey-server \) -perm -u+x | sort)
    elif [ -x "$s" ] || command -v "$s" >/dev/null; then
        binaries+=("$s")
    else
        echo "not a server binary or directory: $s" >&2
        exit 2
    fi
done
[ "${#binaries[@]}" -gt 0 ] || { echo "no redis-server or valkey-server under: $SERVERS" >&2; exit 2; }

# The integration tests (every package's tests/), built once; each server
# then runs the same binaries.
suite=(cargo test --workspace --test '*' --no-fail-fast)
"${suite[@]}" --no-run --quiet

out=${MATRIX_DIR:-target/test-matrix}
mkdir -p "$out"
rows=()
status=0
for b in "${binaries[@]}"; do
    version=$("$b" --version | grep -oE 'v=[^ ]+' | cut -d= -f2)
    kind=$(basename "$b" | cut -d- -f1)
    log="$out/$kind-$version.log"
    echo "== $kind $version ($b): log in $log"
    if RL_SERVER="$b" "${suite[@]}" >"$log" 2>&1; then :; else status=1; fi
    results=$(grep -E '^test result: ' "$log" || true)
    passed=$(grep -oE '[0-9]+ passed' <<<"$results" | awk '{s+=$1} END {print s+0}')
    failed=$(grep -oE '[0-9]+ failed' <<<"$results" | awk '{s+=$1} END {print s+0}')
    failing=$( (grep -E '^test .* \.\.\. FAILED$' "$log" || true) | sed -E 's/^test (.*) \.\.\. FAILED$/\1/' | tr '\n' ' ')
    rows+=("| $kind $version | $passed | $failed | ${failing:-} |")
done

echo
echo "| server | passed | failed | failing tests |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}" | tee "$out/table.md"
exit $status

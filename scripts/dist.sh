#!/usr/bin/env bash
# `make dist`: the release tarball, dist/redis-ratelimit-VERSION-linux-ARCH.tar.gz,
# and its SHA-256 sum beside it. Inside: the module, README.md, LICENSE,
# CHANGELOG.md, ratelimit.conf (the lines for redis.conf) and SHA256SUMS.
#
# The module is linked against glibc GLIBC (default 2.17, the oldest Rust
# supports) with cargo-zigbuild, so that it loads on every distribution
# since then, whatever glibc the build machine has. cargo-zigbuild comes
# from crates.io and zig from PyPI (the ziglang package), installed on first
# use into target/dist-tools. NATIVE=1 builds with the machine's own glibc.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
arch=$(uname -m)
glibc=${GLIBC:-2.17}
name="redis-ratelimit-$version-linux-$arch"
tools="$PWD/target/dist-tools"

if [ "${NATIVE:-0}" = 1 ]; then
    cargo build --release --lib
    module=target/release/libredis_ratelimit.so
else
    if ! command -v cargo-zigbuild >/dev/null && [ ! -x "$tools/bin/cargo-zigbuild" ]; then
        cargo install --locked --quiet --root "$tools" cargo-zigbuild
    fi
    if [ ! -x "$tools/venv/bin/python3" ]; then
        python3 -m venv "$tools/venv"
        "$tools/venv/bin/pip" install --quiet ziglang
    fi
    # cargo-zigbuild runs zig as `python3 -m ziglang`, the venv's python3 first.
    # bindgen reads the module API's header with the machine's C headers
    # (types only; the symbols the module links against are zig's glibc).
    # This name, with dashes, comes before the one cargo-zigbuild sets.
    triple="$arch-unknown-linux-gnu"
    builtin=$(ls -d /usr/lib/llvm-*/lib/clang/*/include | sort -V | tail -n 1)
    PATH="$tools/bin:$tools/venv/bin:$PATH" \
        env "BINDGEN_EXTRA_CLANG_ARGS_$triple=-isystem $builtin -isystem /usr/include/$arch-linux-gnu -isystem /usr/include" \
        cargo zigbuild --release --lib --target "$triple.$glibc"
    module="target/$arch-unknown-linux-gnu/release/libredis_ratelimit.so"
fi

# The newest glibc symbol version the module needs: the oldest glibc it loads on.
needs=$(objdump -T "$module" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/$name"
install -m 0755 "$module" "$stage/$name/libredis_ratelimit.so"
install -m 0644 README.md LICENSE CHANGELOG.md "$stage/$name/"
cat >"$stage/$name/ratelimit.conf" <<CONF
# redis-ratelimit $version: add to redis.conf (the path where you put the module).
loadmodule /usr/local/lib/redis/modules/libredis_ratelimit.so
# Named policies (RL.POLICY, RL.CHECK): load it with
#   loadmodule /usr/local/lib/redis/modules/libredis_ratelimit.so policies on
# Bounds, e.g. (CONFIG GET ratelimit.* lists them all):
# ratelimit.max-waiters 10000
CONF
(cd "$stage/$name" && sha256sum libredis_ratelimit.so README.md LICENSE CHANGELOG.md ratelimit.conf >SHA256SUMS)

mkdir -p dist
tar -C "$stage" --owner=0 --group=0 --sort=name -czf "dist/$name.tar.gz" "$name"
(cd dist && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
echo "dist/$name.tar.gz: module $version for Linux $arch, needs glibc $needs or newer"

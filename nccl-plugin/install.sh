#!/usr/bin/env bash
# Builds the NCCL net plugin and installs it under the name NCCL looks for: libnccl-net-mrc.so
# (NCCL_NET_PLUGIN=mrc finds it on the library path; NCCL_NET_PLUGIN=/full/path/libnccl-net-mrc.so anywhere).
#
#   nccl-plugin/install.sh [DEST_DIR]      default DEST_DIR: <cargo's target folder>/nccl-plugin
set -euo pipefail
cd "$(dirname "$0")/.."
# Cargo's target folder (CARGO_TARGET_DIR or the build configuration may move it).
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
dest="${1:-$target/nccl-plugin}"
cargo build --release -p mrc-nccl-net
mkdir -p "$dest"
install -m 0755 "$target/release/libnccl_net_mrc.so" "$dest/libnccl-net-mrc.so"
# NCCL finds the tables with dlsym: check every version is exported.
for v in 8 9 10 11 12; do
    if ! nm -D --defined-only "$dest/libnccl-net-mrc.so" | grep -qw "ncclNetPlugin_v$v"; then
        echo "install.sh: ncclNetPlugin_v$v is not exported by $dest/libnccl-net-mrc.so" >&2
        exit 1
    fi
done
echo "$dest/libnccl-net-mrc.so"

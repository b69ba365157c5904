#!/usr/bin/env bash
# Gathers what nccl-plugin/gpu/run.sh needs on the GPU machine (which has no Rust toolchain, no iproute2 and no
# nftables) into one folder: the stripped release plugin, mrc-nccl-harness, mrc-perf and mrc-fabric, and the
# Debian packages of iproute2 and nftables with their libraries (../shared/design/gpu-machine.md lists them).
#
#   nccl-plugin/gpu/prepare.sh [DIR]     default DIR: .gpu (git ignores it; carry it to the GPU machine)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-.gpu}"
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
cargo build --release -p mrc-nccl-net -p mrc-nccl-harness -p mrc-tools
mkdir -p "$dir/bin" "$dir/debs"
install -m 0755 "$target/release/libnccl_net_mrc.so" "$dir/bin/libnccl-net-mrc.so"
for b in mrc-nccl-harness mrc-perf mrc-fabric; do
    install -m 0755 "$target/release/$b" "$dir/bin/$b"
done
strip "$dir/bin/"*
(cd "$dir/debs" && apt-get -o APT::Sandbox::User=root download iproute2 libmnl0 libelf1 libbpf1 libcap2 libxtables12 nftables \
    libnftables1 libnftnl11 libjansson4 libedit2 libbsd0 libmd0 >/dev/null)
du -sh "$dir"

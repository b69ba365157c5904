#!/usr/bin/env bash
# Everything the NCCL speed work measures on a GPU machine, in one run (GPU time is minutes, not hours):
#   1. mrc-nccl-harness bench on the machine's cores: plugin vs mrc-perf, 1/2/4/8 comms, one way and both ways;
#   2. allreduce.py (Socket vs MRC, 1 KiB..256 MiB, every result exact) with NCCL's default channels, then
#      NCCL_MIN_NCHANNELS=NCCL_MAX_NCHANNELS=4 and 8, under MPS when the machine has it;
#   3. planefail.py: a plane cut and restored mid-series of 64 MiB all_reduces across the kernel fabric.
# Each step's whole output goes to OUT (default /tmp/nccl-gpu-out); the summary lines to stdout.
#
#   nccl-plugin/gpu/prepare.sh .gpu                 # on the development machine
#   nccl-plugin/gpu/run.sh .gpu [STEPS]             # on the GPU machine, as root; STEPS: bench,ar,fail (all)
set -uo pipefail
cd "$(dirname "$0")/../.."
dir=$(cd "${1:-.gpu}" && pwd)
steps="${2:-bench,ar,fail}"
out="${OUT:-/tmp/nccl-gpu-out}"
mkdir -p "$out"
bin="$dir/bin"
root="$out/pkgs"
mkdir -p "$root"
for f in "$dir"/debs/*.deb; do dpkg -x "$f" "$root"; done
export PATH="$root/usr/bin:$root/usr/sbin:$root/bin:$root/sbin:$PATH"
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== $(nproc) CPUs, $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
status=0

if [[ $steps == *bench* ]]; then
    echo "== harness bench (plugin vs mrc-perf)"
    timeout 240 "$bin/mrc-nccl-harness" --lib "$bin/libnccl-net-mrc.so" bench --perf "$bin/mrc-perf" \
        --comms 1,2,4,8 --sizes 1m,16m --reps 3 2>"$out/bench.err" | tee "$out/bench.txt" || status=1
fi
if [[ $steps == *ar* ]]; then
    for ch in default 4 8; do
        echo "== allreduce.py, channels $ch"
        if [[ $ch == default ]]; then env=(); else env=(NCCL_MIN_NCHANNELS=$ch NCCL_MAX_NCHANNELS=$ch); fi
        env "${env[@]}" timeout 200 python3 nccl-plugin/gpu/allreduce.py --plugin "$bin/libnccl-net-mrc.so" \
            --out "$out/ar-$ch" --timeout 90 >"$out/ar-$ch.txt" 2>&1 || status=1
        grep -E "ratio|MPS|PROBLEM|PASS|FAIL|^ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$out/ar-$ch.txt"
    done
fi
if [[ $steps == *fail* ]]; then
    echo "== planefail.py"
    timeout 200 python3 nccl-plugin/gpu/planefail.py --plugin "$bin/libnccl-net-mrc.so" \
        --fabric-bin "$bin/mrc-fabric" --out "$out/planefail" --timeout 150 >"$out/planefail.txt" 2>&1 || status=1
    tail -8 "$out/planefail.txt"
fi
exit $status

#!/usr/bin/env bash
# Wall-clock keyed/unkeyed ratios per data packet from the replay example, robust to a noisy machine: the runs
# of every case (and of every binary given) alternate round by round, and each case's figure is its fastest
# round, which noise can only make slower, and its median round (benches/README.md, "AUTH tags").
#
#   benches/replay-ratios.sh [ROUNDS] [REPLAYS] [REPLAY_BINARY...]
#
# Defaults: 40 rounds of 150 replays; the binary `cargo build --profile profiling -p mrc-benches --example
# replay` makes. Give a second binary (another commit's build) to compare two engines in the same sitting.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-40}
REPLAYS=${2:-150}
shift $(( $# > 2 ? 2 : $# ))
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
    cargo build -q --profile profiling -p mrc-benches --example replay
    bins=(target/profiling/examples/replay)
fi
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for _ in $(seq "$ROUNDS"); do
    for side in sender receiver; do
        for case in nocopy "copy icrc"; do
            for auth in "" auth; do
                for b in "${!bins[@]}"; do
                    # shellcheck disable=SC2086 # the case's words are separate arguments
                    ns=$("${bins[$b]}" "$side" "$REPLAYS" noverify $case $auth | sed -n 's/.*: \([0-9.]*\) ns per data packet.*/\1/p')
                    echo "$b|$side|${case// /_}|${auth:-none}|$ns" >> "$raw"
                done
            done
        done
    done
done
python3 - "$raw" "${bins[@]}" <<'PY'
import collections, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    b, side, case, auth, ns = line.strip().split("|")
    runs[(int(b), side, case, auth)].append(float(ns))
import statistics
print(f"fastest (median) of {len(next(iter(runs.values())))} rounds, ns per data packet: unkeyed -> keyed (ratio)")
for b, path in enumerate(sys.argv[2:]):
    print(path)
    for side in ("sender", "receiver"):
        for case in ("nocopy", "copy_icrc"):
            no, au = runs[(b, side, case, "none")], runs[(b, side, case, "auth")]
            fast = f"{min(no):7.1f} -> {min(au):7.1f} ({min(au) / min(no):.3f})"
            med = f"{statistics.median(no):7.1f} -> {statistics.median(au):7.1f}"
            print(f"  {side:8} {case:9} {fast}   median {med}")
PY

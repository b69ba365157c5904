#!/usr/bin/env bash
# Scale run: 131,072 NICs x 8 planes, 1 MB permutation, a T1 failing mid-run. Prints wall time and peak RSS
# (targets: <= 30 min, <= 16 GB). Run it in the background: nohup sim/scale.sh > scale.log 2>&1 &
# SCENARIO=... overrides the scenario (e.g. a scaled-down copy to project the full run).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p mrc-sim >/dev/null 2>&1 || cargo build --release -p mrc-sim
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin="$target/release/mrc-sim"
scen="${SCENARIO:-sim/scenarios/scale-131k-8plane-t1-failure.toml}"
out="${OUT:-scale-out}"
/usr/bin/time -v "$bin" run "$scen" --out "$out" 2>"$out.time" | tee "$out.summary"
grep -E "events/s" "$out.time" || true
grep -E "Elapsed|Maximum resident" "$out.time"

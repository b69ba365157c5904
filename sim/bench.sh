#!/usr/bin/env bash
# Speed benchmark: runs bench-leafspine-1024-perm.toml in release and prints wall time, events/s, peak RSS
# and FCT p50/p99/max. Targets on the 2-core development VM: <= 2 s wall, <= 40 MB peak RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p mrc-sim >/dev/null 2>&1 || cargo build --release -p mrc-sim
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin="$target/release/mrc-sim"
out="$(mktemp -d)"
runs="${RUNS:-3}"
for i in $(seq 1 "$runs"); do
    /usr/bin/time -f "%e %M" -o "$out/time" "$bin" run sim/scenarios/bench-leafspine-1024-perm.toml \
        --out "$out/r" >"$out/stdout" 2>"$out/stderr"
    read -r wall rss <"$out/time"
    # mrc-sim's summary line: "<name>: wall 1.22 s, 5253556 events in 1 run (...), ...".
    events=$(grep -o '[0-9][0-9]* events' "$out/stderr" | head -n 1 | grep -o '[0-9]*') || {
        echo "sim/bench.sh: no event count in mrc-sim's output:" >&2
        cat "$out/stderr" >&2
        exit 1
    }
    python3 - "$wall" "$rss" "$events" "$out/r/report.json" <<'PY'
import json, sys
wall, rss, events, path = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
r = json.load(open(path))["run"]
f = r["fct"]
print(f"wall {wall:.2f} s  events {events}  {events / wall / 1e6:.2f} M events/s  peak RSS {rss / 1024:.1f} MB  "
      f"FCT p50 {f['p50_us']:.1f} us  p99 {f['p99_us']:.1f} us  max {f['max_us']:.1f} us  "
      f"(job {r['jct_us']:.1f} us, {f['count']} transfers)")
PY
done
rm -rf "$out"

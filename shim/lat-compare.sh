#!/usr/bin/env bash
# ib_write_lat (2 B, 5000 iterations) under two or more builds of the shim, alternated run by run: on a shared
# machine only runs taken side by side compare, and the average moves with a few iterations of milliseconds
# (shim/README.md, "Latency"). Prints, per library, the median over the runs of p50, average, p99 and the worst
# iteration, with their ranges.
#
#   shim/lat-compare.sh ROUNDS LIBMRC_VERBS_SHIM.so [LIBMRC_VERBS_SHIM.so...]   # takes /tmp/mrc-net.lock
#
# Needs perftest (Debian package). Copy a build's library before rebuilding another (each path must stay put).
set -euo pipefail
ROUNDS=${1:?usage: shim/lat-compare.sh ROUNDS SHIM.so [SHIM.so...]}
shift
[ $# -gt 0 ] || { echo "shim/lat-compare.sh: name at least one shim library" >&2; exit 2; }
if [ "${MRC_BENCH_LOCKED:-}" != 1 ]; then
    exec env MRC_BENCH_LOCKED=1 flock /tmp/mrc-net.lock "$0" "$ROUNDS" "$@"
fi
command -v ib_write_lat >/dev/null || { echo "ib_write_lat missing: apt-get install perftest" >&2; exit 1; }
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
port=$((18600 + RANDOM % 300))
for _ in $(seq "$ROUNDS"); do
    for lib in "$@"; do
        port=$((port + 1))
        LD_PRELOAD=$lib ib_write_lat -d mrc0 -p "$port" -s 2 -n 5000 >/dev/null 2>&1 &
        server=$!
        sleep 0.5
        # perftest's columns: #bytes #iterations t_min t_max t_typical(p50) t_avg t_stdev 99% 99.9%
        LD_PRELOAD=$lib ib_write_lat -d mrc0 -p "$port" -s 2 -n 5000 localhost 2>/dev/null |
            awk -v lib="$lib" '/#bytes/ {getline; print lib, $5, $6, $8, $4}' | tee -a "$raw"
        wait "$server" || true
    done
done
python3 - "$raw" <<'PY'
import collections, statistics as st, sys
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    lib, *v = line.split()
    for name, x in zip(("p50", "avg", "p99", "max"), v):
        runs[lib][name].append(float(x))
for lib, m in runs.items():
    print(f"{lib} ({len(m['avg'])} runs), us: " + "  ".join(
        f"{k} {st.median(x):.1f} [{min(x):.1f}-{max(x):.1f}]" for k, x in m.items()))
PY

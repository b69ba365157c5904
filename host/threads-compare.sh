#!/usr/bin/env bash
# The threads bench (host/benches/threads.rs) of two or more builds, alternated run by run: on a shared machine
# only runs taken side by side compare (host/README.md, "threads bench"). Prints each run's Gbit/s for 1 and 8
# posting threads and their ratio, then per binary the median ratio and the median Gbit/s of each case.
#
#   host/threads-compare.sh ROUNDS THREADS_BENCH_BINARY [THREADS_BENCH_BINARY...]   # takes /tmp/mrc-net.lock
#
# A build's binary is what `cargo bench -p mrc-host --bench threads --no-run` names ("Executable ..."); for an
# older commit, build it in a worktree with its own CARGO_TARGET_DIR.
set -euo pipefail
ROUNDS=${1:?usage: host/threads-compare.sh ROUNDS BENCH_BINARY [BENCH_BINARY...]}
shift
[ $# -gt 0 ] || { echo "host/threads-compare.sh: name at least one bench binary" >&2; exit 2; }
if [ "${MRC_BENCH_LOCKED:-}" != 1 ]; then
    exec env MRC_BENCH_LOCKED=1 flock /tmp/mrc-net.lock "$0" "$ROUNDS" "$@"
fi
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for _ in $(seq "$ROUNDS"); do
    for bin in "$@"; do
        "$bin" --bench 2>/dev/null | awk -v bin="$bin" '
            /1 thread :/ { one = $4 }
            /8 threads:/ { eight = $3 }
            /^  8 threads \/ 1 thread =/ { ratio = $7 }
            END { print bin, one, eight, ratio }' | tee -a "$raw"
    done
done
python3 - "$raw" <<'PY'
import collections, statistics as st, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    b, one, eight, ratio = line.split()
    runs[b].append((float(one), float(eight), float(ratio)))
for b, v in runs.items():
    print(f"{b}\n  {len(v)} runs: 1 thread {st.median(x[0] for x in v):.2f} Gbit/s, 8 threads "
          f"{st.median(x[1] for x in v):.2f} Gbit/s, ratio median {st.median(x[2] for x in v):.2f} "
          f"[{min(x[2] for x in v):.2f}-{max(x[2] for x in v):.2f}]")
PY

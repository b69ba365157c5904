#!/usr/bin/env bash
# Wall time and peak RSS of one scenario per thread count, against a sequential reference binary (the simulator
# before threads, 94055e9, built from a worktree), alternated round by round: on a shared machine only figures
# taken side by side compare (sim/README.md, "Parallel runs").
#
#   sim/threads-scaling.sh SEQUENTIAL_BINARY [ROUNDS] [SCENARIO...]
#
# THREADS (default "1 2") lists the --threads values; the binary under test is the release build that
# `cargo build --release -p mrc-sim` makes, or MRC_SIM if set. Defaults: 3 rounds of scale-8192-perm and
# bench-leafspine-1024-perm. Prints one line per run (wall s, user s, sys s, peak RSS KB, events, report md5)
# and, per scenario, the fastest round of each and the speed-up of every thread count over the reference.
set -euo pipefail
cd "$(dirname "$0")/.."
seq_bin=${1:?usage: sim/threads-scaling.sh SEQUENTIAL_BINARY [ROUNDS] [SCENARIO...]}
rounds=${2:-3}
shift $(( $# > 1 ? 2 : 1 ))
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(scale-8192-perm bench-leafspine-1024-perm)
if [ -z "${MRC_SIM:-}" ]; then
    cargo build -q --release -p mrc-sim
    MRC_SIM="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/release/mrc-sim"
fi
raw=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$raw" "$work"' EXIT
run() { # tag binary scenario [args...]
    local tag=$1 bin=$2 s=$3
    shift 3
    rm -rf "$work/o"
    /usr/bin/time -f "%e %U %S %M" -o "$work/t" "$bin" run "sim/scenarios/$s.toml" --out "$work/o" "$@" \
        >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    local ev
    ev=$(python3 -c "import json; print(json.load(open('$work/o/report.json'))['run']['counters']['events'])")
    echo "$s $tag $(cat "$work/t") $ev $(md5sum <"$work/o/report.json" | cut -c1-8)" | tee -a "$raw"
}
for _ in $(seq "$rounds"); do
    for s in "${scenarios[@]}"; do
        run sequential "$seq_bin" "$s"
        for n in ${THREADS:-1 2}; do
            run "n$n" "$MRC_SIM" "$s" --threads "$n"
        done
    done
done
python3 - "$raw" <<'PY'
import collections, sys
wall, rss = collections.defaultdict(list), collections.defaultdict(int)
for line in open(sys.argv[1]):
    s, tag, e, _u, _sy, m, _ev, _h = line.split()
    wall[(s, tag)].append(float(e))
    rss[(s, tag)] = max(rss[(s, tag)], int(m))
for s in dict.fromkeys(s for s, _ in wall):
    ref = min(wall[(s, "sequential")])
    print(f"{s}: fastest rounds")
    for (s2, tag), v in wall.items():
        if s2 == s:
            print(f"  {tag:>10} {min(v):8.2f} s  peak RSS {rss[(s2, tag)] / 1024:8.1f} MiB  speed-up {ref / min(v):5.2f}")
PY

#!/usr/bin/env bash
# CPU time per event at 1,024 and 8,192 hosts (scale-1024-perm and scale-8192-perm, --threads 1), and their
# ratio, for one or more mrc-sim binaries run alternately round by round: on a shared machine only figures
# taken side by side compare, and the fastest round of each is the one noise touched least (sim/README.md,
# "Speed and scale").
#
#   sim/cpu-per-event.sh [ROUNDS] [MRC_SIM_BINARY...]
#
# Defaults: 3 rounds; the release binary `cargo build --release -p mrc-sim` makes. LIMIT_US=80 stops both runs
# after their first 80 simulated µs (the scenarios' `[run] limit_us`), for quicker comparisons. Prints the CPU model
# and its L2 and L3 sizes (lscpu), then, per binary
# and scale, ns of user+sys CPU per event (fastest and median round), the fastest round's user and system parts and
# the median wall time of a round (at 1K, of its REPEAT_1K runs together), peak RSS and the report's md5; then
# the 8K/1K ratio of the fastest rounds and of the medians, of user+sys CPU and of user time alone.
#
# HOSTS="1024 2048 4096 8192" adds sizes in between (scale-8192-perm with 64 hosts to each of HOSTS/64 leaves):
# where CPU per event climbs shows how much state per window the machine's caches hold. Ratios are then to the
# smallest size. Sizes other than 1,024 run once a round; 1,024 runs REPEAT_1K times.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
shift $(( $# > 0 ? 1 : 0 ))
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
    cargo build -q --release -p mrc-sim
    bins=("$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/release/mrc-sim")
fi
raw=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$raw" "$work"' EXIT
read -r -a hosts <<<"${HOSTS:-1024 8192}"
for s in "${hosts[@]}"; do
    src=sim/scenarios/scale-$s-perm.toml
    if [ ! -f "$src" ]; then
        [ $((s % 64)) -eq 0 ] || { echo "HOSTS: $s is not a multiple of 64 (64 hosts per leaf)" >&2; exit 2; }
        src=$work/gen-$s.toml
        sed "s/^t0 = .*/t0 = $((s / 64))/; s/^name = .*/name = \"scale-$s-perm\"/" \
            sim/scenarios/scale-8192-perm.toml >"$src"
    fi
    if [ -n "${LIMIT_US:-}" ]; then
        sed "s/^limit_us = .*/limit_us = $LIMIT_US/" "$src" >"$work/scale-$s.toml"
    else
        cp "$src" "$work/scale-$s.toml"
    fi
done
# The 1K run takes under a second, against about ten for 8K: a round runs it REPEAT_1K times (default 8) and
# counts their CPU and events together, so that one quick or slow run does not set the 1K figure.
for round in $(seq "$ROUNDS"); do
    for b in "${bins[@]}"; do
        for s in "${hosts[@]}"; do
            reps=1
            [ "$s" = 1024 ] && reps=${REPEAT_1K:-8}
            for _ in $(seq "$reps"); do
                rm -rf "$work/o"
                /usr/bin/time -f "%U %S %M %e" -o "$work/t" "$b" run "$work/scale-$s.toml" \
                    --threads 1 --out "$work/o" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
                read -r u sy rss wall <"$work/t"
                echo "$round $b $s $u $sy $rss $wall $(md5sum <"$work/o/report.json" | cut -c1-8)" \
                    "$(python3 -c "import json; print(json.load(open('$work/o/report.json'))['run']['counters']['events'])")" >>"$raw"
            done
        done
    done
done
# The ratio depends on the machine's caches as much as on the simulator (sim/README.md, "Speed and scale": 1.0 on
# a VM whose caches the 1K run already outgrows, 1.4 on one whose L3 holds it): name the machine with the figures.
if command -v lscpu >/dev/null; then
    lscpu | awk -F: '/^Model name|^L2 cache|^L3 cache/ {gsub(/^ +/, "", $2); sub(/ cache$/, "", $1)
        printf "%s%s", sep, ($1 == "Model name" ? $2 : $1 " " $2); sep = "; "} END {print ""}' | sed 's/^/machine: /'
fi
python3 - "$raw" <<'PY'
import collections, statistics as st, sys
ns, rss, md5 = collections.defaultdict(list), collections.defaultdict(int), collections.defaultdict(set)
wall = collections.defaultdict(list)
# Per round, binary and scale: user, sys, wall and events summed over the round's runs.
rounds = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0])
for line in open(sys.argv[1]):
    r, b, s, u, sy, m, w, h, ev = line.split()
    t = rounds[(r, b, s)]
    t[0] += float(u); t[1] += float(sy); t[2] += float(w); t[3] += int(ev)
    rss[(b, s)] = max(rss[(b, s)], int(m))
    md5[(b, s)].add(h)
for (r, b, s), (u, sy, w, ev) in rounds.items():
    ns[(b, s)].append(((u + sy) * 1e9 / ev, u * 1e9 / ev, sy * 1e9 / ev))
    wall[(b, s)].append(w)
print("user+sys CPU per event, fastest and median round")
for (b, s), v in sorted(ns.items(), key=lambda kv: (kv[0][0], int(kv[0][1]))):
    best = min(v)
    print(f"{b}\n  {s:>5} hosts  {best[0]:6.1f} ns (median {st.median(x[0] for x in v):6.1f};"
          f" fastest: user {best[1]:6.1f}, sys {best[2]:5.1f})  wall median {st.median(wall[(b, s)]):6.2f} s"
          f"  peak RSS {rss[(b, s)] / 1024:6.1f} MiB  report md5 {' '.join(sorted(md5[(b, s)]))}")
# The ratio of the medians too: it moves less from sitting to sitting. And of user time alone: on a VM whose
# host backs memory lazily, the 8K run's system time is mostly zeroing pages the host has to back first, which
# the 1K run, repeated on memory it just freed, mostly does not pay (sim/README.md, "Speed and scale").
sizes = sorted({s for _, s in ns}, key=int)
for b in dict.fromkeys(b for b, _ in ns):
    for k, what in ((0, "user+sys"), (1, "user alone")):
        best = {s: min(x[k] for x in ns[(b, s)]) for s in sizes}
        med = {s: st.median(x[k] for x in ns[(b, s)]) for s in sizes}
        for s in sizes[1:]:
            print(f"{b}: {s}/{sizes[0]} hosts {what}: of the fastest rounds {best[s] / best[sizes[0]]:.2f},"
                  f" of the medians {med[s] / med[sizes[0]]:.2f}")
PY

#!/usr/bin/env bash
# perftest over the verbs shim against mrc-perf, on the same loopback path (8 planes on ::1, same MTU and
# window), in one run: WRITE bandwidth at 64 KiB and WRITE latency at 2 B.
#
#   shim/bench.sh [SECONDS] [TRIALS] # default 5 s per measurement, 3 trials; takes /tmp/mrc-net.lock
#
# Targets (issue 12): ib_write_bw >= 0.9 x mrc-perf, ib_write_lat <= 1.2 x mrc-perf (medians).
# Needs perftest (Debian package) and a release build, which the script makes.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
TRIALS=${2:-3}
LOCK=/tmp/mrc-net.lock
if [ "${MRC_BENCH_LOCKED:-}" != 1 ]; then
    exec env MRC_BENCH_LOCKED=1 flock "$LOCK" "$0" "$@"
fi
command -v ib_write_bw >/dev/null || { echo "ib_write_bw missing: apt-get install perftest" >&2; exit 1; }
# MRC_BENCH_PREBUILT=1: use the release build already in ${CARGO_TARGET_DIR:-target}/release (a machine without
# cargo); otherwise build it and ask cargo where its target folder is.
if [ -n "${MRC_BENCH_PREBUILT:-}" ]; then
    target=${CARGO_TARGET_DIR:-$PWD/target}
else
    cargo build --release -q -p mrc-verbs-shim -p mrc-tools
    target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
fi
T=$target/release
SHIM=$T/libmrc_verbs_shim.so
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
PORT=18900
if [ "$(nproc)" -ge 8 ]; then ALT=thread; else ALT=busy; fi
export ALT

# Waits until something listens on TCP port $1 (no probe connection: perftest accepts exactly one).
wait_listen() {
    local hex
    hex=$(printf '%04X' "$1")
    for _ in $(seq 500); do
        awk -v p="$hex" '$4 == "0A" {n = split($2, a, ":"); if (a[n] == p) f = 1} END {exit !f}' \
            /proc/net/tcp /proc/net/tcp6 && return 0
        sleep 0.02
    done
    echo "nothing listens on $1" >&2
    return 1
}

# mrc-perf server+client; prints the client's JSON.
mrc_perf() {
    PORT=$((PORT + 1))
    "$T/mrc-perf" --port $PORT --json >/dev/null 2>&1 &
    local srv=$!
    wait_listen $PORT
    "$T/mrc-perf" ::1 --port $PORT --json --interval-ms 0 --duration "$SECS" "$@"
    wait $srv || true
}

# perftest server+client under the shim; prints the client's report.
shim_pt() {
    local tool=$1
    shift
    PORT=$((PORT + 1))
    LD_PRELOAD=$SHIM "$tool" -d mrc0 -p $PORT "$@" >"$OUT/server.txt" 2>&1 &
    local srv=$!
    wait_listen $PORT
    LD_PRELOAD=$SHIM "$tool" -d mrc0 -p $PORT "$@" localhost
    wait $srv || true
}

# Interleaved trials: on a shared machine the rate swings by 2x from one minute to the next, so each trial
# measures mrc-perf and the shim back to back and the summary gives medians of values and of per-trial ratios.
: >"$OUT/trials.txt"
for t in $(seq "$TRIALS"); do
    echo "== trial $t/$TRIALS: mrc-perf WRITE bw 64 KiB, ib_write_bw 64 KiB (assist on, off), WRITE lat 2 B"
    perf_bw=$(mrc_perf --mode bw --size 64k | python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["gbps"])')
    shim_pt ib_write_bw -s 65536 -D "$SECS" --report_gbits >"$OUT/bw.txt"
    shim_bw=$(awk '/#bytes/ {getline; print $4}' "$OUT/bw.txt")
    MRC_SHIM_ASSIST=0 shim_pt ib_write_bw -s 65536 -D "$SECS" --report_gbits >"$OUT/bw0.txt"
    shim_bw0=$(awk '/#bytes/ {getline; print $4}' "$OUT/bw0.txt")
    read -r perf_p50 perf_avg < <(mrc_perf --mode lat --size 2 |
        python3 -c 'import json,sys; l=json.load(sys.stdin)["results"][0]["lat_us"]; print(l["p50"], l["avg"])')
    # Iteration mode prints the median (t_typical).
    shim_pt ib_write_lat -s 2 -n 5000 >"$OUT/lat.txt"
    read -r shim_p50 shim_avg < <(awk '/#bytes/ {getline; print $5, $6}' "$OUT/lat.txt")
    busy_p50=nan busy_avg=nan
    # The other progress mode: the default (auto) busy-polls from 8 CPUs; busy-polling progress threads need a
    # core each besides the applications' two spinning threads.
    if [ "$(nproc)" -ge 4 ]; then
        MRC_SHIM_PROGRESS=$ALT shim_pt ib_write_lat -s 2 -n 5000 >"$OUT/lat_b.txt"
        read -r busy_p50 busy_avg < <(awk '/#bytes/ {getline; print $5, $6}' "$OUT/lat_b.txt")
    fi
    echo "   bw Gbit/s: mrc-perf $perf_bw, shim $shim_bw, shim assist off $shim_bw0;" \
        "lat p50 us: mrc-perf $perf_p50, shim $shim_p50"
    echo "$perf_bw $shim_bw $shim_bw0 $perf_p50 $shim_p50 $perf_avg $shim_avg $busy_p50 $busy_avg" >>"$OUT/trials.txt"
done

python3 - "$OUT/trials.txt" <<'EOF'
import math, os, statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
col = lambda i: [r[i] for r in rows]
med = lambda xs: st.median(xs) if xs and not any(math.isnan(x) for x in xs) else float("nan")
ratio = lambda a, b: med([r[a] / r[b] for r in rows])
pb, sb, sb0, pl, sl, pa, sa, bl, ba = (med(col(i)) for i in range(9))
print()
print(f"medians of {len(rows)} interleaved trials (ratio = median of the per-trial ratios)")
print(f"{'':22}{'mrc-perf':>12}{'shim':>12}{'ratio':>9}   target")
r = ratio(1, 0)
print(f"{'WRITE bw 64 KiB Gb/s':22}{pb:12.2f}{sb:12.2f}{r:9.2f}   >= 0.90  {'met' if r >= 0.9 else 'MISSED'}")
r = ratio(4, 3)
print(f"{'WRITE lat 2 B p50 us':22}{pl:12.2f}{sl:12.2f}{r:9.2f}   <= 1.20  {'met' if r <= 1.2 else 'MISSED'}")
print(f"{'WRITE lat 2 B avg us':22}{pa:12.2f}{sa:12.2f}{ratio(6, 5):9.2f}")
print(f"{'  MRC_SHIM_ASSIST=0':22}{pb:12.2f}{sb0:12.2f}{ratio(2, 0):9.2f}")
if not math.isnan(bl):  # measured (4+ cores)
    r = ratio(7, 3)
    alt = os.environ.get("ALT", "busy")
    print(f"{'  ' + alt + ' progress p50':22}{pl:12.2f}{bl:12.2f}{r:9.2f}   <= 1.20  {'met' if r <= 1.2 else 'MISSED'}")
    print(f"{'  ' + alt + ' progress avg':22}{pa:12.2f}{ba:12.2f}{ratio(8, 5):9.2f}")
print("per trial: bw mrc-perf / shim / shim assist off (Gbit/s); lat p50 mrc-perf / shim (us)")
for r in rows:
    print(f"  {r[0]:6.2f} {r[1]:6.2f} {r[2]:6.2f}   {r[3]:7.2f} {r[4]:7.2f}")
print(f"(nproc {os.cpu_count()}, load {open('/proc/loadavg').read().split()[0]})")
EOF

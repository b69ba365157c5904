#!/usr/bin/env bash
# perftest over the verbs shim against mrc-perf, on the same loopback path (8 planes on ::1, same MTU and
# window), in one run: WRITE bandwidth at 64 KiB and WRITE latency at 2 B.
#
#   shim/bench.sh [SECONDS]          # default 5 s per measurement; takes /tmp/mrc-net.lock
#
# Targets (issue 12): ib_write_bw >= 0.9 x mrc-perf, ib_write_lat <= 1.2 x mrc-perf (medians).
# Needs perftest (Debian package) and a release build, which the script makes.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
LOCK=/tmp/mrc-net.lock
if [ "${MRC_BENCH_LOCKED:-}" != 1 ]; then
    exec env MRC_BENCH_LOCKED=1 flock "$LOCK" "$0" "$@"
fi
command -v ib_write_bw >/dev/null || { echo "ib_write_bw missing: apt-get install perftest" >&2; exit 1; }
cargo build --release -q -p mrc-verbs-shim -p mrc-tools
T=$PWD/target/release
SHIM=$T/libmrc_verbs_shim.so
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
PORT=18900

# Waits until something listens on TCP port $1 (no probe connection: perftest accepts exactly one).
wait_listen() {
    local hex
    hex=$(printf '%04X' "$1")
    for _ in $(seq 500); do
        awk -v h=":$hex\$" '$2 ~ h && $4 == "0A" {f = 1} END {exit !f}' /proc/net/tcp /proc/net/tcp6 && return 0
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

echo "== mrc-perf WRITE bw, 64 KiB, ${SECS} s"
perf_bw=$(mrc_perf --mode bw --size 64k | python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["gbps"])')
echo "mrc-perf: $perf_bw Gbit/s"

echo "== ib_write_bw over the shim, 64 KiB, ${SECS} s"
shim_pt ib_write_bw -s 65536 -D "$SECS" --report_gbits | tee "$OUT/bw.txt" | grep -A1 '#bytes'
shim_bw=$(awk '/#bytes/ {getline; print $4}' "$OUT/bw.txt")

echo "== mrc-perf WRITE latency, 2 B, ${SECS} s"
perf_lat=$(mrc_perf --mode lat --size 2 | python3 -c 'import json,sys; l=json.load(sys.stdin)["results"][0]["lat_us"]; print(l["p50"], l["avg"], l["p99"])')
read -r perf_p50 perf_avg perf_p99 <<<"$perf_lat"
echo "mrc-perf: p50 $perf_p50 us, avg $perf_avg us, p99 $perf_p99 us"

echo "== ib_write_lat over the shim, 2 B, 5000 iterations (iteration mode prints the median, t_typical)"
shim_pt ib_write_lat -s 2 -n 5000 | tee "$OUT/lat_n.txt" | grep -A1 '#bytes'
read -r shim_p50 shim_avg shim_p99 < <(awk '/#bytes/ {getline; print $5, $6, $8}' "$OUT/lat_n.txt")
# Busy-polling progress threads need a core each besides the applications' two spinning threads.
busy_p50=nan busy_avg=nan
if [ "$(nproc)" -ge 4 ]; then
    echo "== ib_write_lat over the shim with MRC_SHIM_PROGRESS=busy (progress threads never sleep)"
    MRC_SHIM_PROGRESS=busy shim_pt ib_write_lat -s 2 -n 5000 | tee "$OUT/lat_b.txt" | grep -A1 '#bytes'
    read -r busy_p50 busy_avg _ < <(awk '/#bytes/ {getline; print $5, $6, $8}' "$OUT/lat_b.txt")
fi

echo "== ib_write_bw over the shim with MRC_SHIM_ASSIST=0 (every round on the progress thread), 64 KiB, ${SECS} s"
MRC_SHIM_ASSIST=0 shim_pt ib_write_bw -s 65536 -D "$SECS" --report_gbits | tee "$OUT/bw0.txt" | grep -A1 '#bytes'
shim_bw0=$(awk '/#bytes/ {getline; print $4}' "$OUT/bw0.txt")

python3 - "$perf_bw" "$shim_bw" "$perf_p50" "$shim_p50" "$perf_avg" "$shim_avg" "$busy_p50" "$busy_avg" "$shim_bw0" <<'EOF'
import sys
pb, sb, pl, sl, pa, sa, bl, ba, sb0 = map(float, sys.argv[1:])
print()
print(f"{'':22}{'mrc-perf':>12}{'shim':>12}{'ratio':>9}   target")
print(f"{'WRITE bw 64 KiB Gb/s':22}{pb:12.2f}{sb:12.2f}{sb / pb:9.2f}   >= 0.90  {'met' if sb >= 0.9 * pb else 'MISSED'}")
print(f"{'WRITE lat 2 B p50 us':22}{pl:12.2f}{sl:12.2f}{sl / pl:9.2f}   <= 1.20  {'met' if sl <= 1.2 * pl else 'MISSED'}")
print(f"{'WRITE lat 2 B avg us':22}{pa:12.2f}{sa:12.2f}{sa / pa:9.2f}")
print(f"{'  MRC_SHIM_ASSIST=0':22}{pb:12.2f}{sb0:12.2f}{sb0 / pb:9.2f}")
if bl == bl:  # not NaN: measured (4+ cores)
    print(f"{'  busy progress p50':22}{pl:12.2f}{bl:12.2f}{bl / pl:9.2f}   <= 1.20  {'met' if bl <= 1.2 * pl else 'MISSED'}")
    print(f"{'  busy progress avg':22}{pa:12.2f}{ba:12.2f}{ba / pa:9.2f}")
print(f"(nproc {__import__('os').cpu_count()}, load {open('/proc/loadavg').read().split()[0]})")
EOF

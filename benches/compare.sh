#!/usr/bin/env bash
# MRC over a real SRv6 uSID fabric against the alternatives, all in one run on the same fabric:
#   mrc-perf (MRC, 8 planes; `mrc` datagram by datagram, `mrc-offload` in segmented trains of a few packets per
#   EV, MRC_OFFLOAD=on) | mrc-blast (raw UDP, sendmmsg, same datagram size, sprayed over the planes: `udp-blast`
#   per datagram, the per-packet ceiling; `udp-blast-train` in trains of 7) | iperf3 TCP on plane 0 | MPTCP
#   (mptcpize iperf3) across the 8 planes
# in three conditions: lossless; 1% random drop on every plane; plane 0 cut silently mid-run (goodput in 1 ms
# samples; time until 90% of the surviving capacity is back). Then the same trains cut at the hosts' links (no
# train crosses a switch whole: every switch forwards packets); CPU seconds per GB moved; loopback mrc-perf vs
# iperf3 TCP.
#
# Trains need UDP checksums, which SRv6 hops make wrong at the receiver: the veth fabric never checks them
# (host/src/offload.rs). By default veth passes a train whole from host to host, as it passes TCP's 64 KB
# super-packets: the lossless rows compare like with like.
#
# Needs root, iperf3, mptcpize, ethtool and GNU time (apt-get install iperf3 mptcpize ethtool time). Writes benches/results/compare.csv,
# timeline.csv and compare.svg. Usage: [TRIALS=3] [REPS=3] benches/compare.sh [seconds per run, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-5}
TRIALS=${TRIALS:-3}   # plane-failure trials per tool
REPS=${REPS:-3}       # back-to-back repetitions of mrc and the blast, lossless and under the drop
OUT=benches/results
mkdir -p "$OUT"
cargo build --release -q -p mrc-tools
# Cargo's target folder (CARGO_TARGET_DIR or the build configuration may move it).
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
BIN=$target/release
FAB="$BIN/mrc-fabric --prefix cmp"
PERF=$BIN/mrc-perf
BLAST=$BIN/mrc-blast
H0="ip netns exec cmp-h0"
H1="ip netns exec cmp-h1"
N0=/run/mrc-fabric/cmp/h0.toml
N1=/run/mrc-fabric/cmp/h1.toml
DST=fcbb:bb00:e001::          # h1's plane-0 address
CSV=$OUT/compare.csv

$FAB down >/dev/null 2>&1 || true
trap '$FAB down >/dev/null 2>&1 || true' EXIT
$FAB up --planes 8 --t0s 2 --t1s 1 --mtu 9000 >/dev/null
echo "condition,tool,gbps" >"$CSV"
record() { echo "$1,$2,$3" >>"$CSV"; printf '%-10s %-8s %8.3f Gbit/s\n' "$1" "$2" "$3"; }
json_get() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# Offload for the mrc rows whose name says so.
offload_of() { case $1 in *offload*) echo on ;; *) echo off ;; esac; }

run_mrc() {   # condition tool-name [extra client args]
    local cond=$1 tool=$2; shift 2
    local o
    o=$(offload_of "$tool")
    $H1 env MRC_OFFLOAD="$o" $PERF --config $N1 --json >/tmp/cmp-srv.json 2>/dev/null &
    local srv=$!
    sleep 0.4
    $H0 env MRC_OFFLOAD="$o" $PERF $DST --config $N0 --size 1m --duration "$T" --interval-ms 0 --json "$@" >/tmp/cmp-cli.json &
    local cli=$!
    wait $cli || true
    wait $srv || true
    local g
    g=$(json_get "d['results'][0]['gbps']" </tmp/cmp-cli.json)
    record "$cond" "$tool" "$g"
}

run_blast() {   # condition [train]
    local cond=$1 train=${2:-1} tool=udp-blast
    [ "$train" -gt 1 ] && tool=udp-blast-train
    $H1 $BLAST sink --config $N1 --duration $((T + 2)) --json >/tmp/cmp-sink.json &
    local sink=$!
    sleep 0.3
    $H0 $BLAST send --config $N0 --peer-config $N1 --size 8952 --duration "$T" --train "$train" --json >/dev/null
    wait $sink || true
    record "$cond" "$tool" "$(json_get "d['gbps']" </tmp/cmp-sink.json)"
}

# CPU seconds per GB moved by mrc-perf, both sides (user + system, from getrusage via /usr/bin/time's
# format), offload off and on.
cpu_per_gb() {   # tool
    local o
    o=$(offload_of "$1")
    $H1 env MRC_OFFLOAD="$o" /usr/bin/time -f "%U %S" -o /tmp/cmp-srv.time $PERF --config $N1 --json >/dev/null 2>&1 &
    local srv=$!
    sleep 0.4
    $H0 env MRC_OFFLOAD="$o" /usr/bin/time -f "%U %S" -o /tmp/cmp-cli.time $PERF $DST --config $N0 --size 1m \
        --duration "$T" --interval-ms 0 --json >/tmp/cmp-cli.json
    wait $srv || true
    local bytes cpu
    bytes=$(json_get "d['results'][0]['bytes']" </tmp/cmp-cli.json)
    cpu=$(cat /tmp/cmp-srv.time /tmp/cmp-cli.time | awk '{s += $1 + $2} END {print s}')
    record cpu "$1-s-per-gb" "$(python3 -c "print($cpu / ($bytes / 1e9))")"
}

run_tcp() {   # condition tool(tcp|tcp-mtu|tcp-cubic|mptcp)
    local cond=$1 tool=$2 wrap="" cc=""
    # The VM's default congestion control is BBR, which ignores random loss; tcp-cubic is loss-based (and
    # MTU-sized like tcp-mtu).
    [ "$tool" = tcp-cubic ] && cc="-C cubic"
    [ "$tool" = mptcp ] && wrap="mptcpize run"
    # tcp-mtu: no TSO/GSO on the sender's NICs, so TCP sends MTU-sized packets and a per-packet drop hits it
    # as often as it hits MRC (with super-packets, 1% of 64 KB super-packets is about 0.14% of the MTUs).
    local p
    if [ "$tool" = tcp-mtu ] || [ "$tool" = tcp-cubic ]; then for p in 0 1 2 3 4 5 6 7; do $H0 ethtool -K p$p tso off gso off >/dev/null 2>&1 || true; done; fi
    $H1 $wrap iperf3 -s -1 >/dev/null 2>&1 &
    local srv=$!
    sleep 0.4
    local g
    g=$($H0 $wrap iperf3 -c $DST -t "$T" $cc -J | json_get "d['end']['sum_received']['bits_per_second']/1e9")
    wait $srv || true
    if [ "$tool" = tcp-mtu ] || [ "$tool" = tcp-cubic ]; then for p in 0 1 2 3 4 5 6 7; do $H0 ethtool -K p$p tso on gso on >/dev/null 2>&1 || true; done; fi
    record "$cond" "$tool" "$g"
}

# MPTCP: a subflow per plane (h1 announces its plane addresses).
for h in h0 h1; do ip -n cmp-$h mptcp limits set subflows 8 add_addr_accepted 8; done
for p in 1 2 3 4 5 6 7; do ip -n cmp-h1 mptcp endpoint add fcbb:bb00:e${p}01:: dev p$p signal; done

drop_on() { for p in 0 1 2 3 4 5 6 7; do $FAB drop --plane $p --link t0-0:t1-0 --percent 1 --dir a-to-b >/dev/null; done; }
drop_off() { for p in 0 1 2 3 4 5 6 7; do $FAB undrop --plane $p --link t0-0:t1-0 >/dev/null; done; }

# The VM's forwarding rate swings by 2x from one minute to the next, so mrc and the blast, lossless and under the
# drop, are measured back to back REPS times; the ratios below are medians of the per-repetition ratios.
echo "== mrc and the raw UDP blast, lossless and with 1% random drop on every plane (T0 -> T1), $REPS repetitions"
for r in $(seq "$REPS"); do
    run_mrc lossless mrc; run_mrc lossless mrc-offload; run_blast lossless; run_blast lossless 7
    drop_on; run_mrc drop1 mrc; run_mrc drop1 mrc-offload; run_blast drop1; drop_off
done

echo "== lossless (fabric, 8 planes, MTU 9000)"
# mrc sends from a 1 MiB buffer per QP that stays in cache, like perftest and like the blast's one buffer;
# mrc-64m gives each of the 64 messages in flight its own buffer (the payload comes from memory, not cache).
run_mrc lossless mrc-64m --cycle-buffer 64m; run_tcp lossless tcp; run_tcp lossless tcp-mtu; run_tcp lossless tcp-cubic; run_tcp lossless mptcp

echo "== 1% random drop on every plane (T0 -> T1, the data direction)"
drop_on
run_tcp drop1 tcp; run_tcp drop1 tcp-mtu; run_tcp drop1 tcp-cubic; run_tcp drop1 mptcp
drop_off

echo "== plane 0 cut silently, $TRIALS trials per tool (mrc: 1 ms samples, 10 ms bins; MPTCP: 100 ms bins)"
now_ms() { date +%s%3N; }
# mrc-fabric schedules the cut at the next whole second (--at-second: nft's `meta time` drops from that
# instant on, to the nanosecond) and prints it twice ("between unix ms T and T").
cut_start() { sed -n 's/.* between unix ms \([0-9]*\) and \([0-9]*\).*/\1 \2/p'; }
STAMPS=$OUT/failure-stamps.txt
: >"$STAMPS"
# cut_plane0 TOOL TRIAL START: 1 s into the running client, cut plane 0 and note when; wait for client and server
# ($cli, $srv); restore the plane.
cut_plane0() {
    sleep 1
    read -r a b < <($FAB plane-down 0 --at-second | cut_start)
    echo "$1 $2 $a $b $3" >>"$STAMPS"
    wait $cli || true
    wait $srv || true
    $FAB plane-up 0 >/dev/null
}
for k in $(seq 1 "$TRIALS"); do
    $H1 env MRC_OFFLOAD=on $PERF --config $N1 --json >/dev/null 2>&1 &
    srv=$!
    sleep 0.4
    # The out-of-band TCP connection goes over plane 7, which stays up. 64 KiB messages and 1 ms samples: goodput
    # counts completed messages, so a sample moves in steps of 0.5 Gbit/s. Trains (offload on), as the fastest
    # configuration.
    $H0 env MRC_OFFLOAD=on $PERF fcbb:bb00:e701:: --config $N0 --size 64k --duration 4 --interval-ms 1 \
        --timeline $OUT/timeline-mrc-$k.csv --json >/dev/null &
    cli=$!
    cut_plane0 mrc "$k" 0
    # MPTCP: iperf3 reports at most every 100 ms; its intervals count from the client's start.
    $H1 mptcpize run iperf3 -s -1 >/dev/null 2>&1 &
    srv=$!
    sleep 0.4
    start=$(now_ms)
    $H0 mptcpize run iperf3 -c $DST -t 4 -i 0.1 -J >$OUT/mptcp-$k.json &
    cli=$!
    cut_plane0 mptcp "$k" "$start"
done
python3 - "$OUT" "$STAMPS" <<'EOF'
import json, math, statistics, sys
out, stamps = sys.argv[1], sys.argv[2]
def capacity(series, bin_s):
    """Surviving capacity: 7/8 of the mean goodput over the 0.7 s before the failure."""
    before = [g for t, g in series if -0.7 <= t < -bin_s]
    return sum(before) / max(len(before), 1) * 7 / 8
def recovery(series, width, cap):
    """Time from the failure until the goodput is back at 90% of the surviving capacity for good: the start of the
    first window of `width` consecutive samples from which on every window of `width` samples, for the next
    10 widths, averages at least that. 0 when no window starting within 100 ms of the failure dipped below it
    (later dips are not the failure's); inf when it never came back. `width` 1 on coarse bins."""
    after = [(t, g) for t, g in series if t > 0]
    avg = [sum(g for _, g in after[k:k + width]) / width for k in range(len(after) - width + 1)]
    good = [a >= 0.9 * cap for a in avg]
    if all(ok for k, ok in enumerate(good) if after[k][0] <= 0.1):
        return 0.0
    for k in range(len(good)):
        if all(good[k:k + 10 * width + 1]) and k + 10 * width < len(good):
            return after[k][0]
    return float("inf")
runs = {"mrc": [], "mptcp": []}
for line in open(stamps):
    tool, k, a, b, start = line.split()
    fail, landed = int(a) / 1000, (int(b) - int(a))
    # Times relative to the failure, each sample at the end of its bin.
    if tool == "mrc":
        series = []
        with open(f"{out}/timeline-mrc-{k}.csv") as f:
            next(f)
            for row in f:
                _, g, unix_ms = row.strip().split(",")
                series.append((float(unix_ms) / 1000 - fail, float(g)))
        cap = capacity(series, 0.001)
        r = recovery(series, 3, cap)
    else:
        d = json.load(open(f"{out}/mptcp-{k}.json"))
        series = [(int(start) / 1000 + i["sum"]["end"] - fail, i["sum"]["bits_per_second"] / 1e9)
                  for i in d["intervals"]]
        cap = capacity(series, 0.1)
        r = recovery(series, 1, cap)
    runs[tool].append((r, cap, series, landed))
for tool, rs in runs.items():
    print(f"plane 0 down, {tool}: back to 90% of the surviving capacity after " +
          ", ".join(f"{r*1000:.0f} ms (7/8 of {c/(7/8):.1f} Gbit/s; cut landed within {l} ms)" for r, c, _, l in rs) +
          f"; median {statistics.median(r for r, *_ in rs)*1000:.0f} ms")
rm = statistics.median(r for r, *_ in runs["mrc"])
rp = statistics.median(r for r, *_ in runs["mptcp"])
mrc1, mp = runs["mrc"][0][2], runs["mptcp"][0][2]
# 10 ms bins of the 1 ms samples, aligned on the failure, each stamped at its end.
bins = {}
for t, g in mrc1:
    k = math.ceil(round(t * 1000, 3) / 10)
    bins.setdefault(k, []).append(g)
mrc = [(k / 100, sum(v) / len(v)) for k, v in sorted(bins.items()) if len(v) >= 5]
with open(f"{out}/timeline.csv", "w") as f:
    f.write("tool,t_after_failure_s,gbps\n")
    for t, g in mrc: f.write(f"mrc,{t:.3f},{g:.3f}\n")
    for t, g in mp: f.write(f"mptcp,{t:.3f},{g:.3f}\n")
with open(f"{out}/compare.csv", "a") as f:
    f.write(f"plane0-down,mrc-recovery-ms,{rm*1000:.0f}\nplane0-down,mptcp-recovery-ms,{rp*1000:.0f}\n")
print("  mrc is timed at the end of the first 1 ms sample from which on every 3 ms average is back (for 30 ms), MPTCP at the end of a 100 ms bin")
def lost_ms(series, cap, span):
    """Goodput the cut cost over its first `span` seconds, in ms at the rate before it (noise averages out; on a
    CPU-bound machine 7 planes carry about what 8 did, so 7/8 of it would hide the outage)."""
    after = [g for t, g in series if 0 < t <= span]
    full = cap * 8 / 7
    return sum(full - g for g in after) * (span / max(len(after), 1)) / full * 1000
def noise(series, cap):
    """Share of 3 ms averages before the cut, on all 8 planes, already under the 90% bar: the metric's noise floor."""
    b = [g for t, g in series if -0.7 <= t < 0]
    avg = [sum(b[k:k + 3]) / 3 for k in range(len(b) - 2)]
    return sum(a < 0.9 * cap for a in avg) / max(len(avg), 1)
print("  mrc, each trial: goodput lost in the first 10 ms / 100 ms, in ms at the rate before the cut: " +
      ", ".join(f"{lost_ms(s, c, 0.01):.1f} / {lost_ms(s, c, 0.1):.1f}" for _, c, s, _ in runs["mrc"]) +
      "; 3 ms averages under the bar before the cut (noise floor): " +
      ", ".join(f"{noise(s, c):.0%}" for _, c, s, _ in runs["mrc"]))
print("  mrc 10 ms bins of trial 1 (s after the cut: Gbit/s): " + ", ".join(f"{t:+.2f}: {g:.1f}" for t, g in mrc if -0.03 <= t <= 0.08))
print("  mptcp bins of trial 1: " + ", ".join(f"{t:+.2f}: {g:.1f}" for t, g in mp if -0.2 <= t <= 1.5))
# SVG: goodput around the failure, both tools.
W, H, L, B = 720, 320, 50, 30
lo, hi = -0.5, max(t for t, _ in mrc + mp)
gmax = max(g for _, g in mrc + mp) * 1.1 or 1
X = lambda t: L + (W - L - 10) * (t - lo) / (hi - lo)
Y = lambda g: H - B - (H - B - 10) * g / gmax
def path(s):
    pts = [(t, g) for t, g in s if t >= lo]
    return " ".join(f"{'M' if i == 0 else 'L'}{X(t):.1f},{Y(g):.1f}" for i, (t, g) in enumerate(pts))
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<line x1="{L}" y1="{H-B}" x2="{W-10}" y2="{H-B}" stroke="black"/><line x1="{L}" y1="10" x2="{L}" y2="{H-B}" stroke="black"/>',
       f'<line x1="{X(0):.1f}" y1="10" x2="{X(0):.1f}" y2="{H-B}" stroke="red" stroke-dasharray="4"/>',
       f'<text x="{X(0)+4:.1f}" y="22" fill="red">plane 0 cut</text>',
       f'<path d="{path(mrc)}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>',
       f'<path d="{path(mp)}" fill="none" stroke="#ff7f0e" stroke-width="1.5"/>',
       f'<text x="{W-170}" y="24" fill="#1f77b4">mrc (10 ms bins)</text><text x="{W-170}" y="38" fill="#ff7f0e">MPTCP (100 ms bins)</text>',
       f'<text x="{W/2:.0f}" y="{H-5}">time after the cut (s)</text><text x="{L+6}" y="20">Gbit/s</text>']
for k in range(0, 6):
    g = gmax * k / 5
    svg.append(f'<text x="5" y="{Y(g)+4:.1f}">{g:.1f}</text>')
for k in range(0, int(hi) + 1):
    svg.append(f'<text x="{X(k)-3:.1f}" y="{H-B+14}">{k}</text>')
svg.append("</svg>")
open(f"{out}/compare.svg", "w").write("\n".join(svg))
EOF

echo "== trains cut at the hosts' links (tx-udp-segmentation off): every switch forwards packets, not trains"
host_links() { for h in h0 h1; do for p in 0 1 2 3 4 5 6 7; do ip netns exec cmp-$h ethtool -K p$p tx-udp-segmentation "$1" >/dev/null; done; done; }
host_links off
# A switch drops a train that crosses it whole as one packet (a burst of up to 7): the drop is per packet only here.
for _ in $(seq "$REPS"); do
    run_mrc per-packet-fabric mrc-offload
    drop_on; run_mrc per-packet-drop1 mrc-offload; drop_off
done
run_blast per-packet-fabric 7
host_links on

echo "== CPU per GB moved (both sides, user + system)"
cpu_per_gb mrc; cpu_per_gb mrc-offload

echo "== loopback"
$PERF --json >/dev/null 2>&1 &
srv=$!
sleep 0.4
g=$($PERF ::1 --size 1m --duration "$T" --interval-ms 0 --json | json_get "d['results'][0]['gbps']")
wait $srv || true
record loopback mrc "$g"
iperf3 -s -1 >/dev/null 2>&1 &
srv=$!
sleep 0.4
g=$(iperf3 -c ::1 -t "$T" -J | json_get "d['end']['sum_received']['bits_per_second']/1e9")
wait $srv || true
record loopback tcp "$g"

python3 - "$CSV" <<'EOF'
import csv, os, statistics, sys
rows = {}
for r in csv.DictReader(open(sys.argv[1])):
    rows.setdefault((r["condition"], r["tool"]), []).append(float(r["gbps"]))
g = lambda c, t: statistics.median(rows[(c, t)]) if (c, t) in rows else float("nan")
# Ratios of measurements taken back to back, one per repetition, then their median.
pairs = lambda a, b: [x / y for x, y in zip(rows[a], rows[b])]
each = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
lm, lb, dm, db = ("lossless", "mrc"), ("lossless", "udp-blast"), ("drop1", "mrc"), ("drop1", "udp-blast")
print("\n== ratios")
lo, do, lt = ("lossless", "mrc-offload"), ("drop1", "mrc-offload"), ("lossless", "udp-blast-train")
print(f"fabric lossless: mrc / raw UDP blast = {statistics.median(pairs(lm, lb)):.2f} (target >= 0.8; per repetition "
      f"{each(pairs(lm, lb))}); from 64 MiB of memory: {g('lossless','mrc-64m')/g('lossless','udp-blast'):.2f}")
print(f"fabric lossless, trains: mrc-offload / per-packet blast = {statistics.median(pairs(lo, lb)):.2f} (target >= 1.5; "
      f"per repetition {each(pairs(lo, lb))}); / iperf3 TCP = {g(*lo)/g('lossless','tcp'):.2f} (target >= 1.0); "
      f"/ the blast in trains = {statistics.median(pairs(lo, lt)):.2f}")
print(f"1% drop: mrc keeps {statistics.median(pairs(dm, lm)):.2f} of its lossless goodput (target >= 0.9; per repetition "
      f"{each(pairs(dm, lm))}), mrc-offload {statistics.median(pairs(do, lo)):.2f} ({each(pairs(do, lo))}; a switch drops a whole train at once); "
      f"the blast keeps {statistics.median(pairs(db, lb)):.2f}")
print(f"trains cut at the hosts' links: mrc-offload {g('per-packet-fabric','mrc-offload'):.2f} Gbit/s = "
      f"{g('per-packet-fabric','mrc-offload')/g(*lb):.2f} x the per-packet blast; blast in trains "
      f"{g('per-packet-fabric','udp-blast-train'):.2f}; at 1% drop per packet mrc-offload keeps "
      f"{statistics.median(pairs(('per-packet-drop1','mrc-offload'), ('per-packet-fabric','mrc-offload'))):.2f} (target >= 0.9; "
      f"per repetition {each(pairs(('per-packet-drop1','mrc-offload'), ('per-packet-fabric','mrc-offload')))})")
print(f"CPU seconds per GB moved, both sides: {g('cpu','mrc-s-per-gb'):.3f} datagram by datagram, "
      f"{g('cpu','mrc-offload-s-per-gb'):.3f} in trains")
print(f"1% drop: mrc / TCP = {g('drop1','mrc')/g('drop1','tcp'):.1f}x with 64 KB super-packets, {g('drop1','mrc')/g('drop1','tcp-mtu'):.1f}x with MTU-sized TCP packets, {g('drop1','mrc')/g('drop1','tcp-cubic'):.1f}x against MTU-sized CUBIC (target >= 3x); mrc / MPTCP = {g('drop1','mrc')/g('drop1','mptcp'):.1f}x")
print(f"loopback: mrc / iperf3 TCP = {g('loopback','mrc')/g('loopback','tcp'):.2f} (target >= 1.5)")
print("note: TCP over veth moves 64 KB super-packets that no hop segments, so its lossless figure is not a per-packet ceiling")
print(f"(mrc and blast: medians of {len(rows[lm])} back-to-back repetitions; nproc {os.cpu_count()}, load {open('/proc/loadavg').read().split()[0]})")
EOF
echo "wrote $CSV, $OUT/timeline.csv, $OUT/compare.svg"

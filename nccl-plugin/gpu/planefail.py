#!/usr/bin/env python3
"""A plane of the plugin's transport fails under real NCCL: all_reduces across the kernel fabric, one rank per host.

`mrc-fabric up` builds an SRv6 uSID fabric of network namespaces (--planes planes, two T0s, one host each).
Rank k runs in host k's namespace with that host's node file (NCCL_MRC_NODE_CONFIG), so the plugin's packets
cross the fabric; NCCL's own bootstrap and torch's store use the hosts' plane-0 addresses (plane 0 is never
the one cut). Both ranks share GPU 0 (their own NCCL_HOSTID, P2P and SHM off, under MPS when available, as in
allreduce.py). Rank 0 runs --iters all_reduces of --size bytes, each on a fresh input checked exactly, and
prints the time of each; when it reports iteration --fail-at, this script cuts every T0-T1 link of --plane
(`mrc-fabric plane-down`, a silent cut), and at --restore-at brings it back.

    sudo python3 nccl-plugin/gpu/planefail.py --plugin libnccl-net-mrc.so --fabric-bin target/release/mrc-fabric

Prints every iteration's time (F at the cut, R at the restore), the median before the cut and the slowest
after it. Exit status 0 only if every result was exact and no all_reduce took more than --limit times the
median before the cut. Needs root, iproute2 and nftables (`ip`, `nft` on PATH), PyTorch with CUDA and NCCL.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import allreduce  # noqa: E402  (the shared launcher pieces: NCCL environment, MPS)

PREFIX = "nf"


def fake_worker(args):
    """The launcher's own test without a GPU: the two ranks exchange --size bytes over TCP between the hosts'
    plane-0 addresses per iteration (what torch's store and NCCL's bootstrap need) and print the same lines."""
    import socket
    rank, n = int(os.environ["RANK"]), min(args.size, 1 << 20)
    if rank == 0:
        srv = socket.create_server((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])),
                                   family=socket.AF_INET6)
        c, _ = srv.accept()
    else:
        for _ in range(100):
            try:
                c = socket.create_connection((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])))
                break
            except OSError:
                time.sleep(0.1)
    for i in range(args.iters):
        t0 = time.perf_counter()
        c.sendall(bytes([i % 256]) * n)
        got = b""
        while len(got) < n:
            got += c.recv(n - len(got))
        bad = sum(1 for b in got if b != i % 256)
        if rank == 0:
            print(f"ITER {i} {(time.perf_counter() - t0) * 1e6:.0f} {bad}", flush=True)
        time.sleep(0.01)
    return 0


def worker(args):
    if args.fake:
        return fake_worker(args)
    import datetime
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.op_timeout), device_id=dev)
    n = args.size // 4
    base = torch.arange(n, device=dev, dtype=torch.int64) % 1021
    inp = (base * (rank + 1) + rank).to(torch.float32)
    expect = (base * sum(r + 1 for r in range(world)) + sum(range(world))).to(torch.float32)
    x = torch.empty_like(inp)
    bad_total = 0
    for i in range(-3, args.iters):  # three untimed warm-ups
        x.copy_(inp)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        dist.all_reduce(x)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        bad = int((x != expect).sum().item())
        bad_total += bad
        if rank == 0 and i >= 0:
            print(f"ITER {i} {dt * 1e6:.0f} {bad}", flush=True)
    dist.destroy_process_group()
    return 0 if bad_total == 0 else 1


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def plane0_addr(node_file):
    """The host's plain plane-0 address (fd0f:0:<host uSID>::1, on interface p0): NCCL's and torch's bootstrap."""
    text = open(node_file).read()
    m = re.search(r'addr = "fcbb:bb00:([0-9a-f]+)::"', text)
    if not m:
        raise SystemExit(f"{node_file}: no plane-0 address")
    return f"fd0f:0:{m.group(1)}::1"


def launch(args, hosts, mps_env):
    master = plane0_addr(hosts[0][1])
    port = str(29500 + os.getpid() % 1000)
    procs = []
    for rank, (ns, node) in enumerate(hosts):
        env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_") or k.startswith("NCCL_MRC_")}
        env.update(allreduce.transport_env("mrc", args.plugin))
        env.update(mps_env)
        env.update({
            "RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": master, "MASTER_PORT": port,
            "NCCL_HOSTID": f"mrc-planefail-host-{rank}", "NCCL_MRC_NODE_CONFIG": node,
            "NCCL_SOCKET_IFNAME": "p0", "NCCL_SOCKET_FAMILY": "AF_INET6",
            "NCCL_DEBUG_FILE": os.path.join(args.out, f"nccl-planefail-rank{rank}.log"),
            "PYTHONUNBUFFERED": "1",
        })
        cmd = ["ip", "netns", "exec", ns, sys.executable, os.path.abspath(__file__), "--worker",
               "--size", str(args.size), "--iters", str(args.iters), "--op-timeout", str(args.op_timeout)]
        cmd += ["--fake"] if args.fake else []
        out = subprocess.PIPE if rank == 0 else open(os.path.join(args.out, f"planefail-rank{rank}.out"), "w")
        procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True))
    return procs


def drive(args, rank0, fabric):
    """Reads rank 0's lines, cutting and restoring the plane on cue; returns [(iteration, us, bad, mark)]."""
    rows, log = [], open(os.path.join(args.out, "planefail-rank0.out"), "w")
    for line in rank0.stdout:
        log.write(line)
        m = re.match(r"ITER (\d+) (\d+) (\d+)", line)
        if not m:
            continue
        i, us, bad = int(m.group(1)), int(m.group(2)), int(m.group(3))
        mark = ""
        if i == args.fail_at:
            sh([fabric, "plane-down", str(args.plane), "--prefix", PREFIX])
            mark = "F"
        elif i == args.restore_at:
            sh([fabric, "plane-up", str(args.plane), "--prefix", PREFIX])
            mark = "R"
        rows.append((i, us, bad, mark))
    log.close()
    return rows


def report(args, rows):
    problems = []
    if len(rows) != args.iters:
        problems.append(f"{len(rows)} of {args.iters} all_reduces reported")
    before = [us for i, us, _, _ in rows if i <= args.fail_at]
    after = [(i, us) for i, us, _, _ in rows if i > args.fail_at]
    med = statistics.median(before) if before else float("nan")
    print(f"{'iter':>5} {'us':>10} {'x median':>9}  (F: plane {args.plane} cut after this one, R: restored)")
    for i, us, bad, mark in rows:
        print(f"{i:>5} {us:>10} {us / med:>9.2f}  {mark}{'  WRONG: %d elements' % bad if bad else ''}")
        if bad:
            problems.append(f"all_reduce {i}: {bad} wrong elements")
    if after:
        worst = max(after, key=lambda r: r[1])
        print(f"\nmedian before the cut {med:.0f} us; slowest after it: iteration {worst[0]}, {worst[1]} us "
              f"= {worst[1] / med:.2f}x (limit {args.limit}x)")
        if worst[1] > args.limit * med:
            problems.append(f"all_reduce {worst[0]} took {worst[1] / med:.2f}x the median before the cut")
    json.dump({"rows": rows, "median_before_us": med}, open(os.path.join(args.out, "planefail.json"), "w"))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plugin", help="path to libnccl-net-mrc.so")
    ap.add_argument("--fabric-bin", help="path to mrc-fabric")
    ap.add_argument("--out", default="nccl-planefail-out", help="folder for logs and planefail.json")
    ap.add_argument("--planes", type=int, default=4, help="planes of the fabric")
    ap.add_argument("--plane", type=int, default=2, help="the plane to cut (not 0: the bootstrap uses it)")
    ap.add_argument("--size", type=int, default=64 << 20, help="bytes per all_reduce")
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--fail-at", type=int, default=20)
    ap.add_argument("--restore-at", type=int, default=40)
    ap.add_argument("--limit", type=float, default=2.0, help="slowest allowed, times the median before the cut")
    ap.add_argument("--timeout", type=int, default=300, help="seconds for the whole run")
    ap.add_argument("--op-timeout", type=int, default=120, help="NCCL collective timeout, seconds")
    ap.add_argument("--mps", choices=["auto", "on", "off"], default="auto")
    ap.add_argument("--fake", action="store_true",
                    help="no GPU: the ranks exchange bytes over TCP instead (tests this launcher and the fabric)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.fake:
        args.plugin = args.plugin or __file__
    if not (args.plugin and os.path.isfile(args.plugin) and args.fabric_bin and os.path.isfile(args.fabric_bin)):
        ap.error("--plugin and --fabric-bin must name the built libnccl-net-mrc.so and mrc-fabric")
    if not 0 < args.plane < args.planes:
        ap.error(f"--plane {args.plane}: give 1..{args.planes - 1} (plane 0 carries the bootstrap)")
    args.plugin = os.path.abspath(args.plugin)
    os.makedirs(args.out, exist_ok=True)
    fabric = os.path.abspath(args.fabric_bin)
    up = sh([fabric, "up", "--planes", str(args.planes), "--t0s", "2", "--t1s", "1", "--prefix", PREFIX])
    hosts = [tuple(l.split()[1:3]) for l in up.stdout.splitlines() if re.match(r"h\d+ ", l)]
    mps = allreduce.Mps(args.mps, args.out)
    problems = []
    try:
        print(f"fabric {PREFIX}: {args.planes} planes, hosts {hosts}; {mps.note}", flush=True)
        procs = launch(args, hosts, mps.env)
        timer = threading.Timer(args.timeout, lambda: [p.kill() for p in procs])
        timer.start()
        rows = drive(args, procs[0], fabric)
        for rank, p in enumerate(procs):
            if p.wait() != 0:
                problems.append(f"rank {rank} exited with {p.returncode} (see {args.out})")
        timer.cancel()
        problems += report(args, rows)
    finally:
        mps.stop()
        subprocess.run([fabric, "down", "--prefix", PREFIX], capture_output=True)
    for p in problems:
        print(f"PROBLEM: {p}")
    print("PASS" if not problems else "FAIL")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())

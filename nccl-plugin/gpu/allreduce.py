#!/usr/bin/env python3
"""All-reduce over NCCL's network path on ONE GPU: MRC plugin vs NCCL's Socket transport.

Two processes share GPU 0. Each gets its own NCCL_HOSTID, so NCCL counts two nodes and must use its
network transport between them (P2P and SHM refuse peers on other hosts; they are also disabled). The same
run is done twice, with NCCL's built-in Socket transport (NCCL_NET=Socket, no plugin) and with our plugin
(NCCL_NET_PLUGIN=<path to libnccl-net-mrc.so>, NCCL_NET=MRC). For each message size from 1 KiB to 256 MiB it
checks the result of an all_reduce exactly and times a series of them; it prints the bus bandwidth of both
transports and their ratio, and checks in NCCL's own log (NCCL_DEBUG=INFO, kept in --out) that the
"Using network" line names the transport asked for.

    python3 nccl-plugin/gpu/allreduce.py --plugin target/nccl-plugin/libnccl-net-mrc.so --out /tmp/ar

Both ranks inherit the caller's NCCL_MRC_* variables (e.g. NCCL_MRC_QPS_PER_CONN=4) and NCCL's channel counts
(NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS: each channel is one comm per direction); every other NCCL_* variable
is replaced by this script's. Without NCCL_MRC_NODE_CONFIG the plugin uses loopback planes on ::1.

Two processes on one GPU take turns on it (CUDA time-slices contexts of different processes), and each step
of an all_reduce waits for the other rank's kernel: small all_reduces then cost a few time slices (the ~4.5 ms
floor both transports showed up to 1 MiB). --mps on (or auto, the default, when nvidia-cuda-mps-control is
there) runs the ranks under a private MPS daemon, so their kernels run side by side and the floor is the
transports' own.

Exit status 0 only if every check passed for every transport run. Needs PyTorch with CUDA and NCCL.
"""
import argparse
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

SIZES = [1 << s for s in range(10, 29, 2)]  # 1 KiB, 4 KiB, ..., 256 MiB
# NCCL variables the caller may set for both transports.
PASSED_THROUGH = ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")


class Mps:
    """A private MPS control daemon for the two ranks (pipe and log folders of our own), or none."""

    def __init__(self, mode, out):
        self.env, self.pipe = {}, None
        exe = shutil.which("nvidia-cuda-mps-control")
        if mode == "off" or (mode == "auto" and not exe):
            self.note = "MPS off" + ("" if exe else " (nvidia-cuda-mps-control not found)")
            return
        if not exe:
            raise SystemExit("--mps on: nvidia-cuda-mps-control not found")
        self.pipe = os.path.join(out, "mps-pipe")
        log = os.path.join(out, "mps-log")
        os.makedirs(self.pipe, exist_ok=True)
        os.makedirs(log, exist_ok=True)
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": self.pipe, "CUDA_MPS_LOG_DIRECTORY": log}
        r = subprocess.run([exe, "-d"], env={**os.environ, **self.env}, capture_output=True, text=True)
        if r.returncode != 0:
            if mode == "on":
                raise SystemExit(f"--mps on: the MPS daemon did not start: {r.stderr.strip()}")
            self.env, self.pipe = {}, None
            self.note = f"MPS off (the daemon did not start: {r.stderr.strip()})"
            return
        self.note = f"MPS on (daemon pipes in {self.pipe})"

    def stop(self):
        if self.pipe:
            subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True,
                           env={**os.environ, **self.env}, capture_output=True)
            self.pipe = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------------ worker


def worker(args):
    import datetime
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    dist.init_process_group(
        "nccl", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=args.op_timeout), device_id=dev
    )
    results = []
    for size in SIZES:
        n = size // 4
        base = torch.arange(n, device=dev, dtype=torch.int64) % 1021
        # Exactly representable in float32: every rank's input and their sum are small integers.
        x = (base * (rank + 1) + rank).to(torch.float32)
        expect = (base * sum(r + 1 for r in range(world)) + sum(range(world))).to(torch.float32)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        ok = bool(torch.equal(x, expect))
        bad = 0 if ok else int((x != expect).sum().item())
        # Timed series on a buffer of ones (sums stay finite for these iteration counts).
        y = torch.ones(n, device=dev, dtype=torch.float32)
        iters = max(5, min(100, (256 << 20) // max(size, 1) // 4))
        for _ in range(2):
            dist.all_reduce(y)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(y)
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) / iters
        algbw = size / dt / 1e9
        busbw = algbw * 2 * (world - 1) / world
        results.append({"size": size, "ok": ok, "bad": bad, "us": dt * 1e6, "algbw": algbw, "busbw": busbw})
        if rank == 0:
            print(f"  {args.transport:6s} {size:>10d} B  {dt * 1e6:10.1f} us  busbw {busbw:8.3f} GB/s  "
                  f"{'ok' if ok else f'WRONG ({bad} elements)'}", flush=True)
    dist.destroy_process_group()
    if rank == 0:
        print("RESULTS " + json.dumps(results), flush=True)
    return 0 if all(r["ok"] for r in results) else 1


# ------------------------------------------------------------------------------------------------ launcher


def transport_env(transport, plugin):
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
        "NCCL_P2P_DISABLE": "1",
        "NCCL_SHM_DISABLE": "1",
        "NCCL_IB_DISABLE": "1",
        "NCCL_NVLS_ENABLE": "0",
        "NCCL_COLLNET_ENABLE": "0",
        "NCCL_SOCKET_IFNAME": "lo",
    }
    if transport == "socket":
        env["NCCL_NET"] = "Socket"
        env["NCCL_NET_PLUGIN"] = "none"
    else:
        env["NCCL_NET"] = "MRC"
        env["NCCL_NET_PLUGIN"] = plugin
    return env


def run_transport(args, transport):
    """Runs both ranks with one transport; returns (results or None, problems)."""
    port = free_port()
    procs, outs = [], []
    for rank in range(2):
        env = dict(os.environ)
        for k in [k for k in env if k.startswith("NCCL_")]:
            if not k.startswith("NCCL_MRC_") and k not in PASSED_THROUGH:
                del env[k]
        env.update(args.mps_env)
        env.update(transport_env(transport, args.plugin))
        env.update({
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "NCCL_HOSTID": f"mrc-gpu-test-host-{rank}",
            "NCCL_DEBUG_FILE": os.path.join(args.out, f"nccl-{transport}-rank{rank}.log"),
            "PYTHONUNBUFFERED": "1",
        })
        out = open(os.path.join(args.out, f"{transport}-rank{rank}.out"), "w")
        outs.append(out)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--transport", transport,
               "--op-timeout", str(args.op_timeout)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
    problems = []
    deadline = time.time() + args.timeout
    for rank, p in enumerate(procs):
        try:
            rc = p.wait(timeout=max(1, deadline - time.time()))
            if rc != 0:
                problems.append(f"{transport}: rank {rank} exited with {rc}")
        except subprocess.TimeoutExpired:
            problems.append(f"{transport}: rank {rank} still running after {args.timeout} s; killed")
            for q in procs:
                try:
                    os.killpg(q.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    for o in outs:
        o.close()
    text = open(os.path.join(args.out, f"{transport}-rank0.out")).read()
    sys.stdout.write(text if args.verbose else "".join(l for l in text.splitlines(True) if l.startswith("  ")))
    results = None
    for line in text.splitlines():
        if line.startswith("RESULTS "):
            results = json.loads(line[len("RESULTS "):])
    if results is None:
        problems.append(f"{transport}: no results (see {args.out}/{transport}-rank*.out)")
    else:
        for r in results:
            if not r["ok"]:
                problems.append(f"{transport}: all_reduce of {r['size']} B gave {r['bad']} wrong elements")
    # NCCL's own word on which network it used.
    want = "Socket" if transport == "socket" else "MRC"
    logs = sorted(glob.glob(os.path.join(args.out, f"nccl-{transport}-rank*.log")))
    using = [l.strip() for f in logs for l in open(f, errors="replace") if "Using network" in l]
    if not using:
        problems.append(f"{transport}: no 'Using network' line in {logs or 'any NCCL log'}")
    elif not all(f"Using network {want}" in l for l in using):
        problems.append(f"{transport}: NCCL used another network: {using[0]}")
    else:
        print(f"  {transport}: NCCL log says: {using[0].split('NCCL INFO ')[-1]}")
    return results, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plugin", help="path to libnccl-net-mrc.so (nccl-plugin/install.sh writes it)")
    ap.add_argument("--out", default="nccl-gpu-out", help="folder for the NCCL logs and each rank's output")
    ap.add_argument("--only", choices=["socket", "mrc"], help="run one transport only")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per transport run (both ranks)")
    ap.add_argument("--op-timeout", type=int, default=120, help="NCCL collective timeout, seconds")
    ap.add_argument("--verbose", action="store_true", help="print the ranks' whole output")
    ap.add_argument("--mps", choices=["auto", "on", "off"], default="auto",
                    help="run the ranks under a private MPS daemon (auto: when nvidia-cuda-mps-control exists)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--transport", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    transports = [args.only] if args.only else ["socket", "mrc"]
    if "mrc" in transports:
        if not args.plugin or not os.path.isfile(args.plugin):
            ap.error(f"--plugin must name libnccl-net-mrc.so (got {args.plugin!r}); build it with nccl-plugin/install.sh")
        args.plugin = os.path.abspath(args.plugin)
    os.makedirs(args.out, exist_ok=True)
    mps = Mps(args.mps, args.out)
    args.mps_env = mps.env
    try:
        return compare(args, transports, mps.note)
    finally:
        mps.stop()


def compare(args, transports, mps_note):
    import torch
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
          f"GPU {torch.cuda.get_device_name(0)}; sizes 1 KiB .. 256 MiB; logs in {args.out}; {mps_note}; "
          f"channels {' '.join(f'{k}={os.environ[k]}' for k in PASSED_THROUGH if k in os.environ) or 'NCCL default'}",
          flush=True)
    res, problems = {}, []
    for t in transports:
        print(f"== {t}", flush=True)
        r, p = run_transport(args, t)
        res[t] = r
        problems += p
    if res.get("socket") and res.get("mrc"):
        print(f"\n{'size':>10}  {'Socket GB/s':>12}  {'MRC GB/s':>10}  {'MRC/Socket':>10}")
        ratios = []
        for s, m in zip(res["socket"], res["mrc"]):
            ratio = m["busbw"] / s["busbw"] if s["busbw"] > 0 else float("nan")
            if s["size"] >= 1 << 20:
                ratios.append(ratio)
            print(f"{s['size']:>10}  {s['busbw']:>12.3f}  {m['busbw']:>10.3f}  {ratio:>10.2f}")
        big = res["mrc"][-1]["busbw"] / res["socket"][-1]["busbw"]
        geo = 1.0
        for r in ratios:
            geo *= r
        geo **= 1 / max(len(ratios), 1)
        print(f"\nbus-bandwidth ratio MRC/Socket: {big:.2f} at 256 MiB, {geo:.2f} geometric mean over 1 MiB..256 MiB")
    for p in problems:
        print(f"PROBLEM: {p}")
    print("PASS" if not problems else "FAIL")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())

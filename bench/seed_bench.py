#!/usr/bin/env python3
"""What a hash seed costs: BF.ADD and BF.EXISTS on a seeded filter against an unseeded one
(SEED 0), and BF.ADD creating filters (a new key each) with `bf-seed random` against `bf-seed 0`
(the random draw).

Starts one redis-server (REDIS_SERVER, default `redis-server`) with the module (LCBLOOM_MODULE,
default target/release/liblcbloom.so) on a free loopback port. Each workload runs
redis-benchmark (50 clients, random items via __rand_int__) in alternating rounds: unseeded,
seeded, unseeded, seeded... Every run is preceded by CONFIG RESETSTAT and followed by INFO
commandstats, whose usec_per_call (time inside the command) is the number compared; the ratio
is seeded ÷ unseeded, the median of the per-round ratios (above 1: the seed costs time).
Items are 16 bytes, and 300 bytes (past XXH3's 240, where a seed derives its secret per call).
Knobs: BENCH_ROUNDS (default 7), BENCH_REQUESTS (per run, default 200000), BENCH_OUT (the
result file, default bench/results/seed-<date>.md). Only the server this script started is
contacted or stopped.
"""
import datetime
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER_BIN = os.environ.get("REDIS_SERVER", "redis-server")
BENCH_BIN = os.environ.get("REDIS_BENCHMARK", "redis-benchmark")
MODULE = os.path.abspath(os.environ.get("LCBLOOM_MODULE", os.path.join(ROOT, "target/release/liblcbloom.so")))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "200000"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server():
    port = free_port()
    work = tempfile.mkdtemp(prefix="seed-bench-")
    proc = subprocess.Popen(
        [SERVER_BIN, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", work, "--loadmodule", MODULE],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            return proc, port, client
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("redis-server did not start")


def usec_per_call(client, port, command, args):
    client.config_resetstat()
    subprocess.run([BENCH_BIN, "-p", str(port), "-c", "50", "-n", str(REQUESTS), "-r", "100000000",
                    "-q", command, *args], check=True, stdout=subprocess.DEVNULL)
    stats = client.info("commandstats")
    return stats["cmdstat_" + command.lower()]["usec_per_call"]


def main():
    load = os.getloadavg()
    proc, port, client = start_server()
    long_tail = "x" * 284
    try:
        client.execute_command("BF.RESERVE", "unseeded", "0.01", "1000000", "SEED", "0")
        client.execute_command("BF.RESERVE", "seeded", "0.01", "1000000")
        header = client.execute_command("BF.SCANDUMP", "seeded", "0")[1]
        assert header[4] == 4, "the seeded filter is not seeded"
        workloads = [
            ("BF.ADD 16-byte items", "BF.ADD", lambda k: [k, "item:__rand_int__"], None),
            ("BF.EXISTS 16-byte items", "BF.EXISTS", lambda k: [k, "item:__rand_int__"], None),
            ("BF.ADD 300-byte items", "BF.ADD", lambda k: [k, long_tail + "__rand_int__"], None),
            ("BF.EXISTS 300-byte items", "BF.EXISTS", lambda k: [k, long_tail + "__rand_int__"], None),
            # A new key per command: the create draws the seed (bf-seed random) or not (0).
            ("BF.ADD creating a filter", "BF.ADD", lambda k: ["new:__rand_int__", "a"], "create"),
        ]
        rows = []
        for name, command, args, create in workloads:
            times = {"unseeded": [], "seeded": []}
            ratios = []
            for _ in range(ROUNDS):
                for kind in ("unseeded", "seeded"):
                    if create:
                        client.config_set("lcbloom.bf-seed", "0" if kind == "unseeded" else "random")
                    times[kind].append(usec_per_call(client, port, command, args(kind)))
                    if create:
                        for key in client.scan_iter("new:*", count=10000):
                            client.unlink(key)
                ratios.append(times["seeded"][-1] / times["unseeded"][-1])
            rows.append((name, statistics.median(times["unseeded"]), statistics.median(times["seeded"]),
                         statistics.median(ratios)))
    finally:
        proc.terminate()
        proc.wait()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    out = [f"# Hash seeds: seeded against unseeded filters ({datetime.date.today()})", "",
           f"CPU: {cpu}, {os.cpu_count()} cores; load before the run {load[0]:.2f}; "
           f"{ROUNDS} alternating rounds of {REQUESTS} requests, 50 clients; "
           f"server {SERVER_BIN}; filters 0.01 / 1,000,000. usec_per_call from INFO commandstats "
           "(medians); ratio = seeded ÷ unseeded, the median of the per-round ratios.", "",
           "| workload | unseeded µs | seeded µs | ratio |", "|---|---|---|---|"]
    out += [f"| {n} | {u:.3f} | {s:.3f} | {r:.3f} |" for n, u, s, r in rows]
    text = "\n".join(out) + "\n"
    print(text)
    path = os.environ.get("BENCH_OUT") or os.path.join(
        ROOT, "bench/results", f"seed-{datetime.date.today()}.md")
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Server time per create, two modules side by side: each workload runs on a fresh redis-server
(so that no round pays for the dict growth or rehashing of keys an earlier one made), 400,000
calls through redis-benchmark at pipeline 16 from 20 clients, every call creating a key
(keys drawn from 10^8). The time is the server's own per call (INFO commandstats), the median
of ROUNDS alternating rounds; the ratio is A's time over B's.

Workloads: LC.ADD of 1 and of 30 items creating a default counter, BF.ADD of 1 item and BF.MADD
of 30 creating a default filter, BF.INSERT of 30 creating a 30-day windowed filter, and PFADD of
1 item creating a HyperLogLog (the same server code either way: its spread is the noise). A
module that refuses a workload's command (RedisBloom: LC.*, WINDOW) leaves its row out.

Usage: creates_ab.py A.so B.so [ROUNDS]   (docs/BENCHMARKS.md, "Creating counters" and "Small keys,
created with the defaults")
"""
import socket
import statistics
import subprocess
import sys
import time

import redis

ITEMS30 = " ".join(["__rand_int__"] * 30)
WORKLOADS = {
    "LC.ADD of 1 item creating a default counter": "LC.ADD lcnew:__rand_int__ __rand_int__",
    "LC.ADD of 30 items creating a default counter": f"LC.ADD lcnew30:__rand_int__ {ITEMS30}",
    "BF.ADD of 1 item creating a default filter": "BF.ADD bfnew1:__rand_int__ __rand_int__",
    "BF.MADD of 30 items creating a default filter": f"BF.MADD bfnew:__rand_int__ {ITEMS30}",
    "BF.INSERT of 30 items creating a windowed filter":
        f"BF.INSERT bfwin:__rand_int__ WINDOW 2592000 ITEMS {ITEMS30}",
    "PFADD of 1 item creating a HyperLogLog": "PFADD hllnew:__rand_int__ __rand_int__",
}
CALLS = 400_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_time(module, command):
    """µs per call of `command` on a fresh server with `module`; None if it refuses the command."""
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                             "--loadmodule", module], stdout=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port)
        for _ in range(200):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        name = command.split()[0]
        try:
            r.execute_command(*command.replace("__rand_int__", "0").split())
        except redis.ResponseError:
            return None
        subprocess.run(["redis-benchmark", "-p", str(port), "-P", "16", "-c", "20", "-n", str(CALLS),
                        "-r", "100000000", "-q", *command.split()],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return r.info("commandstats")["cmdstat_" + name.lower()]["usec_per_call"]
    finally:
        proc.terminate()
        proc.wait()


def main():
    a, b = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    times = {(side, w): [] for side in "ab" for w in WORKLOADS}
    for i in range(rounds):
        for side, module in ([("a", a), ("b", b)] if i % 2 == 0 else [("b", b), ("a", a)]):
            for w, command in WORKLOADS.items():
                times[(side, w)].append(server_time(module, command))
    print(f"A: {a}\nB: {b}\n{rounds} alternating rounds, {CALLS:,} creates each, pipeline 16, 20 clients.\n")
    print("| workload | A µs/call | B µs/call | A ÷ B (rounds) |")
    print("|---|---:|---:|---|")
    for w in WORKLOADS:
        ta, tb = times[("a", w)], times[("b", w)]
        if None in ta or None in tb:
            continue
        ratios = " ".join(f"{x / y:.2f}" for x, y in zip(ta, tb))
        print(f"| {w} | {statistics.median(ta):.2f} | {statistics.median(tb):.2f} | "
              f"{statistics.median(x / y for x, y in zip(ta, tb)):.2f} ({ratios}) |")


if __name__ == "__main__":
    main()

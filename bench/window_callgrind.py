#!/usr/bin/env python3
"""Instructions per BF.ADD / BF.EXISTS call on a windowed filter and on a plain filter of the
same capacity and rate, counted by callgrind inside a real redis-server (window_speed.py's
filters: 0.01 / 10^7, each holding 10^6 items, the windowed one `WINDOW 3600`). The plumbing is
lc_callgrind.py's: instrumentation on only while a workload's 2,000 calls run, counting inside
RedisModuleCommandDispatcher (the module's command, the module API it calls and what it
replicates, not the network). Items are 12-digit random numbers, as redis-benchmark's
__rand_int__.

Usage: window_callgrind.py MODULE.so [OUTDIR]
"""
import random

import bf_callgrind
from lc_callgrind import CALLS, connect, time_workloads

CAPACITY = 10_000_000
PREFILL = 1_000_000
rng = random.Random(20261123)


def item():
    return f"{rng.randrange(100_000_000):012d}"


def run(port, pid):
    r = connect(port)
    r.execute_command("BF.RESERVE", "plain", "0.01", CAPACITY)
    r.execute_command("BF.RESERVE", "windowed", "0.01", CAPACITY, "WINDOW", 3600)
    for key in ("plain", "windowed"):
        pipe = r.pipeline(transaction=False)
        for start in range(0, PREFILL, 1000):
            pipe.execute_command("BF.MADD", key, *[f"pre{i}" for i in range(start, start + 1000)])
        pipe.execute()
    workloads = {}
    for command in ("BF.ADD", "BF.EXISTS"):
        for key in ("plain", "windowed"):
            name = f"{command[3:].lower()}_{key}"
            workloads[name] = [(command, key, item()) for _ in range(CALLS)]
    time_workloads(r, pid, workloads)


if __name__ == "__main__":
    bf_callgrind.main(run, "window-callgrind-")

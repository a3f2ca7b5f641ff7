#!/usr/bin/env python3
"""Instructions per BF.ADD / BF.EXISTS call on a windowed filter and on a plain filter of the
same capacity and rate, counted by callgrind inside a real redis-server (window_speed.py's
filters: 0.01 / 10^7, each holding 10^6 items, the windowed one `WINDOW 3600`). The plumbing is
lc_callgrind.py's: instrumentation on only while a workload's 2,000 calls run, counting inside
RedisModuleCommandDispatcher (the module's command, the module API it calls and what it
replicates, not the network). Items are 12-digit random numbers, as redis-benchmark's
__rand_int__.

Batches, drawn after those (so that their items stay those of earlier runs):
- insert30_windowed_new: BF.INSERT key WINDOW 2592000 ITEMS of 30 items, creating the filter
  (a customer's first import into a 30-day filter);
- madd30_windowed_small: BF.MADD of 30 new items to one of 2,000 such filters holding 60
  items added in the same slot;
- madd100_windowed: BF.MADD of 100 new items to the windowed filter above (10^6 items in its
  newest slot: stored one at a time).

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
    pipe = r.pipeline(transaction=False)
    for i in range(CALLS):
        pipe.execute_command("BF.INSERT", f"small:{i}", "WINDOW", 2592000, "ITEMS",
                             *[f"s{i}:{j}" for j in range(60)])
    pipe.execute()
    workloads["insert30_windowed_new"] = [
        ("BF.INSERT", f"new:{i}", "WINDOW", 2592000, "ITEMS", *[item() for _ in range(30)])
        for i in range(CALLS)]
    workloads["madd30_windowed_small"] = [
        ("BF.MADD", f"small:{i}", *[item() for _ in range(30)]) for i in range(CALLS)]
    workloads["madd100_windowed"] = [
        ("BF.MADD", "windowed", *[item() for _ in range(100)]) for _ in range(CALLS)]
    time_workloads(r, pid, workloads)


if __name__ == "__main__":
    bf_callgrind.main(run, "window-callgrind-")

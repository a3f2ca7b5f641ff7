#!/usr/bin/env python3
"""Instructions per BF.* call, counted by callgrind inside a real redis-server (the workloads of
`make bench`'s server benchmark, which a shared machine cannot time reliably; two builds are
compared with it, docs/BENCHMARKS.md). The plumbing is lc_callgrind.py's: instrumentation on only
while a workload's 2,000 calls run, counting inside RedisModuleCommandDispatcher.

Workloads (items are 12-digit random numbers, as redis-benchmark's __rand_int__):
- add_10m, exists_10m, madd100_10m: BF.ADD / BF.EXISTS / BF.MADD of 100 on a 0.01/10M filter;
- add_scaling, exists_scaling: on a default-created filter (0.01/100/×2) grown to 1M items
  (14 sub-filters: its first seven are sparse sets);
- add_200m, madd100_200m, mexists100_200m, and the same on a blocked filter: 0.001/200M;
- madd30_new, add_new: BF.MADD of 30 items, and BF.ADD of one, creating a default filter each time;
- exists_small: BF.EXISTS on default filters holding 30 items;
- madd30_small: BF.MADD of 30 new items into those filters (sparse sets merged with a batch);
- madd100_2m_members, mexists100_2m_members: BF.MADD / BF.MEXISTS of 100 members of a cached
  0.001/2M filter holding the numbers 0 to 999,999 (the server benchmark's cached rows).

Usage: bf_callgrind.py MODULE.so [OUTDIR]. MODULE.so may be RedisBloom's: the blocked rows are
left out, and its counts are in the first column only (the others name lcbloom's functions).
"""
import os
import random
import sys
import tempfile

import redis

from lc_callgrind import CALLS, connect, report, time_workloads, under_callgrind

rng = random.Random(20261123)


def item():
    return f"{rng.randrange(100_000_000):012d}"


def run(port, pid):
    r = connect(port)

    def fill(key, n, prefix):
        pipe = r.pipeline(transaction=False)
        for start in range(0, n, 1000):
            pipe.execute_command("BF.MADD", key, *[f"{prefix}{i}" for i in range(start, min(n, start + 1000))])
        pipe.execute()

    r.execute_command("BF.RESERVE", "bf10m", "0.01", "10000000")
    r.execute_command("BF.RESERVE", "bf200m", "0.001", "200000000")
    r.execute_command("BF.RESERVE", "bfblk", "0.001", "200000000", "LAYOUT", "blocked")
    try:
        r.execute_command("BF.INFO", "bfblk", "LAYOUT")
        blocked = True
    except redis.ResponseError:  # RedisBloom: no layouts (it ignored LAYOUT), no blocked rows
        blocked = False
        r.delete("bfblk")
    fill("scaling", 1_000_000, "prefill:")
    r.execute_command("BF.RESERVE", "bf2m", "0.001", "2000000")
    fill("bf2m", 1_000_000, "")

    def member():
        return str(rng.randrange(1_000_000))

    for i in range(CALLS):
        fill(f"small:{i}", 30, f"s{i}:")
    workloads = {
        "add_10m": [("BF.ADD", "bf10m", item()) for _ in range(CALLS)],
        "exists_10m": [("BF.EXISTS", "bf10m", item()) for _ in range(CALLS)],
        "madd100_10m": [("BF.MADD", "bf10m", *[item() for _ in range(100)]) for _ in range(CALLS)],
        "add_scaling": [("BF.ADD", "scaling", item()) for _ in range(CALLS)],
        "exists_scaling": [("BF.EXISTS", "scaling", item()) for _ in range(CALLS)],
        "add_200m": [("BF.ADD", "bf200m", item()) for _ in range(CALLS)],
        "madd100_200m": [("BF.MADD", "bf200m", *[item() for _ in range(100)]) for _ in range(CALLS)],
        "mexists100_200m": [("BF.MEXISTS", "bf200m", *[item() for _ in range(100)]) for _ in range(CALLS)],
        "madd30_new": [("BF.MADD", f"new:{i}", *[item() for _ in range(30)]) for i in range(CALLS)],
        "exists_small": [("BF.EXISTS", f"small:{rng.randrange(CALLS)}", item()) for _ in range(CALLS)],
        "madd100_2m_members": [("BF.MADD", "bf2m", *[member() for _ in range(100)]) for _ in range(CALLS)],
        "mexists100_2m_members": [("BF.MEXISTS", "bf2m", *[member() for _ in range(100)]) for _ in range(CALLS)],
    }
    if blocked:
        workloads.update({
            "add_200m_blocked": [("BF.ADD", "bfblk", item()) for _ in range(CALLS)],
            "madd100_200m_blocked": [("BF.MADD", "bfblk", *[item() for _ in range(100)]) for _ in range(CALLS)],
            "mexists100_200m_blocked": [("BF.MEXISTS", "bfblk", *[item() for _ in range(100)]) for _ in range(CALLS)],
        })
    # Drawn last, so that the other workloads' items stay those of earlier runs.
    workloads["add_new"] = [("BF.ADD", f"new1:{i}", item()) for i in range(CALLS)]
    workloads["madd30_small"] = [("BF.MADD", f"small:{i}", *[item() for _ in range(30)]) for i in range(CALLS)]
    time_workloads(r, pid, workloads)


def main(workloads=run, prefix="bf-callgrind-"):
    """Runs `workloads(port, pid)` under callgrind and prints the table (window_callgrind.py
    passes its own)."""
    module = os.path.abspath(sys.argv[1])
    out = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix=prefix)
    os.makedirs(out, exist_ok=True)
    under_callgrind(module, out, workloads)
    print(f"module {module}")
    report(out, CALLS)


if __name__ == "__main__":
    main()

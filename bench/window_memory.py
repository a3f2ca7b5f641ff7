#!/usr/bin/env python3
"""Bits per item of windowed filters against a plain filter, by MEMORY USAGE at 10^6 items
per window (docs/BENCHMARKS.md, "Windowed filters: bits per item").

A windowed filter (WINDOW 100) gets a steady stream at capacity for two windows through
BF.INSERT ... AT <t> (filter time, not wall time, so the run takes seconds): 1,000 items per
100 ms. MEMORY USAGE is read after every batch of the second window; the largest and the mean
are reported. A plain non-scaling filter of the same capacity and rate is filled with 10^6
items for comparison. Memory does not depend on the machine's load.

Usage: window_memory.py PORT (a server with lcbloom loaded, nothing else in db 0).
"""
import sys
import time

import redis

N = 1_000_000
BATCH = 1_000
# ms, a multiple of the 25 s slots of a 100 s window, an hour in the past: the run spans 200 s
# of filter time, and `AT` may not pass the server's clock.
T0 = (int(time.time()) - 3_600) // 25 * 25_000


def windowed(r, rate, scaling):
    r.delete("m")
    growth = [] if scaling else ["NONSCALING"]
    r.execute_command("BF.RESERVE", "m", rate, N, *growth, "WINDOW", 100)
    usage = []
    for b in range(2 * N // BATCH):
        items = [f"i{b}:{j}" for j in range(BATCH)]
        r.execute_command("BF.INSERT", "m", "AT", T0 + b * 100, "ITEMS", *items)
        if b >= N // BATCH:
            usage.append(r.memory_usage("m"))
    return max(usage), sum(usage) / len(usage)


def plain(r, rate):
    r.delete("p")
    r.execute_command("BF.RESERVE", "p", rate, N, "NONSCALING")
    for b in range(N // BATCH):
        r.execute_command("BF.MADD", "p", *[f"i{b}:{j}" for j in range(BATCH)])
    return r.memory_usage("p")


def main():
    r = redis.Redis(port=int(sys.argv[1]))
    bits = lambda nbytes: nbytes * 8 / N
    for rate in (0.01, 0.001):
        print(f"rate {rate}: plain non-scaling {bits(plain(r, rate)):.2f} bits/item")
        for scaling in (False, True):
            most, mean = windowed(r, rate, scaling)
            kind = "scaling" if scaling else "non-scaling"
            print(
                f"rate {rate}: windowed {kind}: largest {bits(most):.2f}, "
                f"mean {bits(mean):.2f} bits/item over the second window"
            )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""LC.MERGE's server time by destination: a new key, an empty coarser one, an empty exact one of
another size, and a merge that changes nothing; each module in turn (two builds compared).

Sources: 300 default counters of 3,000 random items each and 100 of 100 items (exact).
The destination is deleted (and reserved again where the row says) before each of 15 merges;
the median of the merges' client-timed milliseconds on a loopback connection is printed.

Usage: lc_merge_bench.py MODULE.so [MODULE.so ...]
"""
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import Server, machine  # noqa: E402

ROWS = [
    ("300 sketches into a new key", "s", None, 15),
    ("300 sketches into an empty 5% key", "s", ("LC.RESERVE", "d", "0.05", "100"), 15),
    ("100 exact counters into an empty exact one of another size", "e",
     ("LC.RESERVE", "d", "0.01", "100"), 15),
    ("a counter into itself (changes nothing)", "self", None, 30),
]


def fill(c):
    rng = random.Random(1)
    pipe = c.pipeline(transaction=False)
    for i in range(300):
        pipe.execute_command("LC.ADD", f"s{i}", *[rng.randrange(10**6) for _ in range(3000)])
    for i in range(100):
        pipe.execute_command("LC.ADD", f"e{i}", *[rng.randrange(10**6) for _ in range(100)])
    pipe.execute()


def merge_ms(c, sources, reserve, runs):
    times = []
    for _ in range(runs):
        if sources == "self":
            command = ("LC.MERGE", "s0", "s0")
        else:
            c.delete("d")
            if reserve:
                c.execute_command(*reserve)
            count = 300 if sources == "s" else 100
            command = ("LC.MERGE", "d", *[f"{sources}{i}" for i in range(count)])
        start = time.perf_counter()
        c.execute_command(*command)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    modules = sys.argv[1:]
    if not modules:
        sys.exit(__doc__)
    results = []
    for module in modules:
        server = Server(module, module)
        try:
            fill(server.client)
            results.append([merge_ms(server.client, *row[1:]) for row in ROWS])
        finally:
            server.close()
    print(f"LC.MERGE, ms (median), {machine()}\n")
    print("| destination | " + " | ".join(os.path.basename(m) for m in modules) + " |")
    print("|---|" + "---:|" * len(modules))
    for i, row in enumerate(ROWS):
        print(f"| {row[0]} | " + " | ".join(f"{r[i]:.2f}" for r in results) + " |")


if __name__ == "__main__":
    main()

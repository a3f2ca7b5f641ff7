#!/usr/bin/env python3
"""Unions of exact counters of several sizes: how often their count is exact, and its time.

Usage: lc_exact_sizes_bench.py [MODULE ...] (default target/release/liblcbloom.so); each module
on a server of its own, the same keys and items in each.

Accuracy: 300 trials of three exact counters reserved at 0.01 / 1,000, 0.01 / 50,000 and
0.002 / 20,000 (exact up to 83, 267 and 2,055 items), holding up to 83, 267 and 400 random
items with random overlaps; `LC.COUNT` of the pairs and of all three against the true number of distinct items,
and `LC.COUNT` of a key `LC.MERGE` made of them against `LC.COUNT` of its sources.

Time: 60 counters at 0.01 / 50,000 and 60 at 0.01 / 40,000 (two sizes, as `lc-capacity` changed
once), 230 random items each (exact), `LC.COUNT` over 2, 10 and all 120 of them, half of each
size, and, for reference, over as many counters of one size; `LC.MERGE` of 10 and of 120 of
them into a new key; server time per call (INFO commandstats), medians of ROUNDS (default 5)
rounds of 30 calls, the modules taking turns.
"""
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import OUR_MODULE, Server, machine  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "5"))
# (rate, capacity, most items)
SIZES = [(0.01, 1_000, 83), (0.01, 50_000, 267), (0.002, 20_000, 400)]


def accuracy(client):
    rng = random.Random(3)
    wrong, counts, merged_apart = [], 0, 0
    for t in range(300):
        sets = []
        shared = [f"s{t}_{i}" for i in range(40)]
        for k, (rate, capacity, most) in enumerate(SIZES):
            n = rng.randint(1, most)
            overlap = rng.randint(0, min(n, len(shared)))
            items = shared[:overlap] + [f"k{k}_{t}_{i}" for i in range(n - overlap)]
            client.execute_command("LC.RESERVE", f"{k}:{t}", rate, capacity)
            client.execute_command("LC.ADD", f"{k}:{t}", *items)
            sets.append(set(items))
        for pick in [(0, 1), (1, 2), (0, 2), (0, 1, 2)]:
            keys = [f"{k}:{t}" for k in pick]
            truth = len(set().union(*(sets[k] for k in pick)))
            got = client.execute_command("LC.COUNT", *keys)
            counts += 1
            if got != truth:
                wrong.append(got - truth)
            merged = f"m{''.join(map(str, pick))}:{t}"
            client.execute_command("LC.MERGE", merged, *keys)
            merged_apart += client.execute_command("LC.COUNT", merged) != got
    return counts, wrong, merged_apart


def fill(client, rng):
    for prefix, capacity in [("a", 50_000), ("b", 40_000), ("c", 50_000)]:
        for i in range(60):
            key = f"{prefix}{i}"
            client.execute_command("LC.RESERVE", key, 0.01, capacity)
            client.execute_command("LC.ADD", key, *[f"u{rng.randrange(10**12)}" for _ in range(230)])


def timed(client, command, keys):
    client.config_resetstat()
    for _ in range(30):
        if command == "LC.MERGE":
            client.delete("merged")
            client.execute_command(command, "merged", *keys)
        else:
            client.execute_command(command, *keys)
    return client.info("commandstats")[f"cmdstat_{command.lower()}"]["usec_per_call"]


def main():
    modules = sys.argv[1:] or [OUR_MODULE]
    servers = [Server(os.path.basename(m), m) for m in modules]
    try:
        info = servers[0].client.info("server")
        print(f"{info.get('server_name', 'redis')} {info.get('valkey_version', info['redis_version'])} "
              f"on {machine()}; {ROUNDS} rounds, server time per call (median)")
        for module, server in zip(modules, servers):
            counts, wrong, apart = accuracy(server.client)
            print(f"{module}: LC.COUNT not exact in {len(wrong)} of {counts} unions "
                  f"(off by {sorted(set(wrong))}); merged keys counting apart from their sources: {apart}")
            server.client.flushall()
            fill(server.client, random.Random(7))
        two = lambda n: [f"{p}{i}" for p in "ab" for i in range(n // 2)]  # noqa: E731
        shapes = {
            "LC.COUNT, 2 keys, two sizes (460 items)": ("LC.COUNT", two(2)),
            "LC.COUNT, 10 keys, two sizes (2,300)": ("LC.COUNT", two(10)),
            "LC.COUNT, 120 keys, two sizes (27,600)": ("LC.COUNT", two(120)),
            "LC.COUNT, 120 keys, one size (27,600)": ("LC.COUNT", [f"{p}{i}" for p in "ac" for i in range(60)]),
            "LC.MERGE into a new key, 10 keys, two sizes": ("LC.MERGE", two(10)),
            "LC.MERGE into a new key, 120 keys, two sizes": ("LC.MERGE", two(120)),
        }
        times = {(shape, m): [] for shape in shapes for m in modules}
        for _ in range(ROUNDS):
            for module, server in zip(modules, servers):
                for shape, (command, keys) in shapes.items():
                    times[(shape, module)].append(timed(server.client, command, keys))
        for shape in shapes:
            line = ", ".join(f"{os.path.basename(m)} {statistics.median(times[(shape, m)]):.1f} us"
                             for m in modules)
            print(f"{shape}: {line}")
    finally:
        for server in servers:
            server.close()


if __name__ == "__main__":
    main()

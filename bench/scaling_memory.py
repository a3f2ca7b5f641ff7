#!/usr/bin/env python3
"""Memory and false-positive rate of scaling filters by growth, lcbloom against RedisBloom.

For each growth g, a filter is reserved at 0.01 / 1000 (scaling, expansion 2) and fed
1000·g distinct items; the table shows MEMORY USAGE × 8 ÷ items (bits per item) and the
false-positive rate over 100,000 non-members, for lcbloom and (with PEER_MODULE) RedisBloom.
It measures the trade-off of the error-rate schedule (src/bloom/chain.rs); docs/BENCHMARKS.md
holds a run. Not a test: nothing is asserted. Usage (from the repository root):

    PEER_MODULE=.tools/redisbloom.so .venv/bin/python bench/scaling_memory.py

Knobs: GROWTHS (comma-separated, default 1,2,4,10,100,1000), RATE, CAPACITY.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import OUR_MODULE, PEER_MODULE, Server, fill, log, mexists_hits  # noqa: E402

GROWTHS = [int(g) for g in os.environ.get("GROWTHS", "1,2,4,10,100,1000").split(",")]
RATE = os.environ.get("RATE", "0.01")
CAPACITY = int(os.environ.get("CAPACITY", "1000"))
PROBES = 100_000


def measure(server, growth):
    key = f"grown{growth}"
    items = CAPACITY * growth
    server.client.execute_command("BF.RESERVE", key, RATE, CAPACITY)
    fill(server, "BF.MADD", key, "member:", items)
    bits = server.client.memory_usage(key) * 8 / items
    fp = mexists_hits(server, key, "absent:", PROBES) / PROBES
    filters = server.client.execute_command("BF.INFO", key, "FILTERS")[0]
    server.client.delete(key)
    return bits, fp, filters


def main():
    sides = [("lcbloom", Server("lcbloom", OUR_MODULE))]
    if PEER_MODULE:
        sides.append(("RedisBloom", Server("peer", PEER_MODULE)))
    try:
        results = {}
        for growth in GROWTHS:
            for label, server in sides:
                log(f"== {label} {growth}x")
                results[(label, growth)] = measure(server, growth)
    finally:
        for _, server in sides:
            server.close()
    labels = [label for label, _ in sides]
    header = ["growth", "items"] + [f"{label} bits/item (FP, filters)" for label in labels]
    if PEER_MODULE:
        header.append("lcbloom ÷ RedisBloom memory")
    print(f"Scaling filters reserved at {RATE} / {CAPACITY}, expansion 2; "
          f"FP over {PROBES:,} non-members.\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for growth in GROWTHS:
        row = [f"{growth}×", f"{CAPACITY * growth:,}"]
        for label in labels:
            bits, fp, filters = results[(label, growth)]
            row.append(f"{bits:.1f} ({fp:.4f}, {filters})")
        if PEER_MODULE:
            row.append(f"{results[('lcbloom', growth)][0] / results[('RedisBloom', growth)][0]:.2f}")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What keys of parameters of their own cost: filters (counters) created alike share one copy
of their parameters (geometry); a key whose rate or capacity no other key has pays for its copy
alone, and its MEMORY USAGE counts it. For each module given (lcbloom builds before and after a
change), thousands of keys of one shape, created alike or each with parameters of its own:
used_memory growth and MEMORY USAGE per key, and what FLUSHALL leaves (the tables' entries,
freed at their next sweep).

Usage: params_memory.py LCBLOOM.so [LCBLOOM.so ...]   (prints a markdown table)
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import Server  # noqa: E402

# (name, keys, the create command and its arguments after the key for key i, the add command,
# items per key)
SHAPES = [
    ("filters 0.001 / 100 alike, 30 items", 20_000,
     lambda i: ("BF.RESERVE", 0.001, 100), "BF.MADD", 30),
    ("filters 0.001·(1 + i/10⁶) / 100, each its own rate, 30 items", 20_000,
     lambda i: ("BF.RESERVE", 0.001 * (1 + i / 1e6), 100), "BF.MADD", 30),
    ("filters 0.1·(1 + i/10⁶) / 10 EXPANSION 1, each its own rate, 300 items (30 sub-filters)",
     5_000, lambda i: ("BF.RESERVE", 0.1 * (1 + i / 1e6), 10, "EXPANSION", 1), "BF.MADD", 300),
    ("counters 0.01 / 1,000 alike, 50 items", 20_000,
     lambda i: ("LC.RESERVE", 0.01, 1000), "LC.ADD", 50),
    ("counters 0.01 / (1,000 + i), each its own capacity, 50 items", 20_000,
     lambda i: ("LC.RESERVE", 0.01, 1000 + i), "LC.ADD", 50),
]


def used_memory(client):
    time.sleep(0.3)  # lets the keyspace's incremental rehash settle
    return int(client.info("memory")["used_memory"])


def measure(client, keys, create, add, items):
    client.flushall()
    base = used_memory(client)
    pipe = client.pipeline(transaction=False)
    for i in range(keys):
        command, *args = create(i)
        pipe.execute_command(command, f"k{i}", *args)
        for start in range(0, items, 1000):
            batch = [f"{i}-{j}" for j in range(start, min(items, start + 1000))]
            pipe.execute_command(add, f"k{i}", *batch)
        if i % 100 == 99:
            pipe.execute()
    pipe.execute()
    grown = used_memory(client) - base
    usage = sum(client.memory_usage(f"k{i}") for i in range(keys))
    client.flushall()
    left = used_memory(client) - base
    return grown / keys, usage / keys, left


def main():
    print("| module | shape | used_memory B/key | MEMORY USAGE B/key | left after FLUSHALL (B) |")
    print("|---|---|---:|---:|---:|")
    for module in sys.argv[1:]:
        server = Server(os.path.basename(module), os.path.abspath(module))
        try:
            for name, keys, create, add, items in SHAPES:
                grown, usage, left = measure(server.client, keys, create, add, items)
                print(f"| {os.path.basename(os.path.dirname(module)) or module} | {name} "
                      f"| {grown:,.0f} | {usage:,.0f} | {left:,} |")
        finally:
            server.close()


if __name__ == "__main__":
    main()

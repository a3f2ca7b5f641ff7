#!/usr/bin/env python3
"""What keys of parameters of their own cost: filters created alike share one interned copy of
their parameters, which MEMORY USAGE leaves out; a filter whose rate or capacity no other key
has pays for its copy alone. For each module given (lcbloom builds before and after a change),
thousands of filters of one shape, created alike or each with its own rate: used_memory growth
and MEMORY USAGE per key, and what FLUSHALL leaves (the parameter table's entries, freed at its
next sweep).

Usage: params_memory.py LCBLOOM.so [LCBLOOM.so ...]   (prints a markdown table)
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import Server  # noqa: E402

# (name, keys, the BF.RESERVE arguments after the key for key i, items per key)
SHAPES = [
    ("0.001 / 100 alike, 30 items", 20_000, lambda i: (0.001, 100), 30),
    ("0.001·(1 + i/10⁶) / 100, each its own rate, 30 items", 20_000,
     lambda i: (0.001 * (1 + i / 1e6), 100), 30),
    ("0.1i / 10 EXPANSION 1, each its own rate, 300 items (30 sub-filters)", 5_000,
     lambda i: (f"0.1{i}", 10, "EXPANSION", 1), 300),
]


def used_memory(client):
    time.sleep(0.3)  # lets the keyspace's incremental rehash settle
    return int(client.info("memory")["used_memory"])


def measure(client, keys, reserve, items):
    client.flushall()
    base = used_memory(client)
    pipe = client.pipeline(transaction=False)
    for i in range(keys):
        pipe.execute_command("BF.RESERVE", f"k{i}", *reserve(i))
        for start in range(0, items, 1000):
            batch = [f"{i}-{j}" for j in range(start, min(items, start + 1000))]
            pipe.execute_command("BF.MADD", f"k{i}", *batch)
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
            for name, keys, reserve, items in SHAPES:
                grown, usage, left = measure(server.client, keys, reserve, items)
                print(f"| {os.path.basename(os.path.dirname(module)) or module} | {name} "
                      f"| {grown:,.0f} | {usage:,.0f} | {left:,} |")
        finally:
            server.close()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Real memory of large reserved Bloom filters: the used_memory growth each BF.RESERVE causes
(server_bench.py's `key_cost`: built twice, the first time unmeasured), with MEMORY USAGE beside
it, for each module given (lcbloom builds before and after a change, RedisBloom). The sizes are
chosen around jemalloc's classes (four per doubling), which cost one allocation up to 25%: a
filter's bits just over a class boundary cost most. PEER_MODULE (RedisBloom) gets the standard
rows only: it ignores LAYOUT and would build a standard filter.

Usage: [PEER_MODULE=redisbloom.so] large_memory.py LCBLOOM.so [LCBLOOM.so ...]
(prints a markdown table)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import Server, key_cost  # noqa: E402

RESERVES = [
    ("0.001", "200000000"),
    ("0.001", "200000000", "LAYOUT", "blocked"),
    ("0.01", "28100000", "NONSCALING"),
    ("0.001", "500000000", "LAYOUT", "blocked"),
    ("0.01", "600000000"),
]


def main():
    print("| module | BF.RESERVE | used_memory growth (B) | MEMORY USAGE (B) |")
    print("|---|---|---:|---:|")
    peer = os.environ.get("PEER_MODULE")
    for module in sys.argv[1:] + ([peer] if peer else []):
        server = Server(os.path.basename(module), os.path.abspath(module))
        try:
            for args in RESERVES:
                if module == peer and "LAYOUT" in args:
                    continue
                usage = []

                def build(via, args=args):
                    via.client.execute_command("BF.RESERVE", "big", *args)
                    usage.append(via.client.execute_command("MEMORY", "USAGE", "big"))

                try:
                    cost = key_cost(server, "big", build)
                except Exception as exc:  # e.g. over max-memory-per-key
                    print(f"| {os.path.basename(module)} | {' '.join(args)} | refused: {exc} | |")
                    server.client.delete("big")
                    continue
                print(f"| {os.path.basename(module)} | {' '.join(args)} | {cost:,} | {usage[-1]:,} |")
        finally:
            server.close()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""ns per item of BF.MADD / BF.MEXISTS batches of 100 against filter size, for lcbloom's two
layouts and RedisBloom (PEER_MODULE), on real servers.

For each size S (SWEEP_SIZES, MiB): a non-scaling 0.001 filter whose capacity gives the
standard layout about S bytes, reserved on each side (lcbloom standard, lcbloom blocked,
RedisBloom), pre-filled with min(capacity, 2M) items named like redis-benchmark's
__rand_int__ (12-digit numbers), which also touches every page. redis-benchmark then sends
batches of 100 of those members (-r = the pre-fill), so every probe of every item is read (and
for MADD written back), whatever the layout: the worst case for the standard layout and the
one the DRAM floor describes. Rounds alternate the sides (SWEEP_ROUNDS, default 3); each run is
CONFIG RESETSTAT, redis-benchmark for ~SWEEP_SECONDS, INFO commandstats (usec_per_call). The
filters of one size are deleted before the next size is made.

Writes bench/results/layout-sweep-<date>.csv (one row per side, size, command and round) and
prints a markdown table of medians with the spread; bench/plot_sweep.py draws the SVG.
Environment: LCBLOOM_MODULE, PEER_MODULE, SWEEP_SIZES (default 1,4,16,64,256,1024),
SWEEP_ROUNDS, SWEEP_SECONDS, REDIS_SERVER, REDIS_BENCHMARK.
"""
import csv
import datetime
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import BENCH_BIN, OUR_MODULE, PEER_MODULE, ROOT, Server, log  # noqa: E402

SIZES = [int(s) for s in os.environ.get("SWEEP_SIZES", "1,4,16,64,256,1024").split(",")]
ROUNDS = int(os.environ.get("SWEEP_ROUNDS", "3"))
SECONDS = float(os.environ.get("SWEEP_SECONDS", "1.0"))
RATE = 0.001
STANDARD_BITS_PER_ITEM = 14.38  # src/bloom/blocked.rs's table, 0.001
PREFILL = 2_000_000


def prefill(client, key, count):
    pipe = client.pipeline(transaction=False)
    for start in range(0, count, 1000):
        pipe.execute_command("BF.MADD", key, *(str(i).zfill(12) for i in range(start, min(count, start + 1000))))
        if (start // 1000) % 50 == 49:
            pipe.execute()
    pipe.execute()


def run(server, command, key, members, requests):
    client = server.client
    client.config_resetstat()
    args = [BENCH_BIN, "-h", "127.0.0.1", "-p", str(server.port), "-c", "50", "-n", str(requests),
            "-r", str(members), "-P", "1", command, key, *(["__rand_int__"] * 100)]
    subprocess.run(args, capture_output=True, text=True, timeout=600, check=True)
    stats = client.info("commandstats")["cmdstat_" + command.lower()]
    return stats["usec_per_call"] * 1000 / 100


def main():
    ours = Server("lcbloom", OUR_MODULE)
    peer = Server("peer", PEER_MODULE) if PEER_MODULE else None
    ours.client.config_set("lcbloom.max-memory-per-key", str(4 << 30))
    sides = [("lcbloom standard", ours, ["LAYOUT", "standard"]),
             ("lcbloom blocked", ours, ["LAYOUT", "blocked"])]
    if peer:
        sides.append(("RedisBloom 2.8.2", peer, []))
    when = datetime.datetime.now()
    out = os.path.join(ROOT, "bench/results", f"layout-sweep-{when:%Y%m%d-%H%M%S}.csv")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    rows = []
    try:
        for size in SIZES:
            capacity = int(size * (1 << 20) * 8 / STANDARD_BITS_PER_ITEM)
            members = min(capacity, PREFILL)
            bytes_of = {}
            for i, (label, server, options) in enumerate(sides):
                key = f"sweep{i}"
                server.client.execute_command("BF.RESERVE", key, RATE, capacity, "NONSCALING", *options)
                prefill(server.client, key, members)
                bytes_of[label] = server.client.memory_usage(key)
            log(f"== {size} MiB: capacity {capacity:,}, {bytes_of}")
            for rnd in range(ROUNDS):
                for command in ("BF.MADD", "BF.MEXISTS"):
                    for i, (label, server, _) in enumerate(sides):
                        ns = run(server, command, f"sweep{i}", members, max(2_000, int(SECONDS * 20_000)))
                        rows.append([label, bytes_of[label], size, command, rnd + 1, f"{ns:.1f}"])
                        log(f"   round {rnd + 1} {command} {label}: {ns:.1f} ns/item")
            for i, (_, server, _) in enumerate(sides):
                server.client.delete(f"sweep{i}")
    finally:
        ours.close()
        if peer:
            peer.close()
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["side", "bytes", "size_mib", "command", "round", "ns_per_item"])
        w.writerows(rows)
    print(f"Layout sweep, {when:%Y-%m-%d %H:%M}, load average {os.getloadavg()[0]:.2f} at the end; "
          f"ns per item, median (min–max) of {ROUNDS} rounds\n")
    print("| size | command | " + " | ".join(label for label, _, _ in sides) + " |")
    print("|---|---|" + "---|" * len(sides))
    for size in SIZES:
        for command in ("BF.MADD", "BF.MEXISTS"):
            cells = []
            for label, _, _ in sides:
                v = [float(r[5]) for r in rows if r[0] == label and r[2] == size and r[3] == command]
                cells.append(f"{statistics.median(v):.0f} ({min(v):.0f}–{max(v):.0f})" if v else "—")
            print(f"| {size} MiB | {command} | " + " | ".join(cells) + " |")
    log(f"written to {out}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""LC.ADD of one new item against the module-API floor (FLOOR.ADD), at each size of counter.

One server loads lcbloom and bench/floor's module (`make floors`). For each size n, KEYS
default counters are filled with n distinct items (exact mode at 100, tokens at 1,000 and
3,000, registers at 10^4 and 10^6; enough keys that the rounds' new items leave each in its
mode), and as many FLOOR.ADD keys made.
A round sends, per key and in turn, one LC.ADD of a new item (so that each counter stays at its
size give or take a few items), then the same number of FLOOR.ADD calls; the time compared is
the server's own (INFO commandstats usec over calls, after CONFIG RESETSTAT). Rounds alternate
LC.ADD and FLOOR.ADD; the ratio is floor ÷ LC.ADD (1 = as fast as the floor), the median of
the per-round ratios with its min–max.

FLOOR.ADD's value is 2 KB whatever the counter's size: smaller than a registers-mode counter
(7 KB with the defaults), whose keys then stay in the caches less, and larger than an exact one.
So each counter is also timed against the same floor over its own bytes: FLOOR.ADD on a value
of as many bytes as the counter (`LC.INFO`'s Size), made by FLOOR.BITMAP. Counters that list
their items sorted (exact and tokens modes) are also timed against the floor of that work,
FLOOR.INSERT: a sorted list of as many bytes as the counter, one new 16-bit value inserted in
order per call. All sides' rounds alternate.

Environment: LCBLOOM_MODULE (default target/release/liblcbloom.so), FLOOR_MODULE (default
target/floor/floor_module.so), ADD_ROUNDS (default 7), ADD_CALLS (calls per side per round,
default 20,000).
"""
import os
import random
import statistics
import sys

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import OUR_MODULE, ROOT, Server, absolute, log, machine  # noqa: E402

FLOOR = absolute(os.environ.get("FLOOR_MODULE") or os.path.join(ROOT, "target/floor/floor_module.so"))
ROUNDS = int(os.environ.get("ADD_ROUNDS", "7"))
CALLS = int(os.environ.get("ADD_CALLS", "20000"))
# (items per counter, keys): the mode each size is in with the defaults (0.01 / 50,000).
SIZES = [(100, 2_000), (1_000, 2_000), (3_000, 2_000), (10_000, 50), (1_000_000, 2)]


def usec_per_call(client, command):
    """The server's total time over its calls: `usec_per_call` itself is rounded to 0.01 µs,
    a few percent of an LC.ADD of 0.15–0.3 µs."""
    stats = client.info("commandstats").get(f"cmdstat_{command}")
    return stats["usec"] / stats["calls"] if stats else None


def lc_info(client, key):
    """`LC.INFO key` as a dict of its fields."""
    info = client.execute_command("LC.INFO", key)
    return dict(zip(info[::2], info[1::2]))


def fill(client, key, n, prefix):
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, 1000):
        pipe.execute_command("LC.ADD", key, *(f"{prefix}{i}" for i in range(start, min(n, start + 1000))))
        if start % 50_000 == 0:
            pipe.execute()
    pipe.execute()


def timed_round(client, command, keys, fresh):
    client.config_resetstat()
    pipe = client.pipeline(transaction=False)
    for i in range(CALLS):
        pipe.execute_command(command, keys[i % len(keys)], next(fresh))
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    return usec_per_call(client, command.lower())


def main():
    server = Server("lcbloom+floor", OUR_MODULE, FLOOR)
    rows = []
    try:
        c = server.client
        run = random.random()
        fresh = (f"new:{run}:{i}" for i in range(10**12))
        for n, nkeys in SIZES:
            c.flushall()
            log(f"== {nkeys} counters of {n:,} items")
            lc_keys = [f"lc:{n}:{k}" for k in range(nkeys)]
            fl_keys = [f"fl:{n}:{k}" for k in range(nkeys)]
            for k, key in enumerate(lc_keys):
                fill(c, key, n, f"{k}:")
            for key in fl_keys:
                c.execute_command("FLOOR.ADD", key, "x")
            infos = [lc_info(c, key) for key in lc_keys]
            mode = infos[0][b"Mode"].decode()
            listed = mode in ("exact", "tokens")
            same_keys = [f"same:{n}:{k}" for k in range(nkeys)]
            list_keys = [f"list:{n}:{k}" for k in range(nkeys)] if listed else []
            for k, info in enumerate(infos):
                size = int(info[b"Size"])
                c.execute_command("FLOOR.BITMAP", same_keys[k], size)
                if listed:
                    c.execute_command("FLOOR.LIST", list_keys[k], size)
            lc_t, fl_t, same_t, ratios, same_ratios, list_ratios = [], [], [], [], [], []
            for _ in range(ROUNDS):
                a = timed_round(c, "LC.ADD", lc_keys, fresh)
                b = timed_round(c, "FLOOR.ADD", fl_keys, fresh)
                same = timed_round(c, "FLOOR.ADD", same_keys, fresh)
                lc_t.append(a)
                fl_t.append(b)
                same_t.append(same)
                ratios.append(b / a)
                same_ratios.append(same / a)
                if listed:
                    list_ratios.append(timed_round(c, "FLOOR.INSERT", list_keys, fresh) / a)
            rows.append((n, mode, lc_t, fl_t, same_t, ratios, same_ratios, list_ratios))
    finally:
        server.close()
    print(f"LC.ADD of one new item against the module-API floors, by counter size: {machine()}, "
          f"{ROUNDS} alternating rounds of {CALLS:,} calls a side, server time per call (INFO "
          "commandstats).\n")
    print("| items in the counter (mode) | LC.ADD µs | FLOOR.ADD µs, 2 KB | FLOOR.ADD µs, same bytes "
          "| 2 KB floor ÷ LC.ADD | same-bytes floor ÷ LC.ADD | sorted-list floor (FLOOR.INSERT) ÷ LC.ADD |")
    print("|---|---:|---:|---:|---:|---:|---:|")

    def spread(r):
        return f"{statistics.median(r):.2f} ({min(r):.2f}–{max(r):.2f})" if r else "—"

    for n, mode, lc_t, fl_t, same_t, r, sr, lr in rows:
        print(f"| {n:,} ({mode}) | {statistics.median(lc_t):.3f} | {statistics.median(fl_t):.3f} | "
              f"{statistics.median(same_t):.3f} | {spread(r)} | {spread(sr)} | {spread(lr)} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""LC.COUNT over many keys against PFCOUNT over as many HyperLogLogs of the same items.

For each shape (keys, items per key): `BASES` distinct base sets of random items (drawn from a
universe of `UNIVERSE` integers, so that they overlap) are added to a counter (`LC.ADD`, the
defaults) and to a HyperLogLog (`PFADD`); each base is then copied (`COPY`) until there are
`keys` keys of each type. The union's true size is known (the bases' union). Then `ROUNDS`
alternating rounds of one `LC.COUNT k1 ... kN` and one `PFCOUNT h1 ... hN`, timed inside the
server (INFO commandstats, usec per call: the client's cost of sending N key names is left
out). Prints a markdown table: the answers, their error against the truth, the server time of
each (median of the rounds, min–max) and the ratio.

Environment: LCBLOOM_MODULE (default target/release/liblcbloom.so), UNION_SHAPES
("keys:items,..."; default 10000:2000,100000:2000), UNION_ROUNDS (default 5), UNION_BASES
(default 200; 350 bases of 2,000 give about 500,000 distinct items), UNION_UNIVERSE (default
10⁶; 10⁴ bases of 2,000 from 2⁴⁰ are counters of items nearly all their own). A shape
"keys:items:2" makes every other base a counter of another size (`OTHER_SIZE`), whose union
with the others is a sketch union; "keys:items:1:E" makes every E-th base hold `LARGE` times
the items (message summaries: most small and exact, a few large sketches among them).
"""
import os
import random

import redis
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import OUR_MODULE, Server, log, machine  # noqa: E402

SHAPES = [tuple(int(x) for x in s.split(":"))
          for s in os.environ.get("UNION_SHAPES", "10000:2000,100000:2000").split(",")]
# Counters of another capacity, as made before `CONFIG SET lcbloom.lc-capacity`: every other
# base of a shape "keys:items:2" is reserved at this error rate and capacity.
OTHER_SIZE = ("0.01", "10000")
# Items of a large base of a shape "keys:items:1:E", as a multiple of the others'.
LARGE = 50
ROUNDS = int(os.environ.get("UNION_ROUNDS", "5"))
BASES = int(os.environ.get("UNION_BASES", "200"))
UNIVERSE = int(os.environ.get("UNION_UNIVERSE", 1_000_000))
SEED = 20261123


def usec_per_call(client, command):
    stats = client.info("commandstats").get(f"cmdstat_{command}")
    return stats["usec_per_call"] if stats else None


def build(server, keys, items_per_key, sizes=1, large_every=0):
    rng = random.Random(SEED + keys + items_per_key)
    truth = set()
    pipe = server.client.pipeline(transaction=False)
    for b in range(BASES):
        large = large_every and b % large_every == 0
        items = [str(rng.randrange(UNIVERSE)) for _ in range(items_per_key * (LARGE if large else 1))]
        truth.update(items)
        if sizes == 2 and b % 2:
            pipe.execute_command("LC.RESERVE", f"lc:{b}", *OTHER_SIZE)
        for start in range(0, len(items), 1000):
            pipe.execute_command("LC.ADD", f"lc:{b}", *items[start:start + 1000])
            pipe.execute_command("PFADD", f"hll:{b}", *items[start:start + 1000])
        pipe.execute()
    for k in range(BASES, keys):
        pipe.execute_command("COPY", f"lc:{k % BASES}", f"lc:{k}")
        pipe.execute_command("COPY", f"hll:{k % BASES}", f"hll:{k}")
        if k % 5000 == 0:
            pipe.execute()
    pipe.execute()
    return len(truth)


def timed(server, command, names):
    server.client.config_resetstat()
    answer = server.client.execute_command(command, *names)
    return answer, usec_per_call(server.client, command.lower())


def main():
    server = Server("lcbloom", OUR_MODULE)
    server.client = redis.Redis(host="127.0.0.1", port=server.port, protocol=2, socket_timeout=600)
    rows = []
    try:
        info = server.client.info("server")
        version = f"{info.get('server_name', 'redis')} {info.get('valkey_version', info['redis_version'])}"
        for keys, per_key, *sizes in SHAPES:
            server.client.flushall()
            server.client.config_set("lcbloom.max-items-per-command", max(keys, 100_000))
            log(f"== {keys} keys of {per_key} items")
            truth = build(server, keys, per_key, *sizes)
            lc_names = [f"lc:{k}" for k in range(keys)]
            hll_names = [f"hll:{k}" for k in range(keys)]
            lc_times, hll_times = [], []
            for _ in range(ROUNDS):
                lc, t = timed(server, "LC.COUNT", lc_names)
                lc_times.append(t)
                hll, t = timed(server, "PFCOUNT", hll_names)
                hll_times.append(t)
            # Base 0 is a large one of a shape "keys:items:1:E": name the others' mode.
            mode = server.client.execute_command("LC.INFO", "lc:1" if sizes[1:] else "lc:0")
            mode = dict(zip(mode[::2], mode[1::2]))[b"Mode"].decode()
            if sizes[:1] == [2]:
                mode += ", two sizes"
            if sizes[1:]:
                mode += f", one in {sizes[1]} bases {LARGE}× as large"
            rows.append((keys, per_key, mode, truth, lc, hll, lc_times, hll_times))
    finally:
        server.close()
    ms = lambda ts: f"{statistics.median(ts) / 1000:.1f} ({min(ts) / 1000:.1f}–{max(ts) / 1000:.1f})"
    print(f"LC.COUNT / PFCOUNT over many keys: {version} on {machine()}, {ROUNDS} alternating "
          "rounds, server time per call (INFO commandstats), ms median (min–max).\n")
    print("| keys | items per key (LC mode) | distinct in the union | LC.COUNT | PFCOUNT | "
          "LC.COUNT ms | PFCOUNT ms | LC ÷ PFCOUNT time |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for keys, per_key, mode, truth, lc, hll, lt, ht in rows:
        err = lambda x: f"{x:,} ({(x / truth - 1) * 100:+.2f}%)"
        print(f"| {keys:,} | {per_key:,} ({mode}) | {truth:,} | {err(lc)} | {err(hll)} | {ms(lt)} | "
              f"{ms(ht)} | {statistics.median(lt) / statistics.median(ht):.2f} |")


if __name__ == "__main__":
    main()

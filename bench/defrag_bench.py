#!/usr/bin/env python3
"""Active defragmentation benchmark: does `activedefrag yes` give back the memory that churn
fragments, for lcbloom's values as for plain strings?

Per kind (plain strings, Bloom filters, linear counters), on a fresh server: KEYS keys of
mixed sizes (strings of 20-200 bytes; filters and counters created by BF.MADD / LC.ADD of 1-30
items, with defaults), then 70% of them deleted at random, then `activedefrag yes` for
SECONDS seconds. Reported: jemalloc's `allocator_frag_ratio` (INFO memory) after the deletes
and after defragmentation, Redis's `active_defrag_hits` (blocks moved, all kinds of block),
lcbloom's own `defrag_moved_blocks`, and whether every surviving key's DUMP payload and
answers (BF.EXISTS of its items, LC.COUNT) are the same after the moves.

Kind `big`: the strings' keyspace plus one 0.001 / 200M Bloom filter (a 373 MiB bit array)
holding 2M items, to show what a big value costs active defrag. Every kind reports the longest
defrag cycle (LATENCY HISTORY active-defrag-cycle, threshold 1 ms) against the cycle's time
budget (Redis: `active-defrag-cycle-max` percent of a serverCron tick, 1000 / hz ms; Valkey 8.1
and later: slices of `active-defrag-cycle-us`, stretched after a wait), and the steps
in which lcbloom paused a value at its cursor because the budget ran out.

Needs a redis-server with Redis's own jemalloc (REDIS_SERVER, e.g.
../shared/servers/redis-7.2.6/redis-server; Debian's refuses `activedefrag yes`) or a Valkey
built with its bundled jemalloc (`make valkey-jemalloc`).
Environment: REDIS_SERVER, LCBLOOM_MODULE, DEFRAG_KEYS (200000), DEFRAG_SECONDS (25),
DEFRAG_KINDS (strings,bf,lc), BENCH_OUT.
"""
import datetime
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import OUR_MODULE, SERVER_BIN, Server, log, machine, report  # noqa: E402

KEYS = int(os.environ.get("DEFRAG_KEYS", "200000"))
SECONDS = float(os.environ.get("DEFRAG_SECONDS", "25"))
KINDS = os.environ.get("DEFRAG_KINDS", "strings,bf,lc,big").split(",")
BIG_ITEMS = 2_000_000
# The same for every kind: defragment from 1 MB of fragmentation on, with a larger share of
# the CPU than the defaults so that 25 s suffice.
DEFRAG_CONFIG = {
    "active-defrag-ignore-bytes": "1mb",
    "active-defrag-threshold-lower": "1",
    "active-defrag-cycle-min": "25",
    "active-defrag-cycle-max": "75",
}
SEED = 20261123


def fill(client, kind, rng):
    pipe = client.pipeline(transaction=False)
    for i in range(KEYS):
        n = rng.randint(1, 30)
        if kind in ("strings", "big"):
            pipe.set(f"k:{i}", "x" * rng.randint(20, 200))
        elif kind == "bf":
            pipe.execute_command("BF.MADD", f"k:{i}", *(f"i{i}:{j}" for j in range(n)))
        else:
            pipe.execute_command("LC.ADD", f"k:{i}", *(f"i{i}:{j}" for j in range(n)))
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    if kind == "big":
        client.execute_command("BF.RESERVE", "big", "0.001", "200000000")
        for start in range(0, BIG_ITEMS, 10_000):
            pipe.execute_command("BF.MADD", "big", *(f"b{j}" for j in range(start, start + 10_000)))
            pipe.execute()


def answers(client, kind, keys):
    """Per key: its serialized form (DUMP) and what it answers."""
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.dump(f"k:{k}")
        if kind == "bf":
            pipe.execute_command("BF.MEXISTS", f"k:{k}", *(f"i{k}:{j}" for j in range(32)))
        elif kind == "lc":
            pipe.execute_command("LC.COUNT", f"k:{k}")
    if kind == "big":
        pipe.execute_command("BF.MEXISTS", "big", *(f"b{j}" for j in range(0, BIG_ITEMS, 997)))
        pipe.execute_command("BF.CARD", "big")
    return pipe.execute()


def cycle_budget(client):
    """The time one active defrag cycle may take. Redis: active-defrag-cycle-max percent of a
    serverCron tick. Valkey 8.1 and later defragment on a timer of their own, in slices of
    active-defrag-cycle-us that a slice stretches after a long wait (to keep
    active-defrag-cycle-max percent of the CPU), so their budget is no one figure."""
    slice_us = client.config_get("active-defrag-cycle-us").get("active-defrag-cycle-us")
    if slice_us:
        return f"{int(slice_us) / 1000:g} ms slices, longer after a wait"
    hz = int(client.config_get("hz")["hz"])
    cycle_max = int(client.config_get("active-defrag-cycle-max")["active-defrag-cycle-max"])
    return f"{cycle_max * 10 / hz:g} ms"


def run(kind):
    server = Server(kind, OUR_MODULE)
    try:
        c = server.client
        rng = random.Random(SEED)
        fill(c, kind, rng)
        doomed = rng.sample(range(KEYS), int(KEYS * 0.7))
        pipe = c.pipeline(transaction=False)
        for n, k in enumerate(doomed):
            pipe.delete(f"k:{k}")
            if n % 1000 == 999:
                pipe.execute()
        pipe.execute()
        survivors = sorted(set(range(KEYS)) - set(doomed))
        before_answers = answers(c, kind, survivors)
        time.sleep(1)
        before = c.info("memory")["allocator_frag_ratio"]
        for name, value in DEFRAG_CONFIG.items():
            c.config_set(name, value)
        c.config_set("latency-monitor-threshold", 1)
        c.execute_command("LATENCY", "RESET")
        c.config_set("activedefrag", "yes")
        time.sleep(SECONDS)
        c.config_set("activedefrag", "no")
        cycles = c.execute_command("LATENCY", "HISTORY", "active-defrag-cycle")
        longest = max((int(ms) for _, ms in cycles), default=0)
        budget = cycle_budget(c)
        paused = c.info("lcbloom").get("lcbloom_defrag_paused_steps", 0)
        after = c.info("memory")["allocator_frag_ratio"]
        hits = c.info("stats")["active_defrag_hits"]
        ours = c.info("lcbloom").get("lcbloom_defrag_moved_blocks", 0)
        same = answers(c, kind, survivors) == before_answers
        return before, after, hits, ours, same, longest, budget, paused
    finally:
        server.close()


def main():
    when = datetime.datetime.now(datetime.timezone.utc)
    rows = []
    for kind in KINDS:
        log(f"{kind}: {KEYS} keys, 70% deleted, {SECONDS:g} s of activedefrag")
        rows.append((kind, *run(kind)))
    names = {"strings": "plain strings", "bf": "lcbloom Bloom filters", "lc": "lcbloom counters",
             "big": "plain strings and a 0.001 / 200M filter of 2M items"}
    lines = [
        f"Active defragmentation, {when:%Y-%m-%d %H:%M} UTC, {machine()}, {SERVER_BIN}; "
        f"{KEYS} keys, 70% deleted at random, {SECONDS:g} s of activedefrag "
        + ", ".join(f"{k} {v}" for k, v in DEFRAG_CONFIG.items()),
        "",
        "| keys | allocator_frag_ratio before | after | blocks moved (Redis) "
        "| by lcbloom | survivors unchanged | longest defrag cycle (budget) | lcbloom steps paused |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, before, after, hits, ours, same, longest, budget, paused in rows:
        lines.append(f"| {names[kind]} | {before:.2f} | {after:.2f} | {hits} | {ours} "
                     f"| {'yes' if same else 'NO'} | {longest} ms ({budget}) | {paused} |")
    report(lines, "defrag", when)


if __name__ == "__main__":
    main()

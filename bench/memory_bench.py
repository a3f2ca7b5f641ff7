#!/usr/bin/env python3
"""Memory benchmark: what a key really costs, by the number of items it holds.

Bytes per key = growth of `used_memory` (INFO memory) over many keys of one shape, divided by
the number of keys: key name, dict entry, Redis objects, allocator size classes and the value
itself, everything the server really spends. `MEMORY USAGE` is sampled beside it (its ratio to
the real cost says whether operators sizing from it are misled).

Shapes (items are random UUID strings, 36 bytes; keys are created by the adds, with defaults):
- `LC.ADD` (lcbloom, 0.01 / 50,000), `PFADD` (HyperLogLog), `SADD` (an exact set) on one server;
- `BF.MADD` with lcbloom's defaults and with RedisBloom 2.8.2's (PEER_MODULE) on another.
for n = 1, 10, 30, 100, 250, 1,000, 5,000 and 50,000 items per key.

Mixes (the users' real key-size mix; each a two-part log-normal, see MIXES below):
- message summaries: three counters per message (delivered = n, read and failed fewer), LC
  against HyperLogLog, and every counter of ≤ 250 items checked to count exactly;
- per-customer contact filters: one default-created filter per customer, lcbloom against
  RedisBloom, with the false-positive rate measured on non-members; and lcbloom's windowed
  filter of the same defaults remembering each contact for 30 days (`BF.INSERT key WINDOW
  2592000 ITEMS ...`), for a rolling billing cycle.

Measurement: the writes go through a connection that is closed before `used_memory` is read
again (its buffers are freed), on a server with no other clients, after a pause that lets the
incremental rehash of the keyspace finish. Prints markdown tables and writes them to
bench/results/memory-<date>.md. Environment: LCBLOOM_MODULE, PEER_MODULE (RedisBloom; its
columns are left empty without it), MEMORY_KEYS (keys per small shape, default 3000),
MEMORY_SIZES (comma-separated n, default the list above), BENCH_OUT.
"""
import datetime
import math
import os
import random
import statistics
import sys
import time
import uuid

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import OUR_MODULE, PEER_MODULE, Server, log, machine, report  # noqa: E402

SIZES = [int(n) for n in os.environ.get("MEMORY_SIZES", "1,10,30,100,250,1000,5000,50000").split(",")]
KEYS = int(os.environ.get("MEMORY_KEYS", "3000"))
ITEMS_PER_SHAPE = 4_000_000  # keys of large n are fewer: at most this many items per shape
BATCH = 1000  # items per command
SEED = 20261123

# Two-part log-normal mixes (median, sigma, clipped range), from the users' proportions:
# 99% of messages go to ≤ 250 recipients, typically a class of 20-30, and 1% reach thousands,
# up to 50,000; most customers have tens of contacts and a few have thousands.
MIXES = {
    "message summaries": [(0.99, 25, 0.6, 1, 250), (0.01, 4000, 0.9, 1000, 50_000)],
    "customer contacts": [(0.97, 30, 0.8, 1, 1000), (0.03, 2000, 0.7, 1000, 20_000)],
}
MIX_KEYS = int(os.environ.get("MIX_KEYS", "3000"))  # messages (3 counters each), customers
# A customer's filter that remembers each contact for 30 days (a `write` command).
WINDOWED_30_DAYS = ("BF.INSERT", "WINDOW", 2_592_000, "ITEMS")


def items(rng, n):
    return [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(n)]


def used_memory(server):
    time.sleep(0.3)  # serverCron finishes the incremental rehash of the keyspace
    return server.client.info("memory")["used_memory"]


def write(server, commands):
    """Runs (command, key, items) in pipelines on a fresh connection, closed afterwards. A
    command is a name, or a tuple of its name and the words that go between key and items."""
    conn = redis.Redis(host="127.0.0.1", port=server.port, protocol=2)
    pipe = conn.pipeline(transaction=False)
    queued = 0
    for command, key, values in commands:
        name, *options = (command,) if isinstance(command, str) else command
        for start in range(0, len(values), BATCH):
            pipe.execute_command(name, key, *options, *values[start:start + BATCH])
            queued += 1
            if queued >= 50:
                pipe.execute()
                queued = 0
    if queued:
        pipe.execute()
    conn.close()


def sample_usage(server, keys):
    picked = keys if len(keys) <= 200 else random.Random(SEED).sample(keys, 200)
    return statistics.mean(server.client.memory_usage(k, samples=0) for k in picked)


def measure(server, command, prefix, sizes_and_items):
    """Bytes per key (used_memory growth) and mean MEMORY USAGE for keys made by `command`."""
    server.client.flushall()
    before = used_memory(server)
    keys = [f"{prefix}:{i:07d}" for i in range(len(sizes_and_items))]
    write(server, ((command, k, v) for k, v in zip(keys, sizes_and_items)))
    after = used_memory(server)
    real = (after - before) / len(keys)
    return real, sample_usage(server, keys), keys


def warm_up(servers):
    """Makes and drops keys of every shape once before anything is measured: the first keys a
    fresh server stores also grow structures of its own (measured: ~50 bytes per key over the
    first 1,000 SETs), which would otherwise be charged to whichever shape runs first."""
    rng = random.Random(SEED - 1)
    data = [items(rng, 1) for _ in range(KEYS)]
    for server, commands in servers:
        for command in commands:
            measure(server, command, "warm", data)
        server.client.flushall()


def keys_for(n):
    return max(30, min(KEYS, ITEMS_PER_SHAPE // n))


def size_table(ours, peer):
    rng = random.Random(SEED)
    shapes = [("LC.ADD", ours, "LC.ADD"), ("PFADD", ours, "PFADD"), ("SADD", ours, "SADD"),
              ("BF.MADD lcbloom", ours, "BF.MADD"), ("BF.MADD RedisBloom", peer, "BF.MADD")]
    rows = []
    for n in SIZES:
        count = keys_for(n)
        data = [items(rng, n) for _ in range(count)]
        row = {"n": n, "keys": count}
        for label, server, command in shapes:
            if server is None or (label == "SADD" and n > 5000):
                row[label] = None
                continue
            log(f"== {label}, {count} keys of {n} items")
            real, usage, _ = measure(server, command, "k", data)
            row[label] = (real, usage)
        server_keys = [s for s in (ours, peer) if s]
        for s in server_keys:
            s.client.flushall()
        rows.append(row)
    return rows


def draw_mix(rng, parts, count):
    sizes = []
    for _ in range(count):
        r, acc = rng.random(), 0.0
        for share, median, sigma, lo, hi in parts:
            acc += share
            if r <= acc:
                break
        sizes.append(min(hi, max(lo, round(rng.lognormvariate(math.log(median), sigma)))))
    return sizes


def message_mix(ours):
    rng = random.Random(SEED + 1)
    sizes = draw_mix(rng, MIXES["message summaries"], MIX_KEYS)
    counters = []  # (n, items): delivered, read, failed per message
    for n in sizes:
        delivered = items(rng, n)
        read = delivered[:round(n * rng.uniform(0.3, 0.9))]
        failed = delivered[:round(n * rng.uniform(0.0, 0.05))]
        counters += [delivered, read, failed]
    counters = [c for c in counters if c]  # a counter with no item is never created
    out = {}
    for label, command in (("LC.ADD", "LC.ADD"), ("PFADD", "PFADD")):
        log(f"== message mix, {label}, {len(counters)} counters")
        real, usage, keys = measure(ours, command, "msg", counters)
        out[label] = (real, usage)
        if command == "LC.ADD":
            pipe = ours.client.pipeline(transaction=False)
            for k in keys:
                pipe.execute_command("LC.COUNT", k)
            counts = pipe.execute()
            small = [(len(c), got) for c, got in zip(counters, counts) if len(c) <= 250]
            out["exact"] = (sum(1 for n, got in small if n == got), len(small))
            big = [abs(got / len(c) - 1) for c, got in zip(counters, counts) if len(c) > 250]
            out["big_error"] = max(big) if big else None
    ours.client.flushall()
    return sizes, len(counters), out


def customer_mix(ours, peer):
    rng = random.Random(SEED + 2)
    sizes = draw_mix(rng, MIXES["customer contacts"], MIX_KEYS)
    filters = [items(rng, n) for n in sizes]
    probes = items(rng, 20)  # 20 non-members per filter
    out = {}
    for label, server, command in (("lcbloom", ours, "BF.MADD"), ("RedisBloom", peer, "BF.MADD"),
                                   ("lcbloom, 30-day window", ours, WINDOWED_30_DAYS)):
        if server is None:
            continue
        log(f"== customer mix, {label}, {len(filters)} filters")
        real, usage, keys = measure(server, command, "cust", filters)
        pipe = server.client.pipeline(transaction=False)
        for k in keys:
            pipe.execute_command("BF.MEXISTS", k, *probes)
        hits = sum(sum(int(x) for x in reply) for reply in pipe.execute())
        out[label] = (real, usage, hits / (len(keys) * len(probes)))
        server.client.flushall()
    return sizes, out


def fmt(cell):
    if cell is None:
        return "—"
    real, usage = cell[0], cell[1]
    return f"{real:,.0f} ({usage / real:.2f})"


def main():
    started = time.time()
    ours = Server("lcbloom", OUR_MODULE)
    peer = Server("peer", PEER_MODULE) if PEER_MODULE else None
    try:
        info = ours.client.info("server")
        version = f"{info.get('server_name', 'redis')} {info.get('valkey_version', info['redis_version'])}"
        warm_up([(ours, ["LC.ADD", "PFADD", "SADD", "BF.MADD", WINDOWED_30_DAYS])]
                + ([(peer, ["BF.MADD"])] if peer else []))
        table = size_table(ours, peer)
        msg_sizes, msg_counters, msg = message_mix(ours)
        cust_sizes, cust = customer_mix(ours, peer)
    finally:
        ours.close()
        if peer:
            peer.close()

    when = datetime.datetime.now().astimezone()
    labels = ["LC.ADD", "PFADD", "SADD", "BF.MADD lcbloom", "BF.MADD RedisBloom"]
    lines = [
        f"Memory benchmark, {when:%Y-%m-%d %H:%M %Z}: {version} on {machine()}.",
        f"Peer module: {PEER_MODULE or 'none'}. Items: random UUID strings; keys created by the adds "
        "with each module's defaults (LC 0.01/50,000; BF 0.01/100/×2).",
        "",
        "Bytes per key = used_memory growth ÷ keys (key overhead included); in brackets MEMORY USAGE "
        "÷ that (1.00 = truthful).",
        "",
        "| items n | keys | " + " | ".join(labels) + " | LC ÷ PFADD | BF lcbloom ÷ RedisBloom |",
        "|" + "---:|" * (len(labels) + 4),
    ]
    for row in table:
        lc, pf = row["LC.ADD"], row["PFADD"]
        bf, rb = row["BF.MADD lcbloom"], row["BF.MADD RedisBloom"]
        lines.append(
            f"| {row['n']:,} | {row['keys']:,} | " + " | ".join(fmt(row[l]) for l in labels)
            + f" | {lc[0] / pf[0]:.2f}" + (f" | {bf[0] / rb[0]:.2f} |" if bf and rb else " | — |"))
    lines += [
        "",
        f"Message-summary mix: {len(msg_sizes):,} messages, {msg_counters:,} counters "
        f"(sizes: median {statistics.median(msg_sizes):.0f}, mean {statistics.mean(msg_sizes):.0f}, "
        f"{sum(n > 250 for n in msg_sizes) / len(msg_sizes):.1%} over 250, max {max(msg_sizes):,}).",
        "",
        "| | bytes per counter | MEMORY USAGE ÷ real |",
        "|---|---:|---:|",
        f"| LC.ADD | {msg['LC.ADD'][0]:,.1f} | {msg['LC.ADD'][1] / msg['LC.ADD'][0]:.2f} |",
        f"| PFADD | {msg['PFADD'][0]:,.1f} | {msg['PFADD'][1] / msg['PFADD'][0]:.2f} |",
        "",
        # Three places: the mix's goal is a ratio (≤ 0.8), and two would round 0.802 down.
        f"LC ÷ HyperLogLog: {msg['LC.ADD'][0] / msg['PFADD'][0]:.3f}; exact counts for counters of "
        f"≤ 250 items: {msg['exact'][0]:,} of {msg['exact'][1]:,}; largest error above 250: "
        + (f"{msg['big_error']:.2%}." if msg['big_error'] is not None else "—."),
        "",
        f"Customer-filter mix: {len(cust_sizes):,} filters (sizes: median "
        f"{statistics.median(cust_sizes):.0f}, mean {statistics.mean(cust_sizes):.0f}, "
        f"{sum(n >= 1000 for n in cust_sizes) / len(cust_sizes):.1%} with ≥ 1,000, max {max(cust_sizes):,}); "
        "FP over 20 non-members per filter.",
        "",
        "| | bytes per filter | MEMORY USAGE ÷ real | FP rate |",
        "|---|---:|---:|---:|",
    ]
    for label, (real, usage, fp) in cust.items():
        lines.append(f"| {label} | {real:,.0f} | {usage / real:.2f} | {fp:.3%} |")
    if "RedisBloom" in cust:
        lines += ["", f"lcbloom ÷ RedisBloom: {cust['lcbloom'][0] / cust['RedisBloom'][0]:.2f}."]
    windowed = cust["lcbloom, 30-day window"][0] / cust["lcbloom"][0]
    lines += ["", f"Windowed ÷ plain lcbloom: {windowed:.2f}."]
    lines += ["", f"Total time: {time.time() - started:.0f} s."]
    report(lines, "memory", when)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Persistence benchmark: how long each path that copies a whole Bloom filter takes, lcbloom
against RedisBloom, on the same redis-server binary.

A filter reserved at 0.001 / 200,000,000 (about 400 MB of bits on either side) is filled with
N items (PERSIST_FILLS, default "0,2000000"; 200000000 is the full filter, where compression
no longer helps), then each path is timed from the client, rounds alternating between the two
modules (PERSIST_ROUNDS, default 3; the median is reported):

- DUMP: the `DUMP` reply (the server serialises and LZF-compresses the value; the server is
  blocked meanwhile), from the client and in the server (INFO commandstats: without the
  payload's transfer);
- RESTORE: `RESTORE` of that payload under another key (blocking), likewise;
- BGSAVE: from `BGSAVE` until `LASTSAVE` changes (the fork serialises; the server is not
  blocked but for the fork);
- DEBUG RELOAD: save and load the RDB (blocking: this is what a restart costs);
- full sync: a second redis-server with the same module becomes a replica and is timed until
  its link is up and the key has arrived (the master's fork and transfer, the replica's load).
  The master runs with `repl-diskless-sync-delay 0`: with a delay, its fork waits for the
  first tick of its once-a-second replication cron past it, and where that tick falls is the
  same round after round, which would add a constant 0–1 s of each server's own to its time.

Fills of up to 10M items are added from this script (`item:<i>`); larger ones by
redis-benchmark, `BF.MADD` of 100 random 12-digit numbers a call (each drawn from 0 to 2·10^9,
so that the expected number of distinct items is N: about 5% more adds than N), which takes
seconds where a Python loop would take many minutes; BF.CARD says what each filter took.

Usage: LCBLOOM_MODULE=... PEER_MODULE=/path/to/redisbloom.so bench/persistence_bench.py
Run it under `flock /work/bench.lock` on a shared machine, and name the CPU with the figures.
Prints a markdown table (seconds per path, and RedisBloom's time ÷ lcbloom's).
"""
import math
import os
import statistics
import subprocess
import sys
import time

import redis

import server_bench
from server_bench import BENCH_BIN, OUR_MODULE, PEER_MODULE, Server, fill, log

# DEBUG RELOAD is one of the paths timed; a full sync starts at once (see the top of this file).
server_bench.SERVER_ARGS += ["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"]

FILLS = [int(x) for x in os.environ.get("PERSIST_FILLS", "0,2000000").split(",")]
ROUNDS = int(os.environ.get("PERSIST_ROUNDS", "3"))
PATHS = ["DUMP", "DUMP in the server", "RESTORE", "RESTORE in the server", "BGSAVE",
         "DEBUG RELOAD", "full sync"]


SCRIPT_FILL_MAX = 10_000_000
# redis-benchmark's __rand_int__ draws below this (its -r is a C int).
DRAW_RANGE = 2_000_000_000
ITEMS_PER_CALL = 100


def fill_items(server, n):
    """Adds about `n` distinct items to the key "bf" (see the top of this file)."""
    if n <= SCRIPT_FILL_MAX:
        fill(server, "BF.MADD", "bf", "item:", n)
        return
    # Draws with repeats: d draws from R values give R·(1 − e^(−d/R)) distinct ones.
    draws = DRAW_RANGE * -math.log(1 - n / DRAW_RANGE)
    calls = math.ceil(draws / ITEMS_PER_CALL)
    subprocess.run(
        [BENCH_BIN, "-h", "127.0.0.1", "-p", str(server.port), "-c", "50", "-P", "16",
         "-n", str(calls), "-r", str(DRAW_RANGE), "-q",
         "BF.MADD", "bf", *["__rand_int__"] * ITEMS_PER_CALL],
        check=True, stdout=subprocess.DEVNULL)


def timed(action):
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def wait_for(predicate, timeout=600):
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise RuntimeError("timed out")
        time.sleep(0.01)


def bgsave(c):
    before = c.lastsave()
    c.bgsave()
    wait_for(lambda: c.lastsave() != before and c.info("persistence")["rdb_bgsave_in_progress"] == 0)


def full_sync(master, module):
    replica = Server("replica", module)
    try:
        r = replica.client
        r.execute_command("REPLICAOF", "127.0.0.1", master.port)

        def synced():
            try:
                info = r.info("replication")
                return info.get("master_link_status") == "up" and r.exists("bf")
            except redis.exceptions.BusyLoadingError:
                return False

        wait_for(synced)
    finally:
        replica.close()


def with_server_time(c, command, action):
    """The client's time for `action` and the server's own for its one `command` call
    (INFO commandstats): the latter without the transfer of a payload of hundreds of MB
    between client and server, the same for both modules but a second or more of noise."""
    c.config_resetstat()
    secs = timed(action)
    stats = c.info("commandstats")[f"cmdstat_{command}"]
    return secs, stats["usec"] / stats["calls"] / 1e6


def measure(server, module, payload):
    c = server.client
    out = {}
    out["DUMP"], out["DUMP in the server"] = with_server_time(c, "dump", lambda: c.dump("bf"))
    out["RESTORE"], out["RESTORE in the server"] = with_server_time(
        c, "restore", lambda: c.restore("copy", 0, payload))
    c.delete("copy")
    out["BGSAVE"] = timed(lambda: bgsave(c))
    out["DEBUG RELOAD"] = timed(lambda: c.execute_command("DEBUG", "RELOAD"))
    out["full sync"] = timed(lambda: full_sync(server, module))
    return out


def main():
    if not PEER_MODULE:
        sys.exit("set PEER_MODULE to RedisBloom's module")
    sides = {"lcbloom": OUR_MODULE, "RedisBloom": PEER_MODULE}
    rows = []
    for n in FILLS:
        servers = {}
        try:
            for name, module in sides.items():
                s = Server(name, module)
                s.client.execute_command("BF.RESERVE", "bf", "0.001", "200000000")
                log(f"{name}: filling {n} items")
                fill_items(s, n)
                log(f"{name}: BF.CARD {s.client.execute_command('BF.CARD', 'bf'):,}")
                servers[name] = s
            times = {name: {p: [] for p in PATHS} for name in sides}
            for round_ in range(ROUNDS):
                for name, s in servers.items():
                    payload = s.client.dump("bf")
                    for path, secs in measure(s, sides[name], payload).items():
                        times[name][path].append(secs)
                    log(f"round {round_ + 1} {name}: done")
            for path in PATHS:
                ours = statistics.median(times["lcbloom"][path])
                peer = statistics.median(times["RedisBloom"][path])
                rows.append((n, path, ours, peer))
        finally:
            for s in servers.values():
                s.close()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"Persistence of a 0.001 / 200M filter, {cpu}, median of {ROUNDS} alternating rounds\n")
    print("| items | path | lcbloom s | RedisBloom s | RedisBloom ÷ lcbloom |")
    print("|---|---|---|---|---|")
    for n, path, ours, peer in rows:
        print(f"| {n:,} | {path} | {ours:.2f} | {peer:.2f} | {peer / ours:.2f} |")


if __name__ == "__main__":
    main()

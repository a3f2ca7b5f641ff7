#!/usr/bin/env python3
"""BF.ADD and BF.EXISTS on a windowed filter against a plain filter of the same capacity and
rate (docs/BENCHMARKS.md, "Windowed filters: speed").

One redis-server (REDIS_SERVER, default Debian's) with lcbloom (LCBLOOM_MODULE, default
target/release/liblcbloom.so) holds both filters, 0.01 / 10^7, each filled with 10^6 items
first; the windowed one has `WINDOW 3600`, so nothing it holds expires during the run.
server_bench.py's machinery runs redis-benchmark (50 clients, pipeline 16, random items) in
alternating rounds, windowed then plain, and compares INFO commandstats' usec_per_call: the
ratio is plain ÷ windowed time per call, so 0.5 means half the plain filter's speed. Knobs as
in server_bench.py (BENCH_ROUNDS, BENCH_SECONDS).

Re-adds: two more filters of the same shape hold REREAD items `r:<12 digits>` (the numbers
redis-benchmark's __rand_int__ draws), the windowed one's added 150 s in the past
(`BF.INSERT ... AT`, `WINDOW 400`: quarter-window slots of 100 s, so they sit in an older slot
and nothing expires during the run). `BF.ADD` of those items then re-adds: on the windowed
filter each moves the item's fingerprint to the newest slot, unless it already sits there.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import OUR_MODULE, Server, Side, Workload, fill, log, machine  # noqa: E402

CAPACITY = 10_000_000
PREFILL = 1_000_000
READD = 3_000_000
READD_WINDOW = 400


def fill_past(client, key, at_ms, batch=1000):
    """Creates windowed filter `key` holding the re-add items, all added at `at_ms`."""
    pipe = client.pipeline(transaction=False)
    for start in range(0, READD, batch):
        items = (f"r:{i:012d}" for i in range(start, min(READD, start + batch)))
        pipe.execute_command("BF.INSERT", key, "CAPACITY", CAPACITY, "ERROR", 0.01,
                             "WINDOW", READD_WINDOW, "AT", int(at_ms), "ITEMS", *items)
        if len(pipe) >= 20:
            pipe.execute()
    pipe.execute()


def main():
    server = Server("lcbloom", OUR_MODULE)
    try:
        c = server.client
        c.execute_command("BF.RESERVE", "plain", 0.01, CAPACITY)
        c.execute_command("BF.RESERVE", "windowed", 0.01, CAPACITY, "WINDOW", 3600)
        for key in ("plain", "windowed"):
            fill(server, "BF.MADD", key, "pre", PREFILL)
        fill_past(c, "windowed-readd", time.time() * 1000 - 150_000)
        fill(server, "BF.MADD", "plain-readd", "r:", READD, digits=12)
        rows = []
        for command in ("BF.ADD", "BF.EXISTS"):
            work = Workload(
                f"{command} 0.01 / 10^7",
                Side(server, f"{command} windowed __rand_int__"),
                Side(server, f"{command} plain __rand_int__"),
                0.5,
            )
            work.measure()
            rows.append(work.row())
        work = Workload(
            "BF.ADD 0.01 / 10^7, re-adds",
            Side(server, "BF.ADD windowed-readd r:__rand_int__", rand_range=READD),
            Side(server, "BF.ADD plain-readd r:__rand_int__", rand_range=READD),
            0.5,
        )
        work.measure()
        rows.append(work.row())
        log(machine())
        print("| workload | windowed | plain | plain ÷ windowed time (rounds) | goal | met |")
        print("|---|---|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    finally:
        server.close()


if __name__ == "__main__":
    main()

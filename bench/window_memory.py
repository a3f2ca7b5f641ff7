#!/usr/bin/env python3
"""Bits per item of windowed filters: MEMORY USAGE of a 10^6-per-window filter under a steady
stream at capacity for two windows (BF.INSERT ... AT <t>: filter time, not wall time), largest
over the second window. Usage: window_memory.py PORT (a server with lcbloom loaded)."""
import redis, sys
r = redis.Redis(port=int(sys.argv[1]))
for rate in (0.01, 0.001):
    for scaling in (False, True):
        r.delete("m")
        args = ["BF.RESERVE", "m", rate, 1000000, "WINDOW", 100] + ([] if scaling else ["NONSCALING"])
        r.execute_command(*args)
        t0 = 4102444800000
        most = 0
        for b in range(2000):
            items = [f"i{b}:{j}" for j in range(1000)]
            r.execute_command("BF.INSERT", "m", "AT", t0 + b * 100, "ITEMS", *items)
            if b >= 1000 and b % 50 == 0:
                most = max(most, r.memory_usage("m"))
        print(f"rate {rate} {'scaling' if scaling else 'nonscaling'}: max MEMORY USAGE {most} = {most*8/1e6:.2f} bits/item")

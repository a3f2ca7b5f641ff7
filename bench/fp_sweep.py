#!/usr/bin/env python3
"""False-positive rate at capacity over the shapes lcbloom promises: measured FP ≤ requested.

For each layout (standard, blocked), rate (10^-2 .. 10^-4) and capacity (10^3 .. SWEEP_MAX,
by powers of ten), a filter is reserved NONSCALING and filled to capacity, and a scaling one
(the default expansion) is reserved at that capacity and measured at 1×, 2×, 4× and 8× of it
(each fill where a sub-filter has just filled up, and the compound rate of all of them). Each
measurement probes 3,600/p non-members (5% of p at three standard deviations) through
BF.MEXISTS. Items are fixed strings, so runs are comparable. `tests/it/bf_accuracy.rs` runs a
handful of these shapes in `make test`; this is the full sweep.

Knobs (environment): SWEEP_MAX (largest capacity, default 10^7: 10^8 and 10^9 take minutes to
hours to fill from one client), SWEEP_RATES (comma-separated, default 0.01,0.001,0.0001),
BENCH_OUT (file to write instead of the dated one). Prints a markdown table, writes it to
bench/results/.
"""
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import OUR_MODULE, Server, fill, log, machine, report  # noqa: E402

MAX_CAPACITY = int(float(os.environ.get("SWEEP_MAX", "1e7")))
RATES = [float(r) for r in os.environ.get("SWEEP_RATES", "0.01,0.001,0.0001").split(",")]
BATCH = 1000


def false_positives(server, key, probes):
    pipe = server.client.pipeline(transaction=False)
    hits = 0
    for start in range(0, probes, BATCH):
        pipe.execute_command("BF.MEXISTS", key, *(f"q:{i}" for i in range(start, min(probes, start + BATCH))))
        if len(pipe) == 20:
            hits += sum(sum(r) for r in pipe.execute())
    hits += sum(sum(r) for r in pipe.execute())
    return hits


def measure(server, key, p):
    probes = int(3600 / p)
    rate = false_positives(server, key, probes) / probes
    return rate, probes


def main():
    started = time.time()
    server = Server("lcbloom", OUR_MODULE)
    rows = []
    try:
        capacities = []
        c = 1000
        while c <= MAX_CAPACITY:
            capacities.append(c)
            c *= 10
        for layout in ("standard", "blocked"):
            for p in RATES:
                for capacity in capacities:
                    key = f"{layout}/{p}/{capacity}"
                    log(f"== {key}")
                    server.client.execute_command("BF.RESERVE", key, p, capacity, "NONSCALING", "LAYOUT", layout)
                    fill(server, "BF.MADD", key, "m:", capacity)
                    rate, probes = measure(server, key, p)
                    rows.append([layout, f"{p:g}", f"{capacity:,}", "non-scaling, at capacity", f"{probes:,}",
                                 f"{rate * 100:.4f}%", f"{rate / p:.3f}", "yes" if rate <= p else "**no**"])
                    server.client.delete(key)
                    key = f"{key}/scaling"
                    server.client.execute_command("BF.RESERVE", key, p, capacity, "LAYOUT", layout)
                    filled = 0
                    for times in (1, 2, 4, 8):
                        if capacity * times > MAX_CAPACITY:
                            break
                        fill(server, "BF.MADD", key, f"m{filled}:", capacity * times - filled)
                        filled = capacity * times
                        rate, probes = measure(server, key, p)
                        # One field of BF.INFO is a one-element array.
                        filters = server.client.execute_command("BF.INFO", key, "FILTERS")[0]
                        rows.append([layout, f"{p:g}", f"{capacity:,}", f"scaling, {times}× ({filters} filters)",
                                     f"{probes:,}", f"{rate * 100:.4f}%", f"{rate / p:.3f}",
                                     "yes" if rate <= p else "**no**"])
                    server.client.delete(key)
    finally:
        server.close()
    when = datetime.datetime.now().astimezone()
    header = ["layout", "rate p", "capacity", "filter, fill", "probes", "measured FP", "FP ÷ p", "≤ p?"]
    lines = [
        f"FP sweep, {when:%Y-%m-%d %H:%M %Z} on {machine()}; module {OUR_MODULE}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
        f"Total time: {time.time() - started:.0f} s.",
    ]
    report(lines, "fp-sweep", when)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""LC against HyperLogLog at every size: accuracy, bytes per key, MVP and time, on the same items.

Two servers (`--save ""`, loopback, started and stopped here): one holds default counters
(`LC.ADD`, 0.01 / 50,000), the other HyperLogLogs (`PFADD`); each gets exactly the same items.
Three groups, each on a fresh pair of servers: 1,000 keys grown to 10^4 items, 100 keys to
2·10^6, 20 keys to 10^7. Every key's items are distinct and independent of every other key's:
a random 8-byte prefix of its own, then a 4-byte index (12-byte items). Items go in 10,000 per
call, in segments that end at each checkpoint n (1, 2, 5, … 10^7). At each checkpoint:

- RMSE and bias of count/n − 1 over the group's keys (one LC.COUNT / PFCOUNT per key);
- bytes per key: used_memory ÷ keys, less used_memory once the group's keys are deleted at the
  end (a fresh server grows structures of its own on first use), each read through a fresh
  connection once every other is closed (their buffers are no key's cost; the slow log and
  the per-command latency histograms are off);
- MVP = bytes per key × 8 × RMSE² (the memory-variance product, in bits);
- add time: server time of the segment's LC.ADD / PFADD calls (INFO commandstats `usec`) per
  item added; count time: server time per LC.COUNT / PFCOUNT call (each the first count after
  the adds: PFCOUNT recomputes a modified HyperLogLog, LC.COUNT reads a kept estimate);
- LC.INFO of the first key: its mode and its `Standard error`.

Writes bench/results/lc-accuracy-<date>.csv (one row per group, checkpoint and type) and prints
the markdown table of the sizes in TABLE. bench/lc_plot.py draws the CSV.

Environment: LCBLOOM_MODULE (default target/release/liblcbloom.so), ACCURACY_GROUPS
("keys:top,..."; default 1000:10000,100:2000000,20:10000000), ACCURACY_OUT (CSV path).
"""
import array
import csv
import datetime
import gc
import os
import socket
import statistics
import sys
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import OUR_MODULE, ROOT, Server, log, machine  # noqa: E402

GROUPS = [tuple(int(x) for x in g.split(":"))
          for g in os.environ.get("ACCURACY_GROUPS", "1000:10000,100:2000000,20:10000000").split(",")]
CHECKPOINTS = [1, 2, 5, 10, 20, 50, 100, 200, 250, 260, 268, 300, 500, 1_000, 2_000, 3_000, 5_000,
               10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000,
               5_000_000, 10_000_000]
TABLE = [100, 1_000, 50_000, 100_000, 200_000, 2_000_000, 10_000_000]
PER_CALL = 10_000
CALLS_IN_FLIGHT = 16
SEED = 20261123
TYPES = {"LC": ("LC.ADD", "LC.COUNT"), "HLL": ("PFADD", "PFCOUNT")}


def command_head(command, key, items):
    """The RESP bytes of `command key` followed by `items` arguments (not included)."""
    return f"*{items + 2}\r\n${len(command)}\r\n{command}\r\n${len(key)}\r\n{key}\r\n".encode()


def items_bytes(prefix, start, end):
    """The RESP bytes of the arguments item(start) … item(end − 1), item(i) = prefix + i (u32
    little-endian), built without a Python loop per item."""
    k = end - start
    unit = b"$12\r\n" + prefix + b"\0\0\0\0\r\n"
    body = bytearray(unit * k)
    index = array.array("I", range(start, end))
    assert index.itemsize == 4 and sys.byteorder == "little"
    raw = index.tobytes()
    at = 5 + len(prefix)
    for b in range(4):
        body[at + b::len(unit)] = raw[b::4]
    return bytes(body)


class Feeder:
    """A raw connection that sends pipelined commands and checks their integer replies."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.pending = 0
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)
        self.pending += 1

    def drain(self):
        while self.pending:
            while b"\r\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise RuntimeError("connection closed")
                self.buf += chunk
            line, self.buf = self.buf.split(b"\r\n", 1)
            if not line.startswith(b":"):
                raise RuntimeError(f"unexpected reply {line[:200]!r}")
            self.pending -= 1

    def close(self):
        self.drain()
        self.sock.close()


def used_memory(server):
    """used_memory read through a fresh connection while no other is open: every
    connection's buffers (Redis 7 also resizes an idle client's reply buffer in its cron)
    would be no key's cost."""
    server.client.connection_pool.disconnect()
    gc.collect()
    time.sleep(0.2)
    conn = redis.Redis(host="127.0.0.1", port=server.port, protocol=2)
    try:
        return conn.info("memory")["used_memory"]
    finally:
        conn.close()


def stat(client, command):
    return client.info("commandstats").get(f"cmdstat_{command.lower()}", {"usec": 0, "calls": 0})


def run_group(keys, top, rows):
    servers = {"LC": Server("lc", OUR_MODULE), "HLL": Server("hll", OUR_MODULE)}
    rng = __import__("random").Random(SEED + keys * 7 + top)
    names = [f"c:{i}" for i in range(keys)]
    prefixes = [rng.getrandbits(64).to_bytes(8, "little") for _ in range(keys)]
    try:
        for s in servers.values():
            # Slow calls would be kept in the slow log with their arguments, and each command
            # gets a latency histogram on its first call after CONFIG RESETSTAT: no key's cost.
            s.client.config_set("slowlog-log-slower-than", -1)
            s.client.config_set("latency-tracking", "no")
        done = 0
        for n in [c for c in CHECKPOINTS if c <= top]:
            log(f"== {keys} keys, {done:,} -> {n:,} items ({time.strftime('%H:%M:%S')})")
            for s in servers.values():
                s.client.config_resetstat()
            feeders = {t: Feeder(s.port) for t, s in servers.items()}
            for name, prefix in zip(names, prefixes):
                for start in range(done, n, PER_CALL):
                    end = min(n, start + PER_CALL)
                    items = items_bytes(prefix, start, end)
                    for t, f in feeders.items():
                        f.send(command_head(TYPES[t][0], name, end - start) + items)
                    if feeders["LC"].pending >= CALLS_IN_FLIGHT:
                        for f in feeders.values():
                            f.drain()
            for f in feeders.values():
                f.close()
            added = (n - done) * keys
            done = n
            for t, s in servers.items():
                used = used_memory(s)
                add_cmd, count_cmd = TYPES[t]
                add_usec = stat(s.client, add_cmd)["usec"]
                pipe = s.client.pipeline(transaction=False)
                for name in names:
                    pipe.execute_command(count_cmd, name)
                counts = pipe.execute()
                cs = stat(s.client, count_cmd)
                errors = [c / n - 1 for c in counts]
                rmse = statistics.fmean(e * e for e in errors) ** 0.5
                mode, se = "", ""
                if t == "LC":
                    info = s.client.execute_command("LC.INFO", names[0])
                    info = dict(zip(info[::2], info[1::2]))
                    mode, se = info[b"Mode"].decode(), float(info[b"Standard error"])
                rows.append({
                    "group_keys": keys, "n": n, "type": t, "rmse": rmse,
                    "bias": statistics.fmean(errors), "used_memory": used,
                    "add_ns_per_item": add_usec * 1000 / added,
                    "count_us": cs["usec"] / max(cs["calls"], 1), "mode": mode,
                    "lc_info_standard_error": se,
                })
                r = rows[-1]
                log(f"   {t}: RMSE {rmse:.4%}, used_memory {used:,}, add {r['add_ns_per_item']:.0f} "
                    f"ns/item, count {r['count_us']:.2f} µs {mode}")
        # The baseline: the same servers with the keys deleted, after everything they did (a
        # fresh server's own structures grow on first use, and not by a key's doing).
        for t, s in servers.items():
            s.client.flushall(asynchronous=False)
            time.sleep(1)
            base = used_memory(s)
            for r in rows:
                if r["group_keys"] == keys and r["type"] == t and "bytes_per_key" not in r:
                    r["bytes_per_key"] = round((r.pop("used_memory") - base) / keys, 1)
                    r["mvp"] = r["bytes_per_key"] * 8 * r["rmse"] ** 2
    finally:
        for s in servers.values():
            s.close()


def table(rows):
    """The headline rows: each size of TABLE from the group with the most keys reaching it."""
    lines = ["| n | keys | LC mode | LC RMSE | HLL RMSE | LC bytes/key | HLL bytes/key | LC MVP | "
             "HLL MVP | LC.ADD ns/item | PFADD ns/item | LC.COUNT µs | PFCOUNT µs |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in TABLE:
        at = [r for r in rows if r["n"] == n]
        if not at:
            continue
        keys = max(r["group_keys"] for r in at)
        lc = next(r for r in at if r["group_keys"] == keys and r["type"] == "LC")
        hll = next(r for r in at if r["group_keys"] == keys and r["type"] == "HLL")
        lines.append(
            f"| {n:,} | {keys:,} | {lc['mode']} | {lc['rmse']:.3%} | {hll['rmse']:.3%} | "
            f"{lc['bytes_per_key']:,.0f} | {hll['bytes_per_key']:,.0f} | {lc['mvp']:.2f} | "
            f"{hll['mvp']:.2f} | {lc['add_ns_per_item']:.0f} | {hll['add_ns_per_item']:.0f} | "
            f"{lc['count_us']:.2f} | {hll['count_us']:.2f} |")
    return lines


def main():
    started = time.time()
    when = datetime.datetime.now(datetime.timezone.utc)
    load = os.getloadavg()
    rows = []
    for keys, top in GROUPS:
        run_group(keys, top, rows)
    out = os.environ.get("ACCURACY_OUT") or os.path.join(
        ROOT, "bench/results", f"lc-accuracy-{when:%Y-%m-%d}.csv")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"LC (0.01 / 50,000, LC.ADD's defaults) against HyperLogLog, {when:%Y-%m-%d %H:%M} UTC, "
          f"{machine()}, load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
          f"{time.time() - started:.0f} s. Raw rows: {os.path.relpath(out, ROOT)}.\n")
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Instructions per LC.ADD / LC.COUNT call, counted by callgrind inside a real redis-server.

A timing taken on a shared machine says little; instruction counts do not depend on the load, so
this is how two builds' speed is compared (docs/BENCHMARKS.md). The server runs under
`valgrind --tool=callgrind` with instrumentation off while the keys are filled, then on for
2,000 calls of each workload (pipelined), counting only inside `RedisModuleCommandDispatcher`
(the module's command and the module API it calls, not the network):

- `add_dense`:  LC.ADD of one new item to a 0.01/50,000 counter holding 50,000 (dense);
- `add_registers_10k`: the same to 50 counters holding 10,000 (registers mode, where most new
                items still change a register);
- `add_sparse`: LC.ADD of one new item to a counter holding 1,000 (sparse from version 2 on;
                3,000 items by the end, still sparse);
- `add_exact`:  LC.ADD of one new item to each of 2,000 counters holding 200 (exact);
- `count`:      LC.COUNT of a counter holding 50,000;
- `count_precisions_held`: LC.COUNT of a 1% counter holding 30,000 items and a 0.5% counter
                holding 20,000 of them (registers of two precisions; the union holds nothing
                beyond the coarser key, and counts as it);
- `count_precisions`: the same with 20,000 other items in the finer counter (estimated);
- `add_new`, `add30_new`: LC.ADD of one item, and of 30, creating a default counter each time
                (the create is replicated with the parameters it used).

Prints, per workload, the instructions per call in the dispatcher and in the module's own entry
(the command's C callback, `lcbloom::…::COMMANDS::callback`, inclusive), with and without the
key lookup (`RM_OpenKey`), whose cost varies between runs because Redis seeds its dict hash randomly.

Valgrind's CPU has no AVX-512, so the module takes its AVX2 builds (or the baseline ones) under
it, whatever the machine: these counts are of those builds.

Usage: lc_callgrind.py MODULE.so [OUTDIR]   (needs valgrind and callgrind_annotate)
"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import redis

CALLS = 2000


def connect(port):
    """A client of the server on `port`, once it answers."""
    for _ in range(600):
        try:
            r = redis.Redis(port=port)
            r.ping()
            return r
        except redis.ConnectionError:
            time.sleep(0.1)
    raise RuntimeError("the server under callgrind never answered")


def time_workloads(r, pid, workloads):
    """Runs each workload (a list of commands, pipelined) with instrumentation on, and dumps
    its counts under its name."""

    def control(*args):
        subprocess.run(["callgrind_control", *args, str(pid)], check=True, stdout=subprocess.DEVNULL)

    for name, commands in workloads.items():
        control("-i", "on")
        control("-z")
        pipe = r.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        pipe.execute()
        control("-d", name)
        control("-i", "off")


def run(port, pid):
    """Fills the keys, runs the workloads with instrumentation on; the counters' modes after."""
    r = connect(port)

    def fill(key, n, prefix):
        for start in range(0, n, 1000):
            r.execute_command("LC.ADD", key, *[f"{prefix}{i}" for i in range(start, min(n, start + 1000))])

    fill("dense", 50_000, "d:")
    fill("count", 50_000, "c:")
    fill("sparse", 1_000, "s:")
    for i in range(50):
        fill(f"reg:{i}", 10_000, f"r{i}:")
    for i in range(CALLS):
        fill(f"exact:{i}", 200, f"e{i}:")
    for key, rate in (("coarse", "0.01"), ("finer", "0.005"), ("other", "0.005")):
        r.execute_command("LC.RESERVE", key, rate, 50_000)
    fill("coarse", 30_000, "p:")
    fill("finer", 20_000, "p:")
    fill("other", 20_000, "o:")
    time_workloads(r, pid, {
        "add_dense": [("LC.ADD", "dense", f"nd{i}") for i in range(CALLS)],
        "add_registers_10k": [("LC.ADD", f"reg:{i % 50}", f"nr{i}") for i in range(CALLS)],
        "add_sparse": [("LC.ADD", "sparse", f"ns{i}") for i in range(CALLS)],
        "add_exact": [("LC.ADD", f"exact:{i}", f"ne{i}") for i in range(CALLS)],
        "count": [("LC.COUNT", "count")] * CALLS,
        "count_precisions_held": [("LC.COUNT", "coarse", "finer")] * CALLS,
        "count_precisions": [("LC.COUNT", "coarse", "other")] * CALLS,
        "add_new": [("LC.ADD", f"new:{i}", f"n{i}") for i in range(CALLS)],
        "add30_new": [("LC.ADD", f"new30:{i}", *[f"n{i}:{j}" for j in range(30)]) for i in range(CALLS)],
    })
    modes = {}
    for key in ("dense", "reg:0", "sparse", "exact:0", "coarse", "finer"):
        info = r.execute_command("LC.INFO", key)
        info = info if isinstance(info, dict) else dict(zip(info[::2], info[1::2]))
        modes[key] = info[b"Mode"].decode()
    return modes


def under_callgrind(module, out, body):
    """Runs redis-server with `module` under callgrind (instrumentation off, counting only
    inside RedisModuleCommandDispatcher once on), returns body(port, pid)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no",
         "--toggle-collect=RedisModuleCommandDispatcher",
         f"--callgrind-out-file={out}/callgrind.out.%p",
         "redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
         "--loadmodule", module],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return body(port, proc.pid)
    finally:
        proc.terminate()
        proc.wait()


def report(out, calls):
    """The markdown rows of the workloads dumped in `out`: instructions per call. The key
    lookup (`RM_OpenKey`, inside the module's entry) varies by up to a hundred instructions
    from run to run with the server's random dict seed (a key that shares its bucket costs a
    compare more), so the last column leaves it out: that is the one to compare builds by."""
    print("| workload | instructions per call (dispatcher) | lcbloom's entry | of which key lookup "
          "| lcbloom's entry without the key lookup |")
    print("|---|---:|---:|---:|---:|")
    for f in sorted(os.listdir(out)):
        path = os.path.join(out, f)
        text = open(path).read()
        trigger = re.search(r"^desc: Trigger: dump (\S+)", text, re.M)
        if not trigger:
            continue
        total = int(re.search(r"^(?:summary|totals): (\d+)", text, re.M).group(1))
        annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", path],
                                   capture_output=True, text=True).stdout

        def inclusive(function):
            # The largest: inlined code can list a function under more than one file name.
            found = re.findall(rf"^\s*([\d,]+) .*:{function}(?: |$)", annotated, re.M)
            return max((int(n.replace(",", "")) for n in found), default=0)

        entry = inclusive(r"lcbloom::[\w:]*COMMANDS::callback")
        lookup = inclusive("RM_OpenKey")
        print(f"| {trigger.group(1)} | {total / calls:,.0f} | {entry / calls:,.0f} "
              f"| {lookup / calls:,.0f} | {(entry - lookup) / calls:,.0f} |")


def main():
    module = os.path.abspath(sys.argv[1])
    out = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="lc-callgrind-")
    os.makedirs(out, exist_ok=True)
    modes = under_callgrind(module, out, run)
    print(f"module {module}; modes after: {modes}")
    report(out, CALLS)


if __name__ == "__main__":
    main()

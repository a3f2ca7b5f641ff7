#!/usr/bin/env python3
"""Server benchmark: lcbloom against RedisBloom (and LC.* against Redis's own HyperLogLog).

Starts redis-server (REDIS_SERVER, default Debian's `redis-server`) with our module
(LCBLOOM_MODULE) on a free loopback port and, when PEER_MODULE=/path/to/redisbloom.so is set,
a second one with that module. Each workload runs redis-benchmark (50 clients, random items via
__rand_int__) in alternating rounds: ours, peer, ours, peer... Every run is preceded by
CONFIG RESETSTAT and followed by INFO commandstats, whose usec_per_call (time spent inside the
command, steadier than the client's requests/s on a small machine where client and server share
CPUs) is the number compared. The ratio is peer ÷ ours: above 1 means we are faster. It is the
median of the per-round ratios. LC workloads compare LC.* with PFADD/PFCOUNT on our own server.

Memory: the used_memory growth a 0.001 / 200M filter causes on both sides (and in lcbloom's
blocked layout), and a scaling filter reserved at 0.01 / 1000 grown to 100,000 items (bits per
item, and the false-positive rate measured with 100,000 non-members through BF.MEXISTS):
used_memory, as MEMORY USAGE leaves RedisBloom's allocator rounding out (`key_cost`).

Floors (built by `make floors`): FLOOR_MODULE=bench/floor's minimal C module is loaded into our
server next to lcbloom, and LC.ADD, LC.COUNT and BF.EXISTS are timed against its FLOOR.ADD and
FLOOR.COUNT (the module API's fixed cost: no module command doing that work can be faster).
PFADD/PFCOUNT are built into Redis and skip that API, so their rows are information for users
choosing between the two, not goals. DRAM_FLOOR=bench/floor's dram_floor program gives what the
memory system allows for the 0.001 / 200M batches (same array size, same reads per item). The
floor module's line commands (FLOOR.SET/PROBE/MSET/MPROBE over an array as large as our blocked
filter) give the floor of the blocked layout's commands: the module API, one DRAM line per item
and the replies. Its probe commands (FLOOR.RESERVE key bytes k, then FLOOR.SET/PROBE: k bits
anywhere in an array as large as our standard filter) give the floor of a single add to the
standard 0.001 / 200M filter. RedisBloom's time over a floor's is the largest ratio any module
could reach on that command.

Memory stalls: the 100-item batches also run on 0.001 / 2M filters, which fit in the caches,
and lookups of members (all k probes read) on both sizes; per layout and operation, what the
200M filter adds per item over the cached one is its memory stall, compared with the DRAM floor
of the lines the operation reads (k per add and per member lookup in the standard layout, one
per non-member, one per item in the blocked layout). When the peer is an lcbloom build (an A/B
run), the blocked workloads use blocked filters on both sides.

Small keys: most keys hold tens of items in a default-created filter. `BF.MADD` of 30 items
creating such a filter (random keys: nearly every call creates one), and `BF.ADD` and `BF.EXISTS`
of random items on SMALL_KEYS default filters made by a `BF.MADD` of 30 each (pipeline 1, so
that all rounds together add about ten items to each).

A side whose command fails (a peer module without the command) is shown as an error cell; the
rest still runs. Prints a markdown table and writes it
to bench/results/. Knobs (environment): BENCH_ROUNDS (default 5), BENCH_SECONDS (target length
of one redis-benchmark run, default 1.5), BENCH_OUT (file to write instead of the dated one),
BENCH_ONLY (a regular expression: only the workloads whose names it matches are timed, the
others only set up; no memory rows), OUR_MODULE_ARGS (load arguments of lcbloom's side, e.g.
`bf-huge-pages yes`, which also puts the floors' arrays in huge pages; an A/B of a config runs
the same build as PEER_MODULE without them).
Only servers this script started are contacted or stopped.
"""
import datetime
import os
import platform
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER_BIN = os.environ.get("REDIS_SERVER", "redis-server")
BENCH_BIN = os.environ.get("REDIS_BENCHMARK", "redis-benchmark")


def absolute(path):
    """A path given in the environment, made absolute: the servers run in temp dirs, where a
    relative module path would not load."""
    return os.path.abspath(path) if path else None


OUR_MODULE = absolute(os.environ.get("LCBLOOM_MODULE") or os.path.join(ROOT, "target/release/liblcbloom.so"))
PEER_MODULE = absolute(os.environ.get("PEER_MODULE"))
FLOOR_MODULE = absolute(os.environ.get("FLOOR_MODULE"))
DRAM_FLOOR = absolute(os.environ.get("DRAM_FLOOR"))
# Probes per item of the standard 0.001 / 200M filters (their first sub-filter is sized for 55%
# of p: src/bloom/filter.rs's sizing gives k = 10): the reads per item of the probe floor and
# of the DRAM floor.
STANDARD_PROBES_200M = 10
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
ONLY = os.environ.get("BENCH_ONLY")  # a regular expression: only the workloads it matches
SECONDS = float(os.environ.get("BENCH_SECONDS", "1.5"))
CLIENTS = 50
RAND_RANGE = 100_000_000  # __rand_int__ draws from 0..RAND_RANGE-1 (12-digit zero-padded)
PEER_HAS_LAYOUTS = False  # set in main: the peer is an lcbloom build (has_layouts)
MEMBERS = 1_000_000  # the items of the cached filters' batches and of the members workloads
SMALL_KEYS = 100_000  # default filters of 30 items, for the small-key adds and lookups: enough
# that the adds of all rounds leave them about 40 items each
REDISBLOOM_200M_BYTES = 402_653_360  # RedisBloom 2.8.2's used_memory growth, when no peer runs
REDISBLOOM_SCALING_BITS = 25.3  # ditto, bits per item of the grown scaling filter
random.seed(20240501)  # the items of the probes and pre-checks are reproducible


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# More redis-server arguments for every server a benchmark starts.
SERVER_ARGS = []
# Load arguments of the first module of lcbloom's server (see the docstring).
OUR_MODULE_ARGS = os.environ.get("OUR_MODULE_ARGS", "").split()
HUGE_PAGES = "bf-huge-pages yes" in " ".join(OUR_MODULE_ARGS).lower()


class Server:
    """A redis-server with one module, in its own temp dir; killed by close()."""

    def __init__(self, label, *modules, module_args=(), floor_args=()):
        """`module_args`: load arguments of the first module; `floor_args`, of the second."""
        self.label = label
        loads = [arg for i, m in enumerate(modules) if m
                 for arg in ("--loadmodule", m, *((module_args, floor_args)[i] if i < 2 else ()))]
        self.dir = tempfile.mkdtemp(prefix="lcbloom-bench-")
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [SERVER_BIN, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir, "--logfile", "server.log", *SERVER_ARGS,
                 *loads],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._wait_ready():
                self.client = redis.Redis(host="127.0.0.1", port=self.port, protocol=2)
                return
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError(f"{label}: redis-server did not start:\n{self.log()}")

    def _wait_ready(self):
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if redis.Redis(host="127.0.0.1", port=self.port).ping():
                    return True
            except (redis.exceptions.ConnectionError, redis.exceptions.BusyLoadingError):
                time.sleep(0.05)
        return False

    def log(self):
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def has_layouts(server):
    """Whether the server's Bloom module has lcbloom's blocked layout (an A/B run of two lcbloom
    builds: then the blocked workloads run on blocked filters on both sides)."""
    if server is None:
        return False
    # By name: RedisBloom's BF.RESERVE ignores arguments it does not know, LAYOUT included.
    def name(module):  # a dict, or a flat list of fields and values, as the client parses it
        return module[b"name"] if isinstance(module, dict) else dict(zip(module[::2], module[1::2]))[b"name"]
    return any(name(m) == b"lcbloom" for m in server.client.execute_command("MODULE", "LIST"))


def peer_name():
    """What the peer column holds: RedisBloom, or in an A/B run the other lcbloom build."""
    return "the other lcbloom build" if PEER_HAS_LAYOUTS else "RedisBloom"


def short_error(exc):
    """An error fit for a table cell (redis-py strips the "ERR " of error replies: put it back)."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, redis.exceptions.ResponseError) and not text.startswith("ERR"):
        text = "ERR " + text
    return tidy(text)


def tidy(text):
    """First line, without redis-py's pipeline wrapper and the echo of the arguments."""
    text = text.strip().splitlines()[0] if text.strip() else "failed"
    text = re.sub(r"^.*of pipeline caused error: ", "ERR ", text)
    text = text.split(", with args beginning with")[0]
    return text if len(text) <= 60 else text[:57] + "..."


def fill(server, command, key, prefix, count, batch=1000, per_pipeline=20, digits=0):
    """Adds `count` distinct items `prefix<i>` (i zero-padded to `digits`) with pipelined
    multi-item commands."""
    pipe = server.client.pipeline(transaction=False)
    queued = 0
    for start in range(0, count, batch):
        pipe.execute_command(command, key, *(f"{prefix}{i:0{digits}d}" for i in range(start, min(count, start + batch))))
        queued += 1
        if queued == per_pipeline:
            pipe.execute()
            queued = 0
    if queued:
        pipe.execute()


def mexists_hits(server, key, prefix, count, batch=1000):
    """How many of `count` items `prefix<i>` BF.MEXISTS reports present."""
    pipe = server.client.pipeline(transaction=False)
    for start in range(0, count, batch):
        pipe.execute_command("BF.MEXISTS", key, *(f"{prefix}{i}" for i in range(start, min(count, start + batch))))
    return sum(sum(int(x) for x in reply) for reply in pipe.execute())


class Side:
    """One side of a comparison: a server, optional set-up commands, the benchmarked command."""

    def __init__(self, server, command, setup=(), rand_range=RAND_RANGE):
        self.server = server
        self.rand_range = rand_range
        self.command = command.split()
        self.stat = "cmdstat_" + self.command[0].lower()
        self.setup = setup
        self.error = None if server is not None else "not run"
        self.usec = []
        self.rps = []

    def prepare(self):
        """Runs the set-up, then the command once: any error marks the side as failed."""
        if self.error:
            return
        try:
            for step in self.setup:
                if callable(step):
                    step(self.server)
                else:
                    self.server.client.execute_command(*step.split())
            probe = [str(random.randrange(self.rand_range)).zfill(12) if a == "__rand_int__" else a
                     for a in self.command]
            self.server.client.execute_command(*probe)
        except redis.exceptions.RedisError as e:
            self.error = short_error(e)

    def run(self, requests, pipeline):
        if self.error:
            return None
        c = self.server.client
        c.config_resetstat()
        out = subprocess.run(
            [BENCH_BIN, "-h", "127.0.0.1", "-p", str(self.server.port), "-c", str(CLIENTS),
             "-n", str(requests), "-r", str(self.rand_range), "-P", str(pipeline), "--csv",
             *self.command],
            capture_output=True, text=True, timeout=600)
        stats = c.info("commandstats").get(self.stat, {})
        if stats.get("failed_calls", 0) or "Error" in out.stderr + out.stdout or not stats:
            text = (out.stderr + out.stdout).strip().splitlines()
            self.error = tidy(next((line for line in text if "ERR" in line), "failed"))
            return None
        rows = [line for line in out.stdout.splitlines() if line.startswith('"') and not line.startswith('"test"')]
        rps = float(rows[-1].split(",")[1].strip('"'))
        self.usec.append(float(stats["usec_per_call"]))
        self.rps.append(rps)
        return rps


class Workload:
    def __init__(self, name, ours, peer, goal, pipeline=16, calibrate=20_000):
        self.name, self.ours, self.peer, self.goal = name, ours, peer, goal
        self.pipeline, self.calibrate = pipeline, calibrate
        self.ratios = []

    def measure(self):
        log(f"== {self.name}")
        for side in (self.ours, self.peer):
            side.prepare()
        # Size runs so one takes about SECONDS on the faster-to-answer side; both sides get the
        # same request count.
        measured = [side.run(self.calibrate, self.pipeline) for side in (self.ours, self.peer)]
        for side in (self.ours, self.peer):
            side.usec.clear()
            side.rps.clear()
        rps = next((r for r in measured if r), None)
        if rps is None:
            return
        requests = max(self.calibrate, min(int(rps * SECONDS), 5_000_000))
        for rnd in range(ROUNDS):
            self.ours.run(requests, self.pipeline)
            self.peer.run(requests, self.pipeline)
            if not self.ours.error and not self.peer.error:
                self.ratios.append(self.peer.usec[-1] / self.ours.usec[-1])
            log(f"   round {rnd + 1}: ours {cell(self.ours)} | peer {cell(self.peer)}")

    def row(self):
        ratio = statistics.median(self.ratios) if self.ratios else None
        spread = fmt_ratio(ratio) + (f" ({min(self.ratios):.2f}–{max(self.ratios):.2f})" if self.ratios else "")
        if self.goal is None:
            return [self.name, cell(self.ours), cell(self.peer), spread, "information", "—"]
        return [self.name, cell(self.ours), cell(self.peer), spread, f"≥ {self.goal}",
                met(ratio is not None and ratio >= self.goal, ratio)]

    def ns_per_item(self, side, items):
        """Median server time per item of a batch workload, or None."""
        return statistics.median(side.usec) * 1000 / items if side.usec and not side.error else None


def cell(side):
    if side.error:
        return "error: " + side.error if side.server is not None else "—"
    if not side.usec:
        return "—"
    return f"{statistics.median(side.usec):.2f} µs/call ({statistics.median(side.rps):,.0f} req/s)"


def fmt_ratio(ratio):
    return "—" if ratio is None else f"{ratio:.2f}"


def met(ok, value):
    return "—" if value is None else ("yes" if ok else "**no**")


def rand_items(n, prefix=""):
    """n random items; a prefix no other workload writes makes them non-members."""
    return " ".join([prefix + "__rand_int__"] * n)


# The items of the lookup batches: never added by any workload, so that every one is a
# non-member (the adds draw from the same numbers, and would make some of them members).
ABSENT = "no:"


class Via:
    """A server seen through another connection (helpers take anything with a `client`)."""

    def __init__(self, client):
        self.client = client


def key_cost(server, key, build):
    """The used_memory growth that building `key` causes (its real cost: RedisBloom's MEMORY
    USAGE leaves out its allocator's rounding), built through a connection of its own, closed
    before used_memory is read again; the key is deleted afterwards. Built twice, the first
    time unmeasured: what the server allocates once, on first use, is no key's cost."""
    for measured in (False, True):
        time.sleep(0.3)
        before = server.client.info("memory")["used_memory"]
        conn = redis.Redis(host="127.0.0.1", port=server.port, protocol=2)
        try:
            build(Via(conn))
        finally:
            conn.close()
        time.sleep(0.3)
        cost = server.client.info("memory")["used_memory"] - before
        server.client.delete(key)
        if measured:
            return cost


def memory_rows(ours, peer):
    """Real bytes (used_memory growth) of a 0.001/200M filter; bits per item and FP rate of a
    grown scaling filter."""
    rows = []
    reference = "" if peer else " (RedisBloom 2.8.2, reference)"
    sizes = {}
    reserve = lambda *extra: (lambda s: s.client.execute_command(  # noqa: E731
        "BF.RESERVE", "mem200m", "0.001", "200000000", *extra))
    for label, server in (("ours", ours), ("peer", peer)):
        if server is None:
            continue
        try:
            sizes[label] = key_cost(server, "mem200m", reserve())
        except redis.exceptions.RedisError as e:
            sizes[label] = "error: " + short_error(e)
    try:
        sizes["blocked"] = key_cost(ours, "mem200m", reserve("LAYOUT", "blocked"))
    except redis.exceptions.RedisError as e:
        sizes["blocked"] = "error: " + short_error(e)
    peer_bytes = sizes.get("peer", REDISBLOOM_200M_BYTES)
    ours_bytes = sizes.get("ours")
    ok = isinstance(ours_bytes, int) and isinstance(peer_bytes, int)
    ratio = peer_bytes / ours_bytes if ok else None
    rows.append(["used_memory growth, BF.RESERVE 0.001 200M",
                 f"{ours_bytes:,} B" if isinstance(ours_bytes, int) else ours_bytes,
                 f"{peer_bytes:,} B{reference}" if isinstance(peer_bytes, int) else peer_bytes,
                 fmt_ratio(ratio), "≥ 1.0 (ours ≤ peer's bytes)", met(ok and ratio >= 1.0, ratio)])
    blocked = sizes.get("blocked")
    ok = isinstance(blocked, int) and isinstance(ours_bytes, int)
    ratio = blocked / ours_bytes if ok else None
    rows.append(["used_memory growth, BF.RESERVE 0.001 200M LAYOUT blocked",
                 f"{blocked:,} B" if isinstance(blocked, int) else blocked,
                 f"{ours_bytes:,} B (lcbloom, standard)" if isinstance(ours_bytes, int) else ours_bytes,
                 "—" if ratio is None else f"{ratio:.3f} (blocked÷standard)",
                 "≤ 1.15 × standard", met(ok and ratio <= 1.15, ratio)])

    grown = {}
    for label, server in (("ours", ours), ("peer", peer)):
        if server is None:
            continue
        log(f"== scaling 0.01/1000 grown to 100k ({label})")
        try:
            fp = {}

            def build(via):
                via.client.execute_command("BF.RESERVE", "grown", "0.01", "1000")
                fill(via, "BF.MADD", "grown", "member:", 100_000)
                fp["rate"] = mexists_hits(via, "grown", "absent:", 100_000) / 100_000

            bits = key_cost(server, "grown", build) * 8 / 100_000
            grown[label] = (bits, fp["rate"])
        except redis.exceptions.RedisError as e:
            grown[label] = "error: " + short_error(e)
    peer_grown = grown.get("peer", (REDISBLOOM_SCALING_BITS, None))
    ours_grown = grown.get("ours")
    ok = isinstance(ours_grown, tuple) and isinstance(peer_grown, tuple)
    ratio = peer_grown[0] / ours_grown[0] if ok else None
    rows.append(["bits per item, scaling 0.01/1000 grown to 100k",
                 f"{ours_grown[0]:.1f} bits/item" if isinstance(ours_grown, tuple) else ours_grown,
                 f"{peer_grown[0]:.1f} bits/item{reference}" if isinstance(peer_grown, tuple) else peer_grown,
                 fmt_ratio(ratio), "≥ 1.33 (ours ≤ 0.75 × peer's)", met(ok and ratio >= 1 / 0.75, ratio)])
    fp_cell = (lambda g: g if isinstance(g, str) else ("—" if g[1] is None else f"{g[1]:.4f}"))
    ours_fp = ours_grown[1] if isinstance(ours_grown, tuple) else None
    rows.append(["FP rate of that filter, 100k non-members",
                 fp_cell(ours_grown) if ours_grown else "—", fp_cell(peer_grown), "—",
                 "ours ≤ 0.01", met(ours_fp is not None and ours_fp <= 0.01, ours_fp)])
    return rows


def workloads(ours, peer, floor):
    reserve10m = ["BF.RESERVE bf10m 0.01 10000000"]
    # Large filters are warmed before they are timed: their bits are allocated zeroed (calloc),
    # so the first write to each 4 KiB page faults it in, which would charge whichever side is
    # timed first with ~100,000 page faults. 1M items touch every page of either layout.
    reserve200m = ["BF.RESERVE bf200m 0.001 200000000",
                   lambda s: fill(s, "BF.MADD", "bf200m", "warm:", 1_000_000)]
    reserve_blocked = ["BF.RESERVE bfblk 0.001 200000000 LAYOUT blocked",
                       lambda s: fill(s, "BF.MADD", "bfblk", "warm:", 1_000_000)]
    prefill_scaling = [lambda s: fill(s, "BF.MADD", "scaling", "prefill:", 1_000_000)]

    def reserve_lines(server):
        server.client.execute_command("FLOOR.RESERVE", "flline", ours.client.memory_usage("bfblk"))

    def reserve_probes(key, filter_key, probes):
        """A floor array as large as our standard filter `filter_key`, `probes` bits per item."""
        return lambda server: server.client.execute_command(
            "FLOOR.RESERVE", key, ours.client.memory_usage(filter_key), probes)

    def bf(command, setup=(), rand_range=RAND_RANGE):
        return Side(ours, command, setup, rand_range), Side(peer, command, setup, rand_range)

    def blocked(command, peer_command, setup=(), rand_range=RAND_RANGE):
        """Ours on a blocked filter; the peer on the same one if it is lcbloom (an A/B run),
        else `peer_command` on its standard filter of that size (RedisBloom has one layout)."""
        if PEER_HAS_LAYOUTS:
            return bf(command, setup, rand_range)
        return Side(ours, command, setup, rand_range), Side(peer, peer_command, (), rand_range)

    def members(key):
        return [lambda s: fill(s, "BF.MADD", key, "", MEMBERS, digits=12)]

    def small_filters(server):
        """SMALL_KEYS default filters of 30 items, named as redis-benchmark draws its keys."""
        pipe = server.client.pipeline(transaction=False)
        for i in range(SMALL_KEYS):
            pipe.execute_command("BF.MADD", f"small:{i:012d}", *(f"s{i}:{j}" for j in range(30)))
            if i % 1_000 == 999:
                pipe.execute()
        pipe.execute()

    def stall_workloads():
        """The 100-item batches on filters that fit in the caches (0.001 / 2M: 3.6 MB standard,
        3.9 MB blocked), and lookups of members (all k probes read) on both sizes: what a large
        filter adds over a cached one is its memory stall (stall_rows). The items of the cached
        filters' batches and of every members workload are drawn from MEMBERS numbers, so that
        the cached filters never scale and the members are all present."""
        rows = []
        for layout, big, cached in (("", "bf200m", "bf2m"), (", blocked", "bfblk", "bf2mblk")):
            reserve = [f"BF.RESERVE {cached} 0.001 2000000" + (" LAYOUT blocked" if layout else "")]

            def sides(cmd, what, key, setup, rand_range, layout=layout):
                absent = ABSENT if (cmd, what) == ("MEXISTS", "items") else ""
                command = f"BF.{cmd} {key} " + rand_items(100, absent)
                if not layout:
                    return bf(command, setup, rand_range)
                standard = {"bfblk": "bf200m", "bf2mblk": "bf2m"}[key]
                return blocked(command, command.replace(key, standard), setup, rand_range)
            for cmd, what, size, key, setup, rand_range in (
                    ("MADD", "items", "2M", cached, reserve, MEMBERS),
                    ("MEXISTS", "items", "2M", cached, (), RAND_RANGE),
                    ("MEXISTS", "members", "2M", cached, members(cached), MEMBERS),
                    ("MEXISTS", "members", "200M", big, members(big), MEMBERS)):
                rows.append(Workload(batch_name(cmd, what, size, layout), *sides(cmd, what, key, setup, rand_range),
                                     None, pipeline=1, calibrate=2_000))
        return rows

    return [
        Workload("BF.ADD 0.01/10M, pipeline 16", *bf("BF.ADD bf10m __rand_int__", reserve10m), 1.0),
        Workload("BF.ADD 0.01/10M, pipeline 1", *bf("BF.ADD bf10m __rand_int__"), 1.0, pipeline=1),
        Workload("BF.EXISTS 0.01/10M, pipeline 16", *bf("BF.EXISTS bf10m __rand_int__"), 1.0),
        Workload("BF.EXISTS 0.01/10M, pipeline 1", *bf("BF.EXISTS bf10m __rand_int__"), 1.0, pipeline=1),
        Workload("BF.MADD 100 items 0.01/10M", *bf("BF.MADD bf10m " + rand_items(100)), 1.5,
                 pipeline=1, calibrate=2_000),
        Workload("BF.ADD default scaling filter, 1M+ items", *bf("BF.ADD scaling __rand_int__", prefill_scaling), 1.2),
        Workload("BF.ADD 0.001/200M", *bf("BF.ADD bf200m __rand_int__", reserve200m), 1.3),
        Workload("BF.MADD 100 items 0.001/200M", *bf("BF.MADD bf200m " + rand_items(100)), 2.5,
                 pipeline=1, calibrate=2_000),
        Workload("BF.MEXISTS 100 items 0.001/200M", *bf("BF.MEXISTS bf200m " + rand_items(100, ABSENT)), 2.5,
                 pipeline=1, calibrate=2_000),
        # lcbloom's blocked layout against RedisBloom's (only) layout on the same workloads.
        Workload("BF.ADD 0.001/200M, blocked",
                 *blocked("BF.ADD bfblk __rand_int__", "BF.ADD bf200m __rand_int__", reserve_blocked), 2.0),
        Workload("BF.EXISTS 0.001/200M, blocked",
                 *blocked("BF.EXISTS bfblk __rand_int__", "BF.EXISTS bf200m __rand_int__"), 2.0),
        Workload("BF.MADD 100 items 0.001/200M, blocked",
                 *blocked("BF.MADD bfblk " + rand_items(100), "BF.MADD bf200m " + rand_items(100)), 6.0,
                 pipeline=1, calibrate=2_000),
        Workload("BF.MEXISTS 100 items 0.001/200M, blocked",
                 *blocked("BF.MEXISTS bfblk " + rand_items(100, ABSENT),
                          "BF.MEXISTS bf200m " + rand_items(100, ABSENT)), 6.0,
                 pipeline=1, calibrate=2_000),
        *stall_workloads(),
        # Small keys, created implicitly with the defaults as most users' keys are.
        Workload("BF.MADD 30 items creating a default filter", *bf("BF.MADD new:__rand_int__ " + rand_items(30)),
                 None, pipeline=1, calibrate=5_000),
        Workload("BF.ADD on default filters of 30+ items, pipeline 1",
                 *bf("BF.ADD small:__rand_int__ __rand_int__", [small_filters], SMALL_KEYS), None, pipeline=1),
        Workload("BF.EXISTS on default filters of 30+ items, pipeline 1",
                 *bf("BF.EXISTS small:__rand_int__ __rand_int__", (), SMALL_KEYS), None, pipeline=1),
        # The module-API floor (bench/floor/floor_module.c, loaded into our server).
        Workload("LC.ADD 1 item vs floor module", Side(ours, "LC.ADD lc1 __rand_int__"),
                 Side(floor, "FLOOR.ADD fl1 __rand_int__"), 0.9),
        Workload("LC.COUNT vs floor module (50k items)",
                 Side(ours, "LC.COUNT lccount", [lambda s: fill(s, "LC.ADD", "lccount", "c:", 50_000)]),
                 # The floor's count must have as many digits as ours (Redis replies 0 and 1
                 # from shared objects and formats larger numbers): fill it the same way.
                 Side(floor, "FLOOR.COUNT flcount",
                      [lambda s: fill(s, "FLOOR.ADD", "flcount", "c:", 50_000, batch=1, per_pipeline=1000)]),
                 0.9),
        Workload("BF.EXISTS 0.01/10M vs floor module read", Side(ours, "BF.EXISTS bf10m __rand_int__"),
                 Side(floor, "FLOOR.COUNT flcount"), None),
        # The floor of a blocked filter beyond the caches: one random line per item over an
        # array as large as ours (floor_module.c, FLOOR.RESERVE/SET/PROBE/MSET/MPROBE).
        Workload(LINE_FLOOR["BF.ADD"], Side(ours, "BF.ADD bfblk __rand_int__"),
                 Side(floor, "FLOOR.SET flline __rand_int__", [reserve_lines]), None),
        Workload(LINE_FLOOR["BF.EXISTS"], Side(ours, "BF.EXISTS bfblk __rand_int__"),
                 Side(floor, "FLOOR.PROBE flline __rand_int__"), None),
        Workload(LINE_FLOOR["BF.MADD"], Side(ours, "BF.MADD bfblk " + rand_items(100)),
                 Side(floor, "FLOOR.MSET flline " + rand_items(100)), None, pipeline=1, calibrate=2_000),
        Workload(LINE_FLOOR["BF.MEXISTS"], Side(ours, "BF.MEXISTS bfblk " + rand_items(100, ABSENT)),
                 Side(floor, "FLOOR.MPROBE flline " + rand_items(100)), None, pipeline=1, calibrate=2_000),
        # The floor of a single add to a standard filter beyond the caches: k bits anywhere
        # in an array as large as ours (floor_module.c, FLOOR.RESERVE key bytes k). Only the
        # 0.001 / 200M filter: the 0.01 / 10M one has grown past its capacity by now.
        Workload(PROBE_FLOOR, Side(ours, "BF.ADD bf200m __rand_int__"),
                 Side(floor, "FLOOR.SET flprobes __rand_int__",
                      [reserve_probes("flprobes", "bf200m", STANDARD_PROBES_200M)]), None),
        # Built-in HyperLogLog: information, not goals (a native command skips the module API).
        Workload("LC.ADD 1 item vs PFADD", Side(ours, "LC.ADD lc1 __rand_int__"),
                 Side(ours, "PFADD hll1 __rand_int__"), None),
        Workload("LC.ADD 100 items vs PFADD", Side(ours, "LC.ADD lc100 " + rand_items(100)),
                 Side(ours, "PFADD hll100 " + rand_items(100)), None, pipeline=1, calibrate=2_000),
        # Most counters are small and new: each message's first readers create its key.
        Workload("LC.ADD 1 item creating a default counter vs PFADD", Side(ours, "LC.ADD lcnew1:__rand_int__ __rand_int__"),
                 Side(ours, "PFADD hllnew1:__rand_int__ __rand_int__"), None, pipeline=1, calibrate=5_000),
        Workload("LC.ADD 30 items creating a default counter vs PFADD",
                 Side(ours, "LC.ADD lcnew30:__rand_int__ " + rand_items(30)),
                 Side(ours, "PFADD hllnew30:__rand_int__ " + rand_items(30)), None, pipeline=1, calibrate=5_000),
        Workload("LC.COUNT vs PFCOUNT (50k items)", Side(ours, "LC.COUNT lccount"),
                 Side(ours, "PFCOUNT hllcount", [lambda s: fill(s, "PFADD", "hllcount", "c:", 50_000)]), None),
    ]


# The blocked-layout workloads timed against the line floor, by command.
LINE_FLOOR = {c: f"{c} 0.001/200M, blocked vs line floor" + (" (100 items)" if c[3] == "M" else "")
              for c in ("BF.ADD", "BF.EXISTS", "BF.MADD", "BF.MEXISTS")}
# The single add to the standard 0.001 / 200M filter timed against the probe floor.
PROBE_FLOOR = f"BF.ADD 0.001/200M vs probe floor ({STANDARD_PROBES_200M} probes)"
# Each floor workload, the workload timing the peer on the same command, and the floor's name.
FLOORED = [(LINE_FLOOR["BF.ADD"], "BF.ADD 0.001/200M, blocked", "line floor"),
           (LINE_FLOOR["BF.EXISTS"], "BF.EXISTS 0.001/200M, blocked", "line floor"),
           (LINE_FLOOR["BF.MADD"], "BF.MADD 100 items 0.001/200M, blocked", "line floor"),
           (LINE_FLOOR["BF.MEXISTS"], "BF.MEXISTS 100 items 0.001/200M, blocked", "line floor"),
           (PROBE_FLOOR, "BF.ADD 0.001/200M", "probe floor")]


def peer_floor_rows(by_name):
    """The most any module could gain over RedisBloom on a command: RedisBloom's time over its
    floor's (the module API, the lines the item needs, the replies)."""
    rows = []
    for floor_workload, peer_workload, label in FLOORED:
        vs_peer, vs_floor = by_name.get(peer_workload), by_name.get(floor_workload)
        if not vs_peer or not vs_floor or not vs_peer.peer.usec or not vs_floor.peer.usec:
            continue
        peer, floor = statistics.median(vs_peer.peer.usec), statistics.median(vs_floor.peer.usec)
        goal = vs_peer.goal
        rows.append([f"{peer_workload}: {peer_name()} ÷ {label} (the most any module can reach)",
                     f"{floor:.2f} µs/call ({label})", f"{peer:.2f} µs/call ({peer_name()})",
                     fmt_ratio(peer / floor), f"goal ≥ {goal} is " + ("within" if peer / floor >= goal else "**beyond**") + " the floor",
                     "—"])
    return rows


def dram_floor(array_bytes, reads):
    """ns per item of `reads` random line reads over `array_bytes`, batches of 100, best
    prefetch distance (bench/floor/dram_floor.c); None without the program."""
    if not DRAM_FLOOR:
        return None
    items = 500_000 if reads > 1 else 2_000_000
    # With lcbloom's arrays in huge pages (`bf-huge-pages yes`), the floor's array too.
    env = dict(os.environ, DRAM_FLOOR_HUGE_PAGES="1" if HUGE_PAGES else "0")
    out = subprocess.run([DRAM_FLOOR, str(array_bytes), str(reads), "100", str(items)],
                         capture_output=True, text=True, timeout=600, env=env).stdout
    found = re.search(r"^best ([0-9.]+) ns/item", out, re.M)
    return float(found.group(1)) if found else None


def floor_rows(by_name, floors):
    """The 0.001 / 200M batches in ns per item against the DRAM floor (goal: within 1.3×)."""
    rows = []
    for name, reads in (("BF.MADD 100 items 0.001/200M", STANDARD_PROBES_200M),
                        ("BF.MEXISTS 100 items 0.001/200M", STANDARD_PROBES_200M),
                        ("BF.MADD 100 items 0.001/200M, blocked", 1),
                        ("BF.MEXISTS 100 items 0.001/200M, blocked", 1)):
        w = by_name.get(name)
        ours = w.ns_per_item(w.ours, 100) if w else None
        floor = floors[reads]
        ratio = floor / ours if ours and floor else None
        rows.append([f"{name} vs DRAM floor ({reads} read{'s' if reads > 1 else ''}/item)",
                     "—" if ours is None else f"{ours:.0f} ns/item",
                     "—" if floor is None else f"{floor:.0f} ns/item (floor)",
                     fmt_ratio(ratio), "≥ 0.77 (ours ≤ 1.3 × floor)", met(ratio is not None and ratio >= 1 / 1.3, ratio)])
    return rows


def batch_name(cmd, what, size, layout):
    """The name of a 100-item batch workload on a 0.001 filter of `size` ("200M" or "2M", the
    cached one) and `layout` ("" or ", blocked")."""
    return f"BF.{cmd} 100 {what} 0.001/{size}{layout}" + (" (cached)" if size == "2M" else "")


def stall_rows(by_name, floors):
    """What a large filter adds over a cached one per item of a 100-item batch (the memory
    stall), against the DRAM floor of the lines the operation reads: k per add and per member
    lookup in the standard layout, about one per non-member lookup (its first probe refuses it),
    one per item in the blocked layout. Goal: within 1.5× the floor."""
    rows = []
    for layout in ("", ", blocked"):
        for cmd, what, standard_lines in (("MADD", "items", STANDARD_PROBES_200M), ("MEXISTS", "items", 1),
                                          ("MEXISTS", "members", STANDARD_PROBES_200M)):
            lines = 1 if layout else standard_lines
            big, cached = (by_name.get(batch_name(cmd, what, size, layout)) for size in ("200M", "2M"))
            if not big or not cached:
                continue
            stalls = []
            for side in ("ours", "peer"):
                b, c = (w.ns_per_item(getattr(w, side), 100) for w in (big, cached))
                stalls.append(None if b is None or c is None else (b - c, b, c))
            floor = floors.get(lines)
            ours = stalls[0]
            # The cached batches measured slower than the large ones (a noisy host): their
            # difference is no stall, and the row says so rather than a ratio below zero.
            unmeasured = ours is not None and ours[0] < 0
            ratio = ours[0] / floor if ours and floor and not unmeasured else None
            shown = lambda st: "—" if st is None else (  # noqa: E731
                f"{st[0]:.0f} ns/item ({st[1]:.0f} − {st[2]:.0f})"
                + (", cached slower: not a stall" if st[0] < 0 else ""))
            rows.append([f"memory stall per item, BF.{cmd} 100 {what}{layout} (200M − cached 2M) "
                         f"vs DRAM floor ({lines} line{'s' if lines > 1 else ''})",
                         shown(ours),
                         (f"peer {shown(stalls[1])}; " if stalls[1] else "")
                         + ("floor —" if floor is None else f"floor {floor:.0f} ns/item"),
                         "—" if ratio is None else f"{ratio:.2f} (stall ÷ floor)",
                         "≤ 1.5 × floor", met(ratio is not None and ratio <= 1.5, ratio)])
    return rows


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} CPUs, {model}, {platform.system()} {platform.release()}"


def main():
    started = time.time()
    # The line floor's arrays in the same pages as lcbloom's.
    ours = Server("lcbloom", OUR_MODULE, FLOOR_MODULE, module_args=OUR_MODULE_ARGS,
                  floor_args=("huge-pages",) if HUGE_PAGES else ())
    peer = Server("peer", PEER_MODULE) if PEER_MODULE else None
    floor = ours if FLOOR_MODULE else None
    global PEER_HAS_LAYOUTS
    try:
        PEER_HAS_LAYOUTS = has_layouts(peer)
        version = ours.client.info("server")
        server_version = f"{version.get('server_name', 'redis')} {version.get('valkey_version', version['redis_version'])}"
        rows = []
        by_name = {}
        for w in workloads(ours, peer, floor):
            if ONLY and not re.search(ONLY, w.name):
                # Its set-up still runs: later workloads use the keys it makes.
                w.ours.prepare()
                w.peer.prepare()
                continue
            w.measure()
            rows.append(w.row())
            by_name[w.name] = w
        # The 200M filters' memory goes before the next ones are made (one at a time here).
        array_bytes = None
        try:
            array_bytes = ours.client.memory_usage("bf200m")
            for server in (ours, peer):
                if server:
                    server.client.delete("bf200m", "bfblk", "flline", "flprobes", "bf2m", "bf2mblk")
        except redis.exceptions.RedisError:
            pass
        if array_bytes:
            floors = {reads: dram_floor(array_bytes, reads) for reads in (STANDARD_PROBES_200M, 1)}
            rows += floor_rows(by_name, floors)
            rows += stall_rows(by_name, floors)
        rows += peer_floor_rows(by_name)
        if not ONLY:
            rows += memory_rows(ours, peer)
    finally:
        ours.close()
        if peer:
            peer.close()

    when = datetime.datetime.now().astimezone()
    header = ["workload", "ours (lcbloom)", f"peer ({peer_name()} / floor / PFADD)",
              "ratio peer÷ours (min–max of rounds)", "goal", "met?"]
    lines = [
        f"Server benchmark, {when:%Y-%m-%d %H:%M %Z}: {server_version} on {machine()}.",
        *([f"lcbloom's load arguments: {' '.join(OUR_MODULE_ARGS)}."] if OUR_MODULE_ARGS else []),
        f"Peer module: {PEER_MODULE or 'none (BF peer columns empty; LC rows compare with PFADD/PFCOUNT)'}"
        + (" (an lcbloom build: blocked rows on blocked filters on both sides)." if PEER_HAS_LAYOUTS else "."),
        f"Floor module: {FLOOR_MODULE or 'none'}; DRAM floor: {DRAM_FLOOR or 'none'}"
        f"{' (the floors in huge pages too)' if HUGE_PAGES else ''}; "
        f"load average at start {os.getloadavg()[0]:.2f}.",
        f"{ROUNDS} alternating rounds, {CLIENTS} clients, ~{SECONDS} s per run; server time per call "
        "from INFO commandstats, medians; ratio = median of per-round peer÷ours.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(str(c) for c in row) + " |" for row in rows),
        "",
        f"Total time: {time.time() - started:.0f} s.",
    ]
    report(lines, "server", when)


def report(lines, kind, when):
    """Prints the report and writes it to BENCH_OUT or bench/results/<kind>-<date>.md."""
    text = "\n".join(lines) + "\n"
    print(text)
    out = os.environ.get("BENCH_OUT") or os.path.join(
        ROOT, "bench/results", f"{kind}-{when:%Y%m%d-%H%M%S}.md")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    log(f"written to {out}")


if __name__ == "__main__":
    main()

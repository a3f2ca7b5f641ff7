#!/usr/bin/env python3
"""LC.COUNT over a few keys against PFCOUNT over as many HyperLogLogs of the same items.

For each size (items per key) 8 keys of each type get their own random items (`LC.ADD` with
the defaults, `PFADD`); then 200 calls of `LC.COUNT` over the first 2 and the first 8 keys, and
as many `PFCOUNT`, timed inside the server (INFO commandstats, usec per call). Prints one line
per size and key count: the counter's mode, both times and their ratio.

Environment: LCBLOOM_MODULE (default target/release/liblcbloom.so), REDIS_SERVER (default
Debian's redis-server), FEW_SIZES (default 200,1000,2000,3400).
"""
import os
import random
import sys

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_bench import OUR_MODULE, Server, machine  # noqa: E402

SIZES = [int(s) for s in os.environ.get("FEW_SIZES", "200,1000,2000,3400").split(",")]
CALLS = 200


def main():
    server = Server("lcbloom", OUR_MODULE)
    client = redis.Redis(host="127.0.0.1", port=server.port, protocol=2, socket_timeout=600)
    try:
        info = client.info("server")
        print(f"{info.get('server_name', 'redis')} {info.get('valkey_version', info['redis_version'])} "
              f"on {machine()}, {CALLS} calls each, server time per call")
        rng = random.Random(5)
        for per in SIZES:
            client.flushall()
            for k in range(8):
                items = [str(rng.randrange(10**9)) for _ in range(per)]
                client.execute_command("LC.ADD", f"lc:{k}", *items)
                client.execute_command("PFADD", f"h:{k}", *items)
            reply = client.execute_command("LC.INFO", "lc:0")
            mode = dict(zip(reply[::2], reply[1::2]))[b"Mode"].decode()
            for keys in [2, 8]:
                times = []
                for command, prefix in [("LC.COUNT", "lc"), ("PFCOUNT", "h")]:
                    client.config_resetstat()
                    for _ in range(CALLS):
                        client.execute_command(command, *[f"{prefix}:{k}" for k in range(keys)])
                    times.append(client.info("commandstats")[f"cmdstat_{command.lower()}"]["usec_per_call"])
                print(f"{per} items ({mode}), {keys} keys: LC.COUNT {times[0]:.1f} us, "
                      f"PFCOUNT {times[1]:.1f} us, ratio {times[0] / times[1]:.2f}")
    finally:
        server.close()


if __name__ == "__main__":
    main()

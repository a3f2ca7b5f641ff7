"""Shared by the examples: a client for `make run`'s server (port 6380, or LCBLOOM_PORT)."""
import os
import sys

import redis


def client():
    port = int(os.environ.get("LCBLOOM_PORT", "6380"))
    r = redis.Redis(host=os.environ.get("LCBLOOM_HOST", "127.0.0.1"), port=port, protocol=2)
    try:
        r.ping()
    except redis.exceptions.ConnectionError:
        sys.exit(f"no server on port {port}: start one with `make run` in another terminal")
    return r


def human(nbytes):
    for unit in ("B", "KB", "MB", "GB"):
        if nbytes < 1024 or unit == "GB":
            return f"{nbytes:,.0f} {unit}" if unit == "B" else f"{nbytes:,.1f} {unit}"
        nbytes /= 1024

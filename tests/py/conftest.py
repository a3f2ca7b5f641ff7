"""Fixtures: a real redis-server with the module, on a free loopback port, per test module.

The module is LCBLOOM_MODULE (set by `make py-test`) and the server REDIS_SERVER (default
redis-server). Only servers started here are ever contacted or stopped.
"""
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest
import redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE = os.environ.get("LCBLOOM_MODULE", os.path.join(ROOT, "target/release/liblcbloom.so"))
SERVER = os.environ.get("REDIS_SERVER", "redis-server")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisProcess:
    def __init__(self, extra_args=(), module_args=(), port=None):
        """On `port` (one attempt) or on a free port (up to five)."""
        self.dir = tempfile.mkdtemp(prefix="lcbloom-py-")
        for _ in range(1 if port else 5):
            self.port = port or free_port()
            self.proc = subprocess.Popen(
                [SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--dir", self.dir, "--logfile", "server.log", "--enable-debug-command", "yes",
                 *extra_args, "--loadmodule", MODULE, *module_args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._wait_ready():
                return
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError("redis-server did not start: " + self.log())

    def _wait_ready(self):
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if redis.Redis(port=self.port, protocol=2).ping():
                    return True
            except redis.exceptions.ConnectionError:
                time.sleep(0.02)
            except redis.exceptions.BusyLoadingError:
                time.sleep(0.02)
        return False

    def log(self):
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def client(self, protocol=2, **kw):
        return redis.Redis(host="127.0.0.1", port=self.port, protocol=protocol, **kw)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def server():
    s = RedisProcess()
    yield s
    s.stop()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(server, request):
    client = server.client(protocol=request.param)
    client.flushall()
    yield client
    client.close()

"""Fixtures: servers started by the Rust test harness (tests/it/py_clients.rs runs this suite:
`cargo test --release --test it py_clients`, part of `make test`). This file only connects to
the ports it is given, never starts or stops a server, and never guesses a port:

- LCBLOOM_TEST_PORT: a server with the module;
- LCBLOOM_TEST_CLUSTER: three cluster nodes with the module, comma-separated ports.
"""
import os

import pytest
import redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Node:
    """A server on a loopback port the harness started."""

    def __init__(self, port):
        self.port = port

    def client(self, protocol=2, **kw):
        return redis.Redis(host="127.0.0.1", port=self.port, protocol=protocol, **kw)


def harness_port(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run these tests through the Rust harness "
                    "(cargo test --release --test it py_clients)")
    return value


@pytest.fixture
def server():
    node = Node(int(harness_port("LCBLOOM_TEST_PORT")))
    node.client().flushall()
    return node


@pytest.fixture(scope="module")
def nodes():
    return [Node(int(p)) for p in harness_port("LCBLOOM_TEST_CLUSTER").split(",")]


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(server, request):
    client = server.client(protocol=request.param)
    yield client
    client.close()

"""redis-py reaches a server with the module (the fixtures live in conftest.py)."""


def test_module_listed(r):
    names = [m[b"name"] if b"name" in m else m["name"] for m in r.module_list()]
    assert b"lcbloom" in names or "lcbloom" in names

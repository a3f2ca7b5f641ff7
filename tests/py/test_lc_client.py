"""LC.* through redis-py's raw execute_command, over RESP2 and RESP3: values and reply shapes."""
import pytest
import redis

INFO_FIELDS = ["Capacity", "Error rate", "Size", "Bits", "Bits set", "Mode", "Count",
               "Standard error", "Saturated", "Exact up to"]


def is_resp3(r):
    return r.get_connection_kwargs().get("protocol") in (3, "3")


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def lc_info(r, key):
    """LC.INFO as an ordered list of (field, value), checking the protocol's shape."""
    reply = r.execute_command("LC.INFO", key)
    if is_resp3(r):
        assert isinstance(reply, dict)
        pairs = [(text(k), v) for k, v in reply.items()]
    else:
        assert isinstance(reply, list) and len(reply) == 2 * len(INFO_FIELDS)
        pairs = [(text(k), v) for k, v in zip(reply[::2], reply[1::2])]
    assert [k for k, _ in pairs] == INFO_FIELDS
    return dict(pairs)


def test_reserve_add_count(r):
    assert r.execute_command("LC.RESERVE", "c", 0.01, 50000) in (b"OK", "OK", True)
    assert r.execute_command("LC.ADD", "c", "a", "b", "c") == 3
    assert r.execute_command("LC.ADD", "c", "a", "d") == 1
    assert r.execute_command("LC.ADD", "c") == 0
    assert r.execute_command("LC.COUNT", "c") == 4
    assert r.execute_command("LC.COUNT", "missing") == 0
    with pytest.raises(redis.ResponseError, match="item exists"):
        r.execute_command("LC.RESERVE", "c", 0.01, 50000)
    with pytest.raises(redis.ResponseError, match="strictly between 0 and 1"):
        r.execute_command("LC.RESERVE", "bad", 1, 100)
    with pytest.raises(redis.ResponseError, match="capacity must be an integer"):
        r.execute_command("LC.RESERVE", "bad", 0.01, 0)
    assert r.exists("bad") == 0


def test_add_creates_with_defaults(r):
    assert r.execute_command("LC.ADD", "new") == 0
    info = lc_info(r, "new")
    assert info["Capacity"] == 50000 and float(info["Error rate"]) == 0.01
    assert info["Count"] == 0 and text(info["Mode"]) == "exact"


def test_info_shapes_exact_and_tokens(r):
    r.execute_command("LC.RESERVE", "s", 0.01, 1000)
    r.execute_command("LC.ADD", "s", *[f"x{i}" for i in range(10)])
    info = lc_info(r, "s")
    assert info["Capacity"] == 1000 and info["Count"] == 10 and text(info["Mode"]) == "exact"
    assert info["Bits"] == 5329 and info["Size"] > 0
    if is_resp3(r):
        # A yes/no field is an integer in RESP3 too (docs/commands.md).
        assert isinstance(info["Error rate"], float) and info["Saturated"] == 0
        assert not isinstance(info["Saturated"], bool)
        assert info["Standard error"] == 0
    else:
        assert info["Error rate"] == b"0.01" and info["Saturated"] == 0
        assert float(info["Standard error"]) == 0
    r.execute_command("LC.ADD", "s", *[f"x{i}" for i in range(1000)])
    info = lc_info(r, "s")
    assert text(info["Mode"]) == "tokens"
    assert abs(info["Count"] - 1000) < 50
    assert 0.002 < float(info["Standard error"]) < 0.015
    assert 0 < info["Bits set"] < info["Bits"]
    with pytest.raises(redis.ResponseError, match="not found"):
        r.execute_command("LC.INFO", "missing")


def test_union_and_merge(r):
    for k in ("a", "b"):
        r.execute_command("LC.RESERVE", k, 0.01, 50000)
    r.execute_command("LC.ADD", "a", *[f"u{i}" for i in range(0, 3000)])
    r.execute_command("LC.ADD", "b", *[f"u{i}" for i in range(2000, 5000)])
    union = r.execute_command("LC.COUNT", "a", "b", "missing")
    assert abs(union - 5000) < 5000 * 0.03
    assert r.execute_command("LC.MERGE", "dst", "a", "b") in (b"OK", "OK", True)
    assert r.execute_command("LC.COUNT", "dst") == union
    # merging a counter into itself and again changes nothing
    r.execute_command("LC.MERGE", "dst", "a")
    assert r.execute_command("LC.COUNT", "dst") == union
    # counters of any capacity and error rate combine
    r.execute_command("LC.RESERVE", "other", 0.02, 7777)
    r.execute_command("LC.ADD", "other", *[f"v{i}" for i in range(2000)])
    both = r.execute_command("LC.COUNT", "a", "other")
    assert abs(both - 5000) < 5000 * 0.05


def test_wrongtype_both_ways(r):
    r.set("str", "v")
    r.bf().add("bloom", "x")
    r.execute_command("LC.ADD", "lc", "x")
    for key in ("str", "bloom"):
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            r.execute_command("LC.ADD", key, "x")
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            r.execute_command("LC.COUNT", "lc", key)
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.bf().add("lc", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.get("lc")


def test_pipeline_and_transaction(r):
    pipe = r.pipeline(transaction=True)
    pipe.execute_command("LC.RESERVE", "t", 0.01, 100)
    pipe.execute_command("LC.ADD", "t", "a", "b")
    pipe.execute_command("LC.COUNT", "t")
    assert pipe.execute()[1:] == [2, 2]


def test_dump_restore_keeps_the_count(r):
    r.execute_command("LC.ADD", "d", *[f"i{i}" for i in range(2000)])
    count = r.execute_command("LC.COUNT", "d")
    payload = r.dump("d")
    r.restore("d2", 0, payload)
    assert r.execute_command("LC.COUNT", "d2") == count
    assert r.type("d2") in (b"lcbloomLC", "lcbloomLC")

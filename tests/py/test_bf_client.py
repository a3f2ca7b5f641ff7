"""redis-py's bf() API against lcbloom, over RESP2 and RESP3 (the `r` fixture runs each test
with both protocols)."""
import pytest
import redis

INFO_FIELDS = ["Capacity", "Size", "Number of filters", "Number of items inserted", "Expansion rate"]


def info_dict(info):
    """BFInfo (RESP2) or a dict (RESP3) as {field: value}."""
    if isinstance(info, dict):
        return {(k.decode() if isinstance(k, bytes) else k): v for k, v in info.items()}
    return {
        "Capacity": info.capacity,
        "Size": info.size,
        "Number of filters": info.filterNum,
        "Number of items inserted": info.insertedNum,
        "Expansion rate": info.expansionRate,
    }


def test_reserve_add_exists(r):
    bf = r.bf()
    assert bf.create("f", 0.01, 1000)
    assert bf.add("f", "a") == 1
    assert bf.add("f", "a") == 0
    assert bf.madd("f", "a", "b", "c") == [0, 1, 1]
    assert bf.exists("f", "b") == 1
    assert bf.exists("f", "nope") == 0
    assert bf.mexists("f", "a", "nope") == [1, 0]
    assert bf.card("f") == 3
    assert bf.card("missing") == 0
    assert bf.exists("missing", "a") == 0
    with pytest.raises(redis.ResponseError, match="item exists"):
        bf.create("f", 0.01, 1000)


def test_replies_are_booleans_in_resp3(r):
    bf = r.bf()
    added = bf.add("b", "x")
    if r.get_connection_kwargs().get("protocol") in (3, "3"):
        assert added is True
    else:
        assert added == 1 and added is not True


def test_info(r):
    bf = r.bf()
    bf.create("f", 0.01, 500, expansion=4)
    bf.madd("f", "a", "b")
    info = info_dict(bf.info("f"))
    assert list(info) == INFO_FIELDS
    assert info["Capacity"] == 500
    assert info["Number of filters"] == 1
    assert info["Number of items inserted"] == 2
    assert info["Expansion rate"] == 4
    # Size: the filter's own bytes, which grow with the items a small filter holds
    assert info["Size"] > 0
    bf.madd("f", *[f"item{i}" for i in range(400)])
    assert info_dict(bf.info("f"))["Size"] > info["Size"]
    bf.create("n", 0.01, 10, noScale=True)
    assert info_dict(bf.info("n"))["Expansion rate"] is None
    with pytest.raises(redis.ResponseError, match="not found"):
        bf.info("missing")


def test_blocked_layout_is_invisible_to_the_client_api(r):
    """A filter made with lcbloom's LAYOUT option answers redis-py's bf() API like any other."""
    bf = r.bf()
    assert r.execute_command("BF.RESERVE", "blk", 0.001, 10000, "LAYOUT", "blocked")
    assert bf.madd("blk", "a", "b") == [1, 1]
    assert bf.mexists("blk", "a", "zz") == [1, 0]
    raw = bf.info("blk")
    info = info_dict(raw)
    assert info["Capacity"] == 10000 and info["Number of items inserted"] == 2
    if isinstance(raw, dict):
        # RESP3 shows lcbloom's own field after RedisBloom's five.
        assert list(info) == INFO_FIELDS + ["Blocked"] and info["Blocked"] == 1


def test_insert(r):
    bf = r.bf()
    assert bf.insert("i", ["a", "b"], capacity=10, error=0.001, expansion=3) == [1, 1]
    info = info_dict(bf.info("i"))
    assert info["Capacity"] == 10 and info["Expansion rate"] == 3
    assert bf.insert("i", ["b", "c"], noCreate=True) == [0, 1]
    with pytest.raises(redis.ResponseError, match="not found"):
        bf.insert("missing", ["a"], noCreate=True)
    assert r.exists("missing") == 0
    # The harness's fixed seed (`ServerBuilder::fixed_seed`) makes "d" no false positive of the
    # full filter on every run, where a random seed would in about 1 run in 100.
    assert bf.insert("ns", ["a", "b", "c"], capacity=2, noScale=True)[:2] == [1, 1]
    with pytest.raises(redis.ResponseError, match="non scaling filter is full"):
        bf.add("ns", "d")
    with pytest.raises(redis.ResponseError, match="nonscaling filters cannot expand"):
        bf.insert("x", ["a"], expansion=2, noScale=True)
    assert r.exists("x") == 0


def test_scaling(r):
    bf = r.bf()
    bf.create("s", 0.01, 10, expansion=2)
    items = [f"item{i}" for i in range(1000)]
    bf.madd("s", *items)
    info = info_dict(bf.info("s"))
    assert info["Number of filters"] == 7
    assert all(v == 1 for v in bf.mexists("s", *items))


def test_scandump_loadchunk(r):
    bf = r.bf()
    bf.create("src", 0.01, 10_000)
    bf.madd("src", *[f"x{i}" for i in range(2_000)])
    it = 0
    while True:
        it, data = bf.scandump("src", it)
        if it == 0:
            assert data in (b"", None) or len(data) == 0
            break
        bf.loadchunk("dst", it, data)
    assert r.execute_command("DEBUG", "DIGEST-VALUE", "dst") == r.execute_command(
        "DEBUG", "DIGEST-VALUE", "src"
    )
    assert bf.exists("dst", "x1999") == 1
    assert bf.card("dst") == bf.card("src")


def test_wrongtype(r):
    r.set("s", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.bf().exists("s", "a")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.bf().card("s")


def is_resp3(r):
    return r.get_connection_kwargs().get("protocol") in (3, "3")


def test_reserve_alias_and_options(r):
    bf = r.bf()
    assert bf.reserve("a", 0.001, 100) is True
    assert bf.create("b", 0.01, 100, expansion=8) is True
    assert bf.create("c", 0.01, 100, noScale=True) is True
    assert info_dict(bf.info("b"))["Expansion rate"] == 8
    assert info_dict(bf.info("c"))["Expansion rate"] is None
    # a lower error rate takes more bits per item
    items = [f"item{i}" for i in range(80)]
    bf.madd("a", *items)
    bf.madd("c", *items)
    assert info_dict(bf.info("a"))["Size"] > info_dict(bf.info("c"))["Size"]
    with pytest.raises(redis.ResponseError, match="bad error rate"):
        bf.create("d", "x", 100)
    with pytest.raises(redis.ResponseError, match=r"0 < error rate range < 1"):
        bf.create("d", 1.5, 100)
    with pytest.raises(redis.ResponseError, match="capacity should be larger than 0"):
        bf.create("d", 0.01, 0)
    assert r.exists("d") == 0


def test_insert_every_option(r):
    bf = r.bf()
    # each option on its own, then all of them; creation options shape the new filter
    assert bf.insert("cap", ["a"], capacity=321) == [1]
    assert info_dict(bf.info("cap"))["Capacity"] == 321
    assert bf.insert("err", ["a"], error=0.0001) == [1]
    assert bf.insert("dflt", ["a"]) == [1]
    items = [f"item{i}" for i in range(80)]
    bf.madd("err", *items)
    bf.madd("dflt", *items)
    default = info_dict(bf.info("dflt"))
    assert info_dict(bf.info("err"))["Size"] > default["Size"]
    assert default["Capacity"] == 100 and default["Expansion rate"] == 2
    assert bf.insert("exp", ["a", "b"], expansion=5) == [1, 1]
    assert info_dict(bf.info("exp"))["Expansion rate"] == 5
    assert bf.insert("ns", ["a"], noScale=True) == [1]
    assert info_dict(bf.info("ns"))["Expansion rate"] is None
    assert bf.insert("all", ["x", "y", "x"], capacity=50, error=0.001, expansion=3) == [1, 1, 0]
    info = info_dict(bf.info("all"))
    assert (info["Capacity"], info["Expansion rate"], info["Number of items inserted"]) == (50, 3, 2)
    # NOCREATE on an existing key adds; options are ignored for an existing key
    assert bf.insert("all", ["z"], noCreate=True, capacity=9999) == [1]
    assert info_dict(bf.info("all"))["Capacity"] == 50
    replies = bf.insert("all", ["z", "w"])
    assert replies == ([False, True] if is_resp3(r) else [0, 1])


def test_info_single_field(r):
    bf = r.bf()
    bf.create("f", 0.01, 1000, expansion=4)
    bf.madd("f", "a", "b", "c")
    full = info_dict(bf.info("f"))
    names = {"CAPACITY": "Capacity", "SIZE": "Size", "FILTERS": "Number of filters",
             "ITEMS": "Number of items inserted", "EXPANSION": "Expansion rate"}
    # raw replies: a client without the BFInfo callback that r.bf() installs on r
    raw = redis.Redis(connection_pool=r.connection_pool)
    for field, name in names.items():
        reply = raw.execute_command("BF.INFO", "f", field.lower())
        if is_resp3(r):
            assert reply == {name.encode(): full[name]} or reply == {name: full[name]}
        else:
            assert reply == [full[name]]
    with pytest.raises(redis.ResponseError, match="Invalid information value"):
        r.execute_command("BF.INFO", "f", "NOPE")


def test_mexists_missing_key_and_booleans(r):
    bf = r.bf()
    assert bf.mexists("missing", "a", "b") == [0, 0]
    bf.madd("k", "a")
    got = bf.mexists("k", "a", "b")
    assert got == [1, 0]
    if is_resp3(r):
        assert got == [True, False] and all(isinstance(v, bool) for v in got)


def test_scandump_chunks_of_a_big_filter(r):
    bf = r.bf()
    bf.create("big", 0.001, 2_000_000)  # ~3.6 MB: header + one chunk
    bf.madd("big", *[f"i{n}" for n in range(1000)])
    chunks, it = [], 0
    while True:
        it, data = bf.scandump("big", it)
        if it == 0:
            break
        chunks.append((it, data))
    assert len(chunks) >= 2 and sum(len(d) for _, d in chunks) > 3_000_000
    for it, data in chunks:
        assert bf.loadchunk("copy", it, data) in (b"OK", "OK", True)
    assert bf.mexists("copy", "i0", "i999") == [1, 1]
    assert info_dict(bf.info("copy")) == info_dict(bf.info("big"))

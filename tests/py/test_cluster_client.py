"""redis-py's RedisCluster against the harness's 3-node cluster (the `nodes` fixture): BF via
bf(), LC via raw commands, hash tags for multi-key LC commands, CROSSSLOT without them."""
import pytest
import redis
from redis.cluster import RedisCluster


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def rc(nodes, request):
    client = RedisCluster(host="127.0.0.1", port=nodes[0].port, protocol=request.param)
    client.flushall(target_nodes=RedisCluster.PRIMARIES)
    yield client
    client.close()


def test_keys_spread_over_the_nodes(rc, nodes):
    bf = rc.bf()
    for i in range(30):
        bf.add(f"filter:{i}", f"item{i}")
        rc.execute_command("LC.ADD", f"counter:{i}", f"a{i}", f"b{i}")
    holders = [n.client().dbsize() for n in nodes]
    assert sum(holders) == 60 and all(h > 0 for h in holders), holders
    for i in range(30):
        assert bf.exists(f"filter:{i}", f"item{i}") == 1
        assert bf.exists(f"filter:{i}", "nope") == 0
        assert rc.execute_command("LC.COUNT", f"counter:{i}") == 2


def test_bf_commands_through_the_cluster(rc):
    bf = rc.bf()
    assert bf.create("{u}:f", 0.01, 1000)
    assert bf.madd("{u}:f", "a", "b", "a") == [1, 1, 0]
    assert bf.mexists("{u}:f", "a", "c") == [1, 0]
    assert bf.insert("{u}:g", ["x", "y"], capacity=50, error=0.001) == [1, 1]
    assert bf.card("{u}:f") == 2
    info = bf.info("{u}:g")
    capacity = info[b"Capacity"] if isinstance(info, dict) and b"Capacity" in info else (
        info["Capacity"] if isinstance(info, dict) else info.capacity)
    assert capacity == 50
    it, chunks = 0, []
    while True:
        it, data = bf.scandump("{u}:f", it)
        if it == 0:
            break
        chunks.append((it, data))
    for it, data in chunks:
        bf.loadchunk("{u}:copy", it, data)
    assert bf.mexists("{u}:copy", "a", "b", "c") == [1, 1, 0]
    with pytest.raises(redis.ResponseError, match="item exists"):
        bf.create("{u}:f", 0.01, 10)


def test_lc_multi_key_with_hash_tags(rc):
    rc.execute_command("LC.ADD", "{campaign:7}:day1", *[f"u{i}" for i in range(100)])
    rc.execute_command("LC.ADD", "{campaign:7}:day2", *[f"u{i}" for i in range(50, 200)])
    assert rc.execute_command("LC.COUNT", "{campaign:7}:day1", "{campaign:7}:day2") == 200
    assert rc.execute_command("LC.MERGE", "{campaign:7}:all", "{campaign:7}:day1",
                              "{campaign:7}:day2") in (b"OK", "OK", True)
    assert rc.execute_command("LC.COUNT", "{campaign:7}:all") == 200


def test_lc_multi_key_without_tags_is_crossslot(rc, nodes):
    # "a" and "b" hash to different slots; each server refuses the command itself.
    assert rc.keyslot("a") != rc.keyslot("b")
    rc.execute_command("LC.ADD", "a", "x")
    rc.execute_command("LC.ADD", "b", "y")
    # the client asks the server for the command's keys (COMMAND GETKEYS) and refuses to send it
    for command in ("LC.COUNT", "LC.MERGE"):
        with pytest.raises(redis.RedisClusterException, match="same key slot"):
            rc.execute_command(command, "a", "b")
    # each server refuses it too (redis-py maps the CROSSSLOT code to ClusterCrossSlotError)
    for node in nodes:
        with pytest.raises(redis.exceptions.ClusterCrossSlotError):
            node.client().execute_command("LC.COUNT", "a", "b")
        with pytest.raises(redis.exceptions.ClusterCrossSlotError):
            node.client().execute_command("LC.MERGE", "a", "b")
    assert rc.execute_command("LC.COUNT", "a") == 1

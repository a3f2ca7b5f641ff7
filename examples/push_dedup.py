"""Duplicate push tokens: drop repeated device tokens with a Bloom filter at 0.1% false positives.

A push platform sees the same device token many times across a campaign. One filter reserved for
the expected number of distinct tokens answers "seen before?" for a whole batch in one `BF.MADD`:
1 = new (send), 0 = probably seen (drop). Duplicates are always caught; about 0.1% of new tokens are
wrongly dropped. Compared here with a Redis SET holding the same tokens.
"""
import os
import random

from _common import client, human

N = int(os.environ.get("TOKENS", "1000000"))
DUP_SHARE = 0.10
BATCH = 1000

r = client()
rng = random.Random(11)
r.delete("push:tokens", "push:tokens:set")
r.bf().reserve("push:tokens", 0.001, N)

distinct = [f"{rng.getrandbits(256):064x}" for _ in range(int(N * (1 - DUP_SHARE)))]
stream = distinct + [rng.choice(distinct) for _ in range(N - len(distinct))]
rng.shuffle(stream)

seen = set()
sent = duplicates_caught = false_positives = 0
for i in range(0, len(stream), BATCH):
    batch = stream[i:i + BATCH]
    answers = r.bf().madd("push:tokens", *batch)
    for token, new in zip(batch, answers):
        truly_new = token not in seen
        seen.add(token)
        if new:
            sent += 1
        elif truly_new:
            false_positives += 1
        else:
            duplicates_caught += 1

pipe = r.pipeline(transaction=False)
for i in range(0, len(distinct), BATCH):
    pipe.sadd("push:tokens:set", *distinct[i:i + BATCH])
pipe.execute()

dups = N - len(distinct)
print(f"tokens processed:         {N:,} ({len(distinct):,} distinct, {dups:,} duplicates)")
print(f"duplicates caught:        {duplicates_caught:,} of {dups:,} (a Bloom filter never misses one)")
print(f"new tokens wrongly dropped: {false_positives:,} = {false_positives / len(distinct):.4%} "
      f"(the filter was emptier earlier, so fewer than at capacity)")
print(f"pushes sent:              {sent:,}")
probe = [f"{rng.getrandbits(256):064x}" for _ in range(min(N, 100_000))]
fp_now = sum(r.bf().mexists("push:tokens", *probe[i:i + BATCH]).count(1)
             for i in range(0, len(probe), BATCH))
print(f"false-positive rate now:  {fp_now / len(probe):.3%} of {len(probe):,} never-seen tokens "
      f"(bound: 0.1% at {N:,} distinct)")
bf_bytes, set_bytes = r.memory_usage("push:tokens"), r.memory_usage("push:tokens:set", samples=0)
print(f"memory: Bloom filter {human(bf_bytes)} vs SET {human(set_bytes)} "
      f"({set_bytes / bf_bytes:.0f}x smaller)")
r.delete("push:tokens:set")

"""Push dedupe over a sliding window: "did we send this push to this token in the last 24 hours?"

A windowed Bloom filter (`BF.RESERVE key rate capacity WINDOW seconds`) remembers each token for
one window after its last push, then forgets it: a repeat within the window is dropped, the next
day's push goes out. In production the window is 86400 s; here it is WINDOW seconds (default 2)
so that two "days" pass in a few seconds. capacity = distinct tokens per window.
"""
import os
import random
import time

from _common import client, human

N = int(os.environ.get("TOKENS", "20000"))
WINDOW = int(os.environ.get("WINDOW", "2"))
REPEATS = 0.10
BATCH = 1000

r = client()
rng = random.Random(7)
r.delete("push:day")
r.execute_command("BF.RESERVE", "push:day", 0.01, N, "WINDOW", WINDOW)

tokens = [f"{rng.getrandbits(128):032x}" for _ in range(N)]


def day(stream):
    """Sends the day's pushes: (sent, dropped) per token, in stream order."""
    answers = []
    for i in range(0, len(stream), BATCH):
        answers += r.bf().madd("push:day", *stream[i:i + BATCH])
    return answers


# Day 1: every token once, and 10% of them again later the same day.
first = tokens + rng.sample(tokens, int(N * REPEATS))
answers = day(first)
sent = sum(answers[:N])
repeats_dropped = answers[N:].count(0)
print(f"day 1: {len(first):,} pushes ({N:,} tokens, {len(first) - N:,} repeats)")
print(f"  sent:                   {sent:,}")
print(f"  wrongly dropped:        {N - sent:,} (false positives, rate {(N - sent) / N:.2%})")
print(f"  repeats dropped:        {repeats_dropped:,} of {len(first) - N:,}")
# BF.INFO's full reply, read raw: redis-py's bf().info() keeps only RedisBloom's five fields.
conn = r.connection_pool.get_connection("BF.INFO")
conn.send_command("BF.INFO", "push:day")
fields = conn.read_response()
r.connection_pool.release(conn)
info = dict(zip(fields[::2], fields[1::2]))
print(f"  BF.CARD:                {r.execute_command('BF.CARD', 'push:day'):,}")
print(f"  memory:                 {human(r.memory_usage('push:day'))} "
      f"({r.memory_usage('push:day') * 8 / N:.1f} bits per token)")

# A day (1.25 windows, the most a token is kept) later, the same tokens are pushed again.
time.sleep(WINDOW * 1.25 + 0.2)
answers = day(tokens)
print(f"day 2 (after {WINDOW * 1.25:g} s): the same {N:,} tokens")
print(f"  sent:                   {sum(answers):,} of {N:,}")
print(f"  BF.CARD after the day:  {r.execute_command('BF.CARD', 'push:day'):,}")
print(f"  window (BF.INFO):       {info[b'Window']} s")

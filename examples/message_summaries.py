"""Message summaries: delivered / read / failed recipients per message with linear counters.

A messaging service keeps, per message, how many distinct recipients a message was delivered to,
read by, or failed for. Most messages go to small groups (counts must be exact), a few to up to
50,000 recipients (≤ 1% error is fine). Each counter is `LC.RESERVE key 0.01 50000`: exact up to
~250 recipients, at most about 7 KB once large (at any number of recipients). Messages of one class share a hash tag ({class:...}) so
their union (`LC.COUNT` over several keys: distinct readers across the class) works in a cluster.
`std err` is the counter's own estimate of its standard error (`LC.INFO`): 0 while it is exact.
"""
import random

from _common import client, human

r = client()
rng = random.Random(7)
CLASS = "{class:newsletter}"
sizes = [12, 80, 250, 1_000, 10_000, 50_000]

for key in r.scan_iter(f"{CLASS}:*"):
    r.delete(key)

print(f"{'message':<10}{'kind':<11}{'exact':>8}{'LC.COUNT':>10}{'error':>9}{'std err':>9}"
      f"{'bytes':>8}")
readers_by_message = []
for n, size in enumerate(sizes, 1):
    recipients = [f"user:{rng.randrange(10**9)}" for _ in range(size)]
    recipients = list(dict.fromkeys(recipients))
    read = [u for u in recipients if rng.random() < 0.6]
    failed = [u for u in recipients if rng.random() < 0.02]
    readers_by_message.append(set(read))
    for kind, members in (("delivered", recipients), ("read", read), ("failed", failed)):
        key = f"{CLASS}:msg:{n}:{kind}"
        r.execute_command("LC.RESERVE", key, 0.01, 50_000)
        pipe = r.pipeline(transaction=False)
        for i in range(0, len(members), 1000):
            pipe.execute_command("LC.ADD", key, *members[i:i + 1000])
        pipe.execute()
        count = r.execute_command("LC.COUNT", key)
        exact = len(members)
        err = (count - exact) / exact if exact else 0.0
        size_bytes = r.memory_usage(key)
        info = r.execute_command("LC.INFO", key)
        std_err = float(dict(zip(info[::2], info[1::2]))[b"Standard error"])
        print(f"msg:{n:<6}{kind:<11}{exact:>8,}{count:>10,}{err:>+9.2%}{std_err:>9.2%}"
              f"{size_bytes:>8,}")

read_keys = [f"{CLASS}:msg:{n}:read" for n in range(1, len(sizes) + 1)]
union = r.execute_command("LC.COUNT", *read_keys)
exact_union = len(set().union(*readers_by_message))
print(f"\ndistinct readers across the class: LC.COUNT = {union:,}, exact = {exact_union:,}, "
      f"error {(union - exact_union) / exact_union:+.2%}")
r.execute_command("LC.MERGE", f"{CLASS}:read:all", *read_keys)
print(f"LC.MERGE into {CLASS}:read:all -> {r.execute_command('LC.COUNT', f'{CLASS}:read:all'):,}")
big = f"{CLASS}:msg:{len(sizes)}:delivered"
print(f"a 50,000-recipient counter takes {human(r.memory_usage(big))}; "
      f"a HyperLogLog takes ~14 KB, a SET of the ids ~{human(50_000 * 60)}")

"""Unique contacts per billing cycle: a filter per customer that expires when the cycle ends.

An email platform bills on the number of distinct contacts a customer emailed this cycle. Each
customer gets a filter `contacts:{customer}:<cycle>` with an expiry at the cycle's end; sends add
contacts in batches (`BF.INSERT`), `BF.CARD` is the running count of unique adds, and before a
list import a dry run (`BF.MEXISTS`) tells how many contacts would be new — without adding them.
"""
import datetime
import random

from _common import client

r = client()
rng = random.Random(3)
customer = "acme"
today = datetime.datetime.now(datetime.timezone.utc)
cycle = today.strftime("%Y-%m")
next_cycle = (today.replace(day=1) + datetime.timedelta(days=32)).replace(day=1, hour=0, minute=0,
                                                                          second=0, microsecond=0)
key = f"contacts:{{{customer}}}:{cycle}"
r.delete(key)

# Reserve for the plan's contact limit, at 0.1% false positives, and expire at the cycle's end.
r.bf().create(key, 0.001, 100_000)
r.expireat(key, next_cycle)

contacts = [f"contact{rng.randrange(60_000)}@example.com" for _ in range(40_000)]
for i in range(0, len(contacts), 1000):
    r.bf().insert(key, contacts[i:i + 1000], noCreate=True)
print(f"{len(contacts):,} sends this cycle to {len(set(contacts)):,} distinct contacts")
print(f"BF.CARD (running count of unique adds): {r.bf().card(key):,}")

new_list = list(dict.fromkeys(f"contact{rng.randrange(80_000)}@example.com" for _ in range(5_000)))
present = r.bf().mexists(key, *new_list)
would_be_new = sum(1 for p in present if not p)
truly_new = len(set(new_list) - set(contacts))
print(f"dry run of a {len(new_list):,}-address import: {would_be_new:,} would be new "
      f"(exact: {truly_new:,}; a false positive can only hide a new one, ~0.1% of them)")
print(f"BF.CARD unchanged by the dry run: {r.bf().card(key):,}")

ttl = r.ttl(key)
print(f"{key} expires at {next_cycle:%Y-%m-%d %H:%M} UTC (TTL {ttl:,} s)")
info = r.bf().info(key)
print(f"BF.INFO: capacity {info.capacity:,}, {info.insertedNum:,} items, "
      f"{info.filterNum} filter(s), {info.size:,} bytes")

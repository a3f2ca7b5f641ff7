"""The examples in examples/ run against a test server (small sizes) and print true statements."""
import os
import re
import subprocess
import sys

from conftest import ROOT


def run_example(server, name, **env):
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", name)],
        env={**os.environ, "LCBLOOM_PORT": str(server.port), **env},
        capture_output=True, text=True, timeout=300, check=True)
    return out.stdout


def num(text):
    return float(text.replace(",", "").rstrip("%"))


def test_message_summaries(server):
    out = run_example(server, "message_summaries.py")
    rows = re.findall(r"^msg:\d+\s+(\w+)\s+([\d,]+)\s+([\d,]+)\s+([+-][\d.]+%)\s+([\d.]+%)\s+([\d,]+)$",
                      out, re.M)
    assert len(rows) == 18, out
    for kind, exact, count, err, std_err, size in rows:
        exact, count, std_err = num(exact), num(count), num(std_err) / 100
        if std_err == 0:
            assert count == exact, out  # exact mode
        else:
            assert abs(count - exact) <= 5 * std_err * exact, out
        assert num(size) < 7500, out  # every counter stays within ~7 KB
    union = re.search(r"LC.COUNT = ([\d,]+), exact = ([\d,]+)", out)
    assert abs(num(union[1]) / num(union[2]) - 1) < 0.03, out
    assert re.search(r"read:all -> " + re.escape(union[1]) + "$", out, re.M), out


def test_push_dedup(server):
    out = run_example(server, "push_dedup.py", TOKENS="20000")
    assert "(18,000 distinct, 2,000 duplicates)" in out, out
    assert "duplicates caught:        2,000 of 2,000" in out, out
    wrongly = re.search(r"wrongly dropped: ([\d,]+)", out)
    sent = re.search(r"pushes sent: +([\d,]+)", out)
    assert num(wrongly[1]) + num(sent[1]) == 18_000, out
    assert num(wrongly[1]) < 18_000 * 0.002, out
    assert num(re.search(r"rate now: +([\d.]+)%", out)[1]) < 0.2, out
    assert num(re.search(r"\((\d+)x smaller\)", out)[1]) > 10, out


def test_billing_cycle(server):
    out = run_example(server, "billing_cycle.py")
    distinct = num(re.search(r"to ([\d,]+) distinct contacts", out)[1])
    card = num(re.search(r"running count of unique adds\): ([\d,]+)", out)[1])
    assert distinct * 0.995 <= card <= distinct, out
    new, exact = re.search(r"([\d,]+) would be new \(exact: ([\d,]+)", out).groups()
    assert num(exact) * 0.99 <= num(new) <= num(exact), out
    assert f"BF.CARD unchanged by the dry run: {card:,.0f}" in out, out
    assert int(re.search(r"\(TTL ([\d,]+) s\)", out)[1].replace(",", "")) > 0, out


def test_push_window(server):
    out = run_example(server, "push_window.py", TOKENS="20000", WINDOW="2")
    assert "repeats dropped:        2,000 of 2,000" in out, out
    wrongly = num(re.search(r"wrongly dropped: +([\d,]+)", out)[1])
    assert wrongly < 20_000 * 0.01, out
    second = num(re.search(r"sent: +([\d,]+) of 20,000", out)[1])
    assert second > 20_000 * 0.99, out  # day 1 forgotten: only false positives drop
    assert num(re.search(r"\(([\d.]+) bits per token\)", out)[1]) < 20, out
    assert "window (BF.INFO):       2 s" in out, out

"""The README's quick start works verbatim: its redis-cli session and its Python snippet, run
against a test server (the port 6380 in them replaced by the test server's), print exactly what
the README shows. Blocks are found by their `<!-- readme-test: ... -->` markers."""
import os
import re
import shlex
import subprocess
import sys

from conftest import ROOT

PROMPT = "127.0.0.1:6380> "


def block(name):
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    m = re.search(r"<!-- readme-test: " + re.escape(name) + r" -->\n```[a-z]*\n(.*?)```", text, re.S)
    assert m, f"README block {name!r} not found"
    return m.group(1)


def test_redis_cli_session(server):
    server.client().flushall()
    lines = block("redis-cli").splitlines()
    assert lines[0] == "$ redis-cli -p 6380"
    steps = []  # (command, expected output lines)
    for line in lines[1:]:
        if line.startswith(PROMPT):
            steps.append((line[len(PROMPT):], []))
        else:
            steps[-1][1].append(line)
    assert len(steps) >= 10
    for command, expected in steps:
        out = subprocess.run(["redis-cli", "--no-raw", "-p", str(server.port), *shlex.split(command)],
                             capture_output=True, text=True, timeout=30).stdout
        assert out.splitlines() == expected, f"{command}\n{out}"


def test_python_snippet(server):
    server.client().flushall()
    code = block("python").replace("port=6380", f"port={server.port}")
    assert code != block("python")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out == block("python-output")

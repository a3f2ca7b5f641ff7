"""The README's examples work verbatim: its redis-cli session, its Python snippet and its
`INFO lcbloom` example, run against a fresh test server (the port 6380 in them replaced by the
test server's), print exactly what the README shows. Blocks are found by their
`<!-- readme-test: ... -->` markers. docs/commands.md's examples (blocks of `> ` lines) do the
same, as one session in the order they are written."""
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
    steps = session(lines[1:], PROMPT)
    assert len(steps) >= 10
    replay(server, steps)


def session(lines, prompt):
    """A transcript's (command, expected output lines), commands being the lines after `prompt`."""
    steps = []
    for line in lines:
        if line.startswith(prompt):
            steps.append((line[len(prompt):], []))
        else:
            steps[-1][1].append(line)
    return steps


def replay(server, steps):
    """Runs each (command, expected output lines) through redis-cli, as a user would type it."""
    for command, expected in steps:
        out = subprocess.run(["redis-cli", "--no-raw", "-p", str(server.port), *shlex.split(command)],
                             capture_output=True, text=True, timeout=30).stdout
        assert out.splitlines() == expected, f"{command}\n{out}"


def test_command_reference_examples(server):
    server.client().flushall()
    with open(os.path.join(ROOT, "docs", "commands.md")) as f:
        blocks = re.findall(r"^```\n(> .*?)^```", f.read(), re.S | re.M)
    steps = session("".join(blocks).splitlines(), "> ")
    assert len(steps) >= 15
    replay(server, steps)


def test_python_snippet(server):
    server.client().flushall()
    code = block("python").replace("port=6380", f"port={server.port}")
    assert code != block("python")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out == block("python-output")


def test_info_example(server):
    """The `INFO lcbloom` example: its commands (`1 2 3 ... 1000` standing for 1 to 1000) on an
    empty server, then the section exactly as shown."""
    r = server.client()
    r.flushall()
    lines = block("info").splitlines()
    commands = [line[2:] for line in lines if line.startswith("> ")]
    shown = [line for line in lines if not line.startswith("> ")]
    assert commands[-1] == "INFO lcbloom" and shown[0] == "# lcbloom"
    for command in commands[:-1]:
        words = command.split()
        if "..." in words:
            at = words.index("...")
            words = words[:at - 3] + [str(i) for i in range(int(words[at - 3]), int(words[at + 1]) + 1)]
        r.execute_command(*words)
    text = subprocess.run(["redis-cli", "-p", str(server.port), "INFO", "lcbloom"],
                          capture_output=True, text=True, timeout=30, check=True).stdout
    assert [line for line in text.splitlines() if line] == shown

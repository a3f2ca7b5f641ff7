# lcbloom — `make run` and `make test` do all set-up on a fresh Debian machine.
SHELL := /bin/bash
MODULE := target/release/liblcbloom.so
PORT ?= 6380
VENV := .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := redis-server redis-tools libclang-dev

.PHONY: all build run test unit-test integration-test py-test deps deps-system deps-python clean

all: build

## Set-up: system packages (only what is missing), then a Python venv for client tests.
deps: deps-system deps-python

deps-system:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

deps-python: $(VENV)/.installed

$(VENV)/.installed: tests/py/requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r tests/py/requirements.txt
	touch $@

build: deps-system
	cargo build --release

## Start redis-server in the foreground with redis.conf and the module (data in ./data).
run: build
	mkdir -p data
	redis-server redis.conf --port $(PORT) --loadmodule $(CURDIR)/$(MODULE)

## Every test: unit and property tests, integration tests against real servers, client tests.
test: deps build unit-test integration-test py-test

unit-test:
	cargo test --release --lib

integration-test:
	cargo test --release --tests --test '*'

py-test: deps-python
	LCBLOOM_MODULE=$(CURDIR)/$(MODULE) $(PY) -m pytest -q tests/py

clean:
	cargo clean
	rm -rf $(VENV)

## ---- Examples and pictures (issue 7) -------------------------------------------------------
.PHONY: demo plots

## Run the three examples against a running server (`make run` in another terminal first):
## port LCBLOOM_PORT, default $(PORT).
demo: deps-python
	@port=$${LCBLOOM_PORT:-$(PORT)}; \
	if ! redis-cli -p $$port PING >/dev/null 2>&1; then \
	  echo "no server on port $$port: start one with 'make run' in another terminal" \
	       "(or set LCBLOOM_PORT)"; exit 1; fi; \
	for ex in message_summaries push_dedup billing_cycle; do \
	  echo "== examples/$$ex.py"; LCBLOOM_PORT=$$port $(PY) examples/$$ex.py || exit 1; echo; \
	done

## Render docs/img/*.svg from the pure cores (src/bin/plots.rs; a few seconds in release).
plots:
	cargo run --release --bin plots -- docs/img

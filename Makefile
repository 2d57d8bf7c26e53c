# Cachalot: the README documents only `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# rustup installs cargo in ~/.cargo/bin, which non-login shells may not have.
export PATH := $(HOME)/.cargo/bin:$(PATH)

CARGO ?= cargo

.PHONY: all build test demo lint clean deps-test deps-demo

all: build

build:
	$(CARGO) build --release

deps-test:
	scripts/install-deps.sh test

deps-demo:
	scripts/install-deps.sh demo

# Installs its own packages, builds with the `ci` profile, runs cargo tests,
# e2e scripts and lints; the last line printed is "N passed, N failed".
test: deps-test
	scripts/run-tests.sh

demo: deps-demo
	$(CARGO) build --release
	scripts/demo.sh

lint:
	$(CARGO) fmt --all --check
	scripts/check-rust-version.sh
	$(CARGO) clippy --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf test-artifacts

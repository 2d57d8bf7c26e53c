# Cachalot: the README documents only `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# rustup installs cargo in ~/.cargo/bin, which non-login shells may not have.
export PATH := $(HOME)/.cargo/bin:$(PATH)

CARGO ?= cargo

.PHONY: all build test demo lint clean deps-test deps-demo install uninstall

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

# Install as a service: the binary, the systemd unit, bash completion and the man
# page. Then `systemctl enable --now cachalot` (home: /var/lib/cachalot).
#   make install [DESTDIR=/tmp/stage] [PREFIX=/usr] [UNITDIR=/lib/systemd/system]
#   make install CACHALOT_BIN=target/ci/cachalot   (installs that binary, no build)
# `make uninstall` (same variables) removes exactly those files; it keeps
# /var/lib/cachalot (pools, tokens, analytics) and never touches pool devices.
PREFIX ?= /usr/local
SBINDIR ?= $(PREFIX)/sbin
UNITDIR ?= /etc/systemd/system
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
MANDIR ?= $(PREFIX)/share/man
CACHALOT_BIN ?= target/release/cachalot
# systemctl only when installing into this machine's root and systemd runs it.
SYSTEMD_RUNNING = [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]

install:
ifeq ($(origin CACHALOT_BIN),file)
	$(CARGO) build --release -p cachalot
endif
	install -D -m 0755 $(CACHALOT_BIN) $(DESTDIR)$(SBINDIR)/cachalot
	install -d -m 0755 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(COMPLETIONDIR) $(DESTDIR)$(MANDIR)/man8
	sed 's|/usr/local/sbin/cachalot|$(SBINDIR)/cachalot|g' packaging/cachalot.service \
		>$(DESTDIR)$(UNITDIR)/cachalot.service
	$(CACHALOT_BIN) completion bash >$(DESTDIR)$(COMPLETIONDIR)/cachalot
	$(CACHALOT_BIN) manpage >$(DESTDIR)$(MANDIR)/man8/cachalot.8
	chmod 0644 $(DESTDIR)$(UNITDIR)/cachalot.service $(DESTDIR)$(COMPLETIONDIR)/cachalot \
		$(DESTDIR)$(MANDIR)/man8/cachalot.8
	if $(SYSTEMD_RUNNING); then systemctl daemon-reload; fi
	@echo "installed $(SBINDIR)/cachalot; start it with: systemctl enable --now cachalot"

uninstall:
	if $(SYSTEMD_RUNNING); then systemctl disable --now cachalot.service || true; fi
	rm -f $(DESTDIR)$(SBINDIR)/cachalot $(DESTDIR)$(UNITDIR)/cachalot.service \
		$(DESTDIR)$(COMPLETIONDIR)/cachalot $(DESTDIR)$(MANDIR)/man8/cachalot.8
	if $(SYSTEMD_RUNNING); then systemctl daemon-reload; fi
	@echo "removed; kept /var/lib/cachalot (pool list, tokens, analytics history)"

lint:
	$(CARGO) fmt --all --check
	scripts/check-rust-version.sh
	$(CARGO) clippy --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf test-artifacts

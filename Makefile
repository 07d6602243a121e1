# Treeline: `make run` serves the dashboard, `make test` runs every test, `make help`
# lists the targets. Each installs what it needs first, and says so:
#   - build tools under TOOLS_DIR (~/.cache/treeline-tools), outside the clone
#     (scripts/setup-tools.sh);
#   - system packages (Chromium, a PostgreSQL server, python3-venv) with apt-get, only
#     when missing, only in `make bootstrap` (scripts/bootstrap-system.sh);
#   - the Python test packages in a venv, PY_VENV (target/py-venv), never the system
#     Python (scripts/setup-python.sh).
# Each public target has a `## target: description` line, which `make help` prints.

SHELL := /bin/bash
TOOLS_DIR ?= $(HOME)/.cache/treeline-tools
export TOOLS_DIR
PY_VENV ?= $(CURDIR)/target/py-venv
export PY_VENV
export PATH := $(TOOLS_DIR)/bin:$(HOME)/.cargo/bin:$(PATH)
DATA_DIR ?= ./treeline-data
ADDR ?= 127.0.0.1:3000
RUST_PACKAGES := -p treeline-wire -p treeline-store -p treeline-devtools -p treeline-app -p treeline-server -p treeline-client
say = @printf '\033[1m[make]\033[0m %s\n'

# CI builds once from a clean clone: incremental caches would only cost disk there.
ifeq ($(CI),true)
export CARGO_INCREMENTAL := 0
endif

.PHONY: run build test-build wheel tools bootstrap py-venv dev test lint lint-quick lint-variant rust-and-bundle rust-test e2e browser-test wheel-test py-test otlp-test bench browser-bench clean help

## run: build the release and serve the dashboard, with the demo loaded, on ADDR (SQLite in DATA_DIR)
run: build
	$(say) "serving: open http://$(ADDR)  (data in $(DATA_DIR), ctrl-c to stop)"
	./target/release/treeline serve --addr $(ADDR) --data-dir $(DATA_DIR) --demo

## build: build the release server and its browser bundle (scripts/build-release.sh; logs in target/build-logs)
build: tools
	@scripts/build-release.sh

# `make test` runs its browser, Python and OTLP tests on the debug build of the server:
# the Rust tests compiled all of it, so it only links the binary instead of building
# an optimised one (docs/building.md has the timings). Same code, the same bundle;
# `make build` makes the optimised binary `make run` serves.
## test-build: the server (debug build) and the bundle, as `make test` runs them
test-build: tools
	@SERVER_PROFILE=dev scripts/build-release.sh

## wheel: Python wheels in target/wheels: the release binary (`treeline` on the PATH) and the SDK
wheel: build py-venv
	$(say) "wheels: the sealed release binary, and the SDK (pip install \"treeline[server]\" --find-links target/wheels)"
	$(PY_VENV)/bin/python scripts/build-wheel.py target/release/treeline target/wheels
	$(PY_VENV)/bin/python -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation ./sdk/python -w target/wheels
	@ls -l target/wheels

## tools: install the build tools (wasm target, treeline-bundle, wasm-opt) under TOOLS_DIR
tools:
	@WANT="wasm bindgen wasmopt" scripts/setup-tools.sh

## bootstrap: install the missing system packages (Chromium, PostgreSQL, python3-venv): the only apt-get
bootstrap:
	@scripts/bootstrap-system.sh

## py-venv: make or update the Python test venv in PY_VENV (pytest, the SDK, OpenTelemetry)
py-venv:
	@scripts/setup-python.sh

## dev: rebuild and reload on every change (cargo-leptos, built once under TOOLS_DIR)
dev: tools
	@WANT=leptos scripts/setup-tools.sh
	$(say) "watching: rebuilds and reloads on every change"
	@# cargo-leptos writes the whole of pkg/ (wasm, JS, CSS) but leaves `make build`'s
	@# files beside it: gzipped copies the server would send in its place, and route
	@# chunks with a manifest whose preload links pages would carry (dev is not split).
	rm -rf target/site/pkg
	cargo leptos watch

# Everything a clean clone needs, in this order: the system packages and the Python
# venv first, so that a missing one fails before the long builds.
# It lints while it builds: clippy's driver compiles the workspace's own crates
# (RUSTC_WORKSPACE_WRAPPER, warnings denied), so the Rust tests' build and the wasm
# build are also `make lint`'s clippy runs, instead of type-checking every crate a
# second time. A lint fails the build that found it.
## test: every test: lints, Rust on SQLite and PostgreSQL, the Python SDK, OTLP, the browser
test: export TREELINE_BIN := $(CURDIR)/target/debug/treeline
test: export RUSTC_WORKSPACE_WRAPPER := $(shell rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
test: export CLIPPY_ARGS := -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
test: bootstrap py-venv lint-quick rust-and-bundle py-test otlp-test browser-test wheel-test

# The browser bundle (its tool, then the wasm, each in its own target directory)
# builds beside the Rust tests: those leave a core idle while they run and link, and
# the bundle fills it. The debug server's own step waits for cargo's lock on target/.
# Either failing fails this; a failed Rust side stops the bundle's whole process
# group (its own, through setsid), as does ctrl-c. Sealed again at the end: when the
# bundle is ready early (unchanged), the tests' own build may link the debug server
# after the bundle's step sealed it, leaving a binary without its site.
rust-and-bundle:
	@setsid $(MAKE) --no-print-directory test-build & bundle=$$!; \
	trap 'kill -- -$$bundle 2>/dev/null' INT TERM; \
	if ! $(MAKE) --no-print-directory rust-test lint-variant; then \
	  kill -- -$$bundle 2>/dev/null; wait $$bundle; exit 1; fi; \
	wait $$bundle && target/debug/treeline seal --site-dir target/site --out target/debug/treeline >/dev/null

# treeline-app is only ever built with `ssr` (the server) or `hydrate` (the browser),
# so those are its feature sets; the server also without its default `devtools`.
## lint: rustfmt check, and clippy (warnings denied) for each feature set
lint: lint-quick
	@WANT=wasm scripts/setup-tools.sh
	$(say) "checking the lints for each feature set"
	cargo clippy $(RUST_PACKAGES) --all-targets --features treeline-app/ssr -- -D warnings
	cargo clippy -p treeline-app -p treeline-frontend --target wasm32-unknown-unknown --features treeline-app/hydrate -- -D warnings
	cargo clippy -p treeline-server --all-targets --no-default-features --features treeline-app/ssr -- -D warnings
	cargo clippy --manifest-path tools/bundle/Cargo.toml --target-dir $(TOOLS_DIR)/target/bundle -- -D warnings

# The checks that need no compiling: formatting, the contract crate keeping clients
# free of the UI (no Leptos under treeline-client), the store keeping to its layer
# (no HTTP framework or UI under treeline-store), and the demo and benchmarks taking
# the server as a `Host` (neither it nor the UI under treeline-devtools).
lint-quick:
	@if [ -n "$${CLIPPY_ARGS:-}" ] && [ ! -x "$${RUSTC_WORKSPACE_WRAPPER:-}" ]; then \
	  echo "clippy-driver not found: rustup component add clippy"; exit 1; fi
	$(say) "checking the formatting, that treeline-client links no UI crate, and treeline-store no HTTP or UI"
	cargo fmt --all -- --check
	cargo fmt --manifest-path tools/bundle/Cargo.toml -- --check
	@! cargo tree -p treeline-client -e normal | grep -E "leptos|web-sys" || \
	  { echo "treeline-client links a UI crate (see above)"; exit 1; }
	@! cargo tree -p treeline-store -e normal | grep -E "leptos|web-sys|axum|tower|hyper|treeline-(app|server|client)" || \
	  { echo "treeline-store links a crate of a layer above it (see above)"; exit 1; }
	@! cargo tree -p treeline-devtools -e normal | grep -E "leptos|treeline-(app|server)" || \
	  { echo "treeline-devtools links the server or the UI (see above)"; exit 1; }

# In `make test` (clippy's driver set): the server without its default features,
# which no other build of the run compiles. Its dependencies are the tests' already.
lint-variant:
	$(say) "linting the server without its default features (devtools)"
	cargo build -p treeline-server --lib --no-default-features --features treeline-app/ssr

## rust-test: the Rust tests, on SQLite and on a throwaway PostgreSQL cluster
rust-test:
	$(say) "Rust tests, with a throwaway PostgreSQL cluster beside them"
	scripts/with-postgres.sh cargo test $(RUST_PACKAGES) --features treeline-app/ssr

## py-test: the Python SDK's tests against TREELINE_BIN (default: the release build; `make build` first)
py-test:
	scripts/test-python.sh

## otlp-test: OpenTelemetry OTLP/HTTP export into TREELINE_BIN (as py-test), on SQLite and PostgreSQL
otlp-test:
	scripts/test-otlp.sh

## e2e: the Playwright browser tests, in Debian's Chromium, against the release build
e2e: build browser-test

## browser-test: the Playwright tests against TREELINE_BIN (as py-test), built already
browser-test:
	@WANT=chromium scripts/bootstrap-system.sh
	@WANT=node scripts/setup-tools.sh
	scripts/e2e.sh

## wheel-test: the wheels of TREELINE_BIN and the SDK installed offline into a fresh venv, served from elsewhere, checked in Chromium
wheel-test:
	scripts/test-wheel.sh

# Through `build`: a plain `cargo build` of the server would leave a binary that names
# the wrong browser bundle.
## bench: ingest throughput on SQLite, with the release build
bench: build
	$(say) "benchmark: ingest throughput on SQLite"
	./target/release/treeline bench ingest

## browser-bench: a million-span trace in Chromium: first rows, a 100,000-child node, scrolling (release build)
browser-bench: build
	@WANT=chromium scripts/bootstrap-system.sh
	@WANT=node scripts/setup-tools.sh
	scripts/browser-bench.sh

## clean: remove the build outputs: target/, the Python test venv in it included
clean:
	$(say) "removing target/ (cargo clean)"
	cargo clean

## help: list the targets and the variables that steer them (needs nothing installed)
help:
	@awk '/^## [A-Za-z0-9_-]+: / { line = substr($$0, 4); i = index(line, ": "); \
	  printf "  \033[1m%-12s\033[0m %s\n", substr(line, 1, i - 1), substr(line, i + 2) }' $(firstword $(MAKEFILE_LIST))
	@printf '\nVariables (make VAR=value):\n  ADDR=%s  DATA_DIR=%s\n  TOOLS_DIR=%s\n  PY_VENV=%s\n' \
	  '$(ADDR)' '$(DATA_DIR)' '$(TOOLS_DIR)' '$(PY_VENV)'

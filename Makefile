# Treeline: `make run` serves the dashboard, `make test` runs every test. Both install
# what they need first (tools go under ~/.cache/treeline-tools, outside the clone).

SHELL := /bin/bash
TOOLS_DIR ?= $(HOME)/.cache/treeline-tools
export TOOLS_DIR
export PATH := $(TOOLS_DIR)/bin:$(HOME)/.cargo/bin:$(PATH)
DATA_DIR ?= ./treeline-data
ADDR ?= 127.0.0.1:3000
RUST_PACKAGES := -p treeline-app -p treeline-server -p treeline-client

# CI builds once from a clean clone: incremental caches would only cost disk there.
ifeq ($(CI),true)
export CARGO_INCREMENTAL := 0
endif

.PHONY: run build tools dev test lint rust-test e2e py-test otlp-test bench clean

## run: build the release and serve the dashboard on $(ADDR) with an embedded SQLite file
run: build
	@echo "Treeline: open http://$(ADDR)  (data in $(DATA_DIR), ctrl-c to stop)"
	./target/release/treeline serve --addr $(ADDR) --data-dir $(DATA_DIR) --demo

build: tools
	cargo leptos build --release

tools:
	@WANT="wasm leptos bindgen wasmopt" scripts/setup-tools.sh

## dev: rebuild and reload on every change
dev: tools
	cargo leptos watch

## test: formatting, lints per feature set, Rust tests on SQLite and PostgreSQL,
## the Python SDK's tests, and the browser tests against the release build
test: lint rust-test build py-test otlp-test e2e

lint: tools
	cargo fmt --all -- --check
	cargo clippy -p treeline-app --all-targets -- -D warnings
	cargo clippy $(RUST_PACKAGES) --all-targets --features treeline-app/ssr -- -D warnings
	cargo clippy -p treeline-app -p treeline-frontend --target wasm32-unknown-unknown --features treeline-app/hydrate -- -D warnings

rust-test: tools
	scripts/with-postgres.sh cargo test $(RUST_PACKAGES) --features treeline-app/ssr

py-test:
	scripts/test-python.sh

otlp-test:
	scripts/test-otlp.sh

e2e: build
	@WANT="chromium node" scripts/setup-tools.sh
	scripts/e2e.sh

## bench: ingest throughput on SQLite. Through `build`: a plain `cargo build` of the
## server would leave a binary that names the wrong browser bundle.
bench: build
	./target/release/treeline bench ingest

clean:
	cargo clean

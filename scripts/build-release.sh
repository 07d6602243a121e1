#!/usr/bin/env bash
# Builds the release: the `treeline` binary and the browser bundle in target/site,
# the same files `cargo leptos build --release --split` makes, without cargo-leptos:
# building that tool on a fresh machine took longer than Treeline itself. `make dev`
# keeps cargo-leptos for its watch-and-reload loop.
#
# First the wasm (profile wasm-release, in target/front, as cargo-leptos lays it
# out), then the server (profile release) while treeline-bundle (tools/bundle,
# wasm-bindgen's library) and wasm-opt run on the wasm; those two are skipped when
# the wasm is byte-identical to the last bundle's. Last, the site is sealed into
# the binary, which then serves it from memory.
# Two cargo builds side by side were tried: no faster on 2 cores (20 min from
# scratch together), and twice the memory.
# Compiler output goes to target/build-logs/; the terminal gets a line per step.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PROGRESS_TAG=build
# shellcheck source=scripts/lib/progress.sh
source scripts/lib/progress.sh

LOGS=target/build-logs
SITE=target/site
PKG=$SITE/pkg
NAME=treeline
FRONT=target/front
WASM_IN=$FRONT/wasm32-unknown-unknown/wasm-release/treeline_frontend.wasm
STAMP=$PKG/.source-wasm.sha256
# The components are type-erased on both sides (far less monomorphised view code in
# the bundle); both builds must agree, as cargo-leptos's `always-erase-components`.
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }--cfg erase_components"
mkdir -p "$LOGS" "$PKG"
started=$SECONDS

# Split by route (app/src/ui/routes.rs): the wasm keeps its relocations, which
# treeline-bundle needs to cut the lazy routes' code into chunks. Each constant
# keeps a data segment of its own: in some builds the merged segment kept every
# page's constants in the main module (274 KB gzip against 251 unmerged).
SPLIT_FLAGS="--cfg treeline_split -Clink-args=--emit-relocs -Clink-args=--no-merge-data-segments"
# Panic messages name their source files: the dependencies' by crate, not by where
# this machine keeps them (a lazy route's chunk name hashes its file too, so only
# paths outside the workspace are remapped: the server's build names the same).
REMAP="--remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}/registry/src/="
step wasm "browser bundle: compiling the wasm" "2-3 min from scratch" "$LOGS/wasm.log" \
  "$(crate_count -p treeline-frontend --target wasm32-unknown-unknown)" -- \
  env RUSTFLAGS="$RUSTFLAGS $SPLIT_FLAGS $REMAP" \
  cargo build -p treeline-frontend --lib --target wasm32-unknown-unknown \
  --profile wasm-release --target-dir "$FRONT"

# The bundle's name is Leptos's own default (`<name>_bg.wasm`, what the hydration
# script asks for when built without cargo-leptos's environment).
WASM_OUT=$PKG/${NAME}_bg.wasm
# A relink from unchanged sources rewrites the wasm with the same bytes: hashes, not
# times, say whether the bundle is stale (the outputs' too: `make dev` writes here).
MANIFEST=$PKG/__wasm_split_manifest.json
# The tool too: a new treeline-bundle writes a different bundle from the same wasm.
stamp() {
  sha256sum "$WASM_IN" "$WASM_OUT" "$PKG/$NAME.js" "$MANIFEST" "$(command -v treeline-bundle)" \
    2>/dev/null | cut -d' ' -f1 | paste -sd' '
}
# The server sends `F.br` or `F.gz` in place of F to a browser that accepts brotli
# or gzip (its bundle files, serve.rs): the wasm goes out as about a third of its
# size. Brotli by treeline-bundle's own encoder: no system tool needed.
precompress() { gzip -9 -k -f -n "$@" && treeline-bundle --brotli "$@"; }
# Low memory (under 1 KB) is never addressed on purpose, so a constant added to a
# pointer can become the instruction's offset (1.2 KB gzip off the main module).
# The producers and target-features sections are for tools, not browsers.
WASM_OPT_FLAGS=(--enable-bulk-memory --enable-nontrapping-float-to-int --low-memory-unused
  --strip-producers --strip-target-features)
bundle() {
  local tmp=$PKG.tmp f
  rm -rf "$tmp" && mkdir -p "$tmp"
  treeline-bundle "$WASM_IN" "$tmp" "$NAME"
  for f in "$tmp"/*.wasm; do
    wasm-opt -Oz "${WASM_OPT_FLAGS[@]}" "$f" -o "$f"
  done
  # Chunk names carry a hash of where their code is: last build's would linger.
  rm -f "$PKG"/split_*.wasm* "$PKG"/chunk_*.wasm* "$PKG"/__wasm_split*
  precompress "$tmp"/*.wasm "$tmp"/*.js
  mv "$tmp"/* "$PKG/"
  rm -rf "$tmp"
  stamp >"$STAMP"
}
# Every file the bundle is made of is there: the main module, the glue and each
# chunk the manifest names, with their gzip copies, and the build id (`make dev`
# empties the directory before it writes its own bundle).
complete() {
  local stem
  [ -f "$WASM_OUT.gz" ] && [ -f "$PKG/$NAME.js.gz" ] && [ -f "$MANIFEST" ] && [ -f "$PKG/treeline.build" ] || return 1
  for stem in $(grep -o '"\(chunk\|split\)_[A-Za-z0-9_]*"' "$MANIFEST" | tr -d '"' | sort -u); do
    [ -f "$PKG/$stem.wasm.gz" ] || return 1
  done
}
if complete && [ "$(stamp)" = "$(cat "$STAMP" 2>/dev/null)" ]; then
  progress_say "browser bundle: the wasm is unchanged, keeping $PKG"
else
  rm -f "$STAMP"
  job bundle "browser bundle: split by route and JS glue (treeline-bundle), wasm-opt -Oz, gzip" "1 min" "$LOGS/bundle.log" 0 -- bundle
fi
# SERVER_PROFILE=dev: the debug build of the server (`make test-build`).
if [ "${SERVER_PROFILE:-release}" = dev ]; then
  server_args=() server_bin=target/debug/treeline server_what="debug build, for the tests"
  server_usual="1 min after the Rust tests' build, 5 min from scratch"
else
  server_args=(--release) server_bin=target/release/treeline server_what="optimised"
  server_usual="5-6 min from scratch"
fi
job server "server: compiling the treeline binary ($server_what)" "$server_usual" \
  "$LOGS/server.log" "$(crate_count -p treeline-server)" -- \
  cargo build -p treeline-server --bin treeline "${server_args[@]}"
wait_jobs

cp style/main.css "$PKG/$NAME.css"
precompress "$PKG/$NAME.css"
cp -r public/. "$SITE/"
# The binary carries the site it was built with (server/src/site/sealed.rs): it then
# runs alone from any directory, and a bundle rebuilt beside a running server cannot
# disagree with it. A copy with the files appended, so no recompile: well under 1 s.
"$server_bin" seal --site-dir "$SITE" --out "$server_bin" >/dev/null
# What every page loads first (the main module, its glue, the stylesheet), as sent.
wire_kb() { cat "$PKG/${NAME}_bg.wasm$1" "$PKG/$NAME.js$1" "$PKG/$NAME.css$1" | wc -c | awk '{printf "%d", $1 / 1024}'; }
progress_say "built in $(minutes $((SECONDS - started))): $server_bin," \
  "with the bundle of $SITE sealed in ($(du -h "$WASM_OUT" | cut -f1) of wasm; the first load" \
  "$(wire_kb .br) KB with brotli, $(wire_kb .gz) KB with gzip)"

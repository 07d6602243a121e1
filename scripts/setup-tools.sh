#!/usr/bin/env bash
# Installs the build tools Treeline needs, outside the clone, so a second run (and a
# fresh clone on the same machine) skips them. Idempotent: each step checks first.
# System packages (Chromium, PostgreSQL, python3-venv) are not installed here: only
# scripts/bootstrap-system.sh runs apt-get.
#
#   TOOLS_DIR   where tools go (default ~/.cache/treeline-tools); its bin/ goes on PATH.
#   WANT        space-separated subset of: wasm leptos bindgen wasmopt node
set -euo pipefail

TOOLS_DIR=${TOOLS_DIR:-$HOME/.cache/treeline-tools}
WANT=${WANT:-"wasm leptos bindgen wasmopt"}
CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
LEPTOS_VERSION=0.3.11
BINARYEN_VERSION=132.0.0
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# tools/bundle's wasm-bindgen must equal the one in Cargo.lock.
BINDGEN_VERSION=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/[^0-9.]/,""); print; exit}' "$ROOT/Cargo.lock" 2>/dev/null || true)

mkdir -p "$TOOLS_DIR/bin"
# Build tools run for seconds: a profile made for building them fast, not for
# shipping (their own release profiles ask for fat LTO and one codegen unit; "off"
# also skips the thin LTO rustc does by default within a crate).
tool_profile() {
  CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_DEBUG=false \
    CARGO_PROFILE_RELEASE_INCREMENTAL=false "$@"
}
export PATH="$TOOLS_DIR/bin:$CARGO_HOME/bin:$PATH"
PROGRESS_TAG=setup
# shellcheck source=scripts/lib/progress.sh
source "$ROOT/scripts/lib/progress.sh"
say() { progress_say "$*"; }
LOGS=$TOOLS_DIR/logs
wants() { [[ " $WANT " == *" $1 "* ]]; }
for item in $WANT; do
  case $item in
    wasm | leptos | bindgen | wasmopt | node) ;;
    chromium | postgres | pyvenv) say "$item is a system package: WANT=$item scripts/bootstrap-system.sh"; exit 2 ;;
    *) say "unknown WANT item '$item' (known: wasm leptos bindgen wasmopt node)"; exit 2 ;;
  esac
done

# Unpacks a crate's published source into $2 through cargo itself.
crate_source() {
  local name=$1 version=$2 dest=$3
  (cd "$TOOLS_DIR" && cargo info "$name@$version" >/dev/null)
  local crate
  crate=$(ls "$CARGO_HOME"/registry/cache/*/"$name-$version.crate" | head -1)
  rm -rf "$dest" && mkdir -p "$dest"
  tar xzf "$crate" -C "$dest" --strip-components=1
}

if wants wasm && ! rustup target list --installed | grep -q wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

if wants leptos && ! cargo-leptos --version 2>/dev/null | grep -q "$LEPTOS_VERSION"; then
  src="$TOOLS_DIR/src/cargo-leptos"
  crate_source cargo-leptos "$LEPTOS_VERSION" "$src"
  # Its lock pins a cargo-util-schemas that needs a newer rustc than ours.
  (cd "$src" && cargo update -q -p cargo-util-schemas --precise 0.14.1)
  step cargo-leptos "building cargo-leptos $LEPTOS_VERSION, for make dev (once)" "10 min" \
    "$LOGS/cargo-leptos.log" "$(cd "$src" && crate_count --features no_downloads)" -- \
    tool_profile env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS \
    cargo install --path "$src" --locked --root "$TOOLS_DIR" --features no_downloads
fi

if wants bindgen; then
  # tools/bundle (wasm-bindgen's library) must match the frontend's wasm-bindgen.
  tool_lock=$ROOT/tools/bundle/Cargo.lock
  tool_version=$(awk '/^name = "wasm-bindgen-cli-support"$/{getline; gsub(/[^0-9.]/,""); print; exit}' "$tool_lock")
  if [ "$tool_version" != "$BINDGEN_VERSION" ]; then
    say "tools/bundle uses wasm-bindgen $tool_version but Cargo.lock has $BINDGEN_VERSION:" \
      "set the same version in tools/bundle/Cargo.toml"
    exit 1
  fi
  stamp=$(cat "$ROOT"/tools/bundle/Cargo.{toml,lock} "$ROOT"/tools/bundle/src/*.rs | sha256sum | cut -d' ' -f1)
  # Under `make test` clippy's driver builds it, so its lints are checked too.
  if [ ! -x "$TOOLS_DIR/bin/treeline-bundle" ] || [ "$(cat "$TOOLS_DIR/treeline-bundle.sha256" 2>/dev/null)" != "$stamp" ]; then
    step bundle-tool "building treeline-bundle (wasm-bindgen $BINDGEN_VERSION's library and the wasm splitter, once)" "1-2 min" \
      "$LOGS/treeline-bundle.log" "$(cd "$ROOT/tools/bundle" && crate_count)" -- \
      tool_profile cargo install --path "$ROOT/tools/bundle" --locked --force --root "$TOOLS_DIR" \
      --target-dir "$TOOLS_DIR/target/bundle"
    echo "$stamp" >"$TOOLS_DIR/treeline-bundle.sha256"
  fi
fi

if wants wasmopt && ! wasm-opt --version 2>/dev/null | grep -q "version ${BINARYEN_VERSION%%.*}"; then
  # Debian's binaryen miscompiles our release wasm; npm's is current.
  say "installing wasm-opt from npm's binaryen $BINARYEN_VERSION"
  mkdir -p "$TOOLS_DIR/npm"
  (cd "$TOOLS_DIR/npm" && npm install --no-audit --no-fund --silent "binaryen@$BINARYEN_VERSION")
  ln -sf "$TOOLS_DIR/npm/node_modules/.bin/wasm-opt" "$TOOLS_DIR/bin/wasm-opt"
fi

if wants node && [ ! -d "$ROOT/end2end/node_modules/@playwright/test" ]; then
  say "installing the end-to-end test packages (npm ci in end2end/)"
  (cd "$ROOT/end2end" && npm ci --no-audit --no-fund --silent)
fi

say "tools ready in $TOOLS_DIR"

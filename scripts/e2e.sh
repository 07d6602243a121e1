#!/usr/bin/env bash
# Starts the release server on a fresh data directory and a free port, runs the
# Playwright tests in Debian's Chromium against it, and stops it.
# Arguments go to Playwright (`scripts/e2e.sh workspace` runs one spec file).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
say() { printf '\033[1m[e2e]\033[0m %s\n' "$*"; }
# TREELINE_BIN: the server to test (`make test` gives its debug build).
TREELINE="${TREELINE_BIN:-$ROOT/target/release/treeline}"
DATA=$(mktemp -d /tmp/treeline-e2e.XXXXXX)
AUTH_DATA=$(mktemp -d /tmp/treeline-e2e-auth.XXXXXX)
# shellcheck source=scripts/lib/serve.sh
source "$ROOT/scripts/lib/serve.sh" # free_port, serve PORT DATA, stop_servers
PORT=$(free_port)
AUTH_PORT=$(free_port)
cleanup() {
  stop_servers
  rm -rf "$DATA" "$AUTH_DATA"
}
trap cleanup EXIT
say "starting ${TREELINE#"$ROOT"/} on 127.0.0.1:$PORT with a fresh data directory"
serve "$PORT" "$DATA"
# A team server: keys stored with `treeline keys create`, so it asks for sign-in.
AUTH_WRITE_KEY=$("$TREELINE" keys create --init --scope write --name "e2e writer" --data-dir "$AUTH_DATA" | tail -n 1)
AUTH_READ_KEY=$("$TREELINE" keys create --scope read --name "e2e reader" --data-dir "$AUTH_DATA" | tail -n 1)
export AUTH_WRITE_KEY AUTH_READ_KEY AUTH_BASE_URL="http://127.0.0.1:$AUTH_PORT"
say "starting a second one, with stored keys, on 127.0.0.1:$AUTH_PORT"
serve "$AUTH_PORT" "$AUTH_DATA"
# The demo, with its big trace scaled down: demo.spec.ts checks it, and every other
# spec must pass beside it.
say "loading the demo (--small) into it"
"$TREELINE" demo --url "http://127.0.0.1:$PORT" --small >"$DATA/demo.log" 2>&1 \
  || { cat "$DATA/demo.log"; tail -50 "$DATA/server.log"; exit 1; }
cd "$ROOT/end2end"
say "running the Playwright tests in ${CHROMIUM:-/usr/bin/chromium}"
if ! BASE_URL="http://127.0.0.1:$PORT" npx playwright test "$@" 2>&1 | tee "$DATA/playwright.log"; then
  echo "--- server log ---"; tail -40 "$DATA/server.log"
  echo "--- signed-in server log ---"; tail -20 "$AUTH_DATA/server.log"
  # Last, where a log that keeps only its tail still shows it: which tests failed, and why.
  echo "--- failed ---"
  sed 's/\x1b\[[0-9;]*m//g' "$DATA/playwright.log" | awk '
    /^  [0-9]+\) / { n = 8 }
    n > 0 && NF { print; n-- }
    /^  [0-9]+ (failed|flaky)/ { tail = 1 }
    tail'
  exit 1
fi

#!/usr/bin/env bash
# Starts the release server on a fresh data directory and a free port, runs the
# Playwright tests in Debian's Chromium against it, and stops it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
say() { printf '\033[1m[e2e]\033[0m %s\n' "$*"; }
DATA=$(mktemp -d /tmp/treeline-e2e.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
say "starting target/release/treeline on 127.0.0.1:$PORT with a fresh data directory"
"$ROOT/target/release/treeline" serve --addr "127.0.0.1:$PORT" --data-dir "$DATA" >"$DATA/server.log" 2>&1 &
SERVER=$!
cleanup() {
  kill "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  rm -rf "$DATA"
}
trap cleanup EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null || { cat "$DATA/server.log"; exit 1; }
# The demo, with its big trace scaled down: demo.spec.ts checks it, and every other
# spec must pass beside it.
say "loading the demo (--small) into it"
"$ROOT/target/release/treeline" demo --url "http://127.0.0.1:$PORT" --small >"$DATA/demo.log" 2>&1 \
  || { cat "$DATA/demo.log"; tail -50 "$DATA/server.log"; exit 1; }
cd "$ROOT/end2end"
say "running the Playwright tests in ${CHROMIUM:-/usr/bin/chromium}"
if ! BASE_URL="http://127.0.0.1:$PORT" npx playwright test; then
  echo "--- server log ---"; tail -50 "$DATA/server.log"; exit 1
fi

#!/usr/bin/env bash
# The browser half of the million-span benchmark: writes `treeline bench
# huge-trace`'s trace once into target/bench-huge (reused afterwards), serves it
# with the release build, and times it in Debian's Chromium (end2end/perf). Run
# `make build` first.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
say() { printf '\033[1m[browser-bench]\033[0m %s\n' "$*"; }
TREELINE="${TREELINE_BIN:-$ROOT/target/release/treeline}"
DATA="$ROOT/target/bench-huge"
mkdir -p "$DATA"
say "the million-span trace in ${DATA#"$ROOT"/} (written once, about 15 s)"
"$TREELINE" bench huge-trace --build-only --database-url "sqlite:$DATA/treeline.db"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$TREELINE" serve --addr "127.0.0.1:$PORT" --data-dir "$DATA" >"$DATA/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
up=""
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && { up=1; break; }
  sleep 0.1
done
[ -n "$up" ] || { say "the server did not answer; its log:"; cat "$DATA/server.log"; exit 1; }
cd "$ROOT/end2end"
say "timing it in ${CHROMIUM:-/usr/bin/chromium}"
BASE_URL="http://127.0.0.1:$PORT" npx playwright test --config perf.config.ts

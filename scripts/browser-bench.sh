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
# shellcheck source=scripts/lib/serve.sh
source "$ROOT/scripts/lib/serve.sh" # free_port, serve PORT DATA, stop_servers
trap stop_servers EXIT
PORT=$(free_port)
serve "$PORT" "$DATA"
cd "$ROOT/end2end"
say "timing it in ${CHROMIUM:-/usr/bin/chromium}"
BASE_URL="http://127.0.0.1:$PORT" npx playwright test --config perf.config.ts

#!/usr/bin/env bash
# The browser half of two benchmarks, timed in Debian's Chromium (end2end/perf):
# the million-span trace of `treeline bench huge-trace` (in target/bench-huge) and
# the 20-run sweep of `treeline bench compare-runs` (in target/bench-sweep), each
# written once and reused afterwards, each served by the release build. Run `make
# build` first.
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

SWEEP="$ROOT/target/bench-sweep"
mkdir -p "$SWEEP"
say "the sweep of 20 runs x 4 metrics x 100,000 steps in ${SWEEP#"$ROOT"/} (written once, about a minute)"
"$TREELINE" bench compare-runs --build-only --database-url "sqlite:$SWEEP/treeline.db"
SWEEP_PORT=$(free_port)
serve "$SWEEP_PORT" "$SWEEP"
say "timing the compare-runs page"
BENCH_SWEEP=1 BASE_URL="http://127.0.0.1:$SWEEP_PORT" npx playwright test --config perf.config.ts compare-runs

#!/usr/bin/env bash
# OTLP/HTTP ingest as users send it: the official OpenTelemetry Python SDK and its
# OTLP/HTTP exporters (protobuf and JSON) against a real server binary (TREELINE_BIN,
# else the release build), from the test venv that scripts/setup-python.sh makes
# (never the system Python).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PY_VENV=${PY_VENV:-$ROOT/target/py-venv}
say() { printf '\033[1m[otlp]\033[0m %s\n' "$*"; }
scripts/setup-python.sh
export TREELINE_BIN="${TREELINE_BIN:-$ROOT/target/release/treeline}"
export PY="$PY_VENV/bin/python"
say "OTLP export tests (tests/otlp) on SQLite"
"$PY" -m pytest tests/otlp -q
say "OTLP export tests (tests/otlp) on PostgreSQL"
# shellcheck disable=SC2016 # expanded by the inner shell, once the cluster is up
scripts/with-postgres.sh bash -c \
  'TREELINE_TEST_DATABASE_URL=$TREELINE_TEST_POSTGRES_URL "$PY" -m pytest tests/otlp -q'

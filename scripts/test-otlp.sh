#!/usr/bin/env bash
# OTLP/HTTP ingest as users send it: the official OpenTelemetry Python SDK and its
# OTLP/HTTP exporters (protobuf and JSON) against the real release server binary.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# Pinned as one consistent set: the JSON exporter is still a pre-release that pins
# its own version of the shared exporter code.
python3 -m pip install --quiet --disable-pip-version-check pytest \
  "opentelemetry-sdk==1.45.1" \
  "opentelemetry-exporter-otlp-proto-http==1.45.1" \
  "opentelemetry-exporter-otlp-json-http==0.66b1"
export TREELINE_BIN="${TREELINE_BIN:-$ROOT/target/release/treeline}"
echo "[otlp] on SQLite"
python3 -m pytest tests/otlp -q
echo "[otlp] on PostgreSQL"
# shellcheck disable=SC2016 # expanded by the inner shell, once the cluster is up
scripts/with-postgres.sh bash -c \
  'TREELINE_TEST_DATABASE_URL=$TREELINE_TEST_POSTGRES_URL python3 -m pytest tests/otlp -q'

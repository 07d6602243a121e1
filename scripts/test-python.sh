#!/usr/bin/env bash
# The Python SDK's tests, against a real server binary (TREELINE_BIN, else the release
# build), in the test venv that scripts/setup-python.sh makes (never the system
# Python).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PY_VENV=${PY_VENV:-$ROOT/target/py-venv}
say() { printf '\033[1m[python]\033[0m %s\n' "$*"; }
scripts/setup-python.sh
export TREELINE_BIN="${TREELINE_BIN:-$ROOT/target/release/treeline}"
say "the SDK's tests (sdk/python/tests) against ${TREELINE_BIN#"$ROOT"/}"
"$PY_VENV/bin/python" -m pytest sdk/python/tests -q

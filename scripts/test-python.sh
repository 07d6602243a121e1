#!/usr/bin/env bash
# The Python SDK's tests, against the real release server binary.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
python3 -m pip install --quiet --disable-pip-version-check pytest ./sdk/python
TREELINE_BIN="$ROOT/target/release/treeline" python3 -m pytest sdk/python/tests -q

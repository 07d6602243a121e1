#!/usr/bin/env bash
# The virtual environment the Python tests run in (scripts/test-python.sh and
# scripts/test-otlp.sh share it): pytest, this checkout's SDK (editable), and the
# OpenTelemetry SDK and OTLP/HTTP exporters. Nothing goes into the system Python.
# Idempotent: a stamp in the venv names what it holds, and a second run that finds
# the same stamp returns at once.
#
#   PY_VENV   where the venv goes (default: target/py-venv in the clone, which git
#             ignores and `make clean` removes)
#   PYTHON    the interpreter it is made from (default python3)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY_VENV=${PY_VENV:-$ROOT/target/py-venv}
PYTHON=${PYTHON:-python3}
say() { printf '\033[1m[python]\033[0m %s\n' "$*"; }

# Pinned as one consistent set: the JSON exporter is still a pre-release that pins
# its own version of the shared exporter code.
REQUIREMENTS=(
  pytest
  "opentelemetry-sdk==1.45.1"
  "opentelemetry-exporter-otlp-proto-http==1.45.1"
  "opentelemetry-exporter-otlp-json-http==0.66b1"
  # So that the SDK's zstd path is tested (below Python 3.14 it needs this package).
  "zstandard==0.25.0"
  # `make wheel` builds the SDK's wheel with it (from 70.1 it needs no `wheel` package).
  "setuptools>=70.1"
)
SDK=$ROOT/sdk/python
STAMP=$PY_VENV/treeline-stamp
# What the venv must hold: the requirements, the SDK's metadata (its pyproject), and
# where the SDK is (an editable install points at this clone).
wanted=$(printf '%s\n' "${REQUIREMENTS[@]}" "sdk: $SDK" "pyproject: $(cksum <"$SDK/pyproject.toml")")
PY=$PY_VENV/bin/python

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$wanted" ] && "$PY" -c 'import pytest, treeline' 2>/dev/null; then
  say "test venv up to date in $PY_VENV"
  exit 0
fi

# A venv whose interpreter no longer runs, or that lacks pip (a venv made without
# ensurepip), is made again from scratch.
if [ -e "$PY_VENV" ] && ! "$PY" -m pip --version >/dev/null 2>&1; then
  say "removing the broken venv in $PY_VENV"
  rm -rf "$PY_VENV"
fi
if [ ! -e "$PY" ]; then
  if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
    WANT=pyvenv "$ROOT/scripts/bootstrap-system.sh"
  fi
  say "creating the test venv in $PY_VENV (from $("$PYTHON" --version 2>&1))"
  mkdir -p "$(dirname "$PY_VENV")"
  "$PYTHON" -m venv "$PY_VENV"
fi
say "installing into the venv: pytest, the SDK (editable), the OpenTelemetry exporters"
rm -f "$STAMP"
"$PY" -m pip install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}" -e "$SDK"
printf '%s\n' "$wanted" >"$STAMP"
say "test venv ready in $PY_VENV"

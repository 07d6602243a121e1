#!/usr/bin/env bash
# The one-file install, as a researcher would make it: a wheel of TREELINE_BIN (a
# sealed binary, else the release build) and one of the SDK, installed with
# `pip install "treeline[server]"` into a fresh virtual environment in a temporary
# directory, offline; `treeline serve` started from another directory, with no site
# directory anywhere it looks; a trace sent with the SDK and read back; and Chromium
# hydrating the pages before and after a broken bundle is written beside the binary.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY_VENV=${PY_VENV:-$ROOT/target/py-venv}
say() { printf '\033[1m[wheel]\033[0m %s\n' "$*"; }
WORK=$(mktemp -d /tmp/treeline-wheel.XXXXXX)
# shellcheck source=scripts/lib/serve.sh
source scripts/lib/serve.sh # free_port, stop_servers
cleanup() {
  stop_servers
  rm -rf "$WORK"
}
trap cleanup EXIT

say "building the wheels of ${TREELINE_BIN:-target/release/treeline} and of the SDK"
"$PY_VENV/bin/python" scripts/build-wheel.py "${TREELINE_BIN:-$ROOT/target/release/treeline}" "$WORK/wheels" >/dev/null
"$PY_VENV/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  ./sdk/python -w "$WORK/wheels"
say "installing \"treeline[server]\" into a fresh venv, offline"
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet --disable-pip-version-check --no-index --find-links "$WORK/wheels" "treeline[server]"

mkdir -p "$WORK/elsewhere"
PORT=$(free_port)
(cd "$WORK/elsewhere" && exec "$WORK/venv/bin/treeline" serve --addr "127.0.0.1:$PORT" --data-dir data \
  >"$WORK/server.log" 2>&1) &
SERVERS+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break
  sleep 0.1
done
grep -q "site=sealed in the binary" "$WORK/server.log" \
  || { echo "the installed server does not serve its sealed site; its log:"; cat "$WORK/server.log"; exit 1; }

say "sending a trace with the installed SDK, and reading it back"
TRACE_URL=$(TREELINE_URL="http://127.0.0.1:$PORT" "$WORK/venv/bin/python" - <<'PY'
import json, os, urllib.request
import treeline as tl
run = tl.init("wheel-check", name="installed from the wheel")
with run.trace("rollout", kind="rollout", step=1) as rollout:
    with rollout.span("policy from the wheel", kind="model") as policy:
        policy.set_output({"action": 1})
run.finish()
url = f"{os.environ['TREELINE_URL']}/api/runs/{run.run_id}/traces"
traces = json.load(urllib.request.urlopen(url))["traces"]
assert [t["trace_id"] for t in traces] == [rollout.trace_id], traces
print(f"/traces?run_id={run.run_id}&trace_id={rollout.trace_id}")
PY
)

say "loading its pages in Chromium, then again with a broken bundle beside the binary"
WANT=chromium scripts/bootstrap-system.sh
WANT=node scripts/setup-tools.sh
cd end2end
BASE_URL="http://127.0.0.1:$PORT" TRACE_URL="$TRACE_URL" SPAN_NAME="policy from the wheel" \
  SITE_BESIDE="$WORK/venv/site" npx playwright test --config install.config.ts \
  || { echo "--- server log ---"; tail -30 "$WORK/server.log"; exit 1; }
say "wheel: $(du -h "$WORK"/wheels/treeline_server-*.whl | cut -f1) (binary $(du -h "$WORK/venv/bin/treeline" | cut -f1))"

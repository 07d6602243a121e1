# Sourced by the scripts that run `treeline serve` for a browser (e2e.sh,
# browser-bench.sh): one way to start a server and know it is up.
#
#   free_port        prints a TCP port free on 127.0.0.1
#   serve PORT DATA  starts "$TREELINE" serve on 127.0.0.1:PORT with the data directory
#     DATA (its output in DATA/server.log), adds its PID to SERVERS, and waits up to
#     10 s for /healthz; if it does not answer, prints the log and exits 1.
#   stop_servers     stops every server in SERVERS and waits for it; run it from the
#     caller's EXIT trap, set before the first `serve` (which may exit).

SERVERS=()

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

serve() {
  "$TREELINE" serve --addr "127.0.0.1:$1" --data-dir "$2" >"$2/server.log" 2>&1 &
  SERVERS+=($!)
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$1/healthz" >/dev/null && return 0
    sleep 0.1
  done
  echo "the server on 127.0.0.1:$1 did not answer /healthz; its log:"
  cat "$2/server.log"; exit 1
}

stop_servers() {
  local pid
  for pid in "${SERVERS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
}

#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL cluster: started here, handed to the
# command as TREELINE_TEST_POSTGRES_URL, and removed afterwards whatever happens.
#   scripts/with-postgres.sh cargo test ...
# PG_OPTS adds server settings (for benchmarks: PG_OPTS="-c shared_buffers=2GB").
set -euo pipefail

PG_BIN=${PG_BIN:-}
if [ -z "$PG_BIN" ]; then
  for dir in /usr/local/bin /usr/lib/postgresql/*/bin; do
    if [ -x "$dir/pg_ctl" ] && [ -x "$dir/initdb" ]; then PG_BIN=$dir; break; fi
  done
fi
if [ -z "$PG_BIN" ]; then
  echo "[postgres] installing the PostgreSQL server from Debian's packages"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | tail -1)
fi

PGDATA=$(mktemp -d /tmp/treeline-pg.XXXXXX)
PORT=${PG_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
# initdb refuses to run as root: the cluster belongs to the postgres user.
as_pg=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  chown postgres "$PGDATA"
  as_pg=(runuser -u postgres --)
fi
cleanup() {
  "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$PGDATA"
}
trap cleanup EXIT

"${as_pg[@]}" "$PG_BIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 >/dev/null
"${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $PORT -k $PGDATA -c fsync=on -c max_connections=200 ${PG_OPTS:-}" start >/dev/null
echo "[postgres] throwaway cluster on 127.0.0.1:$PORT"
export TREELINE_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$PORT/postgres"
"$@"

#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL cluster: started here, handed to the
# command as TREELINE_TEST_POSTGRES_URL, and removed afterwards whatever happens.
# A streaming replica of it (a hot standby on loopback) comes as
# TREELINE_TEST_POSTGRES_REPLICA_URL, for the read-replica tests.
#   scripts/with-postgres.sh cargo test ...
# PG_OPTS adds server settings (for benchmarks: PG_OPTS="-c shared_buffers=2GB").
# PG_REPLICA=no starts the primary alone (benchmarks of one server, whose two cores
# the replica's replay would share).
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/with-postgres.sh COMMAND [ARGS...]" >&2; exit 2; }

ROOT=$(cd "$(dirname "$0")/.." && pwd)
say() { printf '\033[1m[postgres]\033[0m %s\n' "$*"; }
# The server binaries: PG_BIN, else /usr/local/bin, else Debian's. Without any,
# scripts/bootstrap-system.sh (which looks in the same places) installs Debian's.
find_pg_bin() {
  local dir
  for dir in ${PG_BIN:-} /usr/local/bin /usr/lib/postgresql/*/bin; do
    if [ -x "$dir/pg_ctl" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_basebackup" ]; then echo "$dir"; return 0; fi
  done
  return 1
}
if ! PG_BIN=$(find_pg_bin); then
  WANT=postgres "$ROOT/scripts/bootstrap-system.sh"
  PG_BIN=$(find_pg_bin)
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PGDATA=$(mktemp -d /tmp/treeline-pg.XXXXXX)
REPLICA=$(mktemp -d /tmp/treeline-pg-replica.XXXXXX)
PORT=${PG_PORT:-$(free_port)}
REPLICA_PORT=$(free_port)
# initdb refuses to run as root: the cluster belongs to the postgres user.
as_pg=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  chown postgres "$PGDATA" "$REPLICA"
  as_pg=(runuser -u postgres --)
fi
cleanup() {
  "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$REPLICA" -m immediate stop >/dev/null 2>&1 || true
  "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$PGDATA" "$REPLICA"
}
trap cleanup EXIT

say "starting a throwaway cluster on 127.0.0.1:$PORT (server binaries in $PG_BIN)"
"${as_pg[@]}" "$PG_BIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 >/dev/null
"${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$PGDATA/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $PORT -k $PGDATA -c fsync=on -c max_connections=200 ${PG_OPTS:-}" start >/dev/null
export TREELINE_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$PORT/postgres"
if [ "${PG_REPLICA:-yes}" = no ]; then
  say "cluster up, no replica; running $1 with TREELINE_TEST_POSTGRES_URL set (it goes when it ends)"
else
  # The replica: a base backup of the primary that keeps streaming from it (-R
  # writes the standby's settings). A hot standby needs max_connections at least
  # the primary's.
  say "starting its streaming replica on 127.0.0.1:$REPLICA_PORT"
  # (The primary's socket lives in its data directory, which the backup skips.)
  "${as_pg[@]}" "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$PORT" -U postgres -D "$REPLICA" -R -X stream \
    2> >(grep -v 'skipping special file' >&2) >/dev/null
  "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$REPLICA" -l "$REPLICA/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $REPLICA_PORT -k $REPLICA -c max_connections=200 ${PG_OPTS:-}" start >/dev/null
  say "cluster up; running $1 with TREELINE_TEST_POSTGRES_URL and TREELINE_TEST_POSTGRES_REPLICA_URL set (both go when it ends)"
  export TREELINE_TEST_POSTGRES_REPLICA_URL="postgres://postgres@127.0.0.1:$REPLICA_PORT/postgres"
fi
"$@"

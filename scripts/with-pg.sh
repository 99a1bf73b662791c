#!/usr/bin/env bash
# with-pg.sh COMMAND...: run COMMAND with CONVEYOR_TEST_DATABASE_URL naming a
# PostgreSQL database the tests may create schemas in. When the variable is
# already set, COMMAND runs as it is. Otherwise a throwaway cluster is made
# in a temporary directory with Debian's postgresql package (initdb and
# pg_ctl, as the postgres user when run as root), started on a free loopback
# port, and stopped and removed when COMMAND ends.
#
# `with-pg.sh env` prints the URL line only, for `eval "$(make -s pg)"`:
# the cluster is then left running (stop it with `make pg-stop`).
set -euo pipefail

if [ -n "${CONVEYOR_TEST_DATABASE_URL:-}" ] && [ "${1:-}" != "env" ]; then
  exec "$@"
fi

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "with-pg.sh: PostgreSQL's server programs are missing: apt-get install postgresql" >&2
  exit 1
fi

state=${CONVEYOR_PG_DIR:-${TMPDIR:-/tmp}/conveyor-pg-$(id -u)}
run_as=()
if [ "$(id -u)" = 0 ]; then
  run_as=(runuser -u postgres --) # initdb refuses to run as root
fi

start() {
  if [ -f "$state/url" ] && "${run_as[@]}" "$bindir/pg_ctl" -D "$state/data" status >/dev/null 2>&1; then
    return # already running: reuse it
  fi
  rm -rf "$state"
  mkdir -p "$state"
  [ "$(id -u)" = 0 ] && chown postgres: "$state"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000)))
  "${run_as[@]}" "$bindir/initdb" -D "$state/data" -U postgres --auth=trust -E UTF8 --no-locale >"$state/initdb.log" 2>&1 ||
    { cat "$state/initdb.log" >&2; exit 1; }
  "${run_as[@]}" "$bindir/pg_ctl" -D "$state/data" -l "$state/log" -w -t 60 \
    -o "-p $port -k $state -c listen_addresses=127.0.0.1 -c max_connections=500 -c shared_buffers=256MB" start >/dev/null ||
    { cat "$state/log" >&2; exit 1; }
  # The tests' database sorts text as most users' databases do (a language's
  # collation, not the bytes), so that a query that orders names without
  # COLLATE "C" fails a test here rather than reading differently there.
  "${run_as[@]}" "$bindir/psql" -q -h "$state" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
    -c "CREATE DATABASE conveyor_test TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'" \
    >/dev/null || { cat "$state/log" >&2; exit 1; }
  echo "postgres://postgres@127.0.0.1:$port/conveyor_test?sslmode=disable" >"$state/url"
}

stop() {
  if [ -d "$state/data" ]; then
    "${run_as[@]}" "$bindir/pg_ctl" -D "$state/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$state"
}

case "${1:-}" in
env)
  start
  echo "export CONVEYOR_TEST_DATABASE_URL='$(cat "$state/url")'"
  ;;
stop)
  stop
  ;;
*)
  state=$(mktemp -d "${TMPDIR:-/tmp}/conveyor-pg.XXXXXX")
  rmdir "$state"
  trap stop EXIT
  start
  CONVEYOR_TEST_DATABASE_URL=$(cat "$state/url") "$@"
  ;;
esac

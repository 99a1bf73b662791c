#!/usr/bin/env bash
# The held-snapshot run of docs/benchmarks.md: a SOAK at 800 tasks/s for 10
# minutes against a fresh server on PostgreSQL, another session holding a
# REPEATABLE READ snapshot from second 180 to 300, and every 10 s the
# server's dispatch counter and conveyor_tasks' dead and live tuples.
#
#   scripts/bench-held-snapshot.sh ADMIN_URL [OUT_DIR]
#
# ADMIN_URL is a postgres:// URL whose user may create databases; the run
# (re)creates the database conveyor_held_snapshot next to it. OUT_DIR
# (default ./held-snapshot) gets samples.txt (seconds, dispatched so far,
# dead tuples, live tuples), the SOAK's JSON line and the logs. The server
# and the bench are built from this checkout.
set -euo pipefail
admin=${1:?usage: scripts/bench-held-snapshot.sh ADMIN_URL [OUT_DIR]}
out=${2:-held-snapshot}
db=$(python3 -c 'import sys, urllib.parse as u; p = u.urlparse(sys.argv[1]); print(u.urlunparse(p._replace(path="/conveyor_held_snapshot")))' "$admin")
addr=127.0.0.1:7498
mkdir -p "$out"
rm -rf "${out:?}"/*
go build -o "$out/conveyor" ./cmd/conveyor
psql "$admin" -qc 'DROP DATABASE IF EXISTS conveyor_held_snapshot' -c 'CREATE DATABASE conveyor_held_snapshot'
"$out/conveyor" server --broker postgres --database-url "$db" --listen "$addr" --data-dir "$out/data" --log-level warn 2>"$out/server.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
until curl -sf "http://$addr/metrics" >/dev/null; do sleep 0.2; done
"$out/conveyor" bench --workload SOAK --rate 800 --duration 10m --addr "http://$addr" >"$out/soak.json" 2>"$out/soak.err" &
bench=$!
start=$(date +%s)
(sleep 180; psql "$db" -qAt -c 'BEGIN ISOLATION LEVEL REPEATABLE READ' -c 'SELECT count(*) FROM conveyor_tasks' \
  -c 'SELECT pg_sleep(120)' -c 'COMMIT' >"$out/hold.txt" 2>&1) &
echo "seconds dispatched dead live" >"$out/samples.txt"
while kill -0 $bench 2>/dev/null; do
  dispatched=$(curl -s "http://$addr/metrics" | awk '/^conveyor_tasks_dispatched_total/ {s += $2} END {printf "%d", s}')
  tuples=$(psql "$db" -qAt -c "SELECT n_dead_tup || ' ' || n_live_tup FROM pg_stat_user_tables WHERE relname = 'conveyor_tasks'")
  echo "$(($(date +%s) - start)) $dispatched $tuples" >>"$out/samples.txt"
  sleep 10
done
wait $bench || true

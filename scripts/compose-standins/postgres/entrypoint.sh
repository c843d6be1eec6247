#!/bin/sh
# First start: initdb with password auth from anywhere on the compose network; then run the server.
set -eu
mkdir -p "$PGDATA" /run/postgresql && chown -R postgres:postgres "$PGDATA" /run/postgresql
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  printf '%s\n' "$POSTGRES_PASSWORD" > /tmp/pwfile && chown postgres /tmp/pwfile
  runuser -u postgres -- initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile=/tmp/pwfile --auth=scram-sha-256 >/dev/null
  rm -f /tmp/pwfile
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
  runuser -u postgres -- pg_ctl -D "$PGDATA" -o "-c listen_addresses=127.0.0.1" -w start >/dev/null
  PGPASSWORD="$POSTGRES_PASSWORD" psql -h 127.0.0.1 -U "$POSTGRES_USER" -d postgres -qc "CREATE DATABASE \"$POSTGRES_DB\""
  runuser -u postgres -- pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec runuser -u postgres -- postgres -D "$PGDATA" -c listen_addresses='*'

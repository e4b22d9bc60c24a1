#!/bin/sh
# First start: a cluster in $PGDATA (a volume) with the superuser glassllm, whose password
# is POSTGRES_PASSWORD (from a secret, never the image), and the database glassllm; then
# the server, reachable by password (scram-sha-256) from the compose network only; its
# socket in /tmp (the root is read-only, /tmp a tmpfs).
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pw=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pw"
    "$bin/initdb" -D "$PGDATA" -U glassllm --pwfile="$pw" -A scram-sha-256 -E UTF8 >/dev/null
    rm -f "$pw"
    echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
    echo "CREATE DATABASE glassllm;" | "$bin/postgres" --single -D "$PGDATA" postgres >/dev/null
fi
exec "$bin/postgres" -D "$PGDATA" -c listen_addresses='*' -k /tmp \
    -c max_connections="${MAX_CONNECTIONS:-100}"

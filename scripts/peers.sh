#!/usr/bin/env bash
# PostgreSQL 15 and MariaDB 10.11, the peers of the side-by-side comparison
# (docs/performance.md), installed from Debian's packages when missing and run
# by hand on loopback with durable commit, each in its own fresh directory.
#
#   scripts/peers.sh start   # install if needed, create fresh clusters, start both
#   PEERS=postgres scripts/peers.sh start   # PostgreSQL alone
#   scripts/peers.sh stop    # stop both (the data stays until the next start)
#   scripts/peers.sh resume  # start both again on the data the last run left
#                            # (for `tempora-load compare --reads-only`)
#
# PostgreSQL listens on 127.0.0.1:55432 (user and database `bench`, trust
# auth), MariaDB on 127.0.0.1:53306 (user `bench`, no password, database
# `bench`). Data lives under $PEERS_DIR (default /tmp/tempora-peers). Each gets
# 512 MB of cache, twice tempora's default bound (256 MiB).
set -euo pipefail

PEERS_DIR=${PEERS_DIR:-/tmp/tempora-peers}
PG_PORT=${PG_PORT:-55432}
MARIA_PORT=${MARIA_PORT:-53306}
PG_BIN=/usr/lib/postgresql/15/bin
PEERS=${PEERS:-postgres mariadb}
want() { [[ " $PEERS " == *" $1 "* ]]; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install() {
    local missing=()
    [ -x "$PG_BIN/postgres" ] || missing+=(postgresql-15 postgresql-contrib)
    want mariadb && ! command -v mariadbd >/dev/null && missing+=(mariadb-server mariadb-client)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing ${missing[*]}"
        as_root apt-get update -qq
        # Debian's packages try to start their own service; policy-rc.d may refuse, which is fine.
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
}

# Runs a command as the given system user (the servers refuse to run as root).
as_user() {
    local user=$1; shift
    if [ "$(id -un)" = "$user" ]; then "$@"; else as_root runuser -u "$user" -- "$@"; fi
}

start_postgres() {
    local dir=$PEERS_DIR/postgres
    as_root rm -rf "$dir"
    as_root mkdir -p "$dir"
    as_root chown postgres:postgres "$dir"
    as_user postgres "$PG_BIN/initdb" -D "$dir/data" -U bench --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    cat <<EOF | as_user postgres tee -a "$dir/data/postgresql.conf" >/dev/null
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$dir'
max_connections = 200
# Durable commit: every acknowledged transaction is on disk.
fsync = on
synchronous_commit = on
full_page_writes = on
# The same cache budget as tempora; room for bulk index builds and WAL.
shared_buffers = 512MB
maintenance_work_mem = 1GB
max_wal_size = 8GB
checkpoint_timeout = 15min
EOF
    as_user postgres "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
    as_user postgres "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U bench bench
    echo "postgres: 127.0.0.1:$PG_PORT, data in $dir/data"
}

# Starts mariadbd on the configuration in $1 and waits until it answers
# (up to a minute: a restart on a large store recovers first).
launch_mariadb() {
    local dir=$1
    as_user mysql sh -c "mariadbd --defaults-file='$dir/my.cnf' >/dev/null 2>&1 &"
    for _ in $(seq 1 300); do
        [ -S "$dir/mariadb.sock" ] && mariadb --socket="$dir/mariadb.sock" -uroot -e 'SELECT 1' >/dev/null 2>&1 && break
        sleep 0.2
    done
}

start_mariadb() {
    local dir=$PEERS_DIR/mariadb
    as_root rm -rf "$dir"
    as_root mkdir -p "$dir"
    cat <<EOF | as_root tee "$dir/my.cnf" >/dev/null
[mariadbd]
user = mysql
datadir = $dir/data
socket = $dir/mariadb.sock
pid-file = $dir/mariadb.pid
log-error = $dir/server.log
bind-address = 127.0.0.1
port = $MARIA_PORT
skip-name-resolve
max_connections = 200
local_infile = ON
# Durable commit: the redo log is flushed at every commit.
innodb_flush_log_at_trx_commit = 1
innodb_doublewrite = ON
# The same cache budget as tempora; a redo log large enough for bulk loads.
innodb_buffer_pool_size = 512M
innodb_log_file_size = 1G
EOF
    as_root chown -R mysql:mysql "$dir"
    # (Its attempt to chown the PAM helper fails without privileges and is harmless.)
    as_user mysql mariadb-install-db --defaults-file="$dir/my.cnf" --auth-root-authentication-method=socket \
        >/dev/null 2> >(grep -v auth_pam_tool >&2)
    launch_mariadb "$dir"
    mariadb --socket="$dir/mariadb.sock" -uroot -e "
        CREATE DATABASE bench;
        CREATE USER 'bench'@'127.0.0.1';
        GRANT ALL ON bench.* TO 'bench'@'127.0.0.1';"
    echo "mariadb: 127.0.0.1:$MARIA_PORT, data in $dir/data"
}

resume() {
    local pg=$PEERS_DIR/postgres maria=$PEERS_DIR/mariadb
    if [ ! -d "$pg/data" ] || [ ! -f "$maria/my.cnf" ]; then
        echo "no peers' data under $PEERS_DIR to resume: run '$0 start' and load them first" >&2
        exit 1
    fi
    as_user postgres "$PG_BIN/pg_ctl" -D "$pg/data" -l "$pg/server.log" -w start >/dev/null
    echo "postgres: 127.0.0.1:$PG_PORT, data in $pg/data"
    launch_mariadb "$maria"
    echo "mariadb: 127.0.0.1:$MARIA_PORT, data in $maria/data"
}

stop() {
    if [ -f "$PEERS_DIR/postgres/data/postmaster.pid" ]; then
        as_user postgres "$PG_BIN/pg_ctl" -D "$PEERS_DIR/postgres/data" -m fast -w stop >/dev/null || true
    fi
    if [ -f "$PEERS_DIR/mariadb/mariadb.pid" ]; then
        local pid; pid=$(cat "$PEERS_DIR/mariadb/mariadb.pid")
        as_root kill "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    fi
}

case "${1:-}" in
    start) install; stop; start_postgres; if want mariadb; then start_mariadb; fi ;;
    stop) stop ;;
    resume) stop; resume ;;
    *) echo "usage: $0 start|stop|resume" >&2; exit 2 ;;
esac

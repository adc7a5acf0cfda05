#!/usr/bin/env bash
# The side-by-side comparison of docs/performance.md, end to end:
#
#   scripts/compare.sh [SIZE...]     # default: 100000 1000000
#
# Builds tempora and tempora-load (release), then for each size starts fresh
# peers (scripts/peers.sh: PostgreSQL 15 and MariaDB 10.11 on loopback,
# durable commit) and a fresh tempora on an empty data directory, runs
# `tempora-load compare` against all three (results appended to
# $OUT_DIR/results.jsonl, the printed tables to $OUT_DIR/summary-SIZE.txt), and
# at the end draws $OUT_DIR/throughput.png and $OUT_DIR/p99.png.
#
# Environment: OUT_DIR (default target/compare), DURATION and WARMUP (seconds
# per timed workload, default 10 and 2), ROUNDS (of each read step, the
# systems taking turns; the tables and plots take the median, default 3),
# CONNECTIONS (default 16), PEERS_DIR
# (default /tmp/tempora-peers), TEMPORA_DATA (default /tmp/tempora-compare).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(100000 1000000)
OUT_DIR=${OUT_DIR:-target/compare}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-16}
PEERS_DIR=${PEERS_DIR:-/tmp/tempora-peers}
TEMPORA_DATA=${TEMPORA_DATA:-/tmp/tempora-compare}
export PEERS_DIR

# Without this script's OUT_DIR: cargo tracks that variable for `ring`, so a
# build that saw it recompiled ring and the TLS crates over it on every run
# with another OUT_DIR, and again at the next plain `cargo build`.
env -u OUT_DIR cargo build --release --locked -p tempora -p tempora-load
BIN=${CARGO_TARGET_DIR:-target}/release
mkdir -p "$OUT_DIR"

server=
stop_all() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
    server=
    scripts/peers.sh stop
}
trap stop_all EXIT

for size in "${SIZES[@]}"; do
    echo "== size $size"
    scripts/peers.sh start
    rm -rf "$TEMPORA_DATA"
    "$BIN/tempora" serve --data-dir "$TEMPORA_DATA" --http-addr 127.0.0.1:28080 --grpc-addr off --tcp-addr off \
        >"$OUT_DIR/tempora-$size.log" 2>&1 &
    server=$!
    for _ in $(seq 1 100); do
        curl -fs http://127.0.0.1:28080/api/health >/dev/null 2>&1 && break
        sleep 0.1
    done
    pg_pid=$(head -1 "$PEERS_DIR/postgres/data/postmaster.pid")
    maria_pid=$(cat "$PEERS_DIR/mariadb/mariadb.pid")
    "$BIN/tempora-load" compare --size "$size" --connections "$CONNECTIONS" \
        --duration "$DURATION" --warmup "$WARMUP" --rounds "$ROUNDS" \
        --tempora-url http://127.0.0.1:28080 --tempora-data "$TEMPORA_DATA" --tempora-pid "$server" \
        --postgres-data "$PEERS_DIR/postgres/data" --postgres-pid "$pg_pid" \
        --mariadb-data "$PEERS_DIR/mariadb/data" --mariadb-pid "$maria_pid" \
        --out "$OUT_DIR/results.jsonl" | tee "$OUT_DIR/summary-$size.txt"
    stop_all
done

"$BIN/tempora-load" plot --input "$OUT_DIR/results.jsonl" --out-dir "$OUT_DIR"

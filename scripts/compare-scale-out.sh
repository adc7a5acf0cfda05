#!/usr/bin/env bash
# tempora on PostgreSQL against the PostgreSQL peer schema, on one database
# server (docs/scale-out.md, "Performance"):
#
#   scripts/compare-scale-out.sh [SIZE...]     # default: 100000 1000000
#
# Builds tempora and tempora-load (release), then for each size and each
# replica count in REPLICAS (default "1 3") starts a fresh PostgreSQL
# (scripts/peers.sh, durable commit), makes the database `tempora` on it
# beside the peer's `bench`, starts the replicas (`tempora serve --store
# postgres://…/tempora`), and runs `tempora-load compare --systems
# tempora-pg,postgres`: the replicas' CPU is counted with the database
# server's. Results are appended to $OUT_DIR/scale-out.jsonl, the printed
# tables written to $OUT_DIR/scale-out-SIZE-rN.txt.
#
# Environment: OUT_DIR (default target/compare), REPLICAS, DURATION, WARMUP,
# ROUNDS, CONNECTIONS (as scripts/compare.sh), SETTLE_MAX (longest wait
# for a quiet machine before each step, default 300 s), PEERS_DIR (default
# /tmp/tempora-peers), REPLICA_DIR (default /tmp/tempora-replicas).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(100000 1000000)
OUT_DIR=${OUT_DIR:-target/compare}
REPLICAS=${REPLICAS:-1 3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-16}
SETTLE_MAX=${SETTLE_MAX:-300}
PEERS_DIR=${PEERS_DIR:-/tmp/tempora-peers}
REPLICA_DIR=${REPLICA_DIR:-/tmp/tempora-replicas}
export PEERS_DIR PEERS=postgres
PG_PORT=55432
STORE="postgres://bench@127.0.0.1:$PG_PORT/tempora"

# (Without OUT_DIR: see scripts/compare.sh.)
env -u OUT_DIR cargo build --release --locked -p tempora -p tempora-load
BIN=${CARGO_TARGET_DIR:-target}/release
mkdir -p "$OUT_DIR"

pids=()
stop_all() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
    pids=()
    scripts/peers.sh stop
}
trap stop_all EXIT

for size in "${SIZES[@]}"; do
    for n in $REPLICAS; do
        echo "== size $size, $n replica(s)"
        scripts/peers.sh start
        /usr/lib/postgresql/15/bin/createdb -h 127.0.0.1 -p "$PG_PORT" -U bench tempora
        rm -rf "$REPLICA_DIR"
        urls=()
        for i in $(seq 1 "$n"); do
            port=$((28080 + i))
            "$BIN/tempora" serve --store "$STORE" --data-dir "$REPLICA_DIR/$i" --http-addr "127.0.0.1:$port" \
                --grpc-addr off --tcp-addr off >"$OUT_DIR/tempora-pg-$size-r$n-$i.log" 2>&1 &
            pids+=($!)
            urls+=("http://127.0.0.1:$port")
            for _ in $(seq 1 300); do
                curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
                sleep 0.1
            done
        done
        pg_pid=$(head -1 "$PEERS_DIR/postgres/data/postmaster.pid")
        "$BIN/tempora-load" compare --systems tempora-pg,postgres --size "$size" --connections "$CONNECTIONS" \
            --duration "$DURATION" --warmup "$WARMUP" --rounds "$ROUNDS" \
            --settle-max-secs "$SETTLE_MAX" --tempora-pg-url "$(IFS=,; echo "${urls[*]}")" --tempora-pg-pid "$(IFS=,; echo "${pids[*]}")" \
            --tempora-pg-store "host=127.0.0.1 port=$PG_PORT user=bench dbname=tempora" \
            --postgres-data "$PEERS_DIR/postgres/data" --postgres-pid "$pg_pid" \
            --out "$OUT_DIR/scale-out.jsonl" | tee "$OUT_DIR/scale-out-$size-r$n.txt"
        stop_all
    done
done

#!/usr/bin/env bash
# Soak and overload: `scripts/soak.sh [DURATION]` (default 30m).
#
# 1. Starts a durable `tempora serve` on a free port with a fresh data
#    directory and runs `tempora-load soak` against it for DURATION: 64
#    connections of mixed reads and writes, 16 SSE subscribers that drop and
#    resume every minute; PASS needs no error response, every transaction on
#    every stream, and (on runs long enough to tell) flat resident memory.
# 2. Starts a second server with max_in_flight = 8 and max_sse_subscribers = 4
#    and runs `tempora-load overload`: 256 clients for 10 s; the excess must
#    get 503 at once, streams beyond the cap 429.
#
# Results go to target/soak/ (series.jsonl, summary.json, soak.png,
# overload.jsonl, the server logs). Exits non-zero when either fails.
#
# SOAK_PROFILE=debug uses the debug binaries (what CI has already built)
# instead of building release ones; a debug server is several times slower,
# so its figures are not the ones to quote.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-30m}
profile=${SOAK_PROFILE:-release}
target=${CARGO_TARGET_DIR:-target}
if [ "$profile" = release ]; then
    echo "== building tempora and tempora-load (release)"
    cargo build --locked --release -p tempora -p tempora-load
else
    echo "== building tempora and tempora-load (debug)"
    cargo build --locked --bin tempora && cargo build --locked -p tempora-load
fi
out=target/soak
mkdir -p "$out"
rm -f "$out/overload.jsonl"

work=$(mktemp -d /tmp/tempora-soak.XXXXXX)
# Private copies: a build of another checkout into a shared target
# directory must not swap the binaries under a half-hour run.
mkdir "$work/bin"
cp "$target/$profile/tempora" "$target/$profile/tempora-load" "$work/bin/"
BIN=$work/bin
servers=()
cleanup() {
    for pid in "${servers[@]}"; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# start NAME [VAR=VALUE...]: a server on a free port; sets $addr and $pid.
start() {
    local name=$1
    shift
    env "$@" "$BIN/tempora" serve --data-dir "$work/$name" --http-addr 127.0.0.1:0 --grpc-addr off --tcp-addr off \
        --durability durable >"$out/$name.log" 2>&1 &
    pid=$!
    servers+=("$pid")
    addr=
    for _ in $(seq 1 100); do
        addr=$(sed -n 's/.*http listening on \([0-9.]*:[0-9]*\).*/\1/p' "$out/$name.log" | head -1)
        [ -n "$addr" ] && return 0
        sleep 0.1
    done
    cat "$out/$name.log"
    echo "tempora ($name) did not start" >&2
    exit 1
}

status=0
start soak-server
echo "== tempora-load soak --duration $duration (server at $addr, pid $pid)"
"$BIN/tempora-load" soak --url "http://$addr" --duration "$duration" --connections 64 --subscribers 16 \
    --server-pid "$pid" --out-dir "$out" || status=1
kill "$pid" && wait "$pid" || { echo "the soak server did not exit cleanly" >&2; status=1; }

start overload-server TEMPORA_MAX_IN_FLIGHT=8 TEMPORA_MAX_SSE_SUBSCRIBERS=4
echo "== tempora-load overload (max_in_flight 8, max_sse_subscribers 4; server at $addr)"
# The debug run is part of the test suite, which never asserts on timing:
# there the rejections only have to come back (within 30 s), not fast.
reject_bound=250
[ "$profile" = debug ] && reject_bound=30000
"$BIN/tempora-load" overload --url "http://$addr" --concurrency 256 --duration 10s --sse-cap 4 \
    --max-reject-p99-ms "$reject_bound" --out "$out/overload.jsonl" || status=1

if [ "$status" -ne 0 ]; then
    echo "soak: FAIL (see $out/)" >&2
    exit 1
fi
echo "soak: PASS (results in $out/)"

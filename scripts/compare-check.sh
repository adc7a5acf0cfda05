#!/usr/bin/env bash
# The comparison tool's own correctness checks, on a small store, against
# tempora only (the peer comparison is the documented command in
# docs/performance.md, not part of the test suite): starts the real
# `tempora serve` (port 0, a temporary data directory) and runs
# `tempora-load compare --systems tempora` with 1 000 facts: the hot-key run
# (16 writers on 100 keys from an empty store), the bulk import, the reads and
# the asserts with supersession, each followed by the checks (no key with two
# active values, no inverted or overlapping interval, every read answering
# what the data set says), then `--reads-only` and `--writes-only` on the
# store it left. The tool exits non-zero when any check fails, any request
# errs or any read answers the wrong rows.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== building tempora and tempora-load"
cargo build --locked --bin tempora && cargo build --locked -p tempora-load
BIN=${CARGO_TARGET_DIR:-target}/debug

work=$(mktemp -d)
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$BIN/tempora" serve --data-dir "$work/data" --http-addr 127.0.0.1:0 --grpc-addr off --tcp-addr off \
    >"$work/server.log" 2>&1 &
server=$!
addr=
for _ in $(seq 1 100); do
    addr=$(sed -n 's/.*http listening on \([0-9.]*:[0-9]*\).*/\1/p' "$work/server.log" | head -1)
    [ -n "$addr" ] && break
    sleep 0.1
done
if [ -z "$addr" ]; then
    cat "$work/server.log"
    echo "tempora did not start" >&2
    exit 1
fi

echo "== tempora-load compare --systems tempora --size 1000 (server at $addr)"
"$BIN/tempora-load" compare --systems tempora --size 1000 --duration 2 --warmup 1 --settle-max-secs 5 \
    --tempora-url "http://$addr" --tempora-data "$work/data" --tempora-pid "$server" | tee "$work/summary.txt"

# The tool checked itself; make sure every check it reports ran and found nothing.
for check in check_hotkey check_w1; do
    line=$(grep "^$check " "$work/summary.txt") || { echo "missing $check" >&2; exit 1; }
    echo "$line" | grep -q "duplicate_active=0 inverted=0 overlapping=0" || { echo "failed: $line" >&2; exit 1; }
done
# Each timed step says what it cost per request in CPU: the server's
# processes ("server us", 10th column) and the load tool's ("tool us", 12th;
# the 11th, "db us", is a database server's part, "-" for the embedded store).
positive='^[0-9]+\.[0-9]$'
for w in w0 w2 w4 w1 w3; do
    line=$(grep "^$w  *tempora " "$work/summary.txt") || { echo "missing $w" >&2; exit 1; }
    server_us=$(echo "$line" | awk '{print $10}')
    db_us=$(echo "$line" | awk '{print $11}')
    tool_us=$(echo "$line" | awk '{print $12}')
    [[ "$server_us" =~ $positive && "$server_us" != 0.0 ]] || { echo "no server CPU per request: $line" >&2; exit 1; }
    [[ "$tool_us" =~ $positive && "$tool_us" != 0.0 ]] || { echo "no tool CPU per request: $line" >&2; exit 1; }
    [ "$db_us" = - ] || { echo "a database's CPU for the embedded store: $line" >&2; exit 1; }
done

# The reads again on the store the run left, as when comparing builds of the
# read path, each after reading the store into the page cache (--warm): every
# read step then starts with the store's bytes cached ("cached MB", the last
# column, a whole number and not "-"). Two rounds of each: the table shows
# the median round with the range of both ("range per s", the fourth column),
# and every round is in the results file.
echo "== tempora-load compare --systems tempora --size 1000 --reads-only --warm --rounds 2"
"$BIN/tempora-load" compare --systems tempora --size 1000 --duration 1 --warmup 0 --reads-only --settle-max-secs 5 \
    --warm --rounds 2 --tempora-url "http://$addr" --tempora-data "$work/data" --tempora-pid "$server" \
    --out "$work/reads.jsonl" \
    | tee "$work/reads.txt"
for w in w0 w2 w4 w3; do
    line=$(grep "^$w  *tempora " "$work/reads.txt") || { echo "missing $w in --reads-only" >&2; exit 1; }
    cached=$(echo "$line" | awk '{print $NF}')
    [[ "$cached" =~ ^[0-9]+$ ]] && [ "$cached" -gt 0 ] || { echo "no cached bytes after --warm: $line" >&2; exit 1; }
    range=$(echo "$line" | awk '{print $4}')
    [[ "$range" =~ ^[0-9.]+k?-[0-9.]+k?$ ]] || { echo "no range over two rounds: $line" >&2; exit 1; }
    n=$(grep -c "\"workload\":\"$w\"" "$work/reads.jsonl")
    [ "$n" -eq 2 ] || { echo "$w: $n rounds recorded, not 2" >&2; exit 1; }
done
grep -q "^w1 " "$work/reads.txt" && { echo "--reads-only wrote" >&2; exit 1; }

# W1 alone on the same store, as when comparing builds of the write path:
# the asserts and the check after them, and no read step.
echo "== tempora-load compare --systems tempora --size 1000 --writes-only"
"$BIN/tempora-load" compare --systems tempora --size 1000 --duration 1 --warmup 0 --writes-only --settle-max-secs 5 \
    --tempora-url "http://$addr" --tempora-data "$work/data" --tempora-pid "$server" \
    | tee "$work/writes.txt"
grep -q "^w1  *tempora " "$work/writes.txt" || { echo "missing w1 in --writes-only" >&2; exit 1; }
grep "^check_w1 " "$work/writes.txt" | grep -q "duplicate_active=0 inverted=0 overlapping=0" \
    || { echo "no clean check after --writes-only" >&2; exit 1; }
grep -qE "^w[0234] " "$work/writes.txt" && { echo "--writes-only read" >&2; exit 1; }
echo "compare-check: ok"

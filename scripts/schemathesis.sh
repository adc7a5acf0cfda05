#!/usr/bin/env bash
# Property-based API tests: schemathesis (https://schemathesis.io) against the
# real `tempora serve` binary, in keyed mode, on a free port and a temporary
# data directory.
#
#   (a) against the server's own /openapi.json (its operations that are
#       implemented, i.e. not marked x-tempora-planned), and
#   (b) against the reference spec api/abagraph.openapi.json, restricted to
#       the reference operations this server implements.
#
# Default checks (server errors, status codes, content types, response
# schemas and headers, negative and positive data, undeclared methods -> 405,
# ...) plus the hooks' `non_disclosure` check. Settings and the excluded
# checks, each with its reason, are in scripts/schemathesis.toml (run (b):
# scripts/schemathesis-reference.toml); hooks in scripts/schemathesis_hooks.py.
# Exits non-zero on any failure.
#
# Installs schemathesis into target/venv-schemathesis on first use (needs
# python3 >= 3.10 and PyPI). Environment:
#   SCHEMATHESIS_MAX_EXAMPLES  examples per operation and phase (default 50)
#   SCHEMATHESIS_SEED          seed (default 1, for repeatable CI runs);
#                              `random` for a fresh one each run
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/venv.sh

ST_VERSION=4.32.5
VENV=target/venv-schemathesis
MAX_EXAMPLES="${SCHEMATHESIS_MAX_EXAMPLES:-50}"
SEED="${SCHEMATHESIS_SEED:-1}"
TENANT_KEY=nas-key-1

started=$(date +%s)

# --- schemathesis, pinned, in its own venv (idempotent) ---------------------
if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -qF "version $ST_VERSION"; then
    echo "== installing schemathesis $ST_VERSION into $VENV"
    make_venv "$VENV" "schemathesis==$ST_VERSION"
fi
"$VENV/bin/schemathesis" --version

# --- the server --------------------------------------------------------------
echo "== building tempora"
cargo build --locked --bin tempora
BIN=target/debug/tempora

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tempora-schemathesis.XXXXXX")
SERVER_PID=
cleanup() {
    local rc=$?
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    if [[ $rc -ne 0 && -f "$WORK/server.log" ]]; then
        echo "== server log (last 50 lines)"
        tail -n 50 "$WORK/server.log" || true
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== starting tempora serve (keyed mode)"
TEMPORA_TENANT_KEYS="nas=$TENANT_KEY" TEMPORA_ADMIN_TOKENS="adm-secret-1" TEMPORA_CONFIG= \
    "$BIN" serve --data-dir "$WORK/data" --http-addr 127.0.0.1:0 --grpc-addr off --tcp-addr off \
    >"$WORK/server.log" 2>&1 &
SERVER_PID=$!

# Port 0 picks a free port; the server logs the one it bound.
ADDR=
for _ in $(seq 1 300); do
    ADDR=$(grep -o 'http listening on [0-9.:]*' "$WORK/server.log" | head -n 1 | awk '{print $4}') || true
    [[ -n "$ADDR" ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "tempora serve exited early"; exit 1; }
    sleep 0.1
done
[[ -n "$ADDR" ]] || { echo "tempora serve did not start listening"; exit 1; }
URL="http://$ADDR"
"$VENV/bin/python" - "$URL" <<'EOF'
import sys, time, urllib.request
for _ in range(100):
    try:
        urllib.request.urlopen(sys.argv[1] + "/healthz", timeout=2).read()
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("tempora serve does not answer /healthz")
EOF
echo "   listening on $URL"

# --- the runs ----------------------------------------------------------------
# The reference operations this server implements: the served document marks
# the others x-tempora-planned.
REFERENCE_PATHS=$("$VENV/bin/python" - "$URL" api/abagraph.openapi.json <<'EOF'
import json, re, sys, urllib.request
served = json.load(urllib.request.urlopen(sys.argv[1] + "/openapi.json", timeout=10))
reference = json.load(open(sys.argv[2]))
methods = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
paths = [
    p for p, item in reference["paths"].items()
    if not any(served["paths"][p][m].get("x-tempora-planned") for m in item if m in methods)
]
print("^(" + "|".join(re.escape(p) for p in paths) + ")$")
EOF
)

export SCHEMATHESIS_HOOKS=scripts/schemathesis_hooks.py
common=(
    -H "Authorization: Bearer $TENANT_KEY"
    --max-examples "$MAX_EXAMPLES"
    --generation-database none
    # One worker: hypothesis's lambda-source introspection (ast.parse) is not
    # thread-safe on CPython 3.11 ("AST constructor recursion depth mismatch").
    --workers 1
    --request-timeout 10
)
[[ "$SEED" == random ]] || common+=(--seed "$SEED")

failed=0
echo "== (a) schemathesis: the server's own /openapi.json"
"$VENV/bin/schemathesis" --config-file scripts/schemathesis.toml run "$URL/openapi.json" --url "$URL" \
    --exclude-by '/x-tempora-planned == true' "${common[@]}" || failed=1

echo "== (b) schemathesis: the reference spec, operations this server implements ($REFERENCE_PATHS)"
"$VENV/bin/schemathesis" --config-file scripts/schemathesis-reference.toml run api/abagraph.openapi.json --url "$URL" \
    --include-path-regex "$REFERENCE_PATHS" "${common[@]}" || failed=1

if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "tempora serve died during the run"
    failed=1
fi
echo "== schemathesis done in $(( $(date +%s) - started ))s: $([[ $failed -eq 0 ]] && echo passed || echo FAILED)"
exit "$failed"

#!/usr/bin/env bash
# The operator console (/console) end to end in real headless Chromium,
# driven by Playwright (npm `playwright-core`, pinned in
# tests/console/package.json): tests/console/e2e.mjs starts nothing itself;
# this script installs Debian's `chromium` when /usr/bin/chromium is
# missing, installs playwright-core into tests/console/node_modules (needs
# node >= 20 and npm), builds tempora, starts two real servers (keyed mode
# with tenants `nas` and `acme`, and open mode) on free ports with temporary
# data directories, and runs the test: signing in, browsing facts, the
# record-time slider and the valid-time picker, a fact's history, the
# timeline, the graph, the live feed, search, context, alerts with ack,
# that a fact value holding markup renders as text, that another tenant's
# facts never show, and open mode.
#
# Screenshots of the main views go to target/console-e2e/; with
# --update-docs they also replace docs/console-*.png.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

UPDATE_DOCS=0
[[ "${1:-}" == --update-docs ]] && UPDATE_DOCS=1

# --- Chromium (Debian's package) and playwright-core -------------------------
command -v node >/dev/null && command -v npm >/dev/null || { echo "console-e2e: needs node (>= 20) and npm"; exit 1; }
if [[ ! -x /usr/bin/chromium ]]; then
    echo "== installing chromium (Debian)"
    SUDO=
    [[ $(id -u) -eq 0 ]] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
fi

PW_VERSION=$(node -p "require('./tests/console/package.json').dependencies['playwright-core']")
if [[ "$(node -p "try { require('./tests/console/node_modules/playwright-core/package.json').version } catch { '' }")" != "$PW_VERSION" ]]; then
    echo "== installing playwright-core $PW_VERSION into tests/console/node_modules"
    npm ci --prefix tests/console --no-audit --no-fund --loglevel=error
fi

# --- the servers --------------------------------------------------------------
echo "== building tempora"
cargo build --locked --bin tempora
BIN=${CARGO_TARGET_DIR:-target}/debug/tempora

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tempora-console-e2e.XXXXXX")
PIDS=()
cleanup() {
    local rc=$?
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [[ $rc -ne 0 ]]; then
        for log in "$WORK"/*.log; do
            [[ -f "$log" ]] || continue
            echo "== $(basename "$log") (last 30 lines)"
            tail -n 30 "$log" || true
        done
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME [VAR=value...]: a server on a free port; sets URL.
start() {
    local name=$1
    shift
    # Only the settings given here: no TEMPORA_* of the caller's environment.
    local unset=()
    for var in $(compgen -e | grep '^TEMPORA_' || true); do
        unset+=(-u "$var")
    done
    env "${unset[@]}" NO_COLOR=1 "$@" "$BIN" serve --data-dir "$WORK/$name-data" --http-addr 127.0.0.1:0 \
        --grpc-addr off --tcp-addr off >"$WORK/$name.log" 2>&1 &
    PIDS+=($!)
    local addr=
    for _ in $(seq 1 300); do
        addr=$(grep -o 'http listening on [0-9.:]*' "$WORK/$name.log" | head -n 1 | awk '{print $4}') || true
        [[ -n "$addr" ]] && break
        kill -0 "${PIDS[-1]}" 2>/dev/null || { echo "tempora serve ($name) exited early"; exit 1; }
        sleep 0.1
    done
    [[ -n "$addr" ]] || { echo "tempora serve ($name) did not start listening"; exit 1; }
    URL="http://$addr"
    echo "   $name server on $URL"
}

echo "== starting tempora serve (keyed and open mode)"
start keyed TEMPORA_TENANT_KEYS="nas=nas-key-1,acme=acme-key-1" TEMPORA_ADMIN_TOKENS="adm-secret-1"
KEYED_URL=$URL
start open
OPEN_URL=$URL

# --- the test -----------------------------------------------------------------
SHOTS=target/console-e2e
mkdir -p "$SHOTS"
echo "== Chromium $(/usr/bin/chromium --version 2>/dev/null | grep -o '[0-9][0-9.]*' | head -n 1), playwright-core $PW_VERSION: tests/console/e2e.mjs"
node tests/console/e2e.mjs --keyed "$KEYED_URL" --open "$OPEN_URL" --shots "$SHOTS" --profile "$WORK/profile"

if [[ $UPDATE_DOCS -eq 1 ]]; then
    cp "$SHOTS"/console-*.png docs/
    echo "== screenshots copied to docs/"
fi

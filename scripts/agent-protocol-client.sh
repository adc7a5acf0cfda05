#!/usr/bin/env bash
# The Agent Protocol at /ap/v1 driven by the official Python client (PyPI
# `agent-protocol-client`) in a venv under target/ (installed on first use;
# needs python3 and PyPI): tests/python/agent_protocol_client_test.py starts
# the real `tempora serve` (port 0, a temporary data directory), drives a
# task through all its steps, uploads and downloads artifacts (bytes
# compared), paginates tasks, steps and artifacts, checks the 404 and 422
# shapes, and restarts the server in the middle of a task.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/venv.sh

# Pinned: the version this API is tested with.
AP_CLIENT_VERSION=1.1.0
VENV=target/venv-ap

if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('agent-protocol-client') != '$AP_CLIENT_VERSION')" 2>/dev/null; then
    echo "== installing agent-protocol-client $AP_CLIENT_VERSION into $VENV"
    make_venv "$VENV" "agent-protocol-client==$AP_CLIENT_VERSION"
fi

echo "== building tempora"
cargo build --locked --bin tempora
BIN=${CARGO_TARGET_DIR:-target}/debug/tempora

echo "== agent-protocol-client $AP_CLIENT_VERSION: tests/python/agent_protocol_client_test.py"
"$VENV/bin/python" tests/python/agent_protocol_client_test.py --bin "$BIN"

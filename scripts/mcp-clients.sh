#!/usr/bin/env bash
# The MCP endpoint driven by the official Python SDK (PyPI `mcp`), current
# 2.x and the latest 1.x, each in its own venv under target/ (installed on
# first use; needs python3 >= 3.10 and PyPI): tests/python/mcp_client_test.py
# starts the real `tempora serve` (free port, temporary data directory) in
# open and keyed mode, lists and calls every tool, validates structured
# results against the declared output schemas, and checks the namespace pin
# and the session behaviour. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/venv.sh

# Pinned: the versions this endpoint is tested with.
SDKS=("2.3.0:target/venv-mcp2" "1.30.0:target/venv-mcp1")
JSONSCHEMA_VERSION=4.26.0

install() { # version venv
    local version=$1 venv=$2
    if "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$version' or m.version('jsonschema') != '$JSONSCHEMA_VERSION')" 2>/dev/null; then
        return
    fi
    echo "== installing mcp $version into $venv"
    make_venv "$venv" "mcp==$version" "jsonschema==$JSONSCHEMA_VERSION"
}

echo "== building tempora"
cargo build --locked --bin tempora
BIN=target/debug/tempora

failed=0
for sdk in "${SDKS[@]}"; do
    version=${sdk%%:*}
    venv=${sdk#*:}
    install "$version" "$venv"
    echo "== mcp $version: tests/python/mcp_client_test.py"
    "$venv/bin/python" tests/python/mcp_client_test.py --bin "$BIN" || failed=1
done
exit "$failed"

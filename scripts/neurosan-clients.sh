#!/usr/bin/env bash
# The NeuroSan HTTP API driven by neuro-san's own Python client (PyPI
# `neuro-san`, 0.6.x: its HTTP client runs on python3 >= 3.10) in a venv
# under target/ (installed on first use, about 200 MB; needs PyPI):
# tests/python/neurosan_client_test.py starts the real `tempora serve`
# (port 0, temporary data and agents directories) in open and keyed mode,
# lists the networks, reads function and connectivity, chats with `memory`
# (MINIMAL and MAXIMAL, continued through chat_context, sly_data kept back),
# runs the agent_cli, and checks that tenants do not see each other.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/venv.sh

# Pinned: the version this API is tested with. leaf-common (a dependency)
# imports asyncio.eager_task_factory, new in Python 3.12, at import time from
# 1.3.2 on; 1.3.1 (the oldest neuro-san 0.6.98 accepts) keeps the client
# importable on 3.10 and 3.11.
NEURO_SAN_VERSION=0.6.98
LEAF_COMMON_VERSION=1.3.1
VENV=target/venv-neurosan

if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('neuro-san') != '$NEURO_SAN_VERSION' or m.version('leaf-common') != '$LEAF_COMMON_VERSION')" 2>/dev/null; then
    echo "== installing neuro-san $NEURO_SAN_VERSION into $VENV"
    make_venv "$VENV" "neuro-san==$NEURO_SAN_VERSION" "leaf-common==$LEAF_COMMON_VERSION"
fi

echo "== building tempora"
cargo build --locked --bin tempora
BIN=${CARGO_TARGET_DIR:-target}/debug/tempora

echo "== neuro-san $NEURO_SAN_VERSION: tests/python/neurosan_client_test.py"
"$VENV/bin/python" tests/python/neurosan_client_test.py --bin "$BIN"

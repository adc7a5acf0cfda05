#!/usr/bin/env bash
# neuro-san's gRPC API driven by grpcio, in a venv under target/ (installed
# on first use; needs python3 and PyPI): Python stubs are generated from the
# project's proto/ with grpcio-tools into a temporary directory, then
# tests/python/neurosan_grpc_client_test.py starts the real `tempora serve`
# (free ports, temporary data directory), reads the gRPC address from its
# log, and calls List, Function, Connectivity and StreamingChat on the
# name-routed paths (/{agent}.AgentService/...), unknown agents included.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/venv.sh

# Pinned: the versions this surface is tested with.
GRPCIO_VERSION=1.85.1
PROTOBUF_VERSION=7.36.2
VENV=target/venv-grpc

if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('grpcio') != '$GRPCIO_VERSION' or m.version('grpcio-tools') != '$GRPCIO_VERSION' or m.version('protobuf') != '$PROTOBUF_VERSION')" 2>/dev/null; then
    echo "== installing grpcio $GRPCIO_VERSION into $VENV"
    make_venv "$VENV" "grpcio==$GRPCIO_VERSION" "grpcio-tools==$GRPCIO_VERSION" "protobuf==$PROTOBUF_VERSION"
fi

echo "== building tempora"
cargo build --locked --bin tempora
BIN=${CARGO_TARGET_DIR:-target}/debug/tempora

stubs=$(mktemp -d)
trap 'rm -rf "$stubs"' EXIT
echo "== generating Python stubs from proto/"
"$VENV/bin/python" -m grpc_tools.protoc -I proto --python_out="$stubs" --grpc_python_out="$stubs" \
    proto/neuro_san/api/grpc/*.proto

echo "== grpcio $GRPCIO_VERSION: tests/python/neurosan_grpc_client_test.py"
"$VENV/bin/python" tests/python/neurosan_grpc_client_test.py --bin "$BIN" --stubs "$stubs"

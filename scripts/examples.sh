#!/usr/bin/env bash
# Every protocol's own examples, run as written against the real
# `tempora serve` (docs/examples.md): the Agent Protocol Python client's
# minimal example, the MCP Python SDK's README client, neuro-san's README
# client (agent_cli) and library, the NeuroDock spec's packets over TCP, and
# every example of the memory API's reference document
# (api/abagraph.openapi.json) with its answer validated against the
# documented schema. Each runner starts its own server (temporary data
# directory); each example runs within 120 s or fails.
#
# The Python tools come from PyPI, each in a venv under target/ (installed on
# first use, as scripts/mcp-clients.sh, scripts/neurosan-clients.sh and
# scripts/agent-protocol-client.sh install theirs, with the same pins).
# Runs every runner even when one fails; exits non-zero if any example failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/venv.sh

# Pinned: the versions scripts/agent-protocol-client.sh, scripts/mcp-clients.sh
# and scripts/neurosan-clients.sh test with. The Agent Protocol example also
# imports the server SDK (PyPI `agent-protocol`); 1.0.2 installs next to the
# client (both on pydantic 1), in a venv of its own.
AP_CLIENT_VERSION=1.1.0
AP_SDK_VERSION=1.0.2
AP_VENV=target/venv-ap-examples
MCP_VERSION=2.3.0
JSONSCHEMA_VERSION=4.26.0
MCP_VENV=target/venv-mcp2
NEURO_SAN_VERSION=0.6.98
LEAF_COMMON_VERSION=1.3.1
NEUROSAN_VENV=target/venv-neurosan

# has VENV DIST==VERSION...: whether the venv holds exactly these versions.
has() {
    local venv=$1
    shift
    local differs=False
    for pin in "$@"; do
        differs+=" or m.version('${pin%%==*}') != '${pin#*==}'"
    done
    "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit($differs)" 2>/dev/null
}

if ! has "$AP_VENV" "agent-protocol-client==$AP_CLIENT_VERSION" "agent-protocol==$AP_SDK_VERSION"; then
    echo "== installing agent-protocol-client $AP_CLIENT_VERSION and agent-protocol $AP_SDK_VERSION into $AP_VENV"
    make_venv "$AP_VENV" "agent-protocol-client==$AP_CLIENT_VERSION" "agent-protocol==$AP_SDK_VERSION"
fi
if ! has "$MCP_VENV" "mcp==$MCP_VERSION" "jsonschema==$JSONSCHEMA_VERSION"; then
    echo "== installing mcp $MCP_VERSION into $MCP_VENV"
    make_venv "$MCP_VENV" "mcp==$MCP_VERSION" "jsonschema==$JSONSCHEMA_VERSION"
fi
if ! has "$NEUROSAN_VENV" "neuro-san==$NEURO_SAN_VERSION" "leaf-common==$LEAF_COMMON_VERSION"; then
    echo "== installing neuro-san $NEURO_SAN_VERSION into $NEUROSAN_VENV"
    make_venv "$NEUROSAN_VENV" "neuro-san==$NEURO_SAN_VERSION" "leaf-common==$LEAF_COMMON_VERSION"
fi

echo "== building tempora"
cargo build --locked --bin tempora
BIN=${CARGO_TARGET_DIR:-target}/debug/tempora

# A runner that hangs despite its own timeouts is stopped here.
RUNNER_LIMIT=900s
failed=()
runner() { # name python script
    local name=$1 python=$2 script=$3
    echo "== $name: $script"
    if ! timeout --kill-after=10s "$RUNNER_LIMIT" "$python" "$script" --bin "$BIN"; then
        failed+=("$name")
    fi
}

runner "Agent Protocol (agent-protocol-client $AP_CLIENT_VERSION)" "$AP_VENV/bin/python" tests/python/examples_ap.py
runner "MCP (mcp $MCP_VERSION) and the memory API's OpenAPI examples" "$MCP_VENV/bin/python" tests/python/examples_rest_mcp.py
runner "neuro-san $NEURO_SAN_VERSION (agent_cli, library)" "$NEUROSAN_VENV/bin/python" tests/python/examples_neurosan.py
runner "NeuroDock (its spec's packets over TCP)" python3 tests/python/examples_neurodock.py

if ((${#failed[@]})); then
    printf '== examples failed: %s\n' "${failed[@]}"
    exit 1
fi
echo "== examples: all ran as written"

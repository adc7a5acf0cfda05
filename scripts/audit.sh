#!/usr/bin/env bash
# The dependency audit (docs/security.md): cargo-deny's checks of Cargo.lock
# against deny.toml.
#
# * bans, licenses, sources: must pass (no banned crate, only the licences
#   deny.toml allows, crates.io only).
# * advisories: the RustSec database is fetched from GitHub; where GitHub
#   cannot be reached the check is skipped with a notice (never a failure),
#   and the command to run it elsewhere is printed.
#
# Installs cargo-deny with `cargo install cargo-deny --locked` when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo-deny >/dev/null 2>&1; then
    echo "cargo-deny not found; installing it (cargo install cargo-deny --locked)"
    cargo install cargo-deny --locked
fi

cargo deny --locked check bans licenses sources

# The advisory database lives on GitHub. A quick probe decides whether to try.
if curl --silent --head --max-time 10 https://github.com/rustsec/advisory-db >/dev/null 2>&1 \
    || timeout 20 git ls-remote --exit-code https://github.com/rustsec/advisory-db HEAD >/dev/null 2>&1; then
    cargo deny --locked check advisories
else
    echo "NOTICE: advisory check SKIPPED: the RustSec advisory database (https://github.com/rustsec/advisory-db)"
    echo "        cannot be reached from this machine. Run it where it can be:"
    echo "            cargo deny --locked check advisories"
fi

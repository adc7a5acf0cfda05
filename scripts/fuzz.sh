#!/usr/bin/env bash
# The fuzz targets of fuzz/ (docs/fuzzing.md).
#
#   scripts/fuzz.sh check           builds every target and runs each once over
#                                   its seeds (fuzz/seeds/<target>/); in scripts/test
#   scripts/fuzz.sh run [SECONDS]   fuzzes every target in turn, SECONDS each
#                                   (default 300); needs nightly and cargo-fuzz
#
# `run` builds the targets with cargo-fuzz on nightly (cargo-fuzz is
# installed from crates.io when missing), with coverage instrumentation and
# AddressSanitizer, in fuzz/target. `check` builds them uninstrumented on the
# default toolchain in the main target dir (FUZZ_INSTRUMENTED=1: like `run`):
# libFuzzer still runs each seed file given as an argument once, so a seed
# that crashes or panics still fails. The fuzz crate has its own lock file.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-check}
targets=()
for f in fuzz/fuzz_targets/*.rs; do
    targets+=("$(basename "$f" .rs)")
done

have_nightly() {
    command -v rustup >/dev/null 2>&1 && cargo +nightly --version >/dev/null 2>&1
}

ensure_cargo_fuzz() {
    if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
        echo "installing cargo-fuzz"
        cargo install cargo-fuzz --locked
    fi
}

seeds_of() {
    local t=$1
    ls -d "fuzz/seeds/$t"/* 2>/dev/null || true
}

case "$mode" in
check)
    start=$(date +%s)
    mkdir -p fuzz/target
    if [ "${FUZZ_INSTRUMENTED:-0}" = 1 ] && have_nightly; then
        ensure_cargo_fuzz
        (cd fuzz && cargo +nightly fuzz build)
        bin_dir=fuzz/target/$(rustc -vV | sed -n 's/^host: //p')/release
    else
        # Uninstrumented, in the main target dir: fuzz/Cargo.lock pins the
        # same versions as Cargo.lock, so every dependency (and tempora
        # itself) is already built by the test suite and only the targets
        # compile here. The sanitizer build takes over half an hour from
        # scratch on two cores; FUZZ_INSTRUMENTED=1 asks for it.
        target_dir=${CARGO_TARGET_DIR:-$PWD/target}
        CARGO_TARGET_DIR=$target_dir cargo build --manifest-path fuzz/Cargo.toml --locked --bins
        bin_dir=$target_dir/debug
    fi
    for t in "${targets[@]}"; do
        mapfile -t seeds < <(seeds_of "$t")
        if [ ${#seeds[@]} -eq 0 ]; then
            echo "fuzz target $t has no seeds in fuzz/seeds/$t" >&2
            exit 1
        fi
        # Files as arguments: each is run once, and nothing is written back.
        if ! "$bin_dir/$t" -rss_limit_mb=2048 -timeout=30 "${seeds[@]}" >"fuzz/target/$t.replay.log" 2>&1; then
            cat "fuzz/target/$t.replay.log" >&2
            echo "fuzz target $t failed on its seeds" >&2
            exit 1
        fi
        echo "$t: ${#seeds[@]} seeds replayed"
    done
    echo "fuzz check: ${#targets[@]} targets in $(($(date +%s) - start)) s"
    ;;
run)
    seconds=${2:-300}
    have_nightly || { echo "fuzz.sh run needs a nightly toolchain" >&2; exit 1; }
    ensure_cargo_fuzz
    (cd fuzz && cargo +nightly fuzz build)
    failed=()
    for t in "${targets[@]}"; do
        mkdir -p "fuzz/corpus/$t"
        log=fuzz/target/$t.run.log
        echo "== $t for $seconds s"
        # New inputs go to fuzz/corpus/<target> (not committed); crashes to fuzz/artifacts/<target>.
        if (cd fuzz && cargo +nightly fuzz run "$t" "corpus/$t" "seeds/$t" -- \
            -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1) >"$log" 2>&1; then
            status=ok
        else
            status=FAILED
            failed+=("$t")
        fi
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        echo "$t: $status, ${execs:-?} executions in $seconds s (log: $log)"
    done
    if [ ${#failed[@]} -gt 0 ]; then
        echo "failed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
        exit 1
    fi
    ;;
*)
    echo "usage: scripts/fuzz.sh check | run [SECONDS]" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Runs the whole Cachalot test suite and prints, as its very last line,
#
#   N passed, N failed
#
# summed over: the cargo tests (cargo-nextest), every tests/e2e/test_*.sh
# script (one script = one test) and three lint checks (lint-fmt,
# lint-rust-version, lint-clippy).
# Exits 1 if anything failed, else 0.
#
# Environment:
#   E2E_FILTER=substr   run only the e2e scripts whose name contains substr
#   SKIP_CARGO=1        skip the cargo-nextest run (the binaries are still built)
#   SKIP_LINT=1         skip the lint checks
#
# Full logs of every test are kept in test-artifacts/<test name>/.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1

if [[ -f ${HOME:-/root}/.cargo/env ]]; then
    # shellcheck disable=SC1091
    . "${HOME:-/root}/.cargo/env"
fi
export PATH="${HOME:-/root}/.cargo/bin:$PATH"

ARTIFACTS_ROOT=$REPO/test-artifacts
CACHALOT=$REPO/target/ci/cachalot
DEFAULT_E2E_TIMEOUT=600

PASSED=0
FAILED=0
NEXTEST_SKIPPED=0
FAILED_NAMES=()

mkdir -p "$ARTIFACTS_ROOT"

section() { printf '\n==== %s ====\n' "$*"; }

record_fail() { # name
    FAILED=$((FAILED + 1))
    FAILED_NAMES+=("$1")
}

# fresh_artifacts NAME -> prints the (emptied) artifacts dir of a test
fresh_artifacts() {
    local dir=$ARTIFACTS_ROOT/$1
    rm -rf "$dir"
    mkdir -p "$dir"
    printf '%s\n' "$dir"
}

# Runs "$@" as test NAME with output captured to its log; prints PASS/FAIL and,
# on failure, the log's last 40 lines.
run_captured() { # name cmd...
    local name=$1
    shift
    local dir start rc
    dir=$(fresh_artifacts "$name")
    start=$(date +%s)
    "$@" >"$dir/output.log" 2>&1
    rc=$?
    report "$name" "$rc" "$start" "$dir/output.log"
}

report() { # name rc start_epoch logfile
    local name=$1 rc=$2 start=$3 log=$4 secs
    secs=$(($(date +%s) - start))
    if [[ $rc -eq 0 ]]; then
        PASSED=$((PASSED + 1))
        echo "PASS $name (${secs}s)"
    else
        record_fail "$name"
        echo "FAIL $name (${secs}s)"
        echo "---- last 40 lines of $name (exit $rc; full log: ${log#"$REPO"/}) ----"
        tail -n 40 "$log"
        echo "---- end of $name ----"
    fi
}

# parse_nextest_summary LOG -> prints "passed failed skipped", or nothing if the log
# has no summary line. Format (cargo-nextest 0.9.x), e.g.
#   Summary [   2.010s] 3 tests run: 1 passed, 1 failed, 1 timed out, 1 skipped
#   Summary [   0.023s] 3 tests run: 3 passed (1 slow, 1 flaky), 1 skipped
#   Summary [   1.000s] 2/5 tests run: 1 passed, 1 failed, 0 skipped
# "failed", "exec failed" and "timed out" all count as failed, and so do the
# tests of a cancelled run that never ran (the M-N of "N/M tests run");
# "skipped" are the #[ignore]d tests (not run, so the suite was smaller).
parse_nextest_summary() {
    sed -e 's/\x1b\[[0-9;]*m//g' "$1" |
        grep -E '^[[:space:]]*Summary \[.*\] [0-9]+(/[0-9]+)? tests? run:' |
        tail -n 1 |
        awk '{
            line = $0
            sub(/^.*\] /, "", line)
            split(line, parts, " tests? run:")
            n = split(parts[1], runtot, "/")
            notrun = (n == 2) ? runtot[2] - runtot[1] : 0
            rest = parts[2]
            p = 0; f = 0; s = 0
            if (match(rest, /[0-9]+ passed/))    p  = substr(rest, RSTART, RLENGTH) + 0
            if (match(rest, /, [0-9]+ failed/))  f += substr(rest, RSTART + 2, RLENGTH - 2) + 0
            if (match(rest, /[0-9]+ exec failed/)) f += substr(rest, RSTART, RLENGTH) + 0
            if (match(rest, /[0-9]+ timed out/)) f += substr(rest, RSTART, RLENGTH) + 0
            if (match(rest, /[0-9]+ skipped/))   s  = substr(rest, RSTART, RLENGTH) + 0
            print p, f + notrun, s
        }'
}

# ---------------------------------------------------------------- 1. build
section "cargo build --profile ci --workspace --bins"
BUILD_OK=1
BUILD_LOG=$(fresh_artifacts cargo-build)/output.log
cargo build --profile ci --workspace --bins 2>&1 | tee "$BUILD_LOG"
if [[ ${PIPESTATUS[0]} -ne 0 ]]; then
    BUILD_OK=0
    record_fail cargo-build
    echo "FAIL cargo-build (log: ${BUILD_LOG#"$REPO"/})"
fi

# ------------------------------------------------------------ 2. cargo tests
if [[ ${SKIP_CARGO:-0} == 1 ]]; then
    section "cargo nextest: skipped (SKIP_CARGO=1)"
elif [[ $BUILD_OK -eq 0 ]]; then
    section "cargo nextest: skipped (build failed)"
else
    section "cargo nextest run --cargo-profile ci --workspace"
    NEXTEST_LOG=$(fresh_artifacts cargo-nextest)/output.log
    cargo nextest run --profile default --cargo-profile ci --workspace \
        --no-fail-fast --no-tests=warn 2>&1 | tee "$NEXTEST_LOG"
    nextest_rc=${PIPESTATUS[0]}
    counts=$(parse_nextest_summary "$NEXTEST_LOG")
    if [[ -z $counts ]]; then
        # No summary: the test build (or test listing) failed.
        if [[ $nextest_rc -ne 0 ]]; then
            record_fail cargo-nextest
            echo "FAIL cargo-nextest: no summary line, exit $nextest_rc (log: ${NEXTEST_LOG#"$REPO"/})"
        fi
    else
        read -r np nf NEXTEST_SKIPPED <<<"$counts"
        # A failing exit with no failed test counted (e.g. a leak, a setup
        # script) still counts as one failure.
        if [[ $nextest_rc -ne 0 && $nf -eq 0 ]]; then
            nf=1
        fi
        PASSED=$((PASSED + np))
        FAILED=$((FAILED + nf))
        ((nf == 0)) || FAILED_NAMES+=("cargo-nextest($nf)")
        echo "cargo tests: $np passed, $nf failed"
    fi
fi

# ------------------------------------------------------------ 3. e2e scripts
section "e2e scripts (tests/e2e/test_*.sh${E2E_FILTER:+, filter: $E2E_FILTER})"

script_timeout() { # script -> seconds
    local t
    t=$(grep -m1 -E '^#[[:space:]]*timeout:[[:space:]]*[0-9]+[[:space:]]*$' "$1" |
        grep -oE '[0-9]+' || true)
    echo "${t:-$DEFAULT_E2E_TIMEOUT}"
}

shopt -s nullglob
E2E_SCRIPTS=()
while IFS= read -r f; do
    E2E_SCRIPTS+=("$f")
done < <(printf '%s\n' "$REPO"/tests/e2e/test_*.sh | LC_ALL=C sort)
shopt -u nullglob

n_e2e=0
for script in "${E2E_SCRIPTS[@]}"; do
    [[ -f $script ]] || continue
    name=$(basename "$script" .sh)
    if [[ -n ${E2E_FILTER:-} && $name != *"$E2E_FILTER"* ]]; then
        continue
    fi
    n_e2e=$((n_e2e + 1))
    tmo=$(script_timeout "$script")
    dir=$(fresh_artifacts "$name")
    log=$dir/output.log
    start=$(date +%s)
    if [[ $BUILD_OK -eq 0 ]]; then
        echo "not run: cargo build failed" >"$log"
        report "$name" 1 "$start" "$log"
        continue
    fi
    # timeout(1) puts the script in its own process group, which we kill
    # afterwards so that no stray daemon outlives its test.
    CACHALOT=$CACHALOT REPO=$REPO ARTIFACTS=$dir \
        timeout --kill-after=15 "$tmo" bash "$script" </dev/null >"$log" 2>&1 &
    pgid=$!
    wait "$pgid"
    rc=$?
    kill -KILL -- "-$pgid" 2>/dev/null || true
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        echo "e2e: $name TIMED OUT after ${tmo}s (exit $rc)" >>"$log"
    fi
    report "$name" "$rc" "$start" "$log"
done
((n_e2e > 0)) || echo "(no e2e scripts matched)"

# ------------------------------------------------------------------ 4. lint
if [[ ${SKIP_LINT:-0} == 1 ]]; then
    section "lint: skipped (SKIP_LINT=1)"
else
    section "lint"
    run_captured lint-fmt cargo fmt --all --check
    run_captured lint-rust-version scripts/check-rust-version.sh
    run_captured lint-clippy cargo clippy --profile ci --all-targets -- -D warnings
fi

# --------------------------------------------------------------- summary
echo
if ((FAILED > 0)); then
    echo "failed: ${FAILED_NAMES[*]}"
fi
# Say when the run was not the whole suite, so a short run never reads as a
# full pass.
SMALLER=()
[[ ${SKIP_CARGO:-0} == 1 ]] && SMALLER+=("cargo tests skipped (SKIP_CARGO=1)")
[[ ${SKIP_CARGO:-0} != 1 && $BUILD_OK -eq 0 ]] && SMALLER+=("cargo tests not run (build failed)")
((NEXTEST_SKIPPED > 0)) && SMALLER+=("$NEXTEST_SKIPPED cargo tests ignored (#[ignore], not run)")
[[ -n ${E2E_FILTER:-} ]] && SMALLER+=("e2e scripts filtered (E2E_FILTER=$E2E_FILTER)")
[[ ${SKIP_LINT:-0} == 1 ]] && SMALLER+=("lint skipped (SKIP_LINT=1)")
if ((${#SMALLER[@]} > 0)); then
    echo "$PASSED passed, $FAILED failed; NOT the whole suite: $(IFS=';'; echo "${SMALLER[*]}" | sed 's/;/; /g')"
else
    echo "$PASSED passed, $FAILED failed"
fi
((FAILED == 0))

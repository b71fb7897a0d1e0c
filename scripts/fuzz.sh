#!/bin/sh
# SPDX-License-Identifier: MIT
# Run every fuzz target for SECONDS seconds (make fuzz; docs/fuzzing.md):
#   scripts/fuzz.sh BUILD_DIR SECONDS TARGET...
# Each target reads its committed corpus (fuzz/corpus/<t>/) and dictionary
# (fuzz/dict/<t>.dict, when there is one); the inputs it finds go to BUILD_DIR/corpus/<t>/,
# never into the committed corpus. A crash, a sanitizer report, a leak, a hang (over 10 s
# for one input) or running out of memory is a finding: its input is copied to
# fuzz/findings/<t>/ and the run fails, after every target has had its turn.
# FUZZ_JOBS=2 runs two targets at a time.
set -eu
cd "$(dirname "$0")/.."
build=$1
seconds=$2
shift 2
jobs=${FUZZ_JOBS:-1}
logs="$build/logs"
mkdir -p "$logs"

one() {
    t=$1
    scratch="$build/corpus/$t"
    artifacts="$build/artifacts/$t"
    mkdir -p "$scratch" "$artifacts" "fuzz/corpus/$t"
    rm -f "$artifacts"/*
    set -- -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/"
    if [ -f "fuzz/dict/$t.dict" ]; then
        set -- "$@" -dict="fuzz/dict/$t.dict"
    fi
    rc=0
    "$build/fuzz-$t" "$@" "$scratch" "fuzz/corpus/$t" >"$logs/$t.log" 2>&1 || rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log" | tail -n 1)
    found=$(find "$artifacts" -type f | wc -l)
    if [ "$rc" != 0 ] || [ "$found" != 0 ]; then
        mkdir -p "fuzz/findings/$t"
        find "$artifacts" -type f -exec cp {} "fuzz/findings/$t/" \;
        echo "fuzz $t: FINDING after ${runs:-?} executions (exit $rc; input in fuzz/findings/$t/, log $logs/$t.log)"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*property failed|.*runtime error)' "$logs/$t.log" | head -n 5 || true
        return 1
    fi
    echo "fuzz $t: ${runs:-?} executions in $seconds s, no finding"
}

failed=0
if [ "$jobs" -le 1 ]; then
    for t in "$@"; do
        one "$t" || failed=$((failed + 1))
    done
else
    # In batches of $jobs: each batch's results are printed when it ends.
    while [ $# -gt 0 ]; do
        pids=""
        batch=""
        i=0
        while [ $# -gt 0 ] && [ "$i" -lt "$jobs" ]; do
            (one "$1" >"$logs/$1.result" 2>&1) &
            pids="$pids $!"
            batch="$batch $1"
            shift
            i=$((i + 1))
        done
        for p in $pids; do
            wait "$p" || failed=$((failed + 1))
        done
        for t in $batch; do
            cat "$logs/$t.result"
        done
    done
fi
if [ "$failed" != 0 ]; then
    echo "fuzz: $failed target(s) with findings"
    exit 1
fi
echo "fuzz: every target ran $seconds s with no finding"

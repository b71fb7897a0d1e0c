#!/bin/sh
# SPDX-License-Identifier: MIT
# make bench: PyBox against `docker run --rm -i` with the same limits, side by side.
#   scripts/bench.sh PYBOX_BINARY [RUNS]   (RUNS also from BENCH_RUNS; default 20)
set -eu
cd "$(dirname "$0")/.."
pybox=${1:-build/pybox}
runs=${2:-${BENCH_RUNS:-20}}
exec "$(dirname "$pybox")/pybox-bench" "$pybox" "$runs"

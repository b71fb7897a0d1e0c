#!/bin/sh
# SPDX-License-Identifier: MIT
# make bench: PyBox's speed goals, measured side by side with bare bubblewrap and
# `docker run --rm -i` under the same limits (docs/bench.md).
#   scripts/bench.sh PYBOX_BINARY [RUNS]   (RUNS also from BENCH_RUNS; default 20)
set -eu
cd "$(dirname "$0")/.."
pybox=${1:-build/pybox}
runs=${2:-${BENCH_RUNS:-20}}
# bubblewrap, the reference that has no cgroups, filter or receipt (Debian's package).
if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        echo "bench: installing bubblewrap (the reference)" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
    else
        echo "bench: bubblewrap is not installed: its reference row is left out" >&2
    fi
fi
exec "$(dirname "$pybox")/pybox-bench" --goals "$(cd "$(dirname "$pybox")" && pwd)/$(basename "$pybox")" "$runs"

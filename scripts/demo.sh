#!/bin/sh
# SPDX-License-Identifier: MIT
# The main job (make demo): set up what the default backend needs (scripts/setup.sh: the
# packages, the build, the stdlib image; no container engine), then one real program
# through `pybox exec`, and its receipt; at the end, how long all of it took.
#   scripts/demo.sh [PYBOX_BINARY]
set -eu
cd "$(dirname "$0")/.."
start=$(date +%s.%N)
scripts/setup.sh --images stdlib
pybox=${1:-build/pybox}
echo "\$ $pybox exec < examples/inspect.py"
rc=0
"$pybox" exec <examples/inspect.py || rc=$?
echo "demo: set up and run in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s (exit $rc)"
exit "$rc"

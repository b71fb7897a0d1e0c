#!/bin/sh
# SPDX-License-Identifier: MIT
# The main job: one real program through `pybox exec`, and its receipt.
#   scripts/demo.sh [PYBOX_BINARY]
set -eu
cd "$(dirname "$0")/.."
pybox=${1:-build/pybox}
echo "\$ $pybox exec < examples/inspect.py"
exec "$pybox" exec < examples/inspect.py

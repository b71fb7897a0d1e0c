#!/bin/sh
# SPDX-License-Identifier: MIT
# This machine's apt source files, whatever mirror they name (one-line and deb822 files),
# one path a line, for mmdebstrap to build Debian roots from (tests/deb.sh,
# scripts/vm.sh). Exits 1, saying so, when there is none.
set -eu
n=0
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    grep -qE '^[[:space:]]*(deb |Types:)' "$f" || continue
    echo "$f"
    n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "apt-sources: no apt sources on this machine" >&2; exit 1; }

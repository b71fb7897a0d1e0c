#!/bin/sh
# SPDX-License-Identifier: MIT
# Install the Debian packages a make target needs, when any is missing (as root).
#   scripts/need-packages.sh WHAT PACKAGE...
set -eu
what=$1
shift
missing=""
for p in "$@"; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
[ -n "$missing" ] || exit 0
if [ "$(id -u)" != 0 ]; then
    echo "$what: missing packages:$missing (install them as root, or run this as root)" >&2
    exit 1
fi
echo "$what: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null

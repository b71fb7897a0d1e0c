#!/bin/sh
# SPDX-License-Identifier: MIT
# Set PyBox up from nothing on Debian 12 (as root): packages, container engine, build,
# and the pinned stdlib image. Idempotent: a second run only checks, and is quick.
set -eu
cd "$(dirname "$0")/.."

packages="gcc make libc6-dev pkg-config check libcjson-dev libcurl4-openssl-dev libssl-dev
libarchive-dev libseccomp-dev unicode-data docker.io mmdebstrap curl ca-certificates clang-14 libclang-rt-14-dev"
missing=""
for p in $packages; do
    if ! dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup: missing packages:$missing (install them as root, or run this as root)" >&2
        exit 1
    fi
    echo "setup: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

scripts/engine-start.sh
make -s all
build/pybox image build stdlib
build/pybox image build data

#!/bin/sh
# SPDX-License-Identifier: MIT
# make vm-check: PyBox on a Debian host as shipped (systemd, cgroup v2), in a guest booted
# by scripts/vm.sh: its Debian package installed there with apt, then every integration
# suite, the campaign's restriction and crash cases and the MCP SDK client, on the native
# and the docker backend, as root, then rootless boxes as an ordinary user
# (tests/vm-guest.sh).
#
# The guest has no network, and under software emulation unpacking an image costs
# minutes: the images are made here, as folders the guest takes as they are, on a second
# disk (/dev/vdb): an installation (/var/lib/pybox) with the stdlib and data images
# pinned for both backends, built by the packaged pybox from this machine's cached root
# filesystems (nothing is downloaded), and the data root of a private engine
# (/var/lib/docker) the docker images were imported into, which the guest's own engine
# then serves. Results and logs come back in BUILD_DIR/vm-check/results; the guest
# powers off; the whole run is bounded (PYBOX_VM_TIMEOUT seconds, default 2700), and
# what this script made here is removed at its end. PYBOX_VM_BACKENDS, PYBOX_VM_STEPS
# (integration, campaign, rootless), PYBOX_VM_SUITES_NATIVE and _DOCKER choose a part (the
# default is all); PYBOX_VM_CAMPAIGN_OUT puts the campaign's records in that folder
# (make campaign: the evidence) instead of the results; PYBOX_VM_ROOTLESS_SUITES names
# integration suites the ordinary user also runs, rootless (tests/vm-rootless.sh).
#   scripts/vm-check.sh BUILD_DIR
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
state=${PYBOX_HOME:-/var/lib/pybox}
out=$(pwd)/$build/vm-check

version=$(sed -n 's/^#define PYBOX_VERSION "\(.*\)"$/\1/p' pybox/version.h)
for f in "$build/pybox_${version}_$(dpkg --print-architecture).deb" "$build/pybox" "$build/pybox-test" "$build/pybox-init" \
    "$build/itest" "$build/pybox-campaign" tests/mcp/node_modules/@modelcontextprotocol/sdk; do
    [ -e "$f" ] || { echo "vm-check: $f is missing (make vm-check builds it)" >&2; exit 1; }
done
set -- "$state"/cache/base-*.tar
[ -f "$1" ] || { echo "vm-check: no image root filesystem in $state/cache (scripts/setup.sh native)" >&2; exit 1; }

stage=$out/images
engine=$out/engine
cleanup() {
    scripts/engine-private.sh stop "$engine" || true
    rm -rf "$stage" "$engine" "$out/images.img" "$out/package"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
rm -rf "$out"
mkdir -p "$stage/pybox/cache" "$stage/docker"
chmod 0700 "$stage/pybox" "$stage/pybox/cache"
start=$(date +%s)

# The installation the guest takes: the cached root filesystems lent (hard links), the
# images built from them for both backends by the packaged pybox itself (unpacked here:
# its recipes and guest init are the ones the guest's pybox checks its images against),
# the cache kept (a custom image is built on the stdlib image's root filesystem).
pkg=$out/package
dpkg-deb -x "$build/pybox_${version}_$(dpkg --print-architecture).deb" "$pkg"
for f in "$state"/cache/base-*.tar "$state"/cache/base-*.tar.packages; do
    ln -f "$f" "$stage/pybox/cache/" 2>/dev/null || cp "$f" "$stage/pybox/cache/"
done
export PYBOX_HOME="$stage/pybox"
for image in stdlib data; do
    "$pkg/usr/bin/pybox" image build "$image" --backend native
done
DOCKER_HOST=$(scripts/engine-private.sh start "$engine")
export DOCKER_HOST
for image in stdlib data; do
    "$pkg/usr/bin/pybox" image build "$image" --backend docker
done
scripts/engine-private.sh stop "$engine"
unset DOCKER_HOST PYBOX_HOME
rm -rf "$stage/pybox/runs" "$pkg"
# The engine's data root as the guest's engine will find it.
mv "$engine/data"/* "$stage/docker/"
mkfs.ext4 -q -F -L pybox-images -d "$stage" "$out/images.img" 16G >/dev/null
rm -rf "$stage"
echo "vm-check: images made for the guest in $(($(date +%s) - start)) s"

rc=0
scripts/vm.sh run --disk "$out/images.img" --timeout "${PYBOX_VM_TIMEOUT:-2700}" -- \
    env PYBOX_VM_BACKENDS="${PYBOX_VM_BACKENDS:-}" PYBOX_VM_STEPS="${PYBOX_VM_STEPS:-}" \
    PYBOX_VM_SUITES_NATIVE="${PYBOX_VM_SUITES_NATIVE:-}" PYBOX_VM_SUITES_DOCKER="${PYBOX_VM_SUITES_DOCKER:-}" \
    PYBOX_VM_CAMPAIGN_OUT="${PYBOX_VM_CAMPAIGN_OUT:-}" PYBOX_VM_ROOTLESS_SUITES="${PYBOX_VM_ROOTLESS_SUITES:-}" \
    sh tests/vm-guest.sh "$build" "$out/results" || rc=$?
echo "vm-check: $(($(date +%s) - start)) s in all; results in $out/results"
[ -f "$out/results/summary" ] && sed 's/^/  /' "$out/results/summary"
if [ "$rc" != 0 ]; then
    echo "vm-check: FAIL (exit $rc)" >&2
    exit 1
fi
echo "vm-check: passed"

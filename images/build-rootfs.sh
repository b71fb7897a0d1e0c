#!/bin/sh
# SPDX-License-Identifier: MIT
# Build a PyBox root filesystem as a tar from Debian packages, offline from any registry.
#   images/build-rootfs.sh RECIPE_DIR OUT.tar [DEB_CACHE]
# DEB_CACHE, a folder of the caller's (PyBox passes <state>/cache/debs): the packages an
# earlier build downloaded are taken from it and this build's put back, so a second
# recipe downloads only what the first did not; another version of a package this build
# used is removed from it (superseded).
# RECIPE_DIR/packages lists Debian packages (one per line, # comments); an executable
# RECIPE_DIR/customize, if there is one, runs last as `customize ROOT RECIPE_DIR`. The package
# sources are this machine's own apt sources; the suite is this machine's release.
# Also writes OUT.tar.packages: "name version" of every installed package.
set -eu

recipe=$1
out=$2
cache=${3:-}
[ -f "$recipe/packages" ] || { echo "build-rootfs: $recipe/packages is missing" >&2; exit 2; }
command -v mmdebstrap >/dev/null || { echo "build-rootfs: mmdebstrap is not installed" >&2; exit 2; }

suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$suite" ] || { echo "build-rootfs: cannot tell this machine's Debian release" >&2; exit 2; }

packages=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$recipe/packages" | grep -v '^$' | paste -sd, -)
[ -n "$packages" ] || { echo "build-rootfs: no packages in $recipe/packages" >&2; exit 2; }

# The machine's apt sources, whatever mirror they name (one-line and deb822 files).
sources=
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    grep -qE '^[[:space:]]*(deb |Types:)' "$f" || continue
    sources="$sources$f
"
done
[ -n "$sources" ] || { echo "build-rootfs: no apt sources on this machine" >&2; exit 2; }

# The package cache: given as mmdebstrap's own sync hooks, whose paths are not a shell's
# words (a folder named with a blank or a quote: built without the cache).
set --
case $cache in
    "" | *[[:space:]\'\"]*) cache= ;;
    *)
        mkdir -p "$cache"
        export PYBOX_DEB_USED="$out.debs"
        trap 'rm -f "$PYBOX_DEB_USED"' EXIT
        set -- --skip=essential/unlink \
            --setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
            --setup-hook="sync-in $cache /var/cache/apt/archives/" \
            --customize-hook='ls "$1/var/cache/apt/archives" | grep "\.deb$" > "$PYBOX_DEB_USED" || true' \
            --customize-hook="sync-out /var/cache/apt/archives $cache"
        ;;
esac
set -- "$@" "$suite" "$out"
while IFS= read -r f; do
    [ -n "$f" ] && set -- "$@" "$f"
done <<SOURCES
$sources
SOURCES

export PYBOX_PACKAGE_LIST="$out.packages"
# A recipe may have a customize step (images/README.md), run in the finished root.
PYBOX_RECIPE=$(cd "$recipe" && pwd)
export PYBOX_RECIPE
mmdebstrap --format=tar --variant=essential --include="$packages" \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='chroot "$1" dpkg-query -W -f "\${Package} \${Version}\n" > "$PYBOX_PACKAGE_LIST"' \
    --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/hostname"; mkdir -p "$1/tmp" "$1/pybox"; chmod 1777 "$1/tmp"' \
    --customize-hook='if [ -x "$PYBOX_RECIPE/customize" ]; then "$PYBOX_RECIPE/customize" "$1" "$PYBOX_RECIPE"; fi' \
    "$@"

# What this build used stays in the cache; another version of a package it used goes.
if [ -n "$cache" ] && [ -s "$PYBOX_DEB_USED" ]; then
    for f in "$cache"/*.deb; do
        [ -f "$f" ] || continue
        b=${f##*/}
        grep -qxF "$b" "$PYBOX_DEB_USED" && continue
        if grep -q "^${b%%_*}_" "$PYBOX_DEB_USED"; then rm -f "$f"; fi
    done
fi
exit 0

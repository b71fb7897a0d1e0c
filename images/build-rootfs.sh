#!/bin/sh
# SPDX-License-Identifier: MIT
# Build a PyBox root filesystem as a tar from Debian packages, offline from any registry.
#   images/build-rootfs.sh RECIPE_DIR OUT.tar [DEB_CACHE]
# DEB_CACHE, a folder of the caller's (PyBox passes <state>/cache/debs): the packages an
# earlier build downloaded are taken from it and this build's put back, so a second
# recipe downloads only what the first did not. apt takes a package already in its cache
# by name and size, without its checksum, so each package dpkg installed is checked
# against the SHA-256 its signed index names before any customize step runs (a mismatch
# fails the build), and only those files, as they were then, go back: a file that
# differs afterwards, or that no build put there, is not kept; another version of a
# package this build used is removed (superseded).
# RECIPE_DIR/packages lists Debian packages (one per line, # comments); an executable
# RECIPE_DIR/customize, if there is one, runs last as `customize ROOT RECIPE_DIR`. The package
# sources are this machine's own apt sources; the suite is this machine's release.
# Also writes OUT.tar.packages: "name version" of every installed package.
set -eu

# As mmdebstrap's first customize hook (below): the packages dpkg installed, each checked
# against the SHA-256 its signed index names (apt takes a package already in its cache by
# name and size alone); "sha256  file" of each into $PYBOX_DEB_USED. A package that is not
# the one its index names fails the build.
if [ "${1:-}" = "--used-debs" ]; then
    root=$2
    archives="$root/var/cache/apt/archives"
    chroot "$root" dpkg-query -W -f '${Package} ${Version} ${Architecture}\n' > "$PYBOX_DEB_USED.installed"
    APT_CONFIG="$MMDEBSTRAP_APT_CONFIG" apt-cache dumpavail | awk '
        NR == FNR { want[$1 " " $2 " " $3] = 1; next }
        /^Package: / { p = $2 } /^Version: / { v = $2 } /^Architecture: / { a = $2 } /^SHA256: / { s = $2 }
        /^$/ { if ((p " " v " " a) in want) print p, v, a, s; p = v = a = s = "" }
        END { if ((p " " v " " a) in want) print p, v, a, s }' "$PYBOX_DEB_USED.installed" - > "$PYBOX_DEB_USED.index"
    while read -r p v a; do
        f="$archives/${p}_$(printf '%s' "$v" | sed 's/:/%3a/')_${a}.deb"
        [ -f "$f" ] || continue
        want=$(awk -v k="$p $v $a" '$1 " " $2 " " $3 == k { print $4; exit }' "$PYBOX_DEB_USED.index")
        got=$(sha256sum < "$f" | cut -d' ' -f1)
        # Testing only (tests/deb-cache.sh): the check removed, to show what it stops.
        [ "${PYBOX_TEST_UNCHECKED_DEBS:-}" = 1 ] && want=$got
        if [ "$got" != "$want" ]; then
            rm -f "$PYBOX_DEB_CACHE/${f##*/}"
            echo "build-rootfs: $p $v ($a): the package installed is not the one its index names (SHA-256 $got; the index: ${want:-none}); removed from the package cache, the next build downloads it again" >&2
            exit 1
        fi
        echo "$got  ${f##*/}"
    done < "$PYBOX_DEB_USED.installed" > "$PYBOX_DEB_USED"
    rm -f "$PYBOX_DEB_USED.installed" "$PYBOX_DEB_USED.index"
    exit 0
fi

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

# A build that fails leaves no root filesystem or package list behind.
done_with() {
    st=$?
    if [ -n "${PYBOX_DEB_USED:-}" ]; then
        rm -f "$PYBOX_DEB_USED" "$PYBOX_DEB_USED.installed" "$PYBOX_DEB_USED.index" "$out.debs-before"
    fi
    [ "$st" -eq 0 ] || rm -f "$out" "$out.packages"
    return "$st"
}
trap done_with EXIT

# The package cache: given as mmdebstrap's own sync hooks, whose paths are not a shell's
# words (a folder named with a blank or a quote: built without the cache).
set --
case $cache in
    "" | *[[:space:]\'\"]*) cache= ;;
    *)
        mkdir -p "$cache"
        export PYBOX_DEB_USED="$out.debs"
        before="$out.debs-before"
        PYBOX_ROOTFS_SCRIPT=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
        PYBOX_DEB_CACHE=$cache
        export PYBOX_ROOTFS_SCRIPT PYBOX_DEB_CACHE
        ls "$cache" > "$before"
        set -- --skip=essential/unlink \
            --setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
            --setup-hook="sync-in $cache /var/cache/apt/archives/"
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
    ${cache:+--customize-hook='sh "$PYBOX_ROOTFS_SCRIPT" --used-debs "$1"'} \
    --customize-hook='chroot "$1" dpkg-query -W -f "\${Package} \${Version}\n" > "$PYBOX_PACKAGE_LIST"' \
    --customize-hook='rm -f "$1/etc/resolv.conf" "$1/etc/hostname"; mkdir -p "$1/tmp" "$1/pybox"; chmod 1777 "$1/tmp"' \
    --customize-hook='if [ -x "$PYBOX_RECIPE/customize" ]; then "$PYBOX_RECIPE/customize" "$1" "$PYBOX_RECIPE"; fi' \
    ${cache:+"--customize-hook=sync-out /var/cache/apt/archives $cache"} \
    "$@"

# What this build used stays in the cache, as apt had it; anything else it brought back
# goes, and so does another version of a package it used.
if [ -n "$cache" ]; then
    for f in "$cache"/*.deb; do
        [ -f "$f" ] || continue
        b=${f##*/}
        sum=$(awk -v b="$b" '$2 == b { print $1; exit }' "$PYBOX_DEB_USED")
        if [ -n "$sum" ]; then
            [ "$(sha256sum < "$f" | cut -d' ' -f1)" = "$sum" ] || rm -f "$f"
        elif ! grep -qxF "$b" "$before"; then
            rm -f "$f"
        elif awk -v n="${b%%_*}_" 'index($2, n) == 1 { found = 1 } END { exit !found }' "$PYBOX_DEB_USED"; then
            rm -f "$f"
        fi
    done
fi
exit 0

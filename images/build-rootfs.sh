#!/bin/sh
# SPDX-License-Identifier: MIT
# Build a PyBox root filesystem as a tar from Debian packages, offline from any registry.
#   images/build-rootfs.sh RECIPE_DIR OUT.tar
# RECIPE_DIR/packages lists Debian packages (one per line, # comments); an executable
# RECIPE_DIR/customize, if there is one, runs last as `customize ROOT RECIPE_DIR`. The package
# sources are this machine's own apt sources; the suite is this machine's release.
# Also writes OUT.tar.packages: "name version" of every installed package.
set -eu

recipe=$1
out=$2
[ -f "$recipe/packages" ] || { echo "build-rootfs: $recipe/packages is missing" >&2; exit 2; }
command -v mmdebstrap >/dev/null || { echo "build-rootfs: mmdebstrap is not installed" >&2; exit 2; }

suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$suite" ] || { echo "build-rootfs: cannot tell this machine's Debian release" >&2; exit 2; }

packages=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$recipe/packages" | grep -v '^$' | paste -sd, -)
[ -n "$packages" ] || { echo "build-rootfs: no packages in $recipe/packages" >&2; exit 2; }

# The machine's apt sources, whatever mirror they name (one-line and deb822 files).
set --
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    grep -qE '^[[:space:]]*(deb |Types:)' "$f" || continue
    set -- "$@" "$f"
done
[ $# -gt 0 ] || { echo "build-rootfs: no apt sources on this machine" >&2; exit 2; }

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
    "$suite" "$out" "$@"

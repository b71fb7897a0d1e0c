#!/bin/sh
# SPDX-License-Identifier: MIT
# make deb: the Debian package, built with Debian's tools (dpkg-buildpackage, debhelper)
# from a copy of the tree's files in BUILD/deb/, so that what dpkg-buildpackage writes
# beside the tree lands there too; the package is then BUILD/pybox_VERSION_ARCH.deb. The
# version is pybox/version.h's; debian/changelog is written for it in the copy. Missing
# build dependencies (debian/control) are installed first, as root.
#   scripts/deb.sh BUILD_DIR
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}

version=$(sed -n 's/^#define PYBOX_VERSION "\(.*\)"$/\1/p' pybox/version.h)
[ -n "$version" ] || { echo "deb: no PYBOX_VERSION in pybox/version.h" >&2; exit 1; }
scripts/need-packages.sh deb dpkg-dev debhelper fakeroot git
arch=$(dpkg --print-architecture)

# The copy: the tree's files as they are in the work tree, those git ignores left out
# (no build folder, no node_modules).
work=$build/deb
src=$work/pybox-$version
rm -rf "$work"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -C "$src" -xf -
case $src in
/*) here=$src ;;
*) here=./$src ;;
esac

# The changelog entry for this version, dated by the last commit (the same tree gives
# the same package).
date=$(git log -1 --format=%cD 2>/dev/null || date -R)
cat >"$src/debian/changelog" <<EOF
pybox ($version) unstable; urgency=medium

  * PyBox $version.

 -- PyBox developers <pybox-devel@example.org>  $date
EOF

# Build dependencies from debian/control, installed when any is missing.
if ! (cd "$src" && dpkg-checkbuilddeps >/dev/null 2>&1); then
    if [ "$(id -u)" != 0 ]; then
        (cd "$src" && dpkg-checkbuilddeps) || true
        echo "deb: missing build dependencies (install them as root, or run this as root)" >&2
        exit 1
    fi
    echo "deb: installing the build dependencies of debian/control" >&2
    DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq "$here" >/dev/null
fi

(cd "$src" && dpkg-buildpackage -b -us -uc -j"$(nproc)") >"$work/build.log" 2>&1 || {
    tail -40 "$work/build.log" >&2
    echo "deb: dpkg-buildpackage failed (whole log: $work/build.log)" >&2
    exit 1
}
deb=pybox_${version}_${arch}.deb
mv "$work/$deb" "$build/$deb"
echo "deb: $build/$deb"
dpkg-deb --info "$build/$deb" | sed -n 's/^ \(Package\|Version\|Architecture\|Depends\|Recommends\): /  \1: /p'

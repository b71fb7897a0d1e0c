#!/bin/sh
# SPDX-License-Identifier: MIT
# The image builds' package cache (images/build-rootfs.sh), both ways: a package in the
# cache that is not the one its signed index names, of the same name and size (which apt
# takes without its checksum), fails the build, is named and is removed from the cache,
# and the next build downloads it again; with only that check removed (a test-only
# variable), the same build takes the altered package. A recipe of one small package.
#   tests/deb-cache.sh
set -eu
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/pybox-debcache-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "deb-cache: FAIL: $*" >&2; [ -f "$work/log" ] && tail -20 "$work/log" >&2; exit 1; }
build() { sh images/build-rootfs.sh "$work/recipe" "$work/$1.tar" "$work/debs" > "$work/log" 2>&1; }
sum() { sha256sum < "$1" | cut -d' ' -f1; }

mkdir "$work/recipe"
echo hello > "$work/recipe/packages"
build first || fail "the first build (an empty cache)"
deb=$(cd "$work/debs" && ls | grep '^hello_.*\.deb$' || true)
[ -n "$deb" ] || fail "the first build left no hello package in the cache"
good=$(sum "$work/debs/$deb")
size=$(stat -c %s "$work/debs/$deb")

# Another digit in the ar archive's first member's date: the same size, still a package.
at=25
cur=$(dd if="$work/debs/$deb" bs=1 skip=$at count=1 2>/dev/null)
case $cur in [0-8]) new=9 ;; 9) new=8 ;; *) fail "byte $at of $deb is not a digit of the ar header's date" ;; esac
printf %s "$new" | dd of="$work/debs/$deb" bs=1 seek=$at conv=notrunc 2>/dev/null
bad=$(sum "$work/debs/$deb")
[ "$bad" != "$good" ] && [ "$(stat -c %s "$work/debs/$deb")" = "$size" ] || fail "the package was not altered as meant"

# Without the check: apt takes the altered package from the cache.
PYBOX_TEST_UNCHECKED_DEBS=1 build unchecked || fail "the build without the check"
[ "$(sum "$work/debs/$deb")" = "$bad" ] || fail "without the check apt did not take the cached package (it fetched it again): the test shows nothing"
echo "deb-cache: without the check, the build took the altered $deb from the cache"

# With it: refused, said, removed from the cache.
if build checked; then fail "a build with an altered package in the cache passed"; fi
grep -q "hello .*the package installed is not the one its index names" "$work/log" || fail "the refusal does not name the package"
[ ! -e "$work/debs/$deb" ] || fail "the altered package is still in the cache"
[ ! -e "$work/checked.tar" ] || fail "a root filesystem was left by the refused build"
echo "deb-cache: with the check, the build was refused and the altered package removed from the cache"

# The next build downloads it again.
build again || fail "the build after the refusal"
[ "$(sum "$work/debs/$deb")" = "$good" ] || fail "the package fetched again is not the index's"
echo "deb-cache: passed"

#!/bin/sh
# SPDX-License-Identifier: MIT
# make install and make uninstall, end to end (make install-check). PyBox is built into
# a build folder of its own and installed into a prefix of its own; the build folder is
# deleted and the prefix moved, then the installed pybox alone must: say its version and
# help, run a program in this machine's installation (its pinned stdlib image: nothing
# is built there), find its own recipes and guest init to build the stdlib image into a
# private installation (the native backend, from a copy of this machine's cached root
# filesystem) and run a program in it, show its man pages and load its completion.
# Then make uninstall removes what was installed and nothing else. Needs this machine's
# installation (/var/lib/pybox, or PYBOX_HOME) with its stdlib image.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/pybox-install-XXXXXX)
# The private installation's own cgroup parents (the native backend makes them at its
# first box, named after its id; none on cgroup v2 under systemd, docs/cgroups.md) go with
# the folder, once empty.
forget() {
    if [ -f "$tmp/home/install-id" ]; then
        id=$(cat "$tmp/home/install-id")
        for d in /sys/fs/cgroup/pybox-"$id" /sys/fs/cgroup/*/pybox-"$id"; do
            [ -d "$d" ] && rmdir "$d" 2>/dev/null || :
        done
    fi
    rm -rf "$tmp"
}
trap forget EXIT INT TERM
unset PYBOX_IMAGES PYBOX_INIT
home=${PYBOX_HOME:-/var/lib/pybox}
unset PYBOX_HOME

fail() {
    echo "install-check: FAIL: $*" >&2
    exit 1
}
step() { echo "install-check: $*"; }

step "build into $tmp/build, install into $tmp/prefix"
make -s -C "$src" BUILD="$tmp/build" all >/dev/null
make -s -C "$src" BUILD="$tmp/build" install PREFIX="$tmp/prefix"

# what is under the prefix is what the list says, and the list is all PyBox's own
(cd "$tmp/prefix" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) >"$tmp/found"
{ grep -v '/$' "$tmp/prefix/share/pybox/installed-files"; echo share/pybox/installed-files; } | LC_ALL=C sort >"$tmp/listed"
cmp -s "$tmp/found" "$tmp/listed" || fail "the files installed are not the files listed: $(diff "$tmp/found" "$tmp/listed")"
for want in bin/pybox libexec/pybox/pybox-init share/pybox/images/build-rootfs.sh share/pybox/images/stdlib/packages \
    share/pybox/images/data/packages share/man/man1/pybox.1 share/man/man1/pybox-exec.1 share/man/man1/pybox-mcp.1 \
    share/man/man5/pybox-receipt.5 share/bash-completion/completions/pybox lib/systemd/system/pybox-mcp.service; do
    grep -qx "$want" "$tmp/listed" || fail "$want is not installed"
done
grep -qx "ExecStart=$tmp/prefix/bin/pybox mcp --listen .*" "$tmp/prefix/lib/systemd/system/pybox-mcp.service" ||
    fail "the service does not run the installed pybox"

step "delete the build folder, move the prefix"
rm -rf "$tmp/build"
mv "$tmp/prefix" "$tmp/moved"
p=$tmp/moved
pybox=$p/bin/pybox

"$pybox" --version | grep -qx "pybox $(sed -n 's/^#define PYBOX_VERSION "\(.*\)"$/\1/p' "$src/pybox/version.h")" ||
    fail "pybox --version"
"$pybox" help exec | grep -q -- '--color WHEN' || fail "pybox help exec"

step "run a program in $home with the installed pybox"
out=$(echo 'print(6 * 7)' | PYBOX_HOME=$home "$pybox" exec --json) || fail "pybox exec exited $?: $out"
printf '%s\n' "$out" | grep -q '"status":"TARGET_EXIT_OBSERVED"' || fail "pybox exec: $out"
printf '%s\n' "$out" | grep -q '"text":"42\\n"' || fail "pybox exec did not say 42: $out"

step "the installed pybox has no test hook: each one set is refused, nothing run"
for hook in PYBOX_TEST_KILL_AT=run PYBOX_TEST_CGROUP_ROOT=$tmp PYBOX_TEST_RUN_DIR=$tmp; do
    rc=0
    out=$(echo 'print(6 * 7)' | env "$hook" PYBOX_HOME="$home" "$pybox" exec 2>&1) || rc=$?
    [ "$rc" = 125 ] || fail "with $hook, the installed pybox exited $rc: $out"
    case $out in
    *"${hook%%=*} is set: it is a test hook"*) ;;
    *) fail "with $hook, the installed pybox says: $out" ;;
    esac
done
[ ! -e "$p/bin/pybox-test" ] || fail "the test build was installed"

step "build the stdlib image from the installed recipes into a private installation"
# the cached root filesystem its recipe names (sha256 of its package list, then the
# build script: images/image.c), copied so that nothing of the machine's is written
fp=$(cat "$p/share/pybox/images/stdlib/packages" "$p/share/pybox/images/build-rootfs.sh" | sha256sum | cut -c1-16)
[ -f "$home/cache/base-$fp.tar" ] || fail "no cached root filesystem $home/cache/base-$fp.tar (build the stdlib image first)"
mine=$tmp/home
mkdir -m 0700 "$mine" "$mine/cache"
cp "$home/cache/base-$fp.tar" "$home/cache/base-$fp.tar.packages" "$mine/cache/"
PYBOX_HOME=$mine "$pybox" image build stdlib --backend native >"$tmp/build.log" 2>&1 ||
    fail "pybox image build from the installed recipes: $(cat "$tmp/build.log")"
PYBOX_HOME=$mine "$pybox" image verify --backend native >"$tmp/verify.log" 2>&1 ||
    fail "pybox image verify: $(cat "$tmp/verify.log")"
out=$(echo 'print("native")' | PYBOX_HOME=$mine "$pybox" exec --backend native --json) ||
    fail "pybox exec in the image built from the installed recipes: $out"
printf '%s\n' "$out" | grep -q '"text":"native\\n"' || fail "pybox exec --backend native: $out"
# a pybox that has neither says where it looked
mkdir -p "$tmp/alone/bin"
cp "$pybox" "$tmp/alone/bin/"
PYBOX_HOME=$mine "$tmp/alone/bin/pybox" image build stdlib --backend native --force >"$tmp/alone.log" 2>&1 &&
    fail "a pybox without its files built an image"
grep -q "cannot find the image recipes: looked for $tmp/alone/share/pybox/images/build-rootfs.sh" "$tmp/alone.log" ||
    fail "a pybox without its files says: $(cat "$tmp/alone.log")"

step "man pages and completion from the prefix"
MANWIDTH=80 MANPATH=$p/share/man man pybox-exec 2>/dev/null | grep -q -- '--timeout seconds' || fail "man pybox-exec"
for page in man1/pybox.1 man1/pybox-mcp.1 man5/pybox-receipt.5; do
    MANWIDTH=80 man -l "$p/share/man/$page" >/dev/null 2>&1 || fail "man -l $page"
done
bash -c ". '$p/share/bash-completion/completions/pybox' && complete -p pybox" | grep -q _pybox || fail "completion"

step "install again over it: a file it no longer installs is taken away"
printf 'share/pybox/images/gone/\nshare/pybox/images/gone/packages\n' >>"$p/share/pybox/installed-files"
mkdir -p "$p/share/pybox/images/gone"
: >"$p/share/pybox/images/gone/packages"
make -s -C "$src" BUILD="$tmp/build2" all >/dev/null
make -s -C "$src" BUILD="$tmp/build2" install PREFIX="$p" >/dev/null
[ ! -e "$p/share/pybox/images/gone" ] || fail "what the older install listed was left behind"

step "uninstall: exactly what was installed"
: >"$p/bin/not-pybox"
mkdir -p "$p/share/man/man1"
: >"$p/share/man/man1/other.1"
make -s -C "$src" uninstall PREFIX="$p"
left=$(cd "$p" && find . -type f | LC_ALL=C sort | tr '\n' ' ')
[ "$left" = "./bin/not-pybox ./share/man/man1/other.1 " ] || fail "after uninstall, left: $left"
if [ -e "$p/libexec" ] || [ -e "$p/share/pybox" ] || [ -e "$p/share/bash-completion" ] || [ -e "$p/lib" ]; then
    fail "uninstall left PyBox's folders: $(cd "$p" && find . -type d | tr '\n' ' ')"
fi
if [ ! -f "$mine/install-id" ] || [ ! -f "$mine/images-native.json" ]; then
    fail "uninstall touched a state folder"
fi
make -s -C "$src" uninstall PREFIX="$p" 2>"$tmp/again.log" && fail "a second uninstall did not refuse"
grep -q "nothing of PyBox's is installed" "$tmp/again.log" || fail "a second uninstall says: $(cat "$tmp/again.log")"

step "uninstall takes away the folders install made, up to DESTDIR, and no other"
make -s -C "$src" BUILD="$tmp/build2" install DESTDIR="$tmp/stage" PREFIX=/usr/local >/dev/null
[ -x "$tmp/stage/usr/local/bin/pybox" ] || fail "make install DESTDIR=$tmp/stage"
make -s -C "$src" uninstall DESTDIR="$tmp/stage" PREFIX=/usr/local >/dev/null
[ ! -e "$tmp/stage" ] || fail "make uninstall left what make install made: $(cd "$tmp" && find stage | tr '\n' ' ')"
mkdir "$tmp/had" # a DESTDIR that was there before
make -s -C "$src" BUILD="$tmp/build2" install DESTDIR="$tmp/had" PREFIX=/opt/pybox >/dev/null
: >"$tmp/had/opt/other" # something else in a folder install made
make -s -C "$src" uninstall DESTDIR="$tmp/had" PREFIX=/opt/pybox >/dev/null
left=$(cd "$tmp/had" && find . | LC_ALL=C sort | tr '\n' ' ')
[ "$left" = ". ./opt ./opt/other " ] || fail "after uninstall from $tmp/had, left: $left"
rm -rf "$tmp/had"

step "refusals: a relative prefix, a list naming what is not PyBox's"
make -s -C "$src" BUILD="$tmp/build2" install PREFIX=relative/prefix 2>/dev/null && fail "a relative PREFIX was taken"
[ ! -e "$src/relative" ] || fail "a relative PREFIX made something"
make -s -C "$src" BUILD="$tmp/build2" install PREFIX="$tmp/dots/../prefix" 2>/dev/null && fail "a PREFIX with .. was taken"
[ ! -e "$tmp/dots" ] && [ ! -e "$tmp/prefix" ] || fail "a PREFIX with .. made something"
make -s -C "$src" BUILD="$tmp/build2" install PREFIX="$p" >/dev/null
echo 'bin/not-pybox' >>"$p/share/pybox/installed-files"
make -s -C "$src" uninstall PREFIX="$p" 2>/dev/null && fail "uninstall took a list naming what is not PyBox's"
if [ ! -f "$p/bin/not-pybox" ] || [ ! -f "$p/bin/pybox" ]; then
    fail "a refused uninstall removed something"
fi

step "passed"

#!/bin/sh
# SPDX-License-Identifier: MIT
# make deb-test: the Debian package installed with apt into a clean Debian root, made by
# mmdebstrap (variant apt, plus man-db to read the pages) from this machine's own apt
# sources, so that apt must resolve every dependency itself. In the root: apt install
# ./pybox_VERSION_ARCH.deb, then the installed pybox says its version and its help,
# finds its recipes and guest init (image verify: what it says of them, not its status,
# which is the native backend's, and that backend needs a cgroup file system the root
# does not mount), refuses a run clearly where nothing is set up, refuses a test hook (it
# has none: docs/cleanup.md), its man pages render, its completion loads, and apt purge
# takes it all away. mmdebstrap mounts /proc, /sys and /dev for the hooks, keeps services from
# starting, and unmounts and deletes the root when it ends (its null format).
#   tests/deb.sh BUILD_DIR
# the hooks are shell text for mmdebstrap, expanded there
# shellcheck disable=SC2016,SC1091
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
version=$(sed -n 's/^#define PYBOX_VERSION "\(.*\)"$/\1/p' pybox/version.h)
deb=$build/pybox_${version}_$(dpkg --print-architecture).deb
[ -f "$deb" ] || { echo "deb-test: $deb is missing (make deb)" >&2; exit 1; }
command -v mmdebstrap >/dev/null || { echo "deb-test: mmdebstrap is missing (apt-get install mmdebstrap)" >&2; exit 1; }
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$suite" ] || { echo "deb-test: cannot tell this machine's Debian release" >&2; exit 1; }

# This machine's apt sources, whatever mirror they name.
sources=$(scripts/apt-sources.sh) || exit 1
# shellcheck disable=SC2086 # one source file a word
set -- $sources

log=$build/deb-test.log
name=$(basename "$deb")
start=$(date +%s)
echo "deb-test: a clean $suite root, then apt install ./$name in it (log: $log)"
# Each check prints "deb-test: ok ..." so the log shows how far it went.
if ! mmdebstrap --variant=apt --include=man-db --aptopt='APT::Install-Recommends "true"' \
    --customize-hook='echo "deb-test: root made at $(date +%s)"' \
    --customize-hook="copy-in '$deb' /root" \
    --customize-hook="chroot \"\$1\" sh -c 'cd /root && DEBIAN_FRONTEND=noninteractive apt-get install -y ./$name'" \
    --customize-hook='echo "deb-test: installed at $(date +%s)"' \
    --customize-hook='chroot "$1" dpkg -s pybox | grep -qx "Status: install ok installed" && echo "deb-test: ok installed"' \
    --customize-hook="chroot \"\$1\" pybox --version | grep -qx 'pybox $version' && echo 'deb-test: ok pybox --version'" \
    --customize-hook='chroot "$1" pybox help exec | grep -q -- "--timeout SECONDS" && echo "deb-test: ok pybox help exec"' \
    --customize-hook='chroot "$1" test -x /usr/libexec/pybox/pybox-init && echo "deb-test: ok guest init"' \
    --customize-hook='chroot "$1" sh -c "mkdir -m 700 /root/h /root/alone /root/alone/bin && echo 0123456789abcdef0123456789abcdef >/root/h/install-id && cp /usr/bin/pybox /root/alone/bin/ && { PYBOX_HOME=/root/h /root/alone/bin/pybox image verify --backend native 2>/root/alone.err; grep -q \"cannot find the image recipes\" /root/alone.err; } && { PYBOX_HOME=/root/h pybox image verify --backend native 2>/root/verify.err; ! grep -q \"cannot find\" /root/verify.err; } || { head -c 2000 /root/alone.err /root/verify.err; exit 1; }" && echo "deb-test: ok recipes and init found (a copy of pybox elsewhere says it cannot find them)"' \
    --customize-hook='chroot "$1" sh -c "echo \"print(1)\" | PYBOX_HOME=/root/none pybox exec 2>/root/exec.err; test \$? = 125 && grep -q \"pybox image build stdlib\" /root/exec.err" && echo "deb-test: ok pybox exec refuses clearly when not set up"' \
    --customize-hook='chroot "$1" sh -c "MANWIDTH=80 man pybox-exec 2>/dev/null | grep -q \"timeout seconds\"" && echo "deb-test: ok man pybox-exec"' \
    --customize-hook='chroot "$1" sh -c "for p in man1/pybox.1 man1/pybox-mcp.1 man5/pybox-receipt.5; do MANWIDTH=80 man -l /usr/share/man/\$p.gz >/dev/null || exit 1; done" && echo "deb-test: ok man -l"' \
    --customize-hook='chroot "$1" bash -c ". /usr/share/bash-completion/completions/pybox && complete -p pybox >/dev/null" && echo "deb-test: ok completion"' \
    --customize-hook='chroot "$1" sh -c "echo \"print(1)\" | PYBOX_TEST_KILL_AT=run PYBOX_HOME=/root/none pybox exec 2>/root/hook.err; test \$? = 125 && grep -q \"PYBOX_TEST_KILL_AT is set: it is a test hook\" /root/hook.err && ! ls /usr/bin/pybox-test 2>/dev/null" && echo "deb-test: ok the packaged pybox has no test hook"' \
    --customize-hook='chroot "$1" sh -c "DEBIAN_FRONTEND=noninteractive apt-get purge -y pybox >/dev/null && test ! -e /usr/bin/pybox && test ! -e /usr/libexec/pybox && test ! -e /usr/share/pybox" && echo "deb-test: ok apt purge removes it"' \
    "$suite" /dev/null "$@" >"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "deb-test: FAIL (whole log: $log)" >&2
    exit 1
fi
end=$(date +%s)
made=$(sed -n 's/^deb-test: root made at //p' "$log")
installed=$(sed -n 's/^deb-test: installed at //p' "$log")
grep '^deb-test: ok' "$log"
n=$(grep -c '^deb-test: ok' "$log")
[ "$n" = 11 ] || { echo "deb-test: FAIL: $n of 11 checks passed (log: $log)" >&2; exit 1; }
set_up=$(awk '/deb-test: root made at/ {f=1} f && /^Setting up / {print $3 " " $4}' "$log")
echo "deb-test: passed: root made in $((made - start)) s, apt install in $((installed - made)) s," \
    "$((end - start)) s in all; apt set up $(echo "$set_up" | wc -l) packages, among them what pybox names:"
named=$(dpkg-deb -f "$deb" Depends Recommends | sed 's/^[A-Za-z]*: //; s/([^)]*)//g; s/[,|]/\n/g' | tr -d ' ')
echo "$set_up" | while read -r pkg ver; do
    if echo "$named" | grep -qx "${pkg%%:*}"; then echo "  $pkg $ver"; fi
done

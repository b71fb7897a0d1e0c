#!/bin/sh
# SPDX-License-Identifier: MIT
# The docker backend for an ordinary user in the docker group, on this host for real (run
# as root, which only sets up): a user made for the test, in the docker group, with a
# subordinate range of its own; an engine of the test's own (scripts/engine-private.sh,
# its socket the docker group's as dockerd makes it), so the host's engine and its names
# are never touched; root's installation and the user's side by side on that engine,
# each built from this machine's cached root filesystems (lent by hard links). The user
# builds the stdlib image and runs a program in its own state ($XDG_STATE_HOME/pybox);
# the receipt says docker, the program's uid from the user's range (never the user's, nor
# root's range); root's installation still runs its own image after the user's build
# (a user's import must not take the engine's name root's pin checks), and the user's
# cleanup leaves root's alone. Everything made is removed at the end.
#   tests/docker-group.sh BUILD_DIR
set -u
build=$(cd "${1:-build}" && pwd)
src=$(pwd)
state=${PYBOX_HOME:-/var/lib/pybox}
failed=0
say() { echo "docker-group: $*"; }

[ "$(id -u)" = 0 ] || { say "run it as root (it makes a user)"; exit 2; }
set -- "$state"/cache/base-*.tar
[ -f "$1" ] || { say "no root filesystem tar in $state/cache (scripts/setup.sh native)"; exit 2; }
getent group docker >/dev/null || { say "no docker group (apt-get install docker.io)"; exit 2; }

tmp=$(mktemp -d /var/tmp/pybox-docker-group-XXXXXX)
chmod 0755 "$tmp"
user=pyboxdg$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
engine=$tmp/engine
made_user=no
cleanup() {
    if [ -n "${DOCKER_HOST:-}" ]; then
        as_user "pybox image rm stdlib --backend docker" >/dev/null 2>&1
        PYBOX_HOME=$tmp/root "$build/pybox" image rm stdlib --backend docker >/dev/null 2>&1
    fi
    scripts/engine-private.sh stop "$engine" >/dev/null 2>&1
    if [ "$made_user" = yes ]; then
        userdel "$user" 2>/dev/null
        for f in /etc/subuid /etc/subgid; do sed -i "/^$user:/d" "$f"; done
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

useradd -M -d "$tmp/home" -s /bin/sh -G docker "$user" || exit 1
made_user=yes
# The subordinate range useradd gave (Debian's does); else one no other owner's overlaps
# (pybox refuses one that does), above root's boxes'.
if ! grep -q "^$user:" /etc/subuid; then
    s=$((400000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 64 * 65536))
    usermod --add-subuids "$s-$((s + 65535))" --add-subgids "$s-$((s + 65535))" "$user" || exit 1
fi
start=$(grep -m1 "^$user:" /etc/subuid | cut -d: -f2)
count=$(grep -m1 "^$user:" /etc/subuid | cut -d: -f3)
uid=$(id -u "$user")
mkdir -p "$tmp/home" "$tmp/run" "$tmp/home/.local/state/pybox/cache"
chown -R "$user:" "$tmp/home" "$tmp/run"
chmod 0700 "$tmp/home/.local/state/pybox" "$tmp/run"
mkdir -p "$tmp/root/cache" && chmod 0700 "$tmp/root" "$tmp/root/cache"
for f in "$state"/cache/base-*; do
    ln -f "$f" "$tmp/root/cache/" && ln -f "$f" "$tmp/home/.local/state/pybox/cache/" || exit 1
done
DOCKER_HOST=$(scripts/engine-private.sh start "$engine") || exit 1
export DOCKER_HOST
chmod 0755 "$engine"

# as_user COMMAND: as the user, in their groups (docker among them), with their own state.
as_user() {
    setpriv --reuid="$uid" --regid="$(id -g "$user")" --init-groups env -i HOME="$tmp/home" USER="$user" \
        XDG_RUNTIME_DIR="$tmp/run" DOCKER_HOST="$DOCKER_HOST" PATH="$build:/usr/bin:/bin" sh -c "cd '$src' && $1"
}

# check NAME EXPECTED_STATUS PATTERN OUTPUT STATUS
check() {
    if [ "$5" = "$2" ] && printf '%s\n' "$4" | grep -Eq -- "$3"; then
        say "ok $1"
    else
        failed=$((failed + 1))
        say "FAIL $1 (exit $5, wanted $2 and /$3/)"
        printf '%s\n' "$4" | tail -30
    fi
}

out=$(PYBOX_HOME=$tmp/root "$build/pybox" image build stdlib --backend docker 2>&1)
check root-image 0 "pinned" "$out" $?
out=$(as_user "pybox image build stdlib --backend docker" 2>&1)
check user-image 0 "pinned" "$out" $?
out=$(as_user "echo 'import os; print(os.getuid())' | pybox exec --backend docker --json" 2>&1)
rc=$?
check user-run 0 '"status": ?"TARGET_EXIT_OBSERVED"' "$out" $rc
box_uid=$(printf '%s\n' "$out" | sed -n 's/.*"program_uid": *\([0-9]*\).*/\1/p' | head -1)
end=$((start + count - 1))
if [ -n "$box_uid" ] && [ "$box_uid" -ge "$start" ] && [ "$box_uid" -le "$end" ] && [ "$box_uid" != "$uid" ]; then
    say "ok user-box-uid ($box_uid, from the user's range $start-$end)"
else
    failed=$((failed + 1))
    say "FAIL user-box-uid ('$box_uid', wanted one of the user's range $start-$end)"
    printf '%s\n' "$out" | grep -E 'uid|"backend' | head -20
fi
# Without a range: refused before any box, naming the fix.
cp /etc/subuid "$tmp/subuid" && sed -i "/^$user:/d" /etc/subuid
out=$(as_user "echo 'print(1)' | pybox exec --backend docker" 2>&1)
rc=$?
cp "$tmp/subuid" /etc/subuid
check user-no-range 125 "no subordinate range.*usermod --add-subuids" "$out" $rc
out=$(echo 'print(1)' | PYBOX_HOME=$tmp/root "$build/pybox" exec --backend docker 2>&1)
check root-after-user 0 "TARGET_EXIT_OBSERVED" "$out" $?
out=$(as_user "pybox cleanup --backend docker" 2>&1)
check user-cleanup 0 "." "$out" $?
out=$(echo 'print(1)' | PYBOX_HOME=$tmp/root "$build/pybox" exec --backend docker 2>&1)
check root-after-cleanup 0 "TARGET_EXIT_OBSERVED" "$out" $?
say "$failed failed"
[ "$failed" = 0 ]

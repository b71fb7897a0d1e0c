#!/bin/sh
# SPDX-License-Identifier: MIT
# Rootless native boxes on a Debian host as shipped, inside the guest of scripts/vm.sh
# (run there as root, which only sets up and breaks the host on purpose): an ordinary
# user made by useradd as Debian ships it (a home, a subordinate range), logged in
# through a session (runuser -l: systemd --user, XDG_RUNTIME_DIR), runs this build's
# pybox. The user's installation lives on the guest's second disk (/dev/vdb), which
# also holds a root filesystem tar written by images/build-rootfs.sh: the user builds
# the stdlib image from it (pybox image build stdlib --rootfs FILE.tar, no network, no
# root) once, and keeps it across runs. Then: a run, an OOM kill of a child, refused
# forks and a deadline as the user; and each refusal (no subordinate range, user
# namespaces off, no newuidmap, the cpu controller withheld from the user's systemd),
# the host put back after each. Each step's verdict is printed; exit 0 when all pass.
#   tests/vm-rootless.sh BUILD_DIR
# make vm-check runs a short part of it (tests/vm-guest.sh): PYBOX_VM_ROOTLESS_DATA names
# a folder already there (nothing is mounted) whose state/pybox/cache holds the root
# filesystem tars, the user builds the image from them without --rootfs;
# PYBOX_VM_ROOTLESS_ONLY=receipts runs the image, the run, the OOM kill, the refused
# forks, the deadline and the refusals alone; PYBOX_VM_ROOTLESS_BIN_DIR is where the user's
# pybox is found (default BUILD_DIR: the installed package's is /usr/bin);
# PYBOX_VM_ROOTLESS_LOGS is a folder where a failed suite's whole log is written.
set -u
build=$(cd "${1:-build}" && pwd)
src=$(pwd)
user=${PYBOX_VM_USER:-tester}
failed=0
data=${PYBOX_VM_ROOTLESS_DATA:-/srv/pybox-rootless}
bin=${PYBOX_VM_ROOTLESS_BIN_DIR:-$build}
only=${PYBOX_VM_ROOTLESS_ONLY:-}
# The image from the tar on the second disk, else from the tars in the user's cache.
rootfs=
[ -f "$data/base.tar" ] && rootfs="--rootfs $data/base.tar"

say() { echo "vm-rootless: $*"; }

# as_user COMMAND: in a login session of the user, from the source folder, with the
# user's installation on the second disk.
as_user() {
    runuser -l "$user" -c "export XDG_STATE_HOME=$data/state PATH=$bin:/usr/bin:/bin; cd '$src' || exit 125; $1"
}

# check NAME EXPECTED_STATUS PATTERN COMMAND: the user's command exits so and says it.
check() {
    name=$1 want=$2 pattern=$3
    out=$(as_user "$4" 2>&1)
    rc=$?
    if [ "$rc" = "$want" ] && printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
        say "ok $name"
    else
        failed=$((failed + 1))
        say "FAIL $name (exit $rc, wanted $want and /$pattern/)"
        printf '%s\n' "$out" | tail -40
    fi
}

set_up() {
    if [ -z "${PYBOX_VM_ROOTLESS_DATA:-}" ]; then
        mkdir -p "$data" && mount /dev/vdb "$data" || return 1
    fi
    id -u "$user" >/dev/null 2>&1 || useradd -m -s /bin/sh "$user" || return 1
    mkdir -p "$data/state" && chown "$user:" "$data/state" && chmod 0700 "$data/state"
    # the tar readable by the user, as one copied from a root build's cache would be
    [ -z "$rootfs" ] || chmod 0644 "$data/base.tar" "$data/base.tar.packages"
    # the user's manager stays up between the steps, as for a person who stays logged in
    loginctl enable-linger "$user"
    uid=$(id -u "$user")
    i=0
    until [ -d "/sys/fs/cgroup/user.slice/user-$uid.slice/user@$uid.service" ] || [ $i -ge 60 ]; do
        i=$((i + 1))
        sleep 1
    done
    say "host: $(uname -r), $(stat -fc %T /sys/fs/cgroup), $user: $(grep "^$user:" /etc/subuid)," \
        "its manager has: $(cat "/sys/fs/cgroup/user.slice/user-$uid.slice/user@$uid.service/cgroup.controllers")"
}

set_up || { say "FAIL set-up"; exit 1; }

# Under software emulation (qemu without KVM) the cases whose wall-clock bounds so slow a
# machine cannot meet are left out, as make vm-check leaves them out (tests/vm-guest.sh).
exclude=
[ "$(systemd-detect-virt 2>/dev/null)" = qemu ] && exclude=timing

# PYBOX_VM_ROOTLESS_SUITES: integration suites (tests/main.c) to run as the user first,
# each in an installation of its own borrowing the user's images, with the pybox that
# built them (the installed package's, as root's suites in the guest); with
# PYBOX_VM_ROOTLESS_ONLY=suites nothing else runs.
suites() {
    for suite in $PYBOX_VM_ROOTLESS_SUITES; do
        t=$(date +%s)
        log=$(as_user "CK_EXCLUDE_TAGS=$exclude PYBOX_BACKEND=native PYBOX_BIN=$bin/pybox PYBOX_TEST_BIN=$build/pybox-test \
            CK_RUN_SUITE=$suite CK_VERBOSITY=verbose $build/itest" 2>&1)
        rc=$?
        if [ "$rc" = 0 ]; then
            say "ok suite-$suite ($(($(date +%s) - t)) s): $(printf '%s\n' "$log" | grep -E '^[0-9]+%: Checks')"
        else
            failed=$((failed + 1))
            say "FAIL suite-$suite (exit $rc, $(($(date +%s) - t)) s)"
            printf '%s\n' "$log" | grep -E ':[EF]:|^[0-9]+%: Checks' | cut -c1-400 | head -40
            # the whole log (the MCP clients' reports among it), where the caller keeps logs
            [ -z "${PYBOX_VM_ROOTLESS_LOGS:-}" ] || printf '%s\n' "$log" >"$PYBOX_VM_ROOTLESS_LOGS/rootless-suite-$suite.log"
        fi
    done
}

# PYBOX_VM_ROOT_SUITES: the same suites as root, in a root installation on the second disk
# built from the same tar: what fails there too is not the rootless path's.
root_suites() {
    export PYBOX_HOME=$data/root-state
    mkdir -p "$PYBOX_HOME" && chmod 0700 "$PYBOX_HOME"
    "$build/pybox" image build stdlib --backend native --rootfs "$data/base.tar" >/dev/null 2>&1 ||
        { failed=$((failed + 1)); say "FAIL root image"; }
    for suite in $PYBOX_VM_ROOT_SUITES; do
        t=$(date +%s)
        log=$(CK_EXCLUDE_TAGS=$exclude PYBOX_BACKEND=native PYBOX_BIN=$build/pybox PYBOX_TEST_BIN=$build/pybox-test \
            CK_RUN_SUITE=$suite \
            CK_VERBOSITY=verbose "$build/itest" 2>&1)
        rc=$?
        say "as root: suite-$suite exit $rc ($(($(date +%s) - t)) s): $(printf '%s\n' "$log" | grep -E '^[0-9]+%: Checks')"
        printf '%s\n' "$log" | grep -E ':[EF]:' | cut -c1-300 | head -20
    done
    unset PYBOX_HOME
}

# PYBOX_VM_ROOTLESS_BENCH=N: N runs of print(1) as root and N as the user, interleaved;
# the medians of their wall times and the ratio (docs/rootless.md).
bench() {
    export PYBOX_HOME=$data/root-state
    mkdir -p "$PYBOX_HOME" && chmod 0700 "$PYBOX_HOME"
    "$build/pybox" image build stdlib --backend native --rootfs "$data/base.tar" >/dev/null 2>&1
    : >/tmp/bench-root
    : >/tmp/bench-user
    i=0
    while [ $i -lt "$PYBOX_VM_ROOTLESS_BENCH" ]; do
        a=$(date +%s%N)
        echo 'print(1)' | "$build/pybox" exec --backend native --timeout 20 >/dev/null 2>&1
        b=$(date +%s%N)
        echo $(((b - a) / 1000000)) >>/tmp/bench-root
        as_user "a=\$(date +%s%N); echo 'print(1)' | pybox exec --backend native --timeout 20 >/dev/null 2>&1;
            b=\$(date +%s%N); echo \$(((b - a) / 1000000))" >>/tmp/bench-user
        i=$((i + 1))
    done
    unset PYBOX_HOME
    python3 - /tmp/bench-root /tmp/bench-user <<'PY'
import statistics, sys
r = [int(x) for x in open(sys.argv[1]) if x.strip()]
u = [int(x) for x in open(sys.argv[2]) if x.strip()]
mr, mu = statistics.median(r), statistics.median(u)
print("vm-rootless: bench: %d runs each, median root %.0f ms, rootless %.0f ms, ratio %.2f (goal <= 1.2)" % (len(r), mr, mu, mu / mr))
PY
}

start=$(date +%s)
check image-build 0 "pinned|up to date" "pybox image build stdlib --backend native $rootfs"
say "the image: $(($(date +%s) - start)) s"
# The data image too, when its tar is on the disk (the MCP suite runs in it).
if [ -f "$data/data.tar" ]; then
    chmod 0644 "$data/data.tar" "$data/data.tar.packages"
    check image-build-data 0 "pinned|up to date" "pybox image build data --backend native --rootfs $data/data.tar"
elif [ -n "${PYBOX_VM_ROOTLESS_SUITES:-}" ]; then
    check image-build-data 0 "pinned|up to date" "pybox image build data --backend native"
fi
[ -n "${PYBOX_VM_ROOTLESS_SUITES:-}" ] && suites
[ -n "${PYBOX_VM_ROOT_SUITES:-}" ] && root_suites
[ -n "${PYBOX_VM_ROOTLESS_BENCH:-}" ] && bench
if [ "$only" = suites ]; then
    say "$failed failed"
    [ -n "${PYBOX_VM_ROOTLESS_DATA:-}" ] || umount "$data"
    [ "$failed" = 0 ]
    exit
fi

# A run as the user: rootless, with the box's own id and the kernel's readings.
check hello 0 "rootless: as user $user" "echo 'print(1)' | pybox exec --backend native --timeout 20"
check hello-json 0 '"program_uid": ?1[0-9]{5}' "echo 'print(1)' | pybox exec --backend native --timeout 20 --json"

# An OOM kill of a child, refused forks, a deadline: as root's boxes have them.
check oom-child 0 '"oom_kills": ?[1-9]' "printf '%s\n' 'import subprocess,sys' \
 'r=subprocess.run([sys.executable,\"-c\",\"b=bytearray(512*1024*1024)\"])' 'print(r.returncode)' |
 pybox exec --backend native --memory 128m --timeout 20 --json"
check refused-forks 0 '"pids_refused": ?[1-9]|"refused_forks": ?[1-9]' "printf '%s\n' 'import os' \
 'n=0' 'for i in range(64):' '    try:' '        pid=os.fork()' '    except OSError:' '        n+=1; continue' \
 '    if pid==0:' '        import time; time.sleep(2); os._exit(0)' 'print(n)' |
 pybox exec --backend native --pids 32 --timeout 20 --json"
check deadline 124 'deadline' "echo 'while True: pass' | pybox exec --backend native --timeout 2"

# Not in the short part (PYBOX_VM_ROOTLESS_ONLY=receipts), up to its fi.
if [ "$only" != receipts ]; then
# Links where the user's installation and leases are: never followed into another's.
check symlinked-state 125 "belongs to another user" "mkdir -p \$HOME/xs && ln -sfn /root \$HOME/xs/pybox &&
 echo 'print(1)' | XDG_STATE_HOME=\$HOME/xs pybox exec --backend native --timeout 20; rc=\$?; rm -rf \$HOME/xs; exit \$rc"
check symlinked-leases 125 "is not a folder \\(a symbolic link\\)" "mv \$XDG_RUNTIME_DIR/pybox \$XDG_RUNTIME_DIR/pybox.real;
 mkdir -p /tmp/elsewhere && ln -s /tmp/elsewhere \$XDG_RUNTIME_DIR/pybox;
 echo 'print(1)' | pybox exec --backend native --timeout 20; rc=\$?;
 rm \$XDG_RUNTIME_DIR/pybox; mv \$XDG_RUNTIME_DIR/pybox.real \$XDG_RUNTIME_DIR/pybox; rm -rf /tmp/elsewhere; exit \$rc"

# Files in and out: /box/in the user's staging, /box/out packed from inside the box's
# user namespace (the program's, mode 0700, which the user cannot read from outside).
check files 0 "^out:hello rootless$" "d=\$(mktemp -d); echo 'hello rootless' >\$d/in.txt;
 echo 'open(\"/box/out/o.txt\", \"w\").write(\"out:\" + open(\"/box/in/in.txt\").read())' |
 pybox exec --backend native --timeout 20 --input \$d/in.txt --output \$d/out >/dev/null && cat \$d/out/o.txt; rm -rf \$d"

# The user's leftovers, theirs alone: cleanup sees their installation only.
check cleanup 0 "." "pybox cleanup --backend native --dry-run; pybox cleanup --backend native"

# pybox mcp as the user, as a desktop client starts it: the official SDK client spawning
# it with the user's environment (tests/mcp/rootless-driver.mjs).
if [ -d "$src/tests/mcp/node_modules/@modelcontextprotocol/sdk" ]; then
    out=$(as_user "node tests/mcp/rootless-driver.mjs $build/pybox" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep -E '^(ok|FAIL) mcp-' | sed 's/^/vm-rootless: /'
    if [ "$rc" != 0 ]; then
        failed=$((failed + 1))
        say "FAIL mcp (exit $rc)"
        printf '%s\n' "$out" | grep -v '^ok mcp-' | tail -30
    fi
else
    failed=$((failed + 1))
    say "FAIL mcp: the MCP clients are not installed (make mcp-clients)"
fi

# Every way out to the user, tried from inside (tests/rootless/hostile.py): none may
# work, and every one must have been tried.
out=$(as_user "sleep 300 & p=\$!; echo secret >\$HOME/secret;
 { echo \"USER_PID = \$p; USER_FILE = '\$HOME/secret'; USER_UID = \$(id -u); STAGING = '$data/state/pybox/native/staging'\"; cat tests/rootless/hostile.py; } |
 pybox exec --backend native --timeout 30; kill \$p" 2>&1)
tried=$(printf '%s\n' "$out" | grep -c '^  | *blocked ')
if printf '%s\n' "$out" | grep -q 'ESCAPED' || [ "$tried" -lt 14 ]; then
    failed=$((failed + 1))
    say "FAIL hostile ($tried blocked)"
    printf '%s\n' "$out" | tail -50
else
    say "ok hostile ($tried ways out, all blocked)"
    printf '%s\n' "$out" | grep -E '^  \| *(blocked|box uid)'
fi

# The same probes with the box taken away (the user's own python3, as the user): the
# probes must see the escapes a box stops, or they prove nothing.
out=$(as_user "sleep 300 & p=\$!; echo secret >\$HOME/secret;
 { echo \"USER_PID = \$p; USER_FILE = '\$HOME/secret'; USER_UID = \$(id -u); STAGING = '$data/state/pybox/native/staging'\"; cat tests/rootless/hostile.py; } |
 python3 -; kill \$p" 2>&1)
seen=$(printf '%s\n' "$out" | grep -c '^ESCAPED ')
if printf '%s\n' "$out" | grep -q "^ESCAPED signal the user's process" &&
    printf '%s\n' "$out" | grep -q "^ESCAPED read the user's file" &&
    printf '%s\n' "$out" | grep -q "^ESCAPED run as the user" &&
    printf '%s\n' "$out" | grep -q "^ESCAPED other boxes' staging"; then
    say "ok hostile-without-box ($seen escapes seen)"
else
    failed=$((failed + 1))
    say "FAIL hostile-without-box ($seen escapes seen)"
    printf '%s\n' "$out" | tail -20
fi

fi # the short part's end

# The refusals: each thing taken away, then put back.
cp /etc/subuid /etc/subuid.saved
sed -i "/^$user:/d" /etc/subuid
check refuse-subuid 125 "/etc/subuid has no range for $user.*usermod --add-subuids" \
    "echo 'print(1)' | pybox exec --backend native"
mv /etc/subuid.saved /etc/subuid

was=$(sysctl -n user.max_user_namespaces)
sysctl -qw user.max_user_namespaces=0
check refuse-userns 125 "user.max_user_namespaces = 0.*sysctl -w" "echo 'print(1)' | pybox exec --backend native"
sysctl -qw user.max_user_namespaces="$was"

mv /usr/bin/newuidmap /usr/bin/newuidmap.away
check refuse-newuidmap 125 "/usr/bin/newuidmap is not installed.*apt-get install uidmap" \
    "echo 'print(1)' | pybox exec --backend native"
mv /usr/bin/newuidmap.away /usr/bin/newuidmap

mkdir -p /etc/systemd/system/user@.service.d
printf '[Service]\nDelegate=\nDelegate=memory pids\n' >/etc/systemd/system/user@.service.d/zz-pybox-test.conf
systemctl daemon-reload && systemctl restart "user@$(id -u "$user").service"
check refuse-cpu 125 "not delegated the cpu controller.*Delegate=cpu cpuset io memory pids" \
    "echo 'print(1)' | pybox exec --backend native"
rm /etc/systemd/system/user@.service.d/zz-pybox-test.conf
systemctl daemon-reload && systemctl restart "user@$(id -u "$user").service"
check after-refusals 0 "rootless" "echo 'print(1)' | pybox exec --backend native --timeout 20"

# The AppArmor profile the package ships, well formed for this apparmor_parser. AppArmor
# 3 (Debian 12) knows neither its abi 4.0 nor the userns rule, which only AppArmor 4 has
# (and only its hosts restrict user namespaces): there, every other line is parsed and
# those two must be as AppArmor 4 spells them. A profile broken on purpose must fail.
apparmor_check() {
    prof=$src/debian/pybox.apparmor
    tmp=$(mktemp -d)
    if [ -e /etc/apparmor.d/abi/4.0 ]; then
        cp "$prof" "$tmp/p"
    else
        grep -qx 'abi <abi/4.0>,' "$prof" && grep -qx '  userns,' "$prof" || return 1
        sed -e '/^abi <abi\/4.0>,$/d' -e '/^  userns,$/d' "$prof" >"$tmp/p"
    fi
    apparmor_parser -Q -K "$tmp/p" || return 1
    sed 's/^}$//' "$tmp/p" >"$tmp/broken"
    if apparmor_parser -Q -K "$tmp/broken" 2>/dev/null; then
        echo "a profile without its closing brace was taken"
        return 1
    fi
    rm -rf "$tmp"
}
if command -v apparmor_parser >/dev/null; then
    if apparmor_check; then
        say "ok apparmor-profile"
    else
        failed=$((failed + 1))
        say "FAIL apparmor-profile"
    fi
fi

# Nothing of the user's boxes left: no box process, no scope.
left=$(find /sys/fs/cgroup/user.slice -type d -name 'pybox-*' 2>/dev/null)
if pgrep -u "$user" -x pybox-init >/dev/null || [ -n "$left" ]; then
    failed=$((failed + 1))
    say "FAIL nothing-left: $left"
else
    say "ok nothing-left"
fi
say "$failed failed"
[ -n "${PYBOX_VM_ROOTLESS_DATA:-}" ] || umount "$data"
[ "$failed" = 0 ]

#!/bin/sh
# SPDX-License-Identifier: MIT
# make vm-check's part inside the guest (scripts/vm-check.sh runs it there through
# scripts/vm.sh, as root, from the shared source folder): PyBox installed from its
# Debian package with apt (offline: the guest has what it depends on), the images set up
# from the host's cached root filesystems, then on the native backend and on the docker
# backend (Debian's docker.io with its own default cgroup driver): the integration
# suites (the mcp suite drives the installed pybox mcp with the official SDK client) and
# the campaign's restriction and crash cases; then nothing of PyBox's may be left. Each step's output is
# kept in RESULTS/<step>.log; RESULTS/summary says each step's verdict and time.
#   tests/vm-guest.sh BUILD_DIR RESULTS_DIR
set -u
build=$1
results=$2
mkdir -p "$results"
: >"$results/summary"
failed=0
# Which backends, steps and suites (space-separated): all by default; make campaign
# runs the campaign step alone, and one part can be reproduced by hand. The rootless step
# runs once, whatever the backends.
backends=${PYBOX_VM_BACKENDS:-native docker}
steps=${PYBOX_VM_STEPS:-integration campaign rootless}

# The integration suites run on a backend: PYBOX_VM_SUITES_<BACKEND>, else every one.
suites() {
    case "$1" in
    native) echo "${PYBOX_VM_SUITES_NATIVE:-exec refuse isolation verify crash kernel files images mcp session uids chart sign native systemd}" ;;
    docker) echo "${PYBOX_VM_SUITES_DOCKER:-exec refuse isolation verify crash kernel files images mcp session uids chart sign lifecycle}" ;;
    esac
}

say() {
    echo "vm-check: $*"
    echo "$*" >>"$results/summary"
}

# step NAME COMMAND...: runs it with its output in RESULTS/NAME.log; on failure prints
# the log's end, so a failure says which test and with what.
step() {
    name=$1
    shift
    start=$(date +%s)
    echo "vm-check: $name ..."
    if "$@" >"$results/$name.log" 2>&1; then
        say "ok $name ($(($(date +%s) - start)) s)"
    else
        rc=$?
        failed=$((failed + 1))
        say "FAIL $name (exit $rc, $(($(date +%s) - start)) s; log $results/$name.log)"
        grep -E '^[^:]+:[0-9]+:[EF]:|FAIL|not ok|Error' "$results/$name.log" | head -40
        tail -25 "$results/$name.log"
    fi
}

host_facts() {
    echo "kernel: $(uname -r)"
    echo "cmdline: $(cat /proc/cmdline)"
    echo "pid 1: $(cat /proc/1/comm)"
    echo "cgroup filesystem: $(stat -fc %T /sys/fs/cgroup)"
    echo "root controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
    echo "root subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
    # A host as shipped: systemd as PID 1 and the unified hierarchy only, which Debian's
    # kernel command line did not have to ask for.
    [ "$(cat /proc/1/comm)" = systemd ] && [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] &&
        ! grep -q cgroup /proc/cmdline
}

install_package() {
    set -- "$build"/pybox_*_"$(dpkg --print-architecture)".deb
    DEBIAN_FRONTEND=noninteractive apt-get install -y "./$1" && pybox --version
}

# The images, made on the host (scripts/vm-check.sh), on the second disk: the
# installation and the engine's data root, mounted where a host keeps them.
images() {
    mkdir -p /srv/pybox-images /var/lib/pybox /var/lib/docker &&
        mount /dev/vdb /srv/pybox-images &&
        mount --bind /srv/pybox-images/pybox /var/lib/pybox &&
        mount --bind /srv/pybox-images/docker /var/lib/docker &&
        pybox key --init && pybox image list --backend native
}

engine() {
    systemctl start docker.service || return 1
    pybox image list --backend docker || return 1
    i=0
    until curl -sf --unix-socket /var/run/docker.sock http://localhost/_ping >/dev/null; do
        i=$((i + 1))
        [ $i -lt 120 ] || return 1
        sleep 1
    done
    docker info --format 'engine {{.ServerVersion}}, cgroup driver {{.CgroupDriver}}, cgroup v{{.CgroupVersion}}'
}

# One program through the installed pybox, its receipt in the log: the first thing to
# read when a suite fails.
# Under software emulation (qemu without KVM), the cases whose wall-clock bounds such a
# slow machine cannot meet are left out: those tests/itest.c tags "timing"; a run's
# deadlines grow by SLOWER (the campaign's --time-scale; a Python start takes 0.7-1.2 s
# there, 30 times this machine's), and the hello gets a deadline of 20 s.
emulated=no
slower=1
roomy=
[ "$(systemd-detect-virt 2>/dev/null)" = qemu ] && emulated=yes && slower=10 && roomy="--timeout 20"

hello() {
    # shellcheck disable=SC2086 # roomy is empty or two words
    echo 'print("hello from the guest")' | pybox exec --backend "$1" $roomy
}

# One integration suite (tests/main.c) on one backend, in an installation of its own.
integration() {
    [ "$emulated" = no ] || export CK_EXCLUDE_TAGS=timing
    PYBOX_BACKEND=$1 PYBOX_BIN=/usr/bin/pybox PYBOX_TEST_BIN="$(pwd)/$build/pybox-test" CK_RUN_SUITE=$2 \
        PYBOX_CAMPAIGN_BIN="$(pwd)/$build/pybox-campaign" \
        CK_VERBOSITY=verbose "$build/itest"
}

# The campaign's cases whose verdicts must be the same on such a host as on cgroup v1:
# the restriction checks (each both ways), crash safety, an OOM kill of a child, refused
# forks, the memory and process limits, CPU throttling. Into PYBOX_VM_CAMPAIGN_OUT (make
# campaign: the evidence, where each record says its host) or a scratch folder.
campaign() {
    backend=$1
    out=${PYBOX_VM_CAMPAIGN_OUT:-$results/campaign-$backend}
    [ -n "${PYBOX_VM_CAMPAIGN_OUT:-}" ] || rm -rf "$out"
    PYBOX_TEST_BIN="$(pwd)/$build/pybox-test" "$build/pybox-campaign" run --backend "$backend" \
        --time-scale "$slower" --pybox /usr/bin/pybox --out "$out" --limits campaign/limits.md \
        campaign/cases/restriction-*.json campaign/cases/crash-*.json campaign/cases/receipt-oom-child.json \
        campaign/cases/receipt-pids-refusals.json campaign/cases/resource-memory-oom.json \
        campaign/cases/resource-pids-16.json campaign/cases/resource-cpu-half.json &&
        "$build/pybox-campaign" check "$out" campaign/limits.md
}

# The same readings suite with a watcher whose cgroup v2 reader lies (make
# BROKEN=v2-reader, docs/cgroups.md): it must fail, and in each case that reads a v2
# counter (the OOM kill, the refused forks and peak processes, the memory peak, CPU
# throttling), or the suite could not see a wrong reading on this host.
broken_reader() {
    b=build-broken-v2-reader
    [ -x "$b/itest" ] || { echo "$b/itest is missing (make vm-check builds it)"; return 1; }
    if PYBOX_BACKEND=native PYBOX_BIN="$(pwd)/$b/pybox" PYBOX_TEST_BIN="$(pwd)/$b/pybox-test" CK_RUN_SUITE=kernel \
        CK_VERBOSITY=verbose "$b/itest"; then
        echo "the readings suite passed with a v2 reader that lies"
        return 1
    fi
    missed=0
    for case in oom_child_killed_parent_exits pids_limit_peak_and_refusals cpu_time_and_throttling \
        large_array_fits_and_peak_is_the_kernels; do
        grep -q ":F:readings:$case:" "$results/broken-v2-reader.log" || { echo "not caught: $case"; missed=1; }
    done
    return $missed
}

# The installed pybox as an ordinary user (tests/vm-rootless.sh, its short part): a login
# session's own systemd, the user's installation on the second disk with root's cached
# root filesystems lent (hard links, read-only to the user), its stdlib image built from
# them without root; a run whose receipt says rootless with the box's own id, an OOM kill
# of a child, refused forks and a deadline as root's boxes have them; each refusal (no
# subordinate range, user namespaces off, no newuidmap, cpu not delegated) for real.
rootless() {
    d=/srv/pybox-images/rootless
    rm -rf "$d" && mkdir -p "$d/state/pybox/cache" || return 1
    ln /srv/pybox-images/pybox/cache/base-* "$d/state/pybox/cache/" || return 1
    id -u tester >/dev/null 2>&1 || useradd -m -s /bin/sh tester || return 1
    chown tester: "$d/state/pybox" "$d/state/pybox/cache" && chmod 0700 "$d/state/pybox" "$d/state/pybox/cache" &&
        PYBOX_VM_USER=tester PYBOX_VM_ROOTLESS_DATA=$d PYBOX_VM_ROOTLESS_ONLY=receipts PYBOX_VM_ROOTLESS_BIN_DIR=/usr/bin PYBOX_VM_ROOTLESS_LOGS=$results \
            sh tests/vm-rootless.sh "$build"
    rc=$?
    loginctl disable-linger tester
    rm -rf "$d"
    return $rc
}

# Nothing of PyBox's left: no box process, no cgroup, no engine container of a test.
nothing_left() {
    left=0
    if pgrep -x pybox-init >/dev/null || pgrep -x pybox >/dev/null; then
        pgrep -a -x 'pybox(-init)?'
        left=1
    fi
    found=$(find /sys/fs/cgroup -type d -name 'pybox*' ! -name pybox-vm-job.service ! -name pybox.slice 2>/dev/null)
    if [ -n "$found" ]; then
        echo "cgroups left: $found"
        left=1
    fi
    if systemctl is-active -q docker.service; then
        n=$(docker ps -aq --filter label=pybox.install | wc -l)
        [ "$n" = 0 ] || { echo "$n containers left"; left=1; }
    fi
    return $left
}

step host-facts host_facts
[ "$emulated" = no ] || say "emulated without KVM: the integration cases tagged timing (tests/itest.c) are not run"
step install install_package
step images images
# The engine, for the docker backend and for the campaign on either backend (its host
# record names the engine, and a restriction case on the native backend lends a box the
# engine's socket to show the box would reach it).
case " $backends $steps " in *" docker "* | *" campaign "*) step engine engine ;; esac
for b in $backends; do
    step "hello-$b" hello "$b"
    case " $steps " in *" integration "*)
        for suite in $(suites "$b"); do
            step "integration-$b-$suite" integration "$b" "$suite"
        done
        ;;
    esac
    case " $steps " in *" campaign "*) step "campaign-$b" campaign "$b" ;; esac
    case "$b: $steps " in "native: "*" integration "* | "native: integration "*) step broken-v2-reader broken_reader ;; esac
done
case " $steps " in *" rootless "*) step rootless rootless ;; esac
step nothing-left nothing_left
say "$failed failed"
[ "$failed" = 0 ]

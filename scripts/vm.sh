#!/bin/sh
# SPDX-License-Identifier: MIT
# A Debian host as shipped, in a virtual machine: systemd as PID 1, the unified cgroup v2
# hierarchy as Debian's systemd sets it up, Debian's own kernel (nothing on its command
# line about cgroups), no network. Built offline from this machine's apt sources and
# booted with qemu: KVM when /dev/kvm is usable, software emulation (TCG) otherwise.
#
#   scripts/vm.sh disk
#       Build the guest's disk, or say it is up to date. It is cached in $PYBOX_VM_CACHE
#       (default /var/cache/pybox/vm) under the digest of what goes into it (the Debian
#       release, scripts/vm/: the package list and the guest's job runner), and rebuilt
#       when that changes; the disk of an earlier digest is removed then.
#   scripts/vm.sh run [--user NAME] [--share DIR] [--disk FILE] [--timeout SECONDS] -- COMMAND [ARG]...
#       Boot a guest on a throwaway copy of that disk, run COMMAND there and power it
#       off; exits with COMMAND's status (125 when the guest gave none, 124 when the
#       whole run passed --timeout, default 3000 s). DIR (default: the current folder) is
#       shared into the guest at the same path, which is printed, and COMMAND starts
#       there. As root by default, from a system service with no login session (the state
#       of a host right after boot: no user manager); with --user, as that ordinary user
#       (made with useradd if the guest has none, with Debian's subordinate id ranges),
#       through a login session, so systemd starts the user's own manager. COMMAND's
#       output is printed as it comes. --disk attaches FILE (a raw disk image, written
#       to by the guest) as the guest's second disk, /dev/vdb.
#   scripts/vm.sh clean
#       Remove the cached disks.
#
# Environment: PYBOX_VM_CACHE, PYBOX_VM_MEMORY (MiB, default 4096), PYBOX_VM_CPUS
# (default: this machine's), PYBOX_VM_ACCEL (kvm or tcg: default kvm when a probe shows it
# works), PYBOX_VM_CPU_MODEL (emulated: qemu's -cpu, default qemu64), PYBOX_VM_KEEP=1
# keeps the run's folder (console log, control files) and says where.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache=${PYBOX_VM_CACHE:-/var/cache/pybox/vm}
memory=${PYBOX_VM_MEMORY:-4096}
cpus=${PYBOX_VM_CPUS:-$(nproc)}

die() {
    echo "vm: $*" >&2
    exit 125
}

usage() {
    # The header above, from its first command on.
    awk 'NR > 2 && !/^#/ {exit} /^#   scripts/ {on = 1} on {sub(/^# ?/, ""); print}' "$0" >&2
    exit 2
}

suite() {
    # shellcheck disable=SC1091
    s=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$s" ] || die "cannot tell this machine's Debian release"
    echo "$s"
}

# The digest of everything the disk is made of.
digest() {
    {
        suite
        dpkg --print-architecture
        for f in "$here"/vm/*; do
            basename "$f"
            cat "$f"
        done
    } | sha256sum | cut -c1-16
}

disk_dir() {
    echo "$cache/$(digest)"
}

build_disk() {
    [ "$(id -u)" = 0 ] || die "building the guest's disk needs root (mmdebstrap, mkfs.ext4)"
    for tool in mmdebstrap mkfs.ext4 qemu-system-x86_64 qemu-img; do
        command -v "$tool" >/dev/null ||
            die "$tool is missing (apt-get install mmdebstrap e2fsprogs qemu-system-x86 qemu-utils)"
    done
    mkdir -p "$cache"
    chmod 0700 "$cache"
    dir=$(disk_dir)
    # One build at a time; a second caller waits and then finds the disk made.
    exec 9>"$cache/lock"
    flock 9
    if [ -f "$dir/ready" ]; then
        echo "vm: guest disk up to date: $dir"
        flock -u 9
        return 0
    fi
    start=$(date +%s)
    packages=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$here/vm/packages" | grep -v '^$' | paste -sd, -)
    tmp="$cache/building.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    echo "vm: building the guest's disk from Debian packages ($(suite)): $tmp"
    # the hooks are shell text for mmdebstrap, expanded there; one source file a word
    # shellcheck disable=SC2016,SC2046
    if ! mmdebstrap --variant=important --include="$packages" \
        --aptopt='APT::Install-Recommends "false"' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --customize-hook="copy-in '$here/vm/pybox-vm-job' /usr/local/sbin" \
        --customize-hook="copy-in '$here/vm/pybox-vm-job.service' /etc/systemd/system" \
        --customize-hook='chroot "$1" systemctl enable pybox-vm-job.service' \
        --customize-hook='chroot "$1" systemctl disable docker.service docker.socket containerd.service' \
        --customize-hook='echo pybox-guest >"$1/etc/hostname"' \
        --customize-hook='printf "/dev/vda / ext4 rw,errors=remount-ro 0 1\n" >"$1/etc/fstab"' \
        --customize-hook="cp \"\$1\"/boot/vmlinuz-* '$tmp/vmlinuz' && cp \"\$1\"/boot/initrd.img-* '$tmp/initrd.img'" \
        "$(suite)" "$tmp/root" $("$here/apt-sources.sh") >"$tmp/mmdebstrap.log" 2>&1; then
        tail -20 "$tmp/mmdebstrap.log" >&2
        rm -rf "$tmp/root"
        die "mmdebstrap failed (log: $tmp/mmdebstrap.log)"
    fi
    # A sparse file: the room the tests need (images unpacked, an engine's layers).
    mkfs.ext4 -q -F -L pybox-guest -d "$tmp/root" "$tmp/disk.img" 16G >/dev/null
    rm -rf "$tmp/root"
    touch "$tmp/ready"
    mv "$tmp" "$dir"
    # The disks of earlier digests are this script's own, made here: remove them.
    for old in "$cache"/*; do
        [ "$old" != "$dir" ] && [ -f "$old/ready" ] && rm -rf "$old"
    done
    echo "vm: guest disk built in $(($(date +%s) - start)) s: $dir"
    flock -u 9
}

# Whether KVM runs a guest here: /dev/kvm may exist where it cannot (a nested hypervisor
# that refuses the CPU's registers). The probe boots the guest's kernel with no root
# folder: it panics at once, and -no-reboot ends qemu; 30 s at most.
kvm_usable() {
    [ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
    log=$(mktemp)
    timeout -k 5 30 qemu-system-x86_64 -machine q35,accel=kvm -cpu host -smp 1 -m 256 -display none \
        -monitor none -serial "file:$log" -no-reboot -nic none -kernel "$1/vmlinuz" \
        -append "console=ttyS0 panic=-1" >/dev/null 2>&1 || true
    ok=1
    grep -q "Kernel panic" "$log" && ok=0
    rm -f "$log"
    return $ok
}

# Quote each argument for sh.
quote() {
    for a in "$@"; do
        printf "'%s' " "$(printf '%s' "$a" | sed "s/'/'\\\\''/g")"
    done
}

run() {
    user=""
    extra=""
    share=$(pwd)
    timeout=3000
    while [ $# -gt 0 ]; do
        case "$1" in
        --user) [ $# -ge 2 ] || usage; user=$2; shift 2 ;;
        --share) [ $# -ge 2 ] || usage; share=$2; shift 2 ;;
        --disk) [ $# -ge 2 ] || usage; extra=$2; shift 2 ;;
        --timeout) [ $# -ge 2 ] || usage; timeout=$2; shift 2 ;;
        --) shift; break ;;
        *) usage ;;
        esac
    done
    [ $# -gt 0 ] || usage
    case "$user" in
    "" | [a-z_]*) ;;
    *) die "--user $user: a user name starts with a lowercase letter or _" ;;
    esac
    case "$timeout" in
    '' | *[!0-9]*) die "--timeout $timeout: a whole number of seconds" ;;
    esac
    [ -d "$share" ] || die "--share $share: not a folder"
    [ -z "$extra" ] || [ -f "$extra" ] || die "--disk $extra: not a file"
    share=$(cd "$share" && pwd)
    build_disk
    dir=$(disk_dir)

    run_dir=$(mktemp -d "${TMPDIR:-/tmp}/pybox-vm.XXXXXX")
    qemu_pid=""
    # shellcheck disable=SC2317 # called by the trap
    cleanup() {
        # timeout(1) passes TERM on to qemu, which then stops the guest at once.
        [ -n "$qemu_pid" ] && kill "$qemu_pid" 2>/dev/null
        if [ "${PYBOX_VM_KEEP:-}" = 1 ]; then
            echo "vm: the run's folder is kept: $run_dir" >&2
        else
            rm -rf "$run_dir"
        fi
    }
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    mkdir "$run_dir/ctl"
    printf '%s\n' "$share" >"$run_dir/ctl/share-path"
    printf '%s\n' "$user" >"$run_dir/ctl/user"
    printf 'cd %s || exit 125\n%s\n' "$(quote "$share")" "$(quote "$@")" >"$run_dir/ctl/job.sh"
    : >"$run_dir/ctl/out"
    qemu-img create -q -f qcow2 -F raw -b "$dir/disk.img" "$run_dir/disk.qcow2"

    accel=${PYBOX_VM_ACCEL:-}
    if [ -z "$accel" ]; then
        accel=tcg
        kvm_usable "$dir" && accel=kvm
    fi
    case "$accel" in
    kvm) cpu=host ;;
    # Emulated, a CPU without AVX: glibc then picks its SSE2 routines, which emulation
    # runs about twice as fast as the AVX2 ones it picks on "max" (Python's start in the
    # guest: 0.7-1.2 s against 1.3-2.0 s, measured side by side here).
    tcg) cpu=${PYBOX_VM_CPU_MODEL:-qemu64} ;;
    *) die "PYBOX_VM_ACCEL=$accel: kvm or tcg" ;;
    esac
    echo "vm: booting a Debian guest ($accel, $cpus CPUs, $memory MiB); $share is shared at $share;" \
        "as ${user:-root}: $*"
    start=$(date +%s)
    timeout -k 10 "$timeout" qemu-system-x86_64 -machine q35,accel="$accel" -cpu "$cpu" -smp "$cpus" -m "$memory" \
        -display none -monitor none -serial "file:$run_dir/console.log" -no-reboot -nic none \
        -kernel "$dir/vmlinuz" -initrd "$dir/initrd.img" -append "root=/dev/vda rw console=ttyS0 quiet" \
        -drive "file=$run_dir/disk.qcow2,format=qcow2,if=virtio,cache=unsafe" \
        -virtfs "local,path=$run_dir/ctl,mount_tag=pyboxctl,security_model=none,id=pyboxctl" \
        -virtfs "local,path=$share,mount_tag=pyboxshare,security_model=passthrough,id=pyboxshare" ${extra:+-drive "file=$extra,format=raw,if=virtio,cache=unsafe"} &
    qemu_pid=$!
    tail -n +1 -f --pid="$qemu_pid" "$run_dir/ctl/out" &
    qrc=0
    wait "$qemu_pid" || qrc=$?
    qemu_pid=""
    wait 2>/dev/null || true
    took=$(($(date +%s) - start))
    # timeout(1) says 124 when the whole run was bounded by it (the guest is stopped).
    if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
        tail -20 "$run_dir/console.log" >&2 || true
        echo "vm: the guest did not finish within $timeout s: stopped" >&2
        exit 124
    fi
    if [ ! -f "$run_dir/ctl/rc" ]; then
        tail -30 "$run_dir/console.log" >&2 || true
        die "the guest ended after $took s without the command's exit status (its console is above)"
    fi
    rc=$(cat "$run_dir/ctl/rc")
    echo "vm: the command exited $rc; the guest ran $took s"
    exit "$rc"
}

[ $# -gt 0 ] || usage
cmd=$1
shift
case "$cmd" in
disk) build_disk ;;
run) run "$@" ;;
clean)
    rm -rf "$cache"
    echo "vm: removed $cache"
    ;;
*) usage ;;
esac

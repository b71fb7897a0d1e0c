#!/bin/sh
# SPDX-License-Identifier: MIT
# A Docker engine of the caller's own, beside any other: its data root, exec root,
# socket, pid file, configuration and log all in one folder the caller names; no bridge
# network, no iptables rules (no PyBox box has a network).
#   scripts/engine-private.sh start DIR   starts dockerd, waits for /_ping (60 s at most)
#                                         and prints the engine's DOCKER_HOST
#   scripts/engine-private.sh stop DIR    SIGTERM to that dockerd (it stops its own
#                                         containerd), SIGKILL after 60 s; then waits for
#                                         every process naming DIR to end
set -eu
[ $# = 2 ] || { echo "usage: engine-private.sh start|stop DIR" >&2; exit 2; }
cmd=$1
dir=$2
case "$dir" in /*) ;; *) dir=$(pwd)/$dir ;; esac
sock=$dir/docker.sock
pidf=$dir/dockerd.pid

# The processes of this engine: any whose command line names DIR.
procs() {
    for p in /proc/[0-9]*; do
        # (a process may end between the listing and the read: the shell's own word
        # of it silenced too)
        { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$dir/" && echo "${p#/proc/}"
    done
    return 0
}

gone_within() {
    n=$1
    shift
    while [ "$n" -gt 0 ]; do
        left=""
        for p in "$@"; do
            [ -d "/proc/$p" ] && [ "$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)" != Z ] && left="$left $p"
        done
        [ -z "$left" ] && return 0
        sleep 1
        n=$((n - 1))
    done
    return 1
}

case "$cmd" in
start)
    command -v dockerd >/dev/null || { echo "engine-private: dockerd is not installed (apt-get install docker.io)" >&2; exit 1; }
    mkdir -p "$dir/data" "$dir/exec"
    printf '{}\n' >"$dir/daemon.json"
    setsid dockerd --config-file "$dir/daemon.json" --data-root "$dir/data" --exec-root "$dir/exec" \
        --pidfile "$pidf" -H "unix://$sock" --bridge none --iptables=false --ip-masq=false \
        >"$dir/dockerd.log" 2>&1 </dev/null &
    i=0
    until [ -S "$sock" ] && curl -sf --max-time 2 --unix-socket "$sock" http://localhost/_ping >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -gt 300 ]; then
            tail -20 "$dir/dockerd.log" >&2
            echo "engine-private: dockerd did not answer within 60 s (log: $dir/dockerd.log)" >&2
            exit 1
        fi
        sleep 0.2
    done
    echo "unix://$sock"
    ;;
stop)
    if [ -f "$pidf" ]; then
        p=$(cat "$pidf")
        if [ "$(cat "/proc/$p/comm" 2>/dev/null || true)" = dockerd ]; then
            kill -s TERM "$p"
            gone_within 60 "$p" || { kill -s KILL "$p" 2>/dev/null || true; gone_within 10 "$p" || true; }
        fi
    fi
    # shellcheck disable=SC2046 # one pid a word
    gone_within 20 $(procs) || {
        echo "engine-private: still running after the engine stopped: $(procs | tr '\n' ' ')" >&2
        exit 1
    }
    ;;
*)
    echo "usage: engine-private.sh start|stop DIR" >&2
    exit 2
    ;;
esac

#!/bin/sh
# SPDX-License-Identifier: MIT
# Make sure a container engine answers on the socket PyBox will use, starting dockerd if
# none does. Honours DOCKER_HOST=unix:///path. The engine gets no bridge network and no
# iptables rules: every PyBox box has NetworkMode none. Log: /var/log/pybox-dockerd.log.
set -eu

host=${DOCKER_HOST:-unix:///var/run/docker.sock}
case $host in
unix://*) sock=${host#unix://} ;;
*) echo "engine-start: DOCKER_HOST=$host: only unix:// sockets are supported" >&2; exit 2 ;;
esac

ping_engine() {
    [ -S "$sock" ] && curl -sf --max-time 2 --unix-socket "$sock" http://localhost/_ping >/dev/null 2>&1
}

if ping_engine; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "engine-start: no engine answers at $sock, and starting one needs root" >&2
    exit 1
fi
command -v dockerd >/dev/null || { echo "engine-start: dockerd is not installed (apt-get install docker.io)" >&2; exit 1; }

# A killed dockerd leaves its pid file behind and a new one refuses to start: clear it
# when the pid in it is not a live dockerd.
pidfile=/var/run/docker.pid
if [ -f "$pidfile" ]; then
    pid=$(cat "$pidfile" 2>/dev/null || true)
    if [ -z "$pid" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" != dockerd ]; then
        rm -f "$pidfile"
    fi
fi

log=/var/log/pybox-dockerd.log
echo "engine-start: starting dockerd on $sock (log: $log)" >&2
setsid dockerd -H "unix://$sock" --bridge none --iptables=false --ip-masq=false >>"$log" 2>&1 </dev/null &

# Wait for /_ping (bounded): a set-up step polling a daemon it just started.
i=0
while ! ping_engine; do
    i=$((i + 1))
    if [ $i -gt 300 ]; then
        echo "engine-start: dockerd did not answer within 60 s; last lines of $log:" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
    sleep 0.2
done
echo "engine-start: engine ready" >&2

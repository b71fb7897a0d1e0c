#!/bin/sh
# SPDX-License-Identifier: MIT
# pybox-mcp.service started for real in a Debian guest with systemd as PID 1 and cgroup
# v2 (scripts/vm.sh): installed as make install writes it, with a token file, started,
# driven over its unix socket (no token: 401; a session; a call in a native box under the
# service's sandbox), stopped with a call in progress (the drain: its result comes, the
# service ends with status 0, the socket is removed), its log read.
#   tests/service-vm.sh BUILD_DIR
# As root. Makes a private installation (the stdlib image, built here) in a scratch
# folder shared with the guest, and removes it at the end. Slow under software emulation
# (about 5 minutes); not part of make check. PYBOX_VM_CACHE names where the guest's disk
# is kept (scripts/vm.sh).
set -eu
build=$(realpath "$1")
here=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d /var/tmp/pybox-service-vm.XXXXXX)
trap 'rm -rf "$scratch"' EXIT INT TERM
chmod 755 "$scratch"
mkdir "$scratch/bin"
cp "$build/pybox" "$build/pybox-init" "$scratch/bin/"
sed 's|@bindir@|/usr/bin|g' "$here/systemd/pybox-mcp.service" >"$scratch/pybox-mcp.service"
PYBOX_HOME="$scratch/home" "$build/pybox" image build stdlib --backend native >"$scratch/image.log" 2>&1 ||
    { tail -20 "$scratch/image.log"; exit 1; }
tar -cf "$scratch/home.tar" -C "$scratch/home" .
cat >"$scratch/job.sh" <<'JOB'
set -u
here=$(pwd)
step() { echo "== $*"; }
fail() { echo "FAIL: $*"; journalctl -u pybox-mcp --no-pager -o cat | tail -30; exit 1; }
step "guest: $(uname -r), $(systemctl --version | head -1), $(stat -fc %T /sys/fs/cgroup)"
install -m 0755 "$here/bin/pybox" /usr/bin/pybox
install -D -m 0755 "$here/bin/pybox-init" /usr/libexec/pybox/pybox-init
mkdir -p /var/lib/pybox && tar -xf "$here/home.tar" -C /var/lib/pybox
install -m 0644 "$here/pybox-mcp.service" /etc/systemd/system/pybox-mcp.service
install -d -m 0700 /etc/pybox
tok=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
(umask 077 && printf 'agent-1 %s\n' "$tok" >/etc/pybox/mcp-tokens)
printf 'PYBOX_MCP_ARGS="--backend native --images stdlib --max-timeout 20"\n' >/etc/default/pybox-mcp
systemctl daemon-reload
out=$(systemd-analyze verify --man=no /etc/systemd/system/pybox-mcp.service 2>&1)
[ -z "$out" ] || fail "systemd-analyze verify: $out"
step "start"
systemctl start pybox-mcp || fail "start"
for _ in $(seq 1 50); do [ -S /run/pybox-mcp/mcp.sock ] && break; sleep 0.2; done
[ "$(stat -c '%a %G' /run/pybox-mcp/mcp.sock)" = "660 www-data" ] || fail "socket $(stat -c '%a %G' /run/pybox-mcp/mcp.sock)"
S=/run/pybox-mcp/mcp.sock
post() { curl -s --unix-socket $S -H Content-Type:application/json -H Accept:application/json,text/event-stream "$@" http://localhost/mcp; }
[ "$(post -o /dev/null -w '%{http_code}' -d '{}')" = 401 ] || fail "no token, not 401"
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"vm","version":"1"}}}'
sid=$(post -D - -o /dev/null -H "Authorization: Bearer $tok" -d "$init" | tr -d '\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
[ -n "$sid" ] || fail "no session"
call() { post -H "Authorization: Bearer $tok" -H "Mcp-Session-Id: $sid" -d "$1"; }
status() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["result"]; print(r["structuredContent"]["status"], repr(r["structuredContent"]["said"]["stdout"]["text"])) if "structuredContent" in r else print(r["content"][0]["text"])' "$1"; }
# Each call has room to its server's ceiling: under software emulation Python's start alone
# can pass the default deadline.
step "a call in a native box, under the service's sandbox"
call '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(6*7)","timeout_s":18}}}' >/tmp/r2.json
status /tmp/r2.json
[ "$(status /tmp/r2.json)" = "TARGET_EXIT_OBSERVED '42\\n'" ] || fail "the call"
step "systemctl stop with a call in progress: the drain lets it finish"
call '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"import time\ntime.sleep(3)\nprint(\"drained\")","timeout_s":18}}}' >/tmp/r3.json &
c=$!
# once its box runs (systemd has the transient scope PyBox asked for it, docs/cgroups.md)
for _ in $(seq 1 300); do
    [ -n "$(systemctl list-units --type=scope --state=running --no-legend 'pybox-*.scope')" ] && break
    sleep 0.1
done
[ -n "$(systemctl list-units --type=scope --state=running --no-legend 'pybox-*.scope')" ] || fail "no box's scope"
systemctl stop pybox-mcp
wait $c
[ -z "$(systemctl list-units --type=scope --all --no-legend 'pybox-*.scope')" ] || fail "a box's scope is left"
status /tmp/r3.json
[ "$(status /tmp/r3.json)" = "TARGET_EXIT_OBSERVED 'drained\\n'" ] || fail "the drained call"
[ "$(systemctl show pybox-mcp -p ExecMainStatus --value)" = 0 ] || fail "exit status"
[ ! -e $S ] || fail "the socket is left"
journalctl -u pybox-mcp --no-pager -o cat | grep ' pybox mcp: ' | tail -8
echo "service-vm: every check passed"
JOB
"$here/scripts/vm.sh" run --share "$scratch" --timeout 2400 -- sh "$scratch/job.sh"

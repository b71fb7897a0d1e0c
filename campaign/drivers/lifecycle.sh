#!/bin/sh
# SPDX-License-Identifier: MIT
# Campaign driver: a throwaway PyBox installation on a private Docker engine, set up from nothing, used, and deleted.
#
# Contract: cwd = the repository root; PYBOX_BIN = the pybox binary (pybox-init next to it,
# and pybox-campaign, or PYBOX_CAMPAIGN_BIN, which asks the engines);
# PYBOX_CAMPAIGN_TMP = an empty scratch folder. Prints one JSON object on stdout
# ({"observed": {...}, "checks": [...]}), logs on stderr. Exit 0 when it ran to the end,
# whatever the checks say; non-zero when it could not run (everything is cleaned up anyway).
#
# The main installation (the engine on DOCKER_HOST or /var/run/docker.sock, and the PyBox
# state folder pybox would use by default) is only read, before and after, and compared.
set -eu

# On the native backend there is no engine: its throwaway installation is its own driver.
if [ "${PYBOX_BACKEND:-docker}" = native ]; then
    exec python3 "$(dirname "$0")/lifecycle_native.py"
fi
# This driver's folder: its helper imports the drivers' shared Python from there.
drivers=$(cd "$(dirname "$0")" && pwd)

log() { printf 'lifecycle: %s\n' "$*" >&2; }
die() {
    log "$*"
    exit 2
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# ---- preconditions (nothing is started before these pass) ----

[ -n "${PYBOX_BIN:-}" ] || die "PYBOX_BIN is not set"
[ -n "${PYBOX_CAMPAIGN_TMP:-}" ] || die "PYBOX_CAMPAIGN_TMP is not set"
case $PYBOX_BIN in /*) ;; *) die "PYBOX_BIN must be an absolute path" ;; esac
case $PYBOX_CAMPAIGN_TMP in /*) ;; *) die "PYBOX_CAMPAIGN_TMP must be an absolute path" ;; esac
[ -x "$PYBOX_BIN" ] || die "PYBOX_BIN=$PYBOX_BIN is not executable"
[ -f "$(dirname "$PYBOX_BIN")/pybox-init" ] || die "no pybox-init next to $PYBOX_BIN"
[ -d "$PYBOX_CAMPAIGN_TMP" ] || die "PYBOX_CAMPAIGN_TMP=$PYBOX_CAMPAIGN_TMP is not a folder"
[ -f images/build-rootfs.sh ] || die "run from the repository root (images/build-rootfs.sh not found)"
[ "$(id -u)" = 0 ] || die "a private engine needs root"
for c in dockerd containerd python3 setsid mmdebstrap umount awk; do
    command -v "$c" >/dev/null 2>&1 || die "$c is not installed"
done

tmp=${PYBOX_CAMPAIGN_TMP%/}
case $tmp in '' | /) die "PYBOX_CAMPAIGN_TMP must not be the root folder" ;; esac
t_begin=$(now)

# The main installation, as pybox would find it without this driver's overrides (pybox/state.c).
case ${DOCKER_HOST:-} in
unix://*) main_sock=${DOCKER_HOST#unix://} ;;
'') main_sock=/var/run/docker.sock ;;
*) die "DOCKER_HOST=$DOCKER_HOST: only unix:// sockets are supported" ;;
esac
# The campaign runs as an installation of its own (its PYBOX_HOME) and names the main
# one in PYBOX_MAIN_HOME; run by hand, PYBOX_HOME is the main one.
if [ -n "${PYBOX_MAIN_HOME:-}" ]; then
    main_home=$PYBOX_MAIN_HOME
elif [ -n "${PYBOX_HOME:-}" ]; then
    main_home=$PYBOX_HOME
elif [ "$(id -u)" = 0 ]; then
    main_home=/var/lib/pybox
elif [ -n "${XDG_STATE_HOME:-}" ]; then
    main_home=$XDG_STATE_HOME/pybox
else
    main_home=$HOME/.local/state/pybox
fi
case $main_home in "$tmp"/* | /tmp/pybox-campaign-*) die "the main installation's folder ($main_home) is a campaign's own" ;; esac

# ---- the throwaway installation's places ----

res=$tmp/results             # this driver's notes (kept until the caller deletes the scratch)
data=$tmp/engine-data        # the private engine's data root
pidf=$tmp/engine.pid
dcfg=$tmp/engine-config.json # an empty config, so no host daemon.json is read
dlog=$tmp/engine.log
home=$tmp/pybox-home         # PYBOX_HOME of the throwaway installation
probe=$tmp/probe-home        # an installation of no images, to ask engines through (holder):
                             # kept to the end (the main engine is read after the teardown)
campaign_bin=${PYBOX_CAMPAIGN_BIN:-$(dirname "$PYBOX_BIN")/pybox-campaign}
[ -x "$campaign_bin" ] || die "no pybox-campaign at $campaign_bin (PYBOX_CAMPAIGN_BIN)"
btmp=$tmp/build-tmp          # TMPDIR of the image builds (mmdebstrap's work folders)
# The engine socket and the exec root (which holds containerd's sockets) need short paths:
# a Unix socket path has at most 107 bytes.
short=""
if [ ${#tmp} -gt 48 ]; then
    short=$(mktemp -d /tmp/pybox-lc.XXXXXX)
    base=$short
else
    base=$tmp
fi
xroot=$base/exec
sock=$base/docker.sock
mkdir -p "$res"
mkdir -m 0700 "$probe"
printf '%s\n' "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >"$probe/install-id"
H=$res/helper.py
dpid=""
child=""
torn_down=0

cat >"$H" <<'EOF'
import json, os, sys

import hostprocs  # beside this driver (PYTHONPATH)

res = os.path.dirname(os.path.abspath(__file__))
CHECKS = ["private engine started", "stdlib image built from nothing", "data image built from nothing",
          "stdlib run", "data run", "main installation untouched", "private engine and its data deleted"]


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def add_check(name, ok, detail):
    with open(os.path.join(res, "checks.jsonl"), "a") as f:
        f.write(json.dumps({"name": name, "ok": bool(ok), "detail": detail}) + "\n")


def add_obs(key, value):
    with open(os.path.join(res, "observed.jsonl"), "a") as f:
        f.write(json.dumps({"k": key, "v": value}) + "\n")


def cmd_check(name, ok, detail):
    add_check(name, ok == "true", detail)


def cmd_obs(key, value):
    add_obs(key, json.loads(value))


def cmd_obs_str(key, value):
    add_obs(key, value)


def cmd_field(path, *keys):
    v = load(path)
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    print("" if v is None else v)


def cmd_has_in(path, value, *keys):
    v = load(path)
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    sys.exit(0 if isinstance(v, list) and value in v else 1)


def cmd_count_in(path, *keys):
    v = load(path)
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    print(len(v) if isinstance(v, list) else -1)


def cmd_snapshot(holder, home, out):
    """The main installation: its engine's containers and images (pybox-campaign inspect
    --holder), and every entry of the PyBox state folder with its kind, size and mtime."""
    snap = {"engine": None, "home": None}
    h = (load(holder) or {}).get("holder")
    if isinstance(h, dict):
        snap["engine"] = {"containers": sorted(h["containers"]), "images": sorted(h["images"])}
    if os.path.isdir(home):
        entries = {}
        for d, dirs, files in os.walk(home):
            for n in [""] + dirs + files:
                p = os.path.join(d, n) if n else d
                if n == "" and d != home:
                    continue
                st = os.lstat(p)
                kind = "d" if os.path.isdir(p) and not os.path.islink(p) else "l" if os.path.islink(p) else "f"
                entries[os.path.relpath(p, home)] = [kind, st.st_size if kind != "d" else 0, st.st_mtime_ns]
        snap["home"] = entries
    with open(out, "w") as f:
        json.dump(snap, f)


def cmd_compare(before, after, sock, home):
    b, a = load(before), load(after)
    obs = {"socket": sock, "home": home}
    problems = []
    for when, s in (("before", b), ("after", a)):
        e = s["engine"]
        obs["containers_" + when] = len(e["containers"]) if e else None
        obs["images_" + when] = len(e["images"]) if e else None
        obs["home_entries_" + when] = len(s["home"]) if s["home"] is not None else None
    if b["engine"] is None or a["engine"] is None:
        problems.append("main engine did not answer " + ("before" if b["engine"] is None else "after"))
    else:
        for k in ("containers", "images"):
            gone = sorted(set(b["engine"][k]) - set(a["engine"][k]))
            new = sorted(set(a["engine"][k]) - set(b["engine"][k]))
            if gone or new:
                problems.append("%s: %d gone, %d new (%s)" % (k, len(gone), len(new),
                                                               ", ".join(x[:19] for x in (gone + new)[:3])))
    hb, ha = b["home"], a["home"]
    if hb is None and ha is None:
        pass
    elif hb is None or ha is None:
        problems.append("state folder %s" % ("appeared" if hb is None else "disappeared"))
    else:
        changed = sorted(k for k in set(hb) | set(ha) if hb.get(k) != ha.get(k))
        if changed:
            problems.append("state folder: %d entries differ (%s)" % (len(changed), ", ".join(changed[:5])))
    obs["differences"] = problems
    add_obs("main", obs)
    if problems:
        add_check("main installation untouched", False, "; ".join(problems))
    else:
        add_check("main installation untouched", True,
                  "engine: %s containers, %s images, same IDs before and after; state folder: %s"
                  % (obs["containers_before"], obs["images_before"],
                     "absent both times" if hb is None else "%d entries, same sizes and mtimes" % len(hb)))


def cmd_receipt(name, path, expected, pinned, rc):
    r = load(path)
    key = name.split()[0] + "_run"
    if not isinstance(r, dict):
        add_obs(key, {"pybox_exit": int(rc), "receipt": None})
        add_check(name, False, "pybox exited %s without a JSON receipt" % rc)
        return
    box = (r.get("seen") or {}).get("box") or {}
    out = ((r.get("said") or {}).get("stdout") or {}).get("text")
    img = ((r.get("asked") or {}).get("image") or {}).get("id")
    o = {"status": r.get("status"), "exit_code": r.get("exit_code"), "stdout": out,
         "confirmed_gone": box.get("confirmed_gone"), "image_id": img, "engine": (r.get("seen") or {}).get("backend_description"),
         "pybox_exit": int(rc)}
    if "error" in r:
        o["error"] = r["error"]
    add_obs(key, o)
    bad = []
    if r.get("status") != "TARGET_EXIT_OBSERVED":
        bad.append("status %s" % r.get("status"))
    if r.get("exit_code") != 0:
        bad.append("exit code %s" % r.get("exit_code"))
    if out != expected:
        bad.append("stdout %r, expected %r" % (out, expected))
    if box.get("confirmed_gone") is not True:
        bad.append("box not confirmed gone")
    if not pinned or img != pinned:
        bad.append("image %s is not the throwaway pin %s" % (img, pinned or "(none)"))
    detail = "; ".join(bad) if bad else "%s, exit 0, stdout %r, box confirmed gone, image %s (the throwaway pin)" % (
        r.get("status"), out, (img or "")[:19])
    add_check(name, not bad, detail)


def decode(s):
    return s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def under(p, dirs):
    return any(p == d or p.startswith(d.rstrip("/") + "/") for d in dirs)


def cmd_mounts(*dirs):
    """Mount points under any of dirs, deepest first."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = decode(line.split()[4])
            if under(mp, dirs):
                found.append(mp)
    for mp in sorted(set(found), key=lambda p: (-p.count("/"), p)):
        print(mp)


def cmd_procs(*dirs):
    """Processes whose command line names one of dirs: "pid comm" per line."""
    for pid, comm in hostprocs.naming(dirs):
        print(pid, comm)


def cmd_final():
    observed = {}
    try:
        with open(os.path.join(res, "observed.jsonl")) as f:
            for line in f:
                x = json.loads(line)
                observed[x["k"]] = x["v"]
    except OSError:
        pass
    got = {}
    try:
        with open(os.path.join(res, "checks.jsonl")) as f:
            for line in f:
                x = json.loads(line)
                got[x["name"]] = x
    except OSError:
        pass
    checks = [got.get(n, {"name": n, "ok": False, "detail": "not reached"}) for n in CHECKS]
    checks += [x for n, x in got.items() if n not in CHECKS]
    print(json.dumps({"observed": observed, "checks": checks}, indent=2))


globals()["cmd_" + sys.argv[1].replace("-", "_")](*sys.argv[2:])
EOF

hp() { PYTHONPATH=$drivers python3 "$H" "$@"; }
check() { hp check "$@"; }
obs() { hp obs "$@"; }

# What holds the boxes behind an engine's socket, as a whole (pybox-campaign inspect
# --holder, docs/campaign.md: version, storage driver, data root, every container and
# image): SOCKET OUTFILE. Fails when the engine does not answer. It is asked through an
# installation of no images of this driver's own (the probe), on either engine.
holder() {
    rm -f "$2"
    DOCKER_HOST="unix://$1" "$campaign_bin" inspect --home "$probe" --backend docker --holder --json >"$2.part" \
        2>>"$res/inspect.log" && mv "$2.part" "$2"
}
ping_private() { [ -S "$sock" ] && holder "$sock" "$res/ping.json"; }

# A process is gone when /proc has no entry for it or it is a zombie (dockerd is our child
# until it is reaped).
alive() {
    [ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
    s=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || return 1
    [ -n "$s" ] && [ "$s" != Z ]
}

# Wait (bounded, SECONDS) until none of the given pids is alive.
wait_gone() {
    limit=$(($(date +%s) + $1))
    shift
    while :; do
        left=""
        for wg in "$@"; do alive "$wg" && left="$left $wg"; done
        [ -z "$left" ] && return 0
        [ "$(date +%s)" -ge "$limit" ] && return 1
        sleep 0.2
    done
}

engine_procs() { hp procs "$data" "$xroot" "$sock" "$home" "$btmp"; }
our_mounts() { hp mounts "$tmp" ${short:+"$short"}; }

# Run a long step in its own process group, so a signal to this driver can end it (and what
# it started, e.g. mmdebstrap) at once: IN OUT ERR CMD...
run_child() {
    rc_in=$1 rc_out=$2 rc_err=$3
    shift 3
    setsid -w "$@" <"$rc_in" >"$rc_out" 2>"$rc_err" &
    child=$!
    rc=0
    wait "$child" || rc=$?
    child=""
    return "$rc"
}

# The private engine's main pid: the pid file's when it names a live dockerd, else the one
# this driver started.
engine_pid() {
    p=$(cat "$pidf" 2>/dev/null || true)
    if [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null || true)" = dockerd ]; then
        echo "$p"
    else
        echo "$dpid"
    fi
}

# Everything the throwaway installation made goes. Idempotent; never stops on an error.
teardown() {
    [ "$torn_down" = 1 ] && return 0
    torn_down=1
    set +e
    if [ -n "$child" ]; then
        log "teardown: ending the running step (process group $child)"
        kill -s TERM -- "-$child" 2>/dev/null
        wait_gone 20 "$child" || kill -s KILL -- "-$child" 2>/dev/null
        wait "$child" 2>/dev/null
        child=""
    fi
    # The throwaway installation's boxes and volumes in the private engine (pybox-campaign
    # inspect --remove); its images go with the engine's data root.
    td0=$(now)
    removed_c=0 left_c=0
    if ping_private && [ -f "$home/install-id" ]; then
        removed_c=$(hp count-in "$res/ping.json" holder containers)
        DOCKER_HOST="unix://$sock" "$campaign_bin" inspect --home "$home" --backend docker --remove --json \
            >"$res/td-left.json" 2>>"$res/inspect.log"
        holder "$sock" "$res/td-after.json" && left_c=$(hp count-in "$res/td-after.json" holder containers)
        removed_c=$((removed_c - left_c))
        log "teardown: removed $removed_c of the installation's boxes ($left_c containers left in the engine)"
    fi
    # The engine: SIGTERM, bounded wait; dockerd stops its containerd itself.
    td1=$(now)
    stop="not started"
    p=$(engine_pid)
    if [ -n "$p" ] && alive "$p"; then
        log "teardown: SIGTERM to dockerd $p"
        kill -s TERM "$p" 2>/dev/null
        if wait_gone 60 "$p"; then
            stop="exited after SIGTERM"
        else
            kill -s KILL "$p" 2>/dev/null
            wait_gone 10 "$p"
            stop="did not exit within 60 s of SIGTERM; SIGKILL"
        fi
    elif [ -n "$p" ]; then
        stop="had already exited"
    fi
    [ -n "$dpid" ] && wait "$dpid" 2>/dev/null
    # containerd and shims exit after dockerd; anything still naming our folders is ours.
    survivors=$(engine_procs)
    if [ -n "$survivors" ]; then
        spids=$(printf '%s\n' "$survivors" | cut -d' ' -f1)
        # shellcheck disable=SC2086
        wait_gone 20 $spids
        survivors=$(engine_procs)
    fi
    forced=""
    if [ -n "$survivors" ]; then
        forced=$(printf '%s\n' "$survivors" | tr '\n' ',' | sed 's/,$//')
        spids=$(printf '%s\n' "$survivors" | cut -d' ' -f1)
        log "teardown: still running after the engine stopped, ended by pid: $forced"
        for p in $spids; do kill -s TERM "$p" 2>/dev/null; done
        # shellcheck disable=SC2086
        wait_gone 10 $spids || for p in $spids; do kill -s KILL "$p" 2>/dev/null; done
    fi
    td2=$(now)
    # Mounts left under our folders, deepest first; then the folders.
    unmounted=0
    for m in $(our_mounts); do
        log "teardown: unmounting $m"
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
        unmounted=$((unmounted + 1))
    done
    mounts_left=$(our_mounts | wc -l)
    if [ "$mounts_left" -eq 0 ]; then
        rm -rf --one-file-system "$data" "$xroot" "$home" "$btmp" "$sock" "$pidf"
        [ -n "$short" ] && rm -rf --one-file-system "$short"
    else
        log "teardown: $mounts_left mounts remain; folders not removed"
    fi
    td3=$(now)
    set -e
}

on_exit() {
    st=$?
    if [ "$torn_down" != 1 ]; then
        log "stopped early (status $st): cleaning up"
        teardown >&2 || true
        # The folders the caller does not delete (the short socket folder) go in any case.
        [ -n "$short" ] && [ -z "$(our_mounts 2>/dev/null)" ] && rm -rf --one-file-system "$short"
    fi
    exit "$st"
}
trap on_exit EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- 4 (before): the main installation, read only ----

snapshot_main() {
    holder "$main_sock" "$res/main-holder.json" || log "main engine did not answer at $main_sock"
    hp snapshot "$res/main-holder.json" "$main_home" "$1"
}
snapshot_main "$res/main-before.json"
log "main installation read (engine $main_sock, state $main_home)"

# ---- 1: a private engine from nothing ----

mkdir -p "$data" "$xroot" "$home" "$btmp"
printf '{}\n' >"$dcfg"
log "starting a private dockerd (socket $sock, data root $data, log $dlog)"
t_engine=$(now)
setsid dockerd --config-file "$dcfg" --data-root "$data" --exec-root "$xroot" --pidfile "$pidf" \
    -H "unix://$sock" --bridge none --iptables=false --ip-masq=false >"$dlog" 2>&1 </dev/null &
dpid=$!
engine_ok=0
limit=$(($(date +%s) + 60))
while :; do
    if ping_private; then
        engine_ok=1
        break
    fi
    if ! alive "$dpid" && ! alive "$(engine_pid)"; then
        log "dockerd exited before answering; last lines of its log:"
        tail -n 20 "$dlog" >&2
        break
    fi
    if [ "$(date +%s)" -ge "$limit" ]; then
        log "dockerd did not answer /_ping within 60 s; last lines of its log:"
        tail -n 20 "$dlog" >&2
        break
    fi
    sleep 0.2
done
t_ready=$(now)
obs engine_start_s "$(elapsed "$t_engine" "$t_ready")"
obs short_socket_folder "$([ -n "$short" ] && echo true || echo false)"

if [ "$engine_ok" = 1 ]; then
    holder "$sock" "$res/holder-0.json" || true
    holder "$main_sock" "$res/main-holder.json" || true # read only, to compare data roots
    ver=$(hp field "$res/holder-0.json" holder version)
    hp obs-str engine_version "$ver"
    hp obs-str engine_api_version "$(hp field "$res/holder-0.json" holder api_version)"
    driver=$(hp field "$res/holder-0.json" holder storage_driver)
    hp obs-str engine_storage_driver "$driver"
    root=$(hp field "$res/holder-0.json" holder root_dir)
    main_root=$(hp field "$res/main-holder.json" holder root_dir)
    n_img0=$(hp count-in "$res/holder-0.json" holder images)
    n_con0=$(hp count-in "$res/holder-0.json" holder containers)
    obs engine_images_at_start "$n_img0"
    obs engine_containers_at_start "$n_con0"
    why=""
    [ "$root" = "$data" ] || why="$why; data root is $root, not the private one"
    [ "$root" != "$main_root" ] || why="$why; same data root as the main engine"
    [ "$n_img0" = 0 ] && [ "$n_con0" = 0 ] || why="$why; $n_img0 images and $n_con0 containers at start"
    if [ -z "$why" ]; then
        check "private engine started" true "dockerd $ver answered /_ping after $(elapsed "$t_engine" "$t_ready") s; own data root ($driver), 0 images, 0 containers"
    else
        check "private engine started" false "answered, but${why#;}"
    fi
else
    hp obs-str engine_version ""
    check "private engine started" false "no answer on its socket: $(tail -n 1 "$dlog" 2>/dev/null | cut -c1-200)"
fi

# ---- 2: PyBox from nothing on that engine ----

export PYBOX_HOME="$home"
export DOCKER_HOST="unix://$sock"
export PYBOX_IMAGES="${PYBOX_IMAGES:-$(pwd)/images}"
old_tmpdir=${TMPDIR-}
export TMPDIR="$btmp"

pinned_stdlib="" pinned_data=""
home_empty=false
[ -z "$(ls -A "$home")" ] && home_empty=true
build() { # NAME -> sets pinned_NAME, records NAME_build_s and the check
    name=$1
    blog=$res/build-$name.log
    cached_before=$(find "$home" -name 'base-*.tar' 2>/dev/null | wc -l)
    log "building the $name image (progress in $blog)"
    t0=$(now)
    brc=0
    run_child /dev/null "$blog" "$blog" "$PYBOX_BIN" image build "$name" || brc=$?
    t1=$(now)
    sed 's/^/  | /' "$blog" | tail -n 15 >&2
    obs "${name}_build_s" "$(elapsed "$t0" "$t1")"
    id=$(hp field "$home/images.json" "$name" id)
    eval "pinned_$name=\$id"
    why=""
    [ "$brc" = 0 ] || why="$why; pybox image build exited $brc"
    # Built, not taken from a cache: the home was empty when set-up began, and this image's
    # root filesystem was made by mmdebstrap now (another image's may already be cached).
    grep -q "building the root filesystem from Debian packages" "$blog" || why="$why; no root filesystem was built"
    ! grep -q "root filesystem cached" "$blog" || why="$why; the root filesystem came from the cache"
    [ "$home_empty" = true ] || why="$why; PYBOX_HOME was not empty at the start"
    if [ -z "$id" ]; then
        why="$why; nothing pinned"
    elif ! holder "$sock" "$res/holder-$name.json" || ! hp has-in "$res/holder-$name.json" "$id" holder images; then
        why="$why; the private engine has no image $id"
    fi
    hp obs "${name}_image" "{\"pinned_id\": \"$id\", \"build_exit\": $brc, \"root_filesystems_cached_before\": $cached_before}"
    if [ -z "$why" ]; then
        check "$name image built from nothing" true "root filesystem built by mmdebstrap (PYBOX_HOME empty when set-up began), imported and pinned as ${id%"${id#???????????????????}"} in $(elapsed "$t0" "$t1") s"
    else
        check "$name image built from nothing" false "${why#; }"
    fi
}

if [ "$engine_ok" = 1 ]; then
    build stdlib
    build data
    t_pinned=$(now)
    obs setup_s "$(elapsed "$t_engine" "$t_pinned")"

    # ---- 3: use it ----
    exec_run() { # NAME IMAGE EXPECTED_STDOUT PINNED_ID (program in $res/NAME.py)
        rout=$res/receipt-$1.json
        log "running the $1 program"
        rrc=0
        run_child "$res/$1.py" "$rout" "$res/exec-$1.err" "$PYBOX_BIN" exec --json --image "$2" || rrc=$?
        sed 's/^/  | /' "$res/exec-$1.err" | tail -n 5 >&2
        hp receipt "$1 run" "$rout" "$3" "$4" "$rrc"
    }
    printf '%s\n' "print('hello from a throwaway install')" >"$res/stdlib.py"
    cat >"$res/data.py" <<'PY'
import numpy as np
import pandas as pd
df = pd.DataFrame({"n": np.arange(1, 11), "square": np.arange(1, 11) ** 2})
print("sum", int(df.to_numpy().sum()))
PY
    if [ -n "$pinned_stdlib" ]; then
        exec_run stdlib stdlib "hello from a throwaway install
" "$pinned_stdlib"
    fi
    if [ -n "$pinned_data" ]; then
        exec_run data data "sum 440
" "$pinned_data"
    fi
fi

if [ -n "$old_tmpdir" ]; then export TMPDIR="$old_tmpdir"; else unset TMPDIR; fi

# ---- 5: delete it all ----

log "tearing the throwaway installation down"
t_td=$(now)
teardown
t_td_end=$(now)
obs teardown_s "$(elapsed "$t_td" "$t_td_end")"
obs teardown_parts "{\"api_remove_s\": $(elapsed "$td0" "$td1"), \"engine_stop_s\": $(elapsed "$td1" "$td2"), \"unmount_and_delete_s\": $(elapsed "$td2" "$td3"), \"boxes_removed\": $removed_c, \"containers_left\": $left_c}"
hp obs-str teardown_engine_stop "$stop"
hp obs-str teardown_forced "$forced"
obs teardown_unmounted "$unmounted"
why=""
left_procs=$(engine_procs)
left_mounts=$(our_mounts)
left_dirs=""
for d in "$data" "$xroot" "$home" "$btmp" "$sock" ${short:+"$short"}; do
    [ -e "$d" ] && left_dirs="$left_dirs ${d#"$tmp"/}"
done
[ "$engine_ok" = 0 ] || [ "$stop" = "exited after SIGTERM" ] || why="$why; dockerd $stop"
[ -z "$forced" ] || why="$why; had to end: $forced"
[ -z "$left_procs" ] || why="$why; still running: $(printf '%s\n' "$left_procs" | tr '\n' ',')"
[ -z "$left_mounts" ] || why="$why; still mounted: $(printf '%s\n' "$left_mounts" | wc -l)"
[ -z "$left_dirs" ] || why="$why; still present:$left_dirs"
! ping_private || why="$why; the socket still answers"
if [ -z "$why" ]; then
    check "private engine and its data deleted" true "dockerd $stop, containerd and shims gone, $unmounted mounts left to unmount, data root, exec root, socket and PYBOX_HOME removed, in $(elapsed "$t_td" "$t_td_end") s"
else
    check "private engine and its data deleted" false "${why#; }"
fi

# ---- 4 (after) ----

snapshot_main "$res/main-after.json"
hp compare "$res/main-before.json" "$res/main-after.json" "$main_sock" "$main_home"
obs total_s "$(elapsed "$t_begin" "$(now)")"

hp final

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Campaign driver: a throwaway PyBox installation on the native backend (no daemon), set
up from nothing, used, and deleted.

Contract (as campaign/drivers/lifecycle.sh): cwd = the repository root; PYBOX_BIN = the
pybox binary; PYBOX_CAMPAIGN_TMP = an empty scratch folder; PYBOX_MAIN_HOME = the main
installation's folder, only read. Prints one JSON object on stdout ({"observed": {...},
"checks": [...]}), logs on stderr; exit 0 when it ran to the end, whatever the checks say.

What is left of an installation on this backend: its state folder (pins, root filesystem
folders, staging), and its cgroup parents (pybox-<installation id> under each controller),
which hold a leaf per box. Deleting it is removing the folder and the parents; the kernel
refuses to remove a parent that still holds a box, so that removal is itself the check
that no box is left.
"""
import json
import os
import subprocess
import sys
import time

CHECKS = []
OBS = {}


def log(msg):
    print("lifecycle (native): " + msg, file=sys.stderr, flush=True)


def check(name, ok, detail):
    CHECKS.append({"name": name, "ok": bool(ok), "detail": detail})


def snapshot(home):
    """Every entry of a state folder with its kind, size and mtime (None: no folder)."""
    if not os.path.isdir(home):
        return None
    entries = {}
    for d, dirs, files in os.walk(home):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            kind = "l" if os.path.islink(p) else "d" if os.path.isdir(p) else "f"
            entries[os.path.relpath(p, home)] = [kind, st.st_size if kind != "d" else 0, st.st_mtime_ns]
    return entries


def inspect(env):
    """What the installation has now on the native backend, as the backend and the kernel
    say (pybox-campaign inspect, docs/campaign.md): its boxes and its cgroup parents (none
    on cgroup v2 under systemd, where each box is in a scope of its own that goes with it)."""
    binp = os.environ.get("PYBOX_CAMPAIGN_BIN") or os.path.join(os.path.dirname(os.environ["PYBOX_BIN"]),
                                                                 "pybox-campaign")
    p = subprocess.run([binp, "inspect", "--home", env["PYBOX_HOME"], "--backend", "native", "--json"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("pybox-campaign inspect: exit %d: %s" % (p.returncode, p.stderr.decode("utf-8", "replace")))
    return json.loads(p.stdout)["backends"]["native"]


def pybox(args, env, stdin=b"", log_to=None):
    t0 = time.monotonic()
    p = subprocess.run([os.environ["PYBOX_BIN"]] + args, input=stdin, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=1800)
    if log_to:
        with open(log_to, "wb") as f:
            f.write(p.stderr)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def main():
    tmp = os.environ.get("PYBOX_CAMPAIGN_TMP", "")
    binp = os.environ.get("PYBOX_BIN", "")
    if not tmp.startswith("/") or not binp.startswith("/") or not os.path.isdir(tmp) or not os.access(binp, os.X_OK):
        log("PYBOX_BIN and PYBOX_CAMPAIGN_TMP must be absolute: the pybox binary and an empty folder")
        return 2
    if os.geteuid() != 0:
        log("the native backend needs root")
        return 2
    main_home = os.environ.get("PYBOX_MAIN_HOME") or "/var/lib/pybox"
    home = os.path.join(tmp, "pybox-home")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYBOX_HOME": home, "PYBOX_BACKEND": "native",
           "TMPDIR": os.path.join(tmp, "build-tmp")}
    os.makedirs(env["TMPDIR"], exist_ok=True)
    before = snapshot(main_home)
    t_begin = time.monotonic()

    pins = {}
    for name in ("stdlib", "data"):
        log("building the %s image from nothing (an empty installation: no cache)" % name)
        blog = os.path.join(tmp, "build-%s.log" % name)
        rc, out, err, secs = pybox(["image", "build", name, "--backend", "native"], env, log_to=blog)
        text = err.decode("utf-8", "replace")
        try:
            with open(os.path.join(home, "images-native.json")) as f:
                pins[name] = (json.load(f).get(name) or {}).get("id")
        except (OSError, ValueError):
            pins[name] = None
        fresh = "root filesystem cached" not in text if name == "stdlib" else True
        OBS[name + "_build_s"] = round(secs, 1)
        OBS[name + "_image"] = {"pinned_id": pins[name], "build_exit": rc}
        check("%s image built from nothing" % name, rc == 0 and pins[name] and fresh,
              "exit %d, pinned %s in %.1f s%s" % (rc, (pins[name] or "nothing")[:19], secs,
                                                   "" if fresh else "; its root filesystem came from a cache"))
    OBS["setup_s"] = round(time.monotonic() - t_begin, 1)

    runs = [("stdlib run", "stdlib", "print(6 * 7)\n", "42\n"),
            ("data run", "data", "import numpy, pandas\nprint(int(numpy.arange(4).sum()))\n", "6\n")]
    for label, image, program, expected in runs:
        log(label)
        rc, out, err, secs = pybox(["exec", "--json", "--image", image, "--timeout", "20"], env,
                                   stdin=program.encode())
        try:
            r = json.loads(out)
        except ValueError:
            r = None
        if not isinstance(r, dict):
            check(label, False, "pybox exited %d without a JSON receipt: %s" % (rc, err.decode()[-300:]))
            continue
        box = (r.get("seen") or {}).get("box") or {}
        said = (((r.get("said") or {}).get("stdout")) or {}).get("text")
        img = ((r.get("asked") or {}).get("image") or {}).get("id")
        OBS[image + "_run"] = {"status": r.get("status"), "exit_code": r.get("exit_code"), "stdout": said,
                               "backend": (r.get("seen") or {}).get("backend"),
                               "confirmed_gone": box.get("confirmed_gone"), "image_id": img, "wall_s": round(secs, 3)}
        bad = []
        if r.get("status") != "TARGET_EXIT_OBSERVED" or r.get("exit_code") != 0:
            bad.append("status %s, exit %s" % (r.get("status"), r.get("exit_code")))
        if said != expected:
            bad.append("stdout %r, expected %r" % (said, expected))
        if box.get("confirmed_gone") is not True:
            bad.append("box not confirmed gone")
        if (r.get("seen") or {}).get("backend") != "native":
            bad.append("backend %s" % (r.get("seen") or {}).get("backend"))
        if not pins.get(image) or img != pins[image]:
            bad.append("image %s is not the throwaway pin" % img)
        check(label, not bad, "; ".join(bad) if bad else "exit 0, stdout %r, box confirmed gone, image %s (the "
              "throwaway pin), native" % (said, (img or "")[:19]))

    log("tearing the throwaway installation down")
    t_down = time.monotonic()
    install_id = ""
    try:
        with open(os.path.join(home, "install-id")) as f:
            install_id = f.read().strip()
    except OSError:
        pass
    removed = []
    for name in ("stdlib", "data"):
        rc, out, err, _ = pybox(["image", "rm", name, "--backend", "native"], env)
        removed.append("%s: exit %d %s" % (name, rc, out.decode("utf-8", "replace").strip()[:120]))
    rc_clean, out, err, _ = pybox(["cleanup", "--backend", "native"], env)
    roots = os.path.join(home, "native", "roots")
    roots_left = sorted(n for n in os.listdir(roots) if not n.startswith(".")) if os.path.isdir(roots) else []
    # The installation's cgroup parents: removing one that still holds a box fails. Asked
    # before the folder goes (the backend finds the installation by it).
    try:
        native = inspect(env)
        boxes_left = [b["run_id"] for b in native["items"] if b["kind"] == "box"]
        parents = native["kept"]
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as e:
        boxes_left, parents = ["not known: %s" % e], []
    parents_left = []
    for p in parents:
        if os.path.isdir(p):
            try:
                os.rmdir(p)
            except OSError as e:
                parents_left.append("%s (%s)" % (p, e.strerror))
    subprocess.run(["rm", "-rf", "--one-file-system", home], check=False)
    OBS["teardown_s"] = round(time.monotonic() - t_down, 1)
    OBS["teardown"] = {"images_removed": removed, "cleanup_exit": rc_clean, "root_folders_left": roots_left,
                       "cgroup_parents_left": parents_left, "boxes_left": boxes_left,
                       "state_folder_left": os.path.exists(home)}
    gone = not roots_left and not parents_left and not boxes_left and not os.path.exists(home) and install_id != ""
    check("installation and its images deleted", gone,
          "images removed (%s), no root filesystem folder, no box left in its cgroups, its folder deleted" %
          ", ".join(removed) if gone else "left: %s" % json.dumps(OBS["teardown"]))

    after = snapshot(main_home)
    if before is None and after is None:
        check("main installation untouched", True, "absent before and after")
    elif before is None or after is None:
        check("main installation untouched", False, "state folder %s" % ("appeared" if before is None else
                                                                          "disappeared"))
    else:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        check("main installation untouched", not changed,
              "state folder: %d entries, same sizes and mtimes" % len(before) if not changed else
              "state folder: %d entries differ (%s)" % (len(changed), ", ".join(changed[:5])))
    print(json.dumps({"observed": OBS, "checks": CHECKS}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Campaign driver, fault cases: the engine killed or frozen mid-run (a private engine), a full or read-only state directory, PyBox SIGKILLed at each phase; prints one JSON object.
#
# Contract (docs/campaign.md, "driver"): python3 campaign/drivers/faults.py CASE, from the
# repository root, with PYBOX_BIN (absolute; pybox-init next to it; the test build, for the
# test hook PYBOX_TEST_KILL_AT, is PYBOX_TEST_BIN or pybox-test beside it), PYBOX_CAMPAIGN_TMP
# (an empty scratch folder), PYBOX_MAIN_HOME (the main installation: its image pins and
# root filesystem cache are read, never written), PYBOX_BACKEND (docker, the default, or
# native: passed to every pybox command). CASE: engine-killed, engine-stalled (Docker
# only: on native they say so and run nothing), state-full, state-readonly,
# killed-at-phases. Stdout gets exactly one JSON object {"observed": {...}, "checks":
# [{"name", "ok", "detail"}]}; logs go to stderr. Exit 0 when it ran to the end, whatever
# the checks say; 2 when it could not run. Everything it made goes, whatever happens:
# each case works in a throwaway installation of its own, the private engine (its own
# data root, exec root, socket and log, never the shared engine) is stopped and deleted,
# and the state directory cases run in a mount namespace of their own, so their tmpfs
# goes with the process.
import contextlib
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import hostprocs
from receipts import get

REPO = os.getcwd()
PYBOX = os.environ.get("PYBOX_BIN", "")
# The test build (pybox/hooks.h): the installed pybox has no test hook.
PYBOX_TEST = os.environ.get("PYBOX_TEST_BIN") or os.path.join(os.path.dirname(PYBOX), "pybox-test")
TMP = os.environ.get("PYBOX_CAMPAIGN_TMP", "")
BACKEND = os.environ.get("PYBOX_BACKEND") or "docker"
# What an installation has (boxes, volumes, cgroups, staging folders, notes, leases), as
# its backends and the kernel say (docs/campaign.md): no layout of a backend is spelled here.
PYBOX_CAMPAIGN = os.environ.get("PYBOX_CAMPAIGN_BIN") or os.path.join(os.path.dirname(PYBOX), "pybox-campaign")


def log(*a):
    print("[faults]", *a, file=sys.stderr, flush=True)


def cannot_run(why):
    print("faults: cannot run: %s" % why, file=sys.stderr, flush=True)
    sys.exit(2)


def main_home():
    if os.environ.get("PYBOX_MAIN_HOME"):
        return os.environ["PYBOX_MAIN_HOME"]
    return "/var/lib/pybox" if os.geteuid() == 0 else os.path.expanduser("~/.local/state/pybox")


# ---- results ----

CHECKS = []
OBS = {"backend": BACKEND}


def check(name, ok, detail):
    CHECKS.append({"name": name, "ok": bool(ok), "detail": detail})
    log("%s %s: %s" % ("ok  " if ok else "FAIL", name, detail))


# Folders of this machine that the record need not carry: shown by their role.
REDACT = []


def finish():
    text = json.dumps({"observed": OBS, "checks": CHECKS})
    for path, role in sorted(REDACT, key=lambda x: -len(x[0])):
        text = text.replace(path, role)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


# ---- the engine's times ----


def rfc3339(s):
    """Seconds since the epoch of the engine's time stamps."""
    if not s or s.startswith("0001-"):
        return None
    base, _, frac = s.rstrip("Z").partition(".")
    t = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


# ---- processes ----


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def running(pid):
    """True when pid is a process that has not ended (a zombie has)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def argv0(pid):
    """The first word of a process's command line ("" once it is gone)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0", 1)[0].decode("utf-8", "replace")
    except OSError:
        return ""


def wait_until(pred, limit_s, step_s=0.05):
    """Polls pred (bounded): True once it holds, False after limit_s."""
    end = time.monotonic() + limit_s
    while True:
        if pred():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(step_s)


def pybox(args, env, stdin=b"", timeout=120, binary=None):
    """Runs pybox (or binary); (returncode, stdout text, stderr text, seconds). -N: killed
    by signal N."""
    t0 = time.monotonic()
    p = subprocess.run([binary or PYBOX] + args, input=stdin, env=env, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), time.monotonic() - t0


def parse(text):
    try:
        v = json.loads(text)
        return v if isinstance(v, dict) else None
    except ValueError:
        return None


# ---- a throwaway installation ----


class Install:
    """A PyBox installation of this driver's own: a folder with the main installation's
    Docker image pins, its root filesystem cache linked, a leftover expiry as short as
    PyBox allows, and (on the native backend) the stdlib image built from that cache."""

    def __init__(self, where, docker_host=None, pins=True):
        self.home = os.path.join(where, "home")
        os.makedirs(self.home, mode=0o700)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYBOX_HOME": self.home,
                    "PYBOX_IMAGES": os.path.join(REPO, "images")}
        if docker_host:
            self.env["DOCKER_HOST"] = docker_host
        elif os.environ.get("DOCKER_HOST"):
            self.env["DOCKER_HOST"] = os.environ["DOCKER_HOST"]
        main = main_home()
        # Docker's pins only: the images are the engine's, shared. A native image is a
        # folder of the installation that built it: build_stdlib makes this one's.
        if pins and os.path.exists(os.path.join(main, "images.json")):
            shutil.copyfile(os.path.join(main, "images.json"), os.path.join(self.home, "images.json"))
        if os.path.isdir(os.path.join(main, "cache")):
            os.symlink(os.path.join(main, "cache"), os.path.join(self.home, "cache"))
        with open(os.path.join(self.home, "config.json"), "w") as f:
            json.dump({"leftover_expiry_s": 1}, f)
        self.install_id = None

    def build_stdlib(self, backend, engine_is_ours=False):
        """The stdlib image for the backend; the seconds it took. Into the shared engine
        nothing is ever built or imported: there the main installation's pins are used
        as they are, and only the installation's id is made (as pybox makes one)."""
        if backend == "docker" and not engine_is_ours:
            with open(os.path.join(self.home, "images.json")) as f:
                if "stdlib" not in json.load(f):
                    raise RuntimeError("the main installation has no stdlib image pinned (make setup)")
            self.install_id = "%032x" % random.getrandbits(128)
            with open(os.path.join(self.home, "install-id"), "x") as f:
                f.write(self.install_id + "\n")
            return 0.0
        rc, _, err, secs = pybox(["image", "build", "stdlib", "--backend", backend], self.env, timeout=900)
        if rc != 0:
            raise RuntimeError("pybox image build stdlib --backend %s: exit %d: %s" % (backend, rc, err.strip()[-300:]))
        with open(os.path.join(self.home, "install-id")) as f:
            self.install_id = f.read().strip()
        return secs

    def notes(self):
        try:
            return sorted(os.listdir(os.path.join(self.home, "runs")))
        except OSError:
            return []

    def staging(self):
        try:
            return sorted(os.listdir(os.path.join(self.home, "native", "staging")))
        except OSError:
            return []


def campaign_inspect(env, args, timeout=120):
    """pybox-campaign inspect of the installation env names, with these arguments, as
    parsed JSON; raises when it cannot say."""
    r = subprocess.run([PYBOX_CAMPAIGN, "inspect", "--home", env["PYBOX_HOME"], "--json"] + args, env=env,
                       capture_output=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("pybox-campaign inspect %s: exit %d: %s" % (" ".join(args), r.returncode,
                                                                      r.stderr.decode(errors="replace")[-300:]))
    return json.loads(r.stdout)


def backend_args(backends):
    return [a for b in backends for a in ("--backend", b)]


def inspect(env, backends):
    """What the installation has, on these backends."""
    return campaign_inspect(env, backend_args(backends))


def inspect_events(env, backend, since, until):
    """What the backend saw happen to the installation's boxes between two times (its
    engine's events; on the native backend, the folders a box is made in that changed)."""
    return campaign_inspect(env, backend_args([backend]) + ["--since", "%.9f" % since, "--until", "%.9f" % until]
                            )["backends"][backend]["events"]


def box_record(env, box_id, wait=False):
    """A Docker box's record as the engine env names keeps it (after its end, waited for
    within a bound, when wait): status, exit_code, oom_killed, ran_s, pid, args, labels."""
    return campaign_inspect(env, backend_args(["docker"]) + ["--box", box_id] + (["--wait"] if wait else []))["box"]


def remove_all(env, backends):
    """Everything of the installation env names removed from these backends (forced: what
    still runs too), as pybox-campaign inspect --remove does; what is left, listed."""
    return campaign_inspect(env, backend_args(backends) + ["--remove"], timeout=300)


def items(j, backend, kind):
    return [x for x in j["backends"].get(backend, {}).get("items", []) if x["kind"] == kind]


def leaf_tasks(env, run_id):
    """Pids still in a native box's cgroup, where the backend places it."""
    return [p for b in items(inspect(env, ["native"]), "native", "box") if b["run_id"] == run_id for p in b["procs"]]


def native_parents(env):
    """The installation's native cgroup parents (none under systemd), as the backend keeps them."""
    try:
        return inspect(env, ["native"])["backends"]["native"]["kept"]
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as e:
        log("the native cgroup parents: %s" % e)
        return []


def remove_parents(paths):
    for p in paths:
        try:
            os.rmdir(p)
        except OSError:
            pass


def leases(env, run_ids):
    """Lease files naming these runs: [(uid, run, expires, locked)]."""
    return [(str(x["uid"]), x["run_id"], x["expires"], x["locked"]) for x in inspect(env, [])["leases"]
            if x["run_id"] in run_ids]


def leftovers(inst, run_ids, backend):
    """What the installation still has: boxes and volumes (Docker: in the engine the
    installation's environment names), cgroup leaves and staging folders (native), notes,
    and leases that still hold a uid (locked or not expired; an expired lease file is
    free: the next run may take its uid)."""
    now = time.time()
    j = inspect(inst.env, [backend])
    held = [x for x in j["leases"] if x["run_id"] in run_ids and (x["expires"] > now or x["locked"])]
    left = {"notes": inst.notes(), "leases_held": ["%s:%s" % (x["uid"], x["run_id"]) for x in held]}
    if backend == "docker":
        left["boxes"] = [b["id"][:12] for b in items(j, "docker", "box")]
        left["volumes"] = [v["id"][:12] for v in items(j, "docker", "volume")]
    else:
        boxes = items(j, "native", "box")
        left["cgroup_leaves"] = sorted(d for b in boxes for d in b["cgroup"])
        left["staging"] = sorted(b["run_id"] for b in boxes if "staging" in b["state"])
    return left


def wait_for_leases(env, run_ids, note_expires):
    """A uid's lease outlives the run's note by design: renewed just before the start, it
    covers the start call's own bound (docs/policy.md), so a box an engine starts late
    never runs without its uid. Its end is its own expiry, waited for here (at most two
    minutes), not something cleanup removes."""
    lease_end = max([x[2] for x in leases(env, run_ids)] + [0])
    if lease_end > time.time():
        OBS["leases_expire_after_note_s"] = round(lease_end - note_expires, 1)
        wait_for_wall(min(lease_end + 1, time.time() + 120))


def count(left):
    return sum(len(v) for v in left.values())


def cleanup_json(inst, backend):
    rc, out, err, _ = pybox(["cleanup", "--json", "--backend", backend], inst.env)
    rep = parse(out)
    if rc != 0 or rep is None:
        raise RuntimeError("pybox cleanup: exit %d: %s" % (rc, err.strip()[-300:]))
    return rep


def actions(rep, what):
    return [i.get("action") for i in rep.get("items", []) if i.get("what") == what]


def wait_for_wall(t):
    # Waiting for the clock itself: leftovers are due only once their expiry has passed.
    while time.time() < t:
        time.sleep(min(0.5, max(0.01, t - time.time())))


# ---- a private engine ----


class PrivateEngine:
    """A dockerd of this driver's own (docs/campaign.md; as campaign/drivers/lifecycle.sh
    starts one): its own data root, exec root, socket, pid file and log, an empty
    configuration, no bridge, no iptables. Never the shared engine."""

    def __init__(self, where):
        self.where = where
        # The socket and the exec root (containerd's sockets) need short paths.
        self.short = tempfile.mkdtemp(prefix="pybox-ft.", dir="/tmp")
        REDACT.append((self.short, "<engine>"))
        self.data = os.path.join(where, "engine-data")
        self.xroot = os.path.join(self.short, "exec")
        self.sock = os.path.join(self.short, "docker.sock")
        self.pidf = os.path.join(self.short, "engine.pid")
        self.cfg = os.path.join(where, "engine-config.json")
        self.logf = os.path.join(where, "engine.log")
        for d in (self.data, self.xroot):
            os.makedirs(d, exist_ok=True)
        with open(self.cfg, "w") as f:
            f.write("{}\n")
        self.proc = None
        self.host = "unix://" + self.sock
        # An installation of no images, to ask whether the engine answers (pybox-campaign
        # inspect opens the docker backend on it, which pings the engine).
        self.probe = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DOCKER_HOST": self.host,
                      "PYBOX_HOME": os.path.join(where, "probe-home")}
        os.makedirs(self.probe["PYBOX_HOME"], mode=0o700)
        with open(os.path.join(self.probe["PYBOX_HOME"], "install-id"), "x") as f:
            f.write("%032x\n" % random.getrandbits(128))
        self.homes = [self.probe]  # installations on this engine: their boxes go at teardown

    def start(self, limit_s=60):
        log("starting a private dockerd (socket %s, data root %s)" % (self.sock, self.data))
        # A killed dockerd's containerd dies with it, but as an orphan it waits unreaped
        # (a zombie) until its new parent reaps it, and dockerd takes any process named
        # by containerd.pid for a live containerd, waits on it and gives up. A pid file
        # naming no running process is removed, so the engine starts a containerd anew.
        cpid_file = os.path.join(self.xroot, "containerd", "containerd.pid")
        try:
            with open(cpid_file) as f:
                cpid = int(f.read().strip() or 0)
        except (OSError, ValueError):
            cpid = 0
        if cpid > 0 and not running(cpid):
            log("containerd %d of the killed engine is gone (or a zombie): its pid file removed" % cpid)
            os.unlink(cpid_file)
        lf = open(self.logf, "ab")
        self.proc = subprocess.Popen(
            ["dockerd", "--config-file", self.cfg, "--data-root", self.data, "--exec-root", self.xroot,
             "--pidfile", self.pidf, "-H", self.host, "--bridge", "none", "--iptables=false", "--ip-masq=false"],
            stdin=subprocess.DEVNULL, stdout=lf, stderr=lf, start_new_session=True)
        lf.close()
        t0 = time.monotonic()
        ok = wait_until(lambda: self.ping() or self.proc.poll() is not None, limit_s, 0.1) and self.ping()
        if not ok:
            raise RuntimeError("the private dockerd did not answer /_ping: %s" % self.log_tail())
        return time.monotonic() - t0

    def ping(self):
        if not os.path.exists(self.sock):
            return False
        try:
            inspect(self.probe, ["docker"])
            return True
        except (OSError, RuntimeError, ValueError, subprocess.SubprocessError):
            return False

    def pid(self):
        return self.proc.pid if self.proc else None

    def log_tail(self):
        try:
            with open(self.logf, "rb") as f:
                return f.read()[-600:].decode("utf-8", "replace")
        except OSError:
            return ""

    def kill(self):
        """SIGKILL to dockerd alone (its containerd and the boxes' shims live on)."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def procs(self):
        """Processes that name this engine's folders (containerd, shims, the engine)."""
        return [pid for pid, _ in hostprocs.naming((self.data, self.xroot, self.sock))]

    def teardown(self):
        """The boxes of the installations on it (pybox-campaign inspect --remove), SIGTERM,
        then whatever still names our folders, the mounts under them, the folders (its
        images go with its data root). Never raises."""
        if self.ping():
            for env in self.homes:
                try:
                    remove_all(env, ["docker"])
                except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as e:
                    log("removing the boxes of %s: %s" % (env["PYBOX_HOME"], e))
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        left = self.procs()
        if left and not wait_until(lambda: not self.procs(), 20, 0.2):
            for p in self.procs():
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            wait_until(lambda: not self.procs(), 10, 0.2)
        for m in sorted(self.mounts(), key=len, reverse=True):
            subprocess.run(["umount", m], capture_output=True)
            if m in self.mounts():
                subprocess.run(["umount", "-l", m], capture_output=True)
        if not self.mounts():
            shutil.rmtree(self.data, ignore_errors=True)
            shutil.rmtree(self.short, ignore_errors=True)

    def mounts(self):
        out = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4].replace("\\040", " ")
                if mp.startswith(self.where + "/") or mp.startswith(self.short + "/"):
                    out.append(mp)
        return out


# ---- the cases ----

LONG = b"import time\nprint('running', flush=True)\ntime.sleep(30)\n"


@contextlib.contextmanager
def private_engine(name):
    """A private engine in a scratch folder of its own, started, and an installation on it
    with the stdlib image built from nothing; the engine and its data deleted after, and
    checked gone."""
    work = os.path.join(TMP, name)
    os.makedirs(work)
    eng = PrivateEngine(work)
    try:
        OBS["engine_start_s"] = round(eng.start(), 1)
        inst = Install(work, docker_host=eng.host, pins=False)
        eng.homes.append(inst.env)
        OBS["image_import_s"] = round(inst.build_stdlib("docker", engine_is_ours=True), 1)
        yield eng, inst
    finally:
        eng.teardown()
        OBS["engine_deleted"] = not eng.procs() and not os.path.exists(eng.data)
        check("the private engine and its data deleted", OBS["engine_deleted"],
              "dockerd, containerd and shims gone; data root, exec root and socket removed" if OBS["engine_deleted"]
              else "still there: %s" % eng.procs())


def wait_program_running(env, limit_s=30):
    """The box of the installation that runs (in the engine env names), once a process in
    its cgroup is python3: its record (box_record), or None."""
    box = {}

    def seen():
        running = [b for b in items(inspect(env, ["docker"]), "docker", "box") if b["running"]]
        if not running:
            return False
        box["id"] = running[0]["id"]
        return any(os.path.basename(argv0(p)).startswith("python3") for p in running[0]["procs"])

    if not wait_until(seen, limit_s, 0.02):
        return None
    return box_record(env, box["id"])


def engine_killed():
    """A private engine SIGKILLed while a box runs: pybox exits 125 at once and says so;
    the box ends by its own timer with nobody to ask it; the engine, restarted on the
    same data root, has its record; cleanup after expiry removes it; nothing is left."""
    with private_engine("engine-killed") as (eng, inst):
        timeout_s = 2
        env = dict(inst.env)
        p = subprocess.Popen([PYBOX, "exec", "--json", "--backend", "docker", "--timeout", str(timeout_s)], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdin.write(LONG)
        p.stdin.close()
        p.stdin = None  # communicate() below has nothing more to give it
        ins = wait_program_running(inst.env)
        if ins is None:
            p.kill()
            p.wait()
            check("the program ran in a box", False, "no box showed python3 within 30 s")
            return
        box_id, init_pid = ins["id"], int(ins["pid"])
        run_id = ins["labels"].get("pybox.run", "")
        timer_ms = int([a for a in ins["args"] if a.startswith("--timer-ms=")][0].split("=")[1])
        expires = int(ins["labels"].get("pybox.expires", "0"))
        t_kill = time.monotonic()
        eng.kill()
        try:
            out, err = p.communicate(timeout=30)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            rc = None
        exit_s = time.monotonic() - t_kill
        out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        rec = parse(out)
        OBS["pybox_exit"] = rc
        OBS["pybox_exit_after_kill_s"] = round(exit_s, 2)
        OBS["box_timer_ms"] = timer_ms
        OBS["status"] = get(rec, "status")
        OBS["error"] = get(rec, "error.message")
        said = "the engine failed during the run" in err and "ends by its own timer" in err
        lines = err.strip().splitlines()
        OBS["pybox_said"] = lines
        check("pybox exits 125 at once and says why", rc == 125 and exit_s * 1000 < timer_ms and said and rec is not None,
              "exit %s %.2f s after the engine was killed (the box's timer is %.1f s); status %s; it said: \"%s\" and \"%s\""
              % (rc, exit_s, timer_ms / 1000, get(rec, "status"), (lines[0] if lines else "")[:90] + "…",
                 lines[-1] if len(lines) > 1 else ""))
        # The box: its init ends it on its own timer, with no engine to ask it.
        t_gone = time.monotonic()
        ended = wait_until(lambda: not alive(init_pid), 2 * timer_ms / 1000 + 15, 0.05)
        OBS["box_init_gone_after_kill_s"] = round(time.monotonic() - t_kill, 2)
        check("the box ends by its own timer while the engine is down", ended,
              "its init (host pid %d) %s %.1f s after the engine died" % (init_pid, "exited" if ended else "still ran",
                                                                         time.monotonic() - t_gone + exit_s))
        # The engine back, on the same data root: the box's record.
        OBS["engine_restart_s"] = round(eng.start(), 1)
        try:
            state = box_record(inst.env, box_id)
        except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as e:
            log("the box's record: %s" % e)
            state = {}
        ran = state.get("ran_s", 0)
        OBS["box_after_restart"] = {"status": state.get("status"), "exit_code": state.get("exit_code"),
                                    "ran_s": round(ran, 2), "oom": state.get("oom_killed")}
        check("the restarted engine has the box's record: ended by its timer",
              state.get("status") == "exited" and state.get("exit_code") == 137 and ran * 1000 >= timer_ms,
              "status %s, exit %s after %.2f s (timer %.1f s from the program's hello)"
              % (state.get("status"), state.get("exit_code"), ran, timer_ms / 1000))
        # Cleanup: nothing before the expiry, everything after.
        rep = cleanup_json(inst, "docker")
        kept = "kept" in actions(rep, "box") and inst.notes()
        wait_for_wall(expires + 1)
        rep2 = cleanup_json(inst, "docker")
        wait_for_leases(inst.env, {run_id}, expires)
        left = leftovers(inst, {run_id}, "docker")
        OBS["cleanup_after_expiry"] = {"removed": rep2.get("removed"), "kept": rep2.get("kept")}
        OBS["left"] = left
        OBS["leftovers"] = count(left)
        check("cleanup keeps it until its expiry, then leaves nothing",
              kept and "removed" in actions(rep2, "box") and count(left) == 0,
              "before the expiry: %s; after: %d removed (%s); left: %s"
              % ("kept, note kept" if kept else "NOT kept", rep2.get("removed", 0),
                 ", ".join(sorted(set(i.get("what", "") for i in rep2.get("items", [])))), describe(left)))


def stall_case(eng, inst, name, program, args, stop_when, stall_s=3.0):
    """One pybox exec with the private engine frozen (SIGSTOP) for stall_s: before pybox
    starts (stop_when "before") or once the program runs ("running"). Returns the receipt,
    pybox's exit code, and the monotonic times of the stop and the continue relative to
    pybox's start."""
    env = dict(inst.env)
    t_stop = t_cont = None
    if stop_when == "before":
        os.kill(eng.pid(), signal.SIGSTOP)
        t_stop = time.monotonic()
    t0 = time.monotonic()
    p = subprocess.Popen([PYBOX, "exec", "--json", "--backend", "docker"] + args, env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(program)
    p.stdin.close()
    p.stdin = None
    try:
        if stop_when == "running":
            if wait_program_running(inst.env) is None:
                raise RuntimeError("%s: the program never ran" % name)
            os.kill(eng.pid(), signal.SIGSTOP)
            t_stop = time.monotonic()
        # The stall itself: 3 s of the engine not answering anything.
        time.sleep(max(0.0, stall_s - (time.monotonic() - t_stop)))
    finally:
        # Read before the continue: the engine cannot answer anything earlier than this.
        t_cont, wall_cont = time.monotonic(), time.time()
        os.kill(eng.pid(), signal.SIGCONT)
    out, err = p.communicate(timeout=120)
    rec = parse(out.decode("utf-8", "replace"))
    return {"receipt": rec, "exit": p.returncode, "stderr": err.decode("utf-8", "replace")[-400:],
            "stop_s": t_stop - t0, "cont_s": t_cont - t0, "thawed_wall": wall_cont, "wall_s": time.monotonic() - t0}


def iso_wall(s):
    """Seconds since the epoch of a receipt's time ("2026-01-01T00:00:00.000Z")."""
    return rfc3339(s) if s else None


def engine_stalled():
    """The private engine frozen for 3 s (SIGSTOP, then SIGCONT): shorter than every bound
    PyBox puts on the engine (5 s for the first contact, 60 s for a request), so PyBox
    waits it out. The receipt tells the truth: where the time went, and which clock ended
    the program."""
    with private_engine("engine-stalled") as (eng, inst):
        runs = []

        # 1. Frozen before the run: the first contact waits, then the run goes on.
        r = stall_case(eng, inst, "before", b"print('after the stall')\n", ["--timeout", "5"], "before")
        rec, t = r["receipt"], get(r["receipt"], "seen.timings_ms", {}) or {}
        began = iso_wall(get(rec, "asked.at"))
        OBS["frozen_before"] = {"exit": r["exit"], "status": get(rec, "status"), "timings_ms": t,
                                "stall_s": round(r["cont_s"] - r["stop_s"], 2),
                                "run_began_after_thaw_s": round(began - r["thawed_wall"], 3) if began else None}
        # The run begins (asked.at, in whole milliseconds) once the first contact is
        # answered, which cannot be before the thaw: then everything PyBox waited is in
        # "before" (from its own start to the run's), none of it in the run's phases.
        check("frozen before the run: waited out, the wait counted before the run",
              r["exit"] == 0 and get(rec, "status") == "TARGET_EXIT_OBSERVED"
              and get(rec, "said.stdout.text") == "after the stall\n" and began is not None
              and began + 0.001 >= r["thawed_wall"],
              "exit %s, %s; the run began %.3f s after the thaw; timings: before %s ms (pybox started %.2f s before the "
              "thaw), create %s, start %s, run %s, total %s"
              % (r["exit"], get(rec, "status"), (began or 0) - r["thawed_wall"], t.get("before"), r["cont_s"],
                 t.get("create"), t.get("start"), t.get("run"), t.get("total")))
        runs.append(rec)

        # 2. Frozen while the program runs and ends: the box's own clock and PyBox's both
        # in the receipt, each true.
        r = stall_case(eng, inst, "running", b"import time\ntime.sleep(1)\nprint('late')\n", ["--timeout", "10"],
                       "running")
        rec, t = r["receipt"], get(r["receipt"], "seen.timings_ms", {}) or {}
        program_ms = get(rec, "seen.init_record.program_ms")
        # Stopped at or before stop_s, continued no earlier than cont_s: frozen at least
        # this long, all of it after the run began and before its end could be seen.
        frozen_ms = (r["cont_s"] - r["stop_s"]) * 1000
        OBS["frozen_while_running"] = {"exit": r["exit"], "status": get(rec, "status"), "program_ms": program_ms,
                                       "run_ms": t.get("run"), "frozen_ms": round(frozen_ms)}
        check("frozen while the program runs: it completes, both clocks true",
              r["exit"] == 0 and get(rec, "status") == "TARGET_EXIT_OBSERVED" and get(rec, "said.stdout.text") == "late\n"
              and isinstance(program_ms, (int, float)) and program_ms < frozen_ms and (t.get("run") or 0) >= frozen_ms,
              "exit %s, %s, stdout %r; the box's init timed the program at %s ms; PyBox saw its end after %s ms, "
              "the engine being frozen for %d ms of it" % (r["exit"], get(rec, "status"), get(rec, "said.stdout.text"),
                                                          program_ms, t.get("run"), frozen_ms))
        runs.append(rec)

        # 3. Frozen across the deadline: PyBox's stop cannot reach the box; the box's own
        # timer ends the program, and the receipt says so.
        r = stall_case(eng, inst, "deadline", LONG, ["--timeout", "1"], "running")
        rec = r["receipt"]
        unknown = get(rec, "unknown", []) or []
        OBS["frozen_across_the_deadline"] = {"exit": r["exit"], "status": get(rec, "status"),
                                             "clock": get(rec, "seen.clock"),
                                             "host_deadline_passed": get(rec, "seen.host_deadline_passed"),
                                             "init_record": get(rec, "seen.init_record"),
                                             "unknown": unknown, "error": get(rec, "error.message")}
        # Frozen before PyBox's deadline (1 s after the run began, so at least 1 s after
        # pybox started) and for longer than the box's timer (2 s after its hello, which
        # came before the freeze): PyBox's stop cannot reach the box before its timer fires.
        meant = r["stop_s"] < 1.0 and (r["cont_s"] - r["stop_s"]) > 2.0
        check("frozen across the deadline: the receipt names the clock that ended the program",
              meant and r["exit"] == 124 and get(rec, "status") == "BOX_TIMER_KILL_OBSERVED"
              and get(rec, "seen.init_record.box_timer_fired") is True and get(rec, "seen.clock") == "box_timer",
              "frozen %.2f s after pybox started, for %.2f s%s; exit %s, %s; the init's record: box timer fired %s, "
              "stopped on request %s; clock %s; unknown: %s"
              % (r["stop_s"], r["cont_s"] - r["stop_s"], "" if meant else " (NOT across the deadline: not the case meant)",
                 r["exit"], get(rec, "status"), get(rec, "seen.init_record.box_timer_fired"),
                 get(rec, "seen.init_record.stopped_on_request"), get(rec, "seen.clock"), " / ".join(unknown)[:300]))
        runs.append(rec)

        left = leftovers(inst, {get(x, "run_id") for x in runs if x}, "docker")
        OBS["left"] = left
        OBS["leftovers"] = count(left)
        check("nothing left", count(left) == 0, describe(left))


# ---- the state directory: full, read-only ----


def private_mounts():
    """This process (and what it starts) in a mount namespace of its own: a tmpfs mounted
    here goes with it, however it ends."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x00020000) != 0:  # CLONE_NEWNS
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)


def native_root_of(home):
    with open(os.path.join(home, "images-native.json")) as f:
        return json.load(f)["stdlib"]["id"].split(":", 1)[1]


def state_dir(kind):
    """A fresh installation whose state directory is a small tmpfs, full (not a page
    free) or mounted read-only: pybox exec is refused before any box is made, says why,
    and leaves nothing, in the engine, the cgroups, the state directory or the leases."""
    private_mounts()
    work = os.path.join(TMP, "state-" + kind)
    os.makedirs(work)
    os.makedirs(os.path.join(work, "src"))
    src = Install(os.path.join(work, "src"))
    src.build_stdlib(BACKEND)
    state = os.path.join(work, "state")
    os.makedirs(state, mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700,nosuid,nodev", "tmpfs", state], check=True)
    try:
        install_id = "%032x" % random.getrandbits(128)
        with open(os.path.join(state, "install-id"), "w") as f:
            f.write(install_id + "\n")
        for name in ("images.json", "images-native.json", "config.json"):
            if os.path.exists(os.path.join(src.home, name)):
                shutil.copyfile(os.path.join(src.home, name), os.path.join(state, name))
        os.mkdir(os.path.join(state, "runs"), 0o700)
        if BACKEND == "native":
            # The image's folder (150 MB) stays where it was built, bound read-only here.
            digest = native_root_of(src.home)
            for d in ("native", "native/staging", "native/roots", "native/roots/" + digest):
                os.mkdir(os.path.join(state, d), 0o700)
            target = os.path.join(state, "native/roots", digest)
            subprocess.run(["mount", "--bind", os.path.join(src.home, "native/roots", digest), target], check=True)
            subprocess.run(["mount", "-o", "remount,bind,ro", target], check=True)
        if kind == "full":
            fd = os.open(os.path.join(state, "filler"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                while os.write(fd, b"\0" * 4096) > 0:
                    pass
            except OSError:
                pass  # full
            finally:
                os.close(fd)
            st = os.statvfs(state)
            OBS["free_bytes"] = st.f_bavail * st.f_frsize
        else:
            subprocess.run(["mount", "-o", "remount,ro", state], check=True)
        inst = Install.__new__(Install)
        inst.home, inst.install_id = state, install_id
        inst.env = dict(src.env, PYBOX_HOME=state)
        notes_before = inst.notes()
        t0 = time.time()
        rc, out, err, secs = pybox(["exec", "--json", "--backend", BACKEND], inst.env, b"print('never')\n")
        t1 = time.time() + 0.001
        rec = parse(out)
        msg = get(rec, "error.message") or ""
        OBS["exit"] = rc
        OBS["status"] = get(rec, "status")
        OBS["error"] = msg
        OBS["stderr"] = err.strip()[-300:]
        want = ("run note", "No space left on device") if kind == "full" else ("state directory", "Read-only file system")
        check("refused before any box, saying why", rc == 125 and rec is not None and get(rec, "seen.box.created") is not True
              and all(w in msg for w in want),
              "exit %s, %s in %.2f s: %s" % (rc, get(rec, "status"), secs, msg[:300]))
        run_id = get(rec, "run_id") or ""
        made = inspect_events(inst.env, "docker", t0, t1) if BACKEND == "docker" else []
        left = leftovers(inst, {run_id}, BACKEND)
        left["notes"] = [n for n in inst.notes() if n not in notes_before]
        left["leases_any"] = ["%s:%s" % (u, r) for u, r, _, _ in leases(inst.env, {run_id})] if run_id else []
        if BACKEND == "docker":
            left["engine_events"] = [e["action"] for e in made]
        OBS["left"] = left
        OBS["leftovers"] = count(left)
        check("nothing left", count(left) == 0,
              ("no box made (the engine's events for the installation: %d), no volume, no note, no uid lease" % len(made)
               if BACKEND == "docker" else "no cgroup leaf, no staging folder, no note, no uid lease")
              if count(left) == 0 else describe(left))
    finally:
        # The cgroup parents of both installations, asked while the state folder is there.
        parents = native_parents(src.env) if src.install_id else []
        if BACKEND == "native":
            parents += native_parents(dict(src.env, PYBOX_HOME=state))
        subprocess.run(["umount", "-R", state], capture_output=True)
        with open("/proc/self/mountinfo") as f:
            still = [line.split()[4] for line in f if line.split()[4].startswith(state)]
        OBS["unmounted"] = not still
        check("the state directory unmounted", not still, "tmpfs gone" if not still else "still mounted: %s" % still)
        remove_parents(parents)


def state_full():
    state_dir("full")


def state_readonly():
    state_dir("readonly")


# ---- PyBox killed at each phase ----

PHASES = [
    # phase, program, what the box is left as, its exit code once it ended (Docker)
    ("create", LONG, "created", None),
    ("start", LONG, "exited", 121),
    ("run", LONG, "exited", 137),
    ("collect", b"print('done')\n", "exited", 0),
]


def killed_at_phases():
    """pybox exec SIGKILLed at create, start, run and collect (the test hook
    PYBOX_TEST_KILL_AT), ten times each: every box ends by itself (nobody stops or kills
    it), cleanup keeps everything until its expiry, and after it leaves nothing."""
    work = os.path.join(TMP, "killed")
    os.makedirs(work)
    inst = Install(work)
    inst.build_stdlib(BACKEND)
    per = int(os.environ.get("FAULTS_KILLS_PER_PHASE") or 10)
    t0 = time.time()
    runs = []  # (phase, run id)
    problems = []
    try:
        # Every other run asks for files back: its box has a volume (Docker), and no
        # output folder may appear, not even a hidden one.
        outs = os.path.join(work, "outputs")
        os.makedirs(outs)
        for phase, program, _, _ in PHASES:
            for k in range(per):
                before = set(inst.notes())
                env = dict(inst.env, PYBOX_TEST_KILL_AT=phase)
                args = ["exec", "--json", "--backend", BACKEND, "--timeout", "1"]
                if k % 2 == 1:
                    args += ["--output", os.path.join(outs, "%s-%d" % (phase, k))]
                rc, out, err, _ = pybox(args, env, program, binary=PYBOX_TEST)
                new = [n[:-5] for n in set(inst.notes()) - before if n.endswith(".json")]
                if rc != -signal.SIGKILL or out or len(new) != 1:
                    problems.append("%s: exit %s, %d bytes on stdout, %d new notes: %s" % (phase, rc, len(out), len(new),
                                                                                      err.strip()[-160:]))
                if len(new) == 1:
                    runs.append((phase, new[0]))
        OBS["kills"] = len(runs)
        check("pybox killed at each phase", not problems and len(runs) == per * len(PHASES),
              "%d runs killed by SIGKILL (%d at each of %s, every other one with --output), each leaving its note" % (
                  len(runs), per, ", ".join(p[0] for p in PHASES)) + ("; " + "; ".join(problems[:4]) if problems else ""))
        run_ids = {r for _, r in runs}
        by_phase = {p[0]: {"left_as": {}, "exit_codes": {}, "ended_by_itself": 0} for p in PHASES}
        expires = 0
        for _, r in runs:
            try:
                with open(os.path.join(inst.home, "runs", r + ".json")) as f:
                    expires = max(expires, int(json.load(f)["expires"]))
            except (OSError, ValueError, KeyError):
                problems.append("%s: its note has no expiry" % r)
        if BACKEND == "docker":
            boxes = {b["run_id"]: b for b in items(inspect(inst.env, ["docker"]), "docker", "box")}
            for phase, r in runs:
                want = [p for p in PHASES if p[0] == phase][0]
                b = boxes.get(r)
                if b is None:
                    problems.append("%s %s: no box" % (phase, r[:8]))
                    continue
                try:
                    state = box_record(inst.env, b["id"], wait=want[2] == "exited")
                except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as e:
                    problems.append("%s %s: no record: %s" % (phase, r[:8], e))
                    continue
                bp = by_phase[phase]
                shown = "never started (created)" if state["status"] == "created" else state["status"]
                bp["left_as"][shown] = bp["left_as"].get(shown, 0) + 1
                if want[3] is not None:
                    bp["exit_codes"][str(state["exit_code"])] = bp["exit_codes"].get(str(state["exit_code"]), 0) + 1
                ok = state["status"] == want[2] and (want[3] is None or state["exit_code"] == want[3])
                bp["ended_by_itself"] += ok
                if not ok:
                    problems.append("%s %s: %s, exit %s" % (phase, r[:8], state["status"], state["exit_code"]))
            stops = [e["action"] for e in inspect_events(inst.env, "docker", t0 - 1, time.time() + 1)
                     if e["action"] in ("kill", "stop")]
            OBS["kill_or_stop_events"] = len(stops)
            if stops:
                problems.append("someone stopped boxes: %d kill or stop events" % len(stops))
        else:
            for phase, r in runs:
                ended = wait_until(lambda: not leaf_tasks(inst.env, r), 30, 0.05)
                by_phase[phase]["left_as"]["ended" if ended else "running"] = by_phase[phase]["left_as"].get(
                    "ended" if ended else "running", 0) + 1
                by_phase[phase]["ended_by_itself"] += ended
                if not ended:
                    problems.append("%s %s: processes still in its cgroup after 30 s" % (phase, r[:8]))
        OBS["by_phase"] = by_phase
        OBS["ended_by_itself"] = ", ".join("%s %d/%d" % (p, v["ended_by_itself"], per) for p, v in by_phase.items())
        check("every box ends by itself", not problems,
              "; ".join("%s: %s" % (p, ", ".join("%d %s" % (n, k) for k, n in v["left_as"].items())
                                    + (" (exit %s)" % ", ".join("%s x%d" % (c, n) for c, n in v["exit_codes"].items())
                                       if v["exit_codes"] else "")) for p, v in by_phase.items())
              + ("; no kill or stop from anyone" if BACKEND == "docker" and not OBS.get("kill_or_stop_events") else "")
              + ("; wrong: " + "; ".join(problems[:4]) if problems else ""))
        rep = cleanup_json(inst, BACKEND)
        early = [i for i in rep.get("items", []) if i.get("run_id") in run_ids and i.get("action") != "kept"]
        OBS["cleanup_before_expiry"] = {"kept": sum(1 for i in rep.get("items", []) if i.get("run_id") in run_ids
                                                    and i.get("action") == "kept"), "removed": len(early)}
        wait_for_wall(expires + 1)
        rep2 = cleanup_json(inst, BACKEND)
        removed = [i for i in rep2.get("items", []) if i.get("run_id") in run_ids and i.get("action") == "removed"]
        wait_for_leases(inst.env, run_ids, expires)
        # The leases, expired by now and held by nobody, go with the next cleanup.
        rep3 = cleanup_json(inst, BACKEND)
        OBS["leases_swept"] = rep3.get("leases_removed")
        left = leftovers(inst, run_ids, BACKEND)
        left["output_folders"] = sorted(os.listdir(outs))
        stale = [x for x in leases(inst.env, run_ids) if x[2] <= time.time()]
        OBS["cleanup_after_expiry"] = {"removed": len(removed),
                                       "kinds": sorted(set(i.get("what") for i in removed))}
        OBS["kept_before_expiry"] = OBS["cleanup_before_expiry"]["kept"]
        OBS["removed_after_expiry"] = len(removed)
        OBS["left"] = left
        OBS["leftovers"] = count(left)
        OBS["expired_lease_files"] = len(stale)
        check("cleanup keeps all until the expiry, then leaves nothing",
              not early and count(left) == 0 and not stale,
              "before the expiry: %d kept, %d removed; after it: %d removed (%s); left: %s; once the leases expired, "
              "a cleanup removed %s expired lease files, and %d are left"
              % (OBS["cleanup_before_expiry"]["kept"], len(early), len(removed),
                 ", ".join(OBS["cleanup_after_expiry"]["kinds"]), describe(left), OBS["leases_swept"], len(stale)))
    finally:
        # Whatever a failed check left of this installation's own goes (only its label).
        if inst.install_id:
            try:
                if BACKEND == "docker":
                    remove_all(inst.env, ["docker"])
            except (OSError, RuntimeError) as e:
                log("removing what is left: %s" % e)
            remove_parents(native_parents(inst.env))
        OBS["total_s"] = round(time.time() - t0, 1)


def describe(left):
    n = count(left)
    return "nothing" if n == 0 else json.dumps({k: v for k, v in left.items() if v})[:300]


def main():
    if not PYBOX or not os.path.isabs(PYBOX) or not os.access(PYBOX, os.X_OK):
        cannot_run("PYBOX_BIN must be the absolute path of an executable pybox")
    if not TMP or not os.path.isdir(TMP):
        cannot_run("PYBOX_CAMPAIGN_TMP must be an existing folder")
    if sys.argv[1:] == ["killed-at-phases"] and not os.access(PYBOX_TEST, os.X_OK):
        cannot_run("%s is not an executable pybox-test (the test build: make)" % PYBOX_TEST)
    if BACKEND not in ("docker", "native"):
        cannot_run("PYBOX_BACKEND=%s: give docker or native" % BACKEND)
    if os.geteuid() != 0:
        cannot_run("the fault cases need root")
    REDACT.append((TMP.rstrip("/"), "<tmp>"))
    cases = {"engine-killed": engine_killed, "engine-stalled": engine_stalled, "state-full": state_full,
             "state-readonly": state_readonly, "killed-at-phases": killed_at_phases}
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        cannot_run("give one case: %s" % ", ".join(sorted(cases)))
    case = sys.argv[1]
    OBS["case"] = case
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda s, f: (_ for _ in ()).throw(KeyboardInterrupt()))
    t0 = time.monotonic()
    try:
        if case.startswith("engine-") and BACKEND != "docker":
            check("Docker only", True, "the %s backend has no engine to kill or freeze: not run" % BACKEND)
        else:
            cases[case]()
    except KeyboardInterrupt:
        check("ran to its end", False, "stopped by a signal")
    except Exception as e:  # a failure of the driver itself is a failed check, with what happened
        check("ran to its end", False, "%s: %s" % (type(e).__name__, str(e)[:400]))
    OBS["total_s"] = round(time.monotonic() - t0, 1)
    finish()


if __name__ == "__main__":
    main()

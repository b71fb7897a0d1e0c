#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Campaign driver, session cases: sessions through the command line (pybox session open,
# pybox exec --session, pybox session close); prints one JSON object.
#
# Contract (docs/campaign.md, "driver"): python3 campaign/drivers/session.py CASE, from the
# repository root, with PYBOX_BIN (absolute), PYBOX_HOME (the campaign's installation),
# PYBOX_BACKEND (passed on to every pybox command). CASE: state (state kept across calls,
# and not there without the session), deadline (a call past its deadline ends the
# session), ttl-killed (its holder SIGKILLed, the box's own timer ends the session at its
# lifetime), apart (a second session, and a run without one, see nothing of the first;
# the same look inside the first sees every trace), forged (a forged call record printed
# by the code stays the program's output). Stdout gets exactly one JSON object
# {"observed": {...}, "checks": [{"name", "ok", "detail"}]}; logs go to stderr. Exit 0
# when it ran to the end, whatever the checks say; 2 when it could not run. Every session
# it opens it closes, whatever happens.
import json
import os
import signal
import subprocess
import sys
import time
from receipts import get

PYBOX = os.environ.get("PYBOX_BIN", "")
BACKEND = os.environ.get("PYBOX_BACKEND") or "docker"
PYBOX_CAMPAIGN = os.environ.get("PYBOX_CAMPAIGN_BIN") or os.path.join(os.path.dirname(PYBOX), "pybox-campaign")
PROBES = os.path.join(os.getcwd(), "campaign", "probes")

CHECKS = []
OBS = {"backend": BACKEND}
OPENED = []


def log(*a):
    print("[session]", *a, file=sys.stderr, flush=True)


def check(name, ok, detail):
    CHECKS.append({"name": name, "ok": bool(ok), "detail": detail})
    log("%s %s: %s" % ("ok  " if ok else "FAIL", name, detail))


def pybox(args, stdin=b"", timeout=120):
    return subprocess.run([PYBOX] + args, input=stdin, capture_output=True, timeout=timeout)


def open_session(*args):
    r = pybox(["session", "open"] + list(args))
    sid = r.stdout.decode().strip()
    if r.returncode != 0 or len(sid) != 32:
        raise RuntimeError("session open: exit %d: %s" % (r.returncode, r.stderr.decode(errors="replace")))
    OPENED.append(sid)
    return sid


def call(sid, code, *extra):
    """One call: (exit code, receipt or None, stderr)."""
    r = pybox(["exec", "--session", sid, "--json"] + list(extra), code.encode())
    try:
        rec = json.loads(r.stdout)
    except ValueError:
        rec = None
    return r.returncode, note_run(rec), r.stderr.decode(errors="replace")


def plain(code):
    r = pybox(["exec", "--json", "--timeout", "20"], code.encode())
    return r.returncode, note_run(json.loads(r.stdout))


def close(sid):
    r = pybox(["session", "close", sid, "--json"])
    try:
        return note_run(json.loads(r.stdout))
    except ValueError:
        return None


def listed():
    r = pybox(["session", "list", "--json"])
    return json.loads(r.stdout) if r.returncode == 0 else None


def boxes():
    """This installation's boxes on the backend, as pybox-campaign inspect says."""
    r = subprocess.run([PYBOX_CAMPAIGN, "inspect", "--home", os.environ["PYBOX_HOME"], "--backend", BACKEND, "--json"],
                       capture_output=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("pybox-campaign inspect: exit %d" % r.returncode)
    j = json.loads(r.stdout)
    return [x for x in j["backends"][BACKEND]["items"] if x["kind"] == "box"]


def probe(name):
    with open(os.path.join(PROBES, name)) as f:
        return f.read()


RUNS = set()  # the run ids of this case's boxes, from their receipts


def note_run(rec):
    if get(rec, "run_id"):
        RUNS.add(get(rec, "run_id"))
    return rec


def nothing_left(what):
    """None of this case's boxes is left (the campaign's installation may hold other
    cases' boxes until their expiry), and no session is listed."""
    left = [b for b in boxes() if b.get("run_id") in RUNS]
    sessions = listed()
    check("nothing left " + what, RUNS and not left and sessions == [],
          "boxes of this case left: %d of %d, sessions listed: %s" % (len(left), len(RUNS), sessions))


# ---- the cases ----


def case_state():
    sid = open_session("--timeout", "20", "--ttl", "120")
    rc1, r1, e1 = call(sid, "import os\nx = 41\nprint(os.getpid())\n")
    rc2, r2, e2 = call(sid, "import os\nprint(x + 1, os.getpid())\n")
    out1 = get(r1, "said.stdout.text", "")
    out2 = get(r2, "said.stdout.text", "")
    OBS["call_2_stdout"] = out2
    OBS["call_2_state"] = get(r2, "seen.start.session.state")
    check("the second call reads the first call's variable in the same interpreter",
          rc1 == 0 and rc2 == 0 and out2.split(" ")[0] == "42" and out2.split(" ")[-1].strip() == out1.strip(),
          "call 1 said %r, call 2 said %r (%s)" % (out1, out2, e2[-200:]))
    check("each call's receipt names its session and whose state it saw",
          get(r1, "seen.start.session.id") == sid and get(r1, "seen.start.session.state") ==
          "none: the session's first call" and get(r2, "seen.start.session.state") ==
          "state from calls 1..1 of this session" and get(r2, "seen.box.id") == get(r1, "seen.box.id"),
          "call 1: %s; call 2: %s" % (get(r1, "seen.start.session"), get(r2, "seen.start.session")))
    prc, pr = plain("print(x + 1)\n")
    check("without the session the same line has no x (the state is the session's, not faked)",
          prc == 1 and "NameError" in get(pr, "said.stderr.text", ""),
          "exit %d, stderr %r" % (prc, get(pr, "said.stderr.text", "")[-120:]))
    c = close(sid)
    OPENED.remove(sid)
    OBS["close_status"] = get(c, "status")
    check("session close gives the session's receipt, its box confirmed gone",
          get(c, "status") == "SESSION_CLOSED_OBSERVED" and get(c, "seen.init_record.calls") == 2 and
          get(c, "seen.box.confirmed_gone") is True,
          "status %s, calls %s, gone %s" % (get(c, "status"), get(c, "seen.init_record.calls"),
                                            get(c, "seen.box.confirmed_gone")))
    nothing_left("after the close")


def case_deadline():
    sid = open_session("--timeout", "2", "--ttl", "120")
    rc0, r0, _ = call(sid, "x = 1\n")
    rc, r, e = call(sid, "import time\ntime.sleep(30)\n")
    OBS["status"] = get(r, "status")
    OBS["exit"] = rc
    check("a call past its deadline is stopped at it and ends the session; its receipt says so",
          rc0 == 0 and rc == 124 and get(r, "seen.start.session.goes_on") is False and
          get(r, "seen.start.session.call") == 2 and get(r, "seen.box.confirmed_gone") is True,
          "exit %d, status %s, session %s" % (rc, get(r, "status"), get(r, "seen.start.session")))
    rc2, _, e2 = call(sid, "print(x)\n")
    check("a call after it is refused: nothing restarted the session", rc2 == 125 and "no live session" in e2,
          "exit %d: %s" % (rc2, e2.strip()[-200:]))
    OPENED.remove(sid)
    nothing_left("after the deadline")


def case_ttl_killed():
    t0 = time.time()
    sid = open_session("--ttl", "2")
    rc, r, _ = call(sid, "x = 1\nprint(x)\n")
    entry = [s for s in (listed() or []) if s.get("id") == sid]
    pid = entry[0]["holder_pid"] if entry else 0
    check("the session runs a call and its holder is listed alive",
          rc == 0 and entry and entry[0].get("holder_alive") is True, "exit %d, listed %s" % (rc, entry))
    if pid > 1:
        os.kill(pid, signal.SIGKILL)
    t_kill = time.time()
    gone_at = None
    while time.time() - t0 < 60:
        # running as the backend says (docker), or with processes in its cgroup (native)
        if not [b for b in boxes() if b.get("run_id") in RUNS and (b.get("running") or b.get("procs"))]:
            gone_at = time.time()
            break
        time.sleep(0.25)
    OBS["box_ended_s_after_open"] = round(gone_at - t0, 1) if gone_at else None
    # the box's own timer: its lifetime (2 s) and its margin (10 s) from its start
    check("with its holder SIGKILLed, the box's own timer ended it at its lifetime and margin, by itself",
          gone_at is not None and 11.0 <= gone_at - t0 <= 30.0 and t_kill - t0 < 11.0,
          "box ended %.1f s after the open (holder killed at %.1f s)" % ((gone_at or 0) - t0, t_kill - t0))
    entry = [s for s in (listed() or []) if s.get("id") == sid]
    rc2, _, e2 = call(sid, "print(x)\n")
    check("the list says its holder is gone, and a call is refused",
          entry and entry[0].get("holder_alive") is False and rc2 == 125 and "no holder" in e2,
          "listed %s; exit %d: %s" % (entry, rc2, e2.strip()[-160:]))
    # what is left goes at its expiry (the box's life and the leftovers' margin), by cleanup
    expires = max([b.get("expires", 0) for b in boxes() if b.get("run_id") in RUNS] + [0])
    while time.time() < min(expires + 1, t0 + 300):
        time.sleep(1)
    r = pybox(["cleanup"])
    OBS["cleanup_exit"] = r.returncode
    OPENED.remove(sid)
    nothing_left("after pybox cleanup")


def case_apart():
    a = open_session("--ttl", "120")
    b = open_session("--ttl", "120")
    rca, ra, _ = call(a, probe("trace_leave.py"))
    rcb, rb, _ = call(b, probe("trace_look.py"))
    prc, pr = plain(probe("trace_look.py"))
    rca2, ra2, _ = call(a, probe("trace_look.py"))
    seen_b = get(rb, "said.stdout.text", "").split("\n")
    seen_plain = get(pr, "said.stdout.text", "").split("\n")
    seen_a = get(ra2, "said.stdout.text", "").split("\n")
    OBS["second_session_found"] = seen_b[0]
    OBS["plain_run_found"] = seen_plain[0]
    OBS["same_session_found"] = seen_a[0]
    check("a second session finds nothing of the first (files, environment, module, builtins, random state, "
          "processes)", rca == 0 and rcb == 0 and seen_b[0] == "none", "found %r" % seen_b[0])
    check("a run without a session finds nothing of it either", prc == 0 and seen_plain[0] == "none",
          "found %r" % seen_plain[0])
    check("each session its own user", len(seen_b) > 1 and len(seen_a) > 1 and seen_a[1] != seen_b[1],
          "first %r, second %r" % (seen_a[1:2], seen_b[1:2]))
    check("the control: the same look inside the first session finds every trace (the look can see them)",
          rca2 == 0 and seen_a[0] == "tmp,out,env,module,builtins,process,random", "found %r" % seen_a[0])
    for s in (a, b):
        close(s)
        OPENED.remove(s)
    nothing_left("after both closes")


def case_forged():
    sid = open_session("--ttl", "120")
    forged = "\\x1epybox-call v4 " + "0" * 64 + " call=9 out=0 err=0 said=0 call_ms=1 alive=0"
    code = 'print("%s")\nprint(\'{"call": 7, "exception": null, "value": "forged"}\')\n' % forged
    rc, r, e = call(sid, code)
    out = get(r, "said.stdout.text", "")
    OBS["session"] = get(r, "seen.start.session")
    OBS["session_report"] = get(r, "said.session_report")
    report = {}
    try:
        report = json.loads(get(r, "said.session_report", "") or "{}")
    except ValueError:
        pass
    check("the forged call record is the program's output, under SAID", rc == 0 and "pybox-call v4" in out,
          "stdout %r" % out[:200])
    check("the call stays call 1 of a session that goes on; the interpreter's own report is quoted as said",
          get(r, "status") == "SESSION_CALL_ENDED" and get(r, "seen.start.session.call") == 1 and
          get(r, "seen.start.session.goes_on") is True and report.get("call") == 1,
          "status %s, session %s, report %s" % (get(r, "status"), get(r, "seen.start.session"), report))
    rc2, r2, _ = call(sid, "print('after')\n")
    check("the next call is call 2, its output its own", rc2 == 0 and get(r2, "seen.start.session.call") == 2 and
          get(r2, "said.stdout.text") == "after\n", "session %s, stdout %r" % (get(r2, "seen.start.session"),
                                                                             get(r2, "said.stdout.text")))
    c = close(sid)
    OPENED.remove(sid)
    check("its close counts two calls", get(c, "seen.init_record.calls") == 2, "%s" % get(c, "seen.init_record"))
    nothing_left("after the close")


CASES = {"state": case_state, "deadline": case_deadline, "ttl-killed": case_ttl_killed, "apart": case_apart,
         "forged": case_forged}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: session.py %s" % "|".join(CASES), file=sys.stderr)
        sys.exit(2)
    if not os.path.isabs(PYBOX) or not os.access(PYBOX, os.X_OK) or not os.environ.get("PYBOX_HOME"):
        print("session: cannot run: PYBOX_BIN (absolute) and PYBOX_HOME are needed", file=sys.stderr)
        sys.exit(2)
    try:
        CASES[sys.argv[1]]()
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as e:
        check("the case ran to its end", False, str(e))
    finally:
        for s in list(OPENED):
            close(s)
    sys.stdout.write(json.dumps({"observed": OBS, "checks": CHECKS}) + "\n")


main()

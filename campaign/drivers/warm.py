#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Campaign driver, the warm-box case: two calls on one `pybox mcp --warm 1` server, the
# first leaving traces everywhere a later program might look (campaign/probes/trace_leave.py:
# /tmp, /box/out, the environment, a module, the builtins, the random state, a process),
# the second looking for them (trace_look.py); prints one JSON object.
#
# Contract (docs/campaign.md, "driver"): python3 campaign/drivers/warm.py with|without, from
# the repository root, with PYBOX_BIN (absolute), PYBOX_HOME (the campaign's installation),
# PYBOX_BACKEND (passed on as --backend). with: the server as installed; both calls start
# warm, in two boxes of two users, and the look finds nothing. without: the test build
# (PYBOX_TEST_BIN, else pybox-test beside PYBOX_BIN) with only PYBOX_TEST_WARM_REUSE=1,
# under which the pool hands the first call's box to the second (the relaxation
# reused-box): the look finds the traces, so it can see them. Either way nothing of the
# case is left once the server ended. Stdout gets exactly one JSON object
# {"observed": {...}, "checks": [{"name", "ok", "detail"}]}; logs go to stderr. Exit 0 when
# it ran to the end, whatever the checks say; 2 when it could not run.
import json
import os
import subprocess
import sys
from receipts import get

PYBOX = os.environ.get("PYBOX_BIN", "")
PYBOX_TEST = os.environ.get("PYBOX_TEST_BIN") or os.path.join(os.path.dirname(PYBOX), "pybox-test")
BACKEND = os.environ.get("PYBOX_BACKEND") or "docker"
PYBOX_CAMPAIGN = os.environ.get("PYBOX_CAMPAIGN_BIN") or os.path.join(os.path.dirname(PYBOX), "pybox-campaign")
PROBES = os.path.join(os.getcwd(), "campaign", "probes")
# Every trace trace_leave.py leaves, in the order trace_look.py names them.
TRACES = "tmp,out,env,module,builtins,process,random"

CHECKS = []
OBS = {"backend": BACKEND}


def log(*a):
    print("[warm]", *a, file=sys.stderr, flush=True)


def check(name, ok, detail):
    CHECKS.append({"name": name, "ok": bool(ok), "detail": detail})
    log("%s %s: %s" % ("ok  " if ok else "FAIL", name, detail))


def probe(name):
    with open(os.path.join(PROBES, name)) as f:
        return f.read()


class Server:
    """pybox mcp on stdio, spoken to line by line as a raw MCP client does."""

    def __init__(self, binary, env):
        self.p = subprocess.Popen([binary, "mcp", "--images", "stdlib", "--warm", "1", "--python-sessions", "0",
                                   "--backend", BACKEND, "--max-timeout", "30"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.next_id = 1
        init = self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "pybox-campaign", "version": "1"}})
        if "result" not in init:
            raise RuntimeError("initialize: %s" % init)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def rpc(self, method, params):
        i = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("the server ended before answering %s" % method)
            msg = json.loads(line)
            if msg.get("id") == i:
                return msg

    def run(self, code):
        """One run_python call, its /box/out asked back (so the box has one): its receipt (the
        structured content)."""
        r = self.rpc("tools/call", {"name": "run_python", "arguments": {"code": code, "return_files": True}})
        rec = get(r, "result.structuredContent")
        if not isinstance(rec, dict):
            raise RuntimeError("run_python gave no receipt: %s" % json.dumps(r)[:500])
        return rec

    def end(self):
        """Close its input, as a client leaving does; its exit code."""
        self.p.stdin.close()
        return self.p.wait(timeout=120)


def boxes():
    """This installation's boxes on the backend, as pybox-campaign inspect says."""
    r = subprocess.run([PYBOX_CAMPAIGN, "inspect", "--home", os.environ["PYBOX_HOME"], "--backend", BACKEND, "--json"],
                       capture_output=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("pybox-campaign inspect: exit %d" % r.returncode)
    return [x for x in json.loads(r.stdout)["backends"][BACKEND]["items"] if x["kind"] == "box"]


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("with", "without"):
        print("usage: warm.py with|without", file=sys.stderr)
        sys.exit(2)
    relaxed = sys.argv[1] == "without"
    binary = PYBOX_TEST if relaxed else PYBOX
    if not os.path.isabs(PYBOX) or not os.access(binary, os.X_OK) or not os.environ.get("PYBOX_HOME"):
        print("warm: cannot run: PYBOX_BIN (absolute), %s and PYBOX_HOME are needed" % binary, file=sys.stderr)
        sys.exit(2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYBOX_TEST_")}
    if relaxed:
        env["PYBOX_TEST_WARM_REUSE"] = "1"
    server = None
    runs = set()
    try:
        server = Server(binary, env)
        first = server.run(probe("trace_leave.py"))
        second = server.run(probe("trace_look.py"))
        code = server.end()
        server = None
        for r in (first, second):
            runs.add(get(r, "run_id"))
        said = (get(second, "said.stdout.text") or "").split("\n")
        found = said[0]
        OBS["first_said"] = get(first, "said.stdout.text")
        OBS["second_found"] = found
        OBS["starts"] = [get(first, "seen.start.kind"), get(second, "seen.start.kind")]
        OBS["boxes"] = [get(first, "seen.box.id"), get(second, "seen.box.id")]
        OBS["users"] = [get(first, "asked.policy.program_uid"), get(second, "asked.policy.program_uid")]
        OBS["relaxed"] = [get(first, "asked.policy.RELAXED_FOR_A_TEST"), get(second, "asked.policy.RELAXED_FOR_A_TEST")]
        check("the first call left its traces", get(first, "exit_code") == 0 and OBS["first_said"] == "left\n",
              "exit %s, said %r" % (get(first, "exit_code"), OBS["first_said"]))
        check("the second call's look ran", get(second, "exit_code") == 0 and len(said) > 1 and
              said[1].startswith("uid "), "exit %s, said %r" % (get(second, "exit_code"), said))
        if not relaxed:
            check("both calls were served by warm boxes", OBS["starts"] == ["warm", "warm"],
                  "seen.start.kind %s" % OBS["starts"])
            check("each call had a box of its own, of a user of its own",
                  OBS["boxes"][0] != OBS["boxes"][1] and OBS["users"][0] != OBS["users"][1],
                  "boxes %s, users %s" % (OBS["boxes"], OBS["users"]))
            check("no receipt says its box was relaxed", OBS["relaxed"] == [None, None], "relaxed %s" % OBS["relaxed"])
            check("the second call found no trace of the first", found == "none", "found %r" % found)
        else:
            check("the relaxation handed the first call's box to the second, and both receipts say so",
                  OBS["boxes"][0] == OBS["boxes"][1] and all("reused-box" in (x or "") for x in OBS["relaxed"]),
                  "boxes %s, relaxed %s" % (OBS["boxes"], OBS["relaxed"]))
            check("in the reused box the look finds every trace (files, /tmp, environment, process, interpreter)",
                  found == TRACES, "found %r" % found)
        check("the server ended cleanly when its input closed", code == 0, "exit %s" % code)
        left = [b for b in boxes() if b.get("run_id") in runs]
        check("nothing of the case is left after the server ended", runs and None not in runs and not left,
              "boxes left: %d (runs %s)" % (len(left), sorted(str(r) for r in runs)))
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as e:
        check("the case ran to its end", False, str(e))
    finally:
        if server is not None:
            server.p.kill()
            server.p.wait()
    sys.stdout.write(json.dumps({"observed": OBS, "checks": CHECKS}) + "\n")


main()

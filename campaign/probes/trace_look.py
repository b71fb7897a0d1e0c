# SPDX-License-Identifier: MIT
# Looks for what trace_leave.py leaves: prints the traces found, comma-separated, or
# "none"; then its own uid.
import json
import os
import random

found = []
if os.path.exists("/tmp/trace"):
    found.append("tmp")
if os.path.exists("/box/out/trace"):
    found.append("out")
if "TRACE" in os.environ:
    found.append("env")
if hasattr(json, "TRACE"):
    found.append("module")
b = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
if "TRACE" in b:
    found.append("builtins")
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            if open("/proc/%s/cmdline" % p, "rb").read().startswith(b"sleep"):
                found.append("process")
        except OSError:
            pass
r = random.getstate()
random.seed(12345)
if random.getstate() == r:
    found.append("random")
print(",".join(found) or "none")
print("uid", os.getuid())

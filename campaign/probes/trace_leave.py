# SPDX-License-Identifier: MIT
# Leaves a trace of itself everywhere a later program might look: /tmp, /box/out, the
# environment, a module, the builtins, the random state, a process (trace_look.py looks).
import json
import os
import random
import subprocess

builtins = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
open("/tmp/trace", "w").write("t")
open("/box/out/trace", "w").write("o")
os.environ["TRACE"] = "e"
json.TRACE = "m"
builtins["TRACE"] = "b"
random.seed(12345)
subprocess.Popen(["sleep", "60"])
print("left")

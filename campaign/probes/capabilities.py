# Probe: give a file away to another user (needs CAP_CHOWN).
import os
eff = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]
open("/tmp/probe", "w").close()
try:
    os.chown("/tmp/probe", 4242, 4242)
    print("ESCAPED: uid %d chowned a file to 4242 (CapEff %s)" % (os.getuid(), eff))
except OSError as e:
    print("BLOCKED: uid %d chown failed: %s (CapEff %s)" % (os.getuid(), e.strerror, eff))

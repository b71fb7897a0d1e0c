# Probe: gain root through a setuid-root program (su), read from the kernel's view of it.
import os, subprocess, time
p = subprocess.Popen(["/usr/bin/su", "-c", "true", "root"], stdin=subprocess.PIPE,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
# Popen may return before the exec is complete: the credentials are read once the
# kernel names the process su (it then waits for a password on its stdin, never given).
uids, name = None, ""
for _ in range(400):
    status = open("/proc/%d/status" % p.pid).read().splitlines()
    name = [l.split()[1] for l in status if l.startswith("Name:")][0]
    if name == "su":
        uids = [l.split()[1:] for l in status if l.startswith("Uid:")][0]
        break
    time.sleep(0.005)
p.kill()
p.wait()
if uids is None:
    print("UNKNOWN: su never ran (the process stayed %s)" % name)
elif uids[1] == "0":
    print("ESCAPED: su ran with effective uid 0 (real %s) for uid %d" % (uids[0], os.getuid()))
else:
    print("BLOCKED: su ran with effective uid %s, not 0" % uids[1])

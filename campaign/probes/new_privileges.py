# Probe: gain root through a setuid-root program (su), read from the kernel's view of it.
import os, subprocess
p = subprocess.Popen(["/usr/bin/su", "-c", "true", "root"], stdin=subprocess.PIPE,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
# Popen returns after the exec: the credentials below are su's, before it is reaped.
uids = [l.split()[1:] for l in open("/proc/%d/status" % p.pid) if l.startswith("Uid:")][0]
p.kill()
p.wait()
if uids[1] == "0":
    print("ESCAPED: su ran with effective uid 0 (real %s) for uid %d" % (uids[0], os.getuid()))
else:
    print("BLOCKED: su ran with effective uid %s, not 0" % uids[1])

# Probe: start 64 processes at once.
import os
r, w = os.pipe()
kids, refused = [], 0
for i in range(64):
    try:
        pid = os.fork()
    except OSError:
        refused += 1
        continue
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    kids.append(pid)
os.close(w)
for k in kids:
    os.waitpid(k, 0)
if refused == 0:
    print("ESCAPED: all 64 processes started")
else:
    print("BLOCKED: %d of 64 started, %d refused" % (len(kids), refused))

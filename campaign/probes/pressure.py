# Probe: arm a trigger on the host's pressure stall files (/proc/pressure/*: the whole
# host's, writable by any user), as the program's own user.
import errno
import os

armed, refused = [], []
for name in ("cpu", "io", "memory"):
    p = "/proc/pressure/" + name
    try:
        fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        refused.append("%s (%s)" % (p, errno.errorcode.get(e.errno, e.errno)))
        continue
    try:
        os.write(fd, b"some 500000 2000000\0")
        armed.append(p)
    except OSError as e:
        refused.append("%s (write: %s)" % (p, errno.errorcode.get(e.errno, e.errno)))
    finally:
        os.close(fd)
if armed:
    print("ESCAPED: a trigger armed on " + ", ".join(armed))
else:
    print("BLOCKED: not opened for writing: " + "; ".join(refused))

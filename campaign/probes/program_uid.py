# Probe: look into root's home folder (mode 0700 in the image).
import os
try:
    print("ESCAPED: uid %d listed /root: %d entries" % (os.getuid(), len(os.listdir("/root"))))
except OSError as e:
    print("BLOCKED: uid %d listing /root failed: %s" % (os.getuid(), e.strerror))

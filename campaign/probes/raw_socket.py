# Probe: open a raw socket (packet forging).
import os, socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    print("ESCAPED: uid %d opened a raw ICMP socket" % os.getuid())
except OSError as e:
    print("BLOCKED: raw socket: %s" % e.strerror)

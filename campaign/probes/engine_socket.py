# Probe: talk to the container engine through its socket.
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("/run/docker.sock")
    s.sendall(b"GET /_ping HTTP/1.0\r\nHost: x\r\n\r\n")
    reply = s.recv(4096).decode(errors="replace")
    print("ESCAPED: the engine answered /_ping:", reply.split("\r\n")[0], reply.rsplit("\r\n", 1)[-1])
except OSError as e:
    print("BLOCKED: /run/docker.sock:", e.strerror)

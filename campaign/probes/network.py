# Probe: reach a TCP listener on the loopback the box could share.
import socket
try:
    c = socket.create_connection(("127.0.0.1", 7777), timeout=2)
    print("ESCAPED: connected to 127.0.0.1:7777 and read", c.recv(64).decode())
except OSError as e:
    print("BLOCKED: connect to 127.0.0.1:7777 failed:", e.strerror)

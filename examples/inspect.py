# A small program that looks around the box it runs in and does a little work.
import os
import platform
import socket

print("hello inspection")
print("python", platform.python_version(), "as uid", os.getuid())
primes = [n for n in range(2, 2000) if all(n % d for d in range(2, int(n**0.5) + 1))]
print("primes below 2000:", len(primes), "the last", primes[-1])
try:
    socket.create_connection(("192.0.2.1", 80), timeout=1)
    print("network: reachable")
except OSError as e:
    print("network:", e.strerror)
try:
    open("/written-by-the-program", "w")
    print("root filesystem: writable")
except OSError as e:
    print("root filesystem:", e.strerror)

# Holds every per-user kernel quota it can reach, then waits: descriptors in flight over
# a Unix socket, POSIX message queues, inotify instances, queued real-time signals.
# Once it holds them all it starts a child whose command line says "quota-held", which
# is what the host watches for before it starts the victim box.
import ctypes, os, signal, socket, subprocess, sys, threading, time

libc = ctypes.CDLL(None, use_errno=True)
held = {}

# Descriptors in flight: sent over a socket and never received.
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
a.setblocking(False)
sent = 0
try:
    while sent < 2000:
        socket.send_fds(a, [b"x"], [b.fileno()] * 200)
        sent += 200
except OSError as e:
    held["inflight_stop"] = e.strerror
held["fds_in_flight"] = sent

# POSIX message queues, until the user's byte quota is gone.
libc.mq_open.restype = ctypes.c_int
queues = 0
for i in range(64):
    q = libc.mq_open(("/pybox-hold-%d" % i).encode(), os.O_CREAT | os.O_RDWR, 0o600, None)
    if q < 0:
        held["mq_stop"] = os.strerror(ctypes.get_errno())
        break
    queues += 1
held["message_queues"] = queues

# inotify instances, until the user's count is gone.
inotify = 0
for i in range(1024):
    if libc.inotify_init() < 0:
        held["inotify_stop"] = os.strerror(ctypes.get_errno())
        break
    inotify += 1
held["inotify_instances"] = inotify

# Real-time signals queued to itself and never taken (tgkill is held to the user's
# pending-signal limit; kill() is not).
sig = signal.SIGRTMIN
signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
queued = 0
try:
    while queued < 200000:
        signal.pthread_kill(threading.get_ident(), sig)
        queued += 1
except OSError as e:
    held["signals_stop"] = e.strerror
held["signals_queued"] = queued

print("HELD", held, flush=True)
marker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", "quota-held"])
time.sleep(3600)

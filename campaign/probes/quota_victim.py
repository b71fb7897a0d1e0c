# Ordinary operations that need a per-user kernel quota: passing one descriptor over a
# Unix socket, a POSIX message queue, an inotify instance, a queued real-time signal, and
# a multiprocessing pool (which passes descriptors to its fork server).
import ctypes, json, multiprocessing, os, signal, socket, sys, threading

libc = ctypes.CDLL(None, use_errno=True)
result = {"uid": os.getuid()}


def attempt(name, fn):
    try:
        fn()
        result[name] = "ok"
    except OSError as e:
        result[name] = "FAILED: " + (e.strerror or str(e))
    except Exception as e:
        result[name] = "FAILED: " + type(e).__name__ + ": " + str(e)


def pass_fd():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    socket.send_fds(a, [b"x"], [b.fileno()])
    msg, fds, _, _ = socket.recv_fds(b, 1, 1)
    for f in fds:
        os.close(f)


def mq():
    q = libc.mq_open(b"/pybox-victim", os.O_CREAT | os.O_RDWR, 0o600, None)
    if q < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    libc.mq_unlink(b"/pybox-victim")


def inotify():
    fd = libc.inotify_init()
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    os.close(fd)


def rt_signal():
    sig = signal.SIGRTMIN + 1
    signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
    signal.pthread_kill(threading.get_ident(), sig)
    if signal.sigtimedwait([sig], 1) is None:
        raise OSError(0, "the signal was not queued")


def pool():
    # The program came on stdin: there is no main file for the fork server to import.
    sys.modules["__main__"].__dict__.pop("__file__", None)
    with multiprocessing.get_context("forkserver").Pool(2) as p:
        if p.map(abs, [-1, -2]) != [1, 2]:
            raise OSError(0, "wrong answer")


for name, fn in [("pass_fd", pass_fd), ("mq_open", mq), ("inotify_init", inotify),
                 ("sigqueue", rt_signal), ("forkserver_pool", pool)]:
    attempt(name, fn)
failed = [k for k, v in result.items() if isinstance(v, str) and v != "ok"]
print(json.dumps(result, sort_keys=True))
print(("ESCAPED: the other box's quota broke " + ", ".join(failed)) if failed else "BLOCKED: every operation worked")

# SPDX-License-Identifier: MIT
# Run in a rootless native box by tests/vm-rootless.sh: every way out to the user who runs
# PyBox, tried. Prints "blocked NAME" or "ESCAPED NAME: how" for each; the test wants no
# ESCAPED. argv is not available (the program comes on stdin): the user's pid, uid, a file
# of the user's and the user's staging folder of boxes are in the program's first line,
# set by the test.
import ctypes, errno, os, signal, socket

def tried(name, fn):
    try:
        how = fn()
    except OSError as e:
        print("blocked", name, "(%s)" % errno.errorcode.get(e.errno, e.errno))
        return
    if how:
        print("ESCAPED", name + ":", how)
    else:
        print("blocked", name)

libc = ctypes.CDLL(None, use_errno=True)

def call(fn, *args):
    r = fn(*args)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r

def _kill(p):
    try:
        os.kill(p, 0)
    except OSError:
        return False
    return p != os.getpid() and p != 1 and os.getppid() != p

def _bus():
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/user/%d/bus" % USER_UID)

# who the box is: its own id, never the user's
def ids():
    u = os.getuid()
    maps = open("/proc/self/uid_map").read().split()
    lines = [[int(x) for x in maps[i:i + 3]] for i in range(0, len(maps), 3)]
    outside = [out + u - inside for inside, out, n in lines if inside <= u < inside + n]
    if u == 0 or outside == [USER_UID]:
        return "runs as uid %d, which is the user's %s" % (u, outside)
    print("box uid", u, "outside", outside, "map", " ".join(maps))
    return None
tried("run as the user", ids)
# the user's own process: no such pid here, and no signal could reach it
tried("signal the user's process", lambda: (os.kill(USER_PID, signal.SIGTERM), "signalled")[1])
tried("signal every pid", lambda: ", ".join(str(p) for p in range(2, 4096) if _kill(p)) or None)
# the user's files
tried("read the user's file", lambda: open(USER_FILE).read() and "read it")
tried("the user's session bus", lambda: (_bus(), "connected")[1])
# other boxes: their staging folders (their /box/in) are in the user's installation
tried("other boxes' staging", lambda: "listed %d" % len(os.listdir(STAGING)))
# the box's own root and init
tried("write the image", lambda: (open("/usr/lib/os-release", "a").write("x"), "written")[1])
tried("read init's memory", lambda: (open("/proc/1/mem", "rb").read(1), "read")[1])
tried("ptrace init", lambda: (call(libc.ptrace, 16, 1, 0, 0), "attached")[1])
tried("become root", lambda: (os.setuid(0), "root")[1])
# the kernel's doors a user namespace would open
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
tried("a nested user namespace", lambda: (call(libc.unshare, CLONE_NEWUSER), "unshared")[1])
tried("a mount namespace", lambda: (call(libc.unshare, CLONE_NEWNS), "unshared")[1])
tried("mount a tmpfs", lambda: (call(libc.mount, b"t", b"/tmp", b"tmpfs", 0, None), "mounted")[1])
tried("setns into init's", lambda: (call(libc.setns, os.open("/proc/1/ns/user", os.O_RDONLY), 0), "joined")[1])


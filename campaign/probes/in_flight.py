# Probe: leave the box's stdout and stderr, a 16 MiB memfd, a 4 MiB /tmp file and handles
# of the mount, IPC and network namespaces in flight in a cycle of unix sockets that no
# process can receive from any more (SCM_RIGHTS), then exit 0. Whether they outlive the
# box is for the host to see (the receipt's seen.box.after_end, natively).
import array, os, socket


def send(s, fds):
    s.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


m = os.memfd_create("kept")
os.write(m, b"\1" * (16 << 20))
t = os.open("/tmp", os.O_RDWR | os.O_TMPFILE, 0o600)
os.write(t, b"\2" * (4 << 20))
ns = [os.open("/proc/self/ns/" + n, os.O_RDONLY) for n in ("mnt", "ipc", "net")]
a, b = socket.socketpair()
c, d = socket.socketpair()
print("LEFT IN FLIGHT: stdout, stderr, a 16 MiB memfd, a 4 MiB /tmp file, "
      "the mount, IPC and network namespaces", flush=True)
send(a, [1, 2, m, t] + ns)
send(c, [a.fileno(), b.fileno()])
send(a, [c.fileno(), d.fileno()])

# Probe: a child touches 256 MiB.
import os
pid = os.fork()
if pid == 0:
    b = bytearray(256 * 1024 * 1024)
    for i in range(0, len(b), 4096):
        b[i] = 1
    os._exit(0)
_, st = os.waitpid(pid, 0)
if os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0:
    print("ESCAPED: a child held 256 MiB and exited normally")
else:
    print("BLOCKED: the child allocating 256 MiB was killed by signal %d" % os.WTERMSIG(st))

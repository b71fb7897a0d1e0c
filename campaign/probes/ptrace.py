# Probe: attach to PID 1 (the box's init) with ptrace.
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_SEIZE = 0x4206
if libc.ptrace(PTRACE_SEIZE, 1, None, None) == 0:
    print("ESCAPED: uid %d attached to PID 1 with ptrace" % os.getuid())
else:
    print("BLOCKED: ptrace(PID 1): %s" % os.strerror(ctypes.get_errno()))

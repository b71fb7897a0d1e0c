# Probe: put a key into the kernel's keyring (shared kernel state).
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 248, "aarch64": 217}[platform.machine()]  # add_key
KEY_SPEC_PROCESS_KEYRING = -2
k = libc.syscall(nr, b"user", b"pybox-probe", b"x", 1, KEY_SPEC_PROCESS_KEYRING)
if k > 0:
    print("ESCAPED: add_key stored key %d in the kernel keyring" % k)
else:
    print("BLOCKED: add_key: %s" % os.strerror(ctypes.get_errno()))

# SPDX-License-Identifier: MIT
"""The host's processes as the campaign's drivers look for them: by what their command
line names (a private engine's folders, an installation's)."""
import os


def naming(needles):
    """(pid, command name) of each process but this one, not ended (a zombie has), whose
    command line names one of needles."""
    me = os.getpid()
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == me:
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cl = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open("/proc/%s/stat" % p) as f:
                st = f.read()
        except OSError:
            continue
        if st.rsplit(")", 1)[1].split()[0] == "Z":
            continue
        if any(n in cl for n in needles):
            found.append((int(p), st[st.index("(") + 1:st.rindex(")")]))
    return found

# Probe: read the host kernel's timer list and scheduler details through /proc.
seen = []
for p in ("/proc/timer_list", "/proc/sched_debug", "/proc/keys"):
    try:
        t = open(p).read()
    except OSError:
        continue
    if t:
        seen.append("%s (%d bytes: %r)" % (p, len(t), t.splitlines()[0][:40]))
print("ESCAPED: read " + "; ".join(seen) if seen else "BLOCKED: /proc/timer_list, /proc/sched_debug and /proc/keys read empty or refused")

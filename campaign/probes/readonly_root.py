# Probe: write into the image's root filesystem (/var/tmp is world-writable in the image).
try:
    with open("/var/tmp/pybox-probe", "w") as f:
        f.write("x")
    print("ESCAPED: wrote /var/tmp/pybox-probe in the image's root filesystem")
except OSError as e:
    print("BLOCKED: writing /var/tmp/pybox-probe failed:", e.strerror)

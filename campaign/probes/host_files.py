# Probe: read a file of the host's.
try:
    print("ESCAPED: read the host's canary:", open("/host/canary.txt").read())
except OSError as e:
    print("BLOCKED: /host/canary.txt:", e.strerror)

# Probe: read a setting of the host's from the environment.
import os
v = os.environ.get("PYBOX_CANARY")
print("ESCAPED: PYBOX_CANARY=%s" % v if v else "BLOCKED: no PYBOX_CANARY; environment has %s" % sorted(os.environ))

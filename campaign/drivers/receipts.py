# SPDX-License-Identifier: MIT
"""What the campaign's drivers read from a receipt or an answer: a field by its dotted
path."""


def get(j, path, default=None):
    """The value at path ("seen.box.id") in the JSON object j, or default where any step
    of it is missing."""
    for k in path.split("."):
        if not isinstance(j, dict) or k not in j:
            return default
        j = j[k]
    return j

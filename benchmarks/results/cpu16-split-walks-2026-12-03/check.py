"""Where two analyze --json documents differ: python3 check.py A B"""

import json
import sys

a, b = (json.load(open(p)) for p in sys.argv[1:3])
out = []


def walk(x, y, path):
    if len(out) > 12:
        return
    if type(x) is not type(y):
        out.append(f"{path}: type {type(x).__name__} vs {type(y).__name__}")
        return
    if isinstance(x, dict):
        for k in x.keys() | y.keys():
            if k not in x or k not in y:
                out.append(f"{path}.{k}: missing")
                continue
            walk(x[k], y[k], f"{path}.{k}")
    elif isinstance(x, list):
        if len(x) != len(y):
            out.append(f"{path}: len {len(x)} vs {len(y)}")
        for i, (p, q) in enumerate(zip(x, y)):
            walk(p, q, f"{path}[{i}]")
    elif x != y:
        out.append(f"{path}: {x!r} vs {y!r}")


walk(a, b, "")
print("\n".join(out) or "same")

"""A fork's cost to the process that goes on (2-core machine): `segment_records` of the B200 tile's
path timed alone and while a forked child that only sleeps holds every page it shares (each page
the parent then writes is copied first). python3 cow.py TILE_FOLDER (PYTHONPATH=. from the root)."""

import contextlib
import os
import signal
import sys
import time

import tpscope.metrics.critical_path as cp
from tpscope.cli import main

saved = []
orig = cp.segment_records


def kept(seg, acts, graph, floor):
    saved.append((seg, acts, graph, floor))
    return orig(seg, acts, graph, floor)


cp.segment_records = kept
with contextlib.redirect_stdout(open(os.devnull, "w")):
    main(["analyze", sys.argv[1], "--json", "--no-cache", "--workers", "6"])
seg, acts, graph, floor = saved[0]


def one(forked: bool) -> float:
    pid = None
    if forked:
        pid = os.fork()
        if pid == 0:
            time.sleep(5)
            os._exit(0)
    t = time.perf_counter()
    orig(seg, acts, graph, floor)
    took = time.perf_counter() - t
    if pid:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return round(took, 4)


print("alone", [one(False) for _ in range(5)])
print("a forked child alive", [one(True) for _ in range(5)])
print("alone", [one(False) for _ in range(5)])

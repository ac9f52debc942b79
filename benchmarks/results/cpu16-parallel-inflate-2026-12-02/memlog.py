"""Timeline of the PSS of one command and its children, sampled every 50 ms: python3 memlog.py CMD..."""

import subprocess
import sys
import time

import psutil

t0 = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, text=True)
ps = psutil.Process(proc.pid)
rows = []
while proc.poll() is None:
    try:
        kids = ps.children(recursive=True)
        parent = ps.memory_full_info().pss / 2**20
        tot = parent
        for c in kids:
            try:
                tot += c.memory_full_info().pss / 2**20
            except psutil.Error:
                pass
        rows.append(f"{time.perf_counter() - t0:.2f}:{parent:.0f}/{tot:.0f}/{len(kids)}")
    except psutil.Error:
        pass
    time.sleep(0.05)
print(" ".join(sys.argv[2:]), proc.stdout.read().strip())
print("peak", max(int(r.split("/")[1]) for r in rows), "wall", round(time.perf_counter() - t0, 2))
print(" ".join(rows))

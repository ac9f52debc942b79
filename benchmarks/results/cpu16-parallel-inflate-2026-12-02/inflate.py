"""Inflate one gzip trace by rapidgzip: threads x chunk size, wall and peak RSS of a fresh process."""

import subprocess
import sys

CODE = r"""
import sys, time, resource, rapidgzip
p, par, cs, n = sys.argv[1], int(sys.argv[2]), int(float(sys.argv[3]) * 2**20), int(sys.argv[4])
t = time.perf_counter(); buf = bytearray(n)
with rapidgzip.RapidgzipFile(p, parallelization=par, chunk_size=cs) as f: got = f.readinto(buf)
print(par, sys.argv[3], "MiB", round(time.perf_counter() - t, 3), "s maxrss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10, "MB", got == n)
"""
ISAL = r"""
import sys, time, resource, isal.igzip as ig
t = time.perf_counter(); d = ig.open(sys.argv[1]).read()
print("isal", len(d), round(time.perf_counter() - t, 3), "s maxrss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10, "MB")
"""
p = sys.argv[1]
n = int(
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import isal.igzip as ig,sys;print(len(ig.open(sys.argv[1]).read()))",
            p,
        ],
        capture_output=True,
        text=True,
    ).stdout
)
for _ in range(1):
    subprocess.run([sys.executable, "-c", ISAL, p])
    for par in (16,):
        for cs in ("0.5", "1", "2", "4"):
            subprocess.run([sys.executable, "-c", CODE, p, str(par), cs, str(n)])

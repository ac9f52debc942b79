"""A timeline of reading one file in parts: gunzip reads, forks, each part's decode (in its
process), the last part, receive and merge; perf_counter (CLOCK_MONOTONIC) is shared by processes.

    python3 partlog.py RANK_FILE WORKERS
"""

import json
import multiprocessing.context as mc
import os
import sys
import time

import tpscope.trace.read.parallel as par

LOG = "/tmp/partlog.jsonl"


def log(**fields):
    with open(LOG, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "t": time.perf_counter(), **fields}) + "\n")


class Timed:
    """The text stream, its reads timed."""

    def __init__(self, f):
        self.f, self.spent, self.n = f, 0.0, 0

    def read(self, n=-1):
        t = time.perf_counter()
        data = self.f.read(n)
        self.spent += time.perf_counter() - t
        self.n += len(data)
        if not data:
            log(ev="gunzip_done", spent=self.spent, bytes=self.n)
        return data

    def readinto(self, b):
        t = time.perf_counter()
        got = self.f.readinto(b)
        self.spent += time.perf_counter() - t
        self.n += got
        if not got:
            log(ev="gunzip_done", spent=self.spent, bytes=self.n)
        return got


real_decode, real_open = par.decode_span, par.open_text
real_start, real_receive, real_merge = mc.ForkProcess.start, par._receive, par.merge


def decode_span(buf, lo, hi, *a, **k):
    log(ev="decode_start", bytes=hi - lo)
    result = real_decode(buf, lo, hi, *a, **k)
    log(ev="decode_end")
    return result


def start(self):
    t = time.perf_counter()
    real_start(self)
    log(ev="forked", took=time.perf_counter() - t)


def receive(r):
    result = real_receive(r)
    log(ev="received")
    return result


def merge(parts):
    log(ev="merge_start")
    result = real_merge(parts)
    log(ev="merge_end")
    return result


par.decode_span, par.open_text = decode_span, lambda fh: Timed(real_open(fh))
mc.ForkProcess.start, par._receive, par.merge = start, receive, merge
open(LOG, "w").close()
log(ev="begin")
par.read_in_parts(sys.argv[1], int(sys.argv[2]))
log(ev="end")
events = [json.loads(line) for line in open(LOG)]
begin = events[0]["t"]
for e in events:
    e["t"] = round(e["t"] - begin, 4)
    print(json.dumps(e))

"""A timeline of reading one file in parts: gunzip reads, forks, each part's decode (in its
process), the last part, receive and merge; perf_counter (CLOCK_MONOTONIC) is shared by processes."""
import sys, time, os, json
import tpscope.trace.read.parallel as par
LOG = "/tmp/partlog.jsonl"
open(LOG, "w").close()
def log(**k):
    with open(LOG, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "t": time.perf_counter(), **k}) + "\n")
orig_decode = par.decode_span
def decode_span(buf, lo, hi, *a, **k):
    log(ev="decode_start", bytes=hi - lo)
    r = orig_decode(buf, lo, hi, *a, **k)
    log(ev="decode_end")
    return r
par.decode_span = decode_span
orig_open = par.open_text
class Timed:
    def __init__(self, f): self.f = f; self.spent = 0.0; self.n = 0
    def read(self, n=-1):
        t = time.perf_counter(); d = self.f.read(n); self.spent += time.perf_counter() - t; self.n += len(d)
        if not d: log(ev="gunzip_done", spent=self.spent, bytes=self.n)
        return d
    def readinto(self, b):
        t = time.perf_counter(); k = self.f.readinto(b); self.spent += time.perf_counter() - t; self.n += k
        if not k: log(ev="gunzip_done", spent=self.spent, bytes=self.n)
        return k
par.open_text = lambda fh: Timed(orig_open(fh))
import multiprocessing.context as mc
Proc = mc.ForkProcess
orig_start = Proc.start
def start(self):
    t = time.perf_counter(); orig_start(self); log(ev="forked", took=time.perf_counter() - t)
Proc.start = start
orig_recv = par._receive
def _receive(r):
    x = orig_recv(r); log(ev="received"); return x
par._receive = _receive
orig_merge = par.merge
def merge(x):
    log(ev="merge_start"); r = orig_merge(x); log(ev="merge_end"); return r
par.merge = merge
t0 = time.perf_counter()
log(ev="begin")
r = par.read_in_parts(sys.argv[1], int(sys.argv[2]))
log(ev="end")
evs = [json.loads(l) for l in open(LOG)]
base = evs[0]["t"]
for e in evs:
    e["t"] = round(e["t"] - base, 4)
    print(json.dumps(e))

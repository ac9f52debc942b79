"""Where reading one file in parts spends its time (timers around parallel.py's pieces)."""
import sys, time, io, contextlib
import tpscope.trace.read.parallel as par
T = {}
def timed(name, f):
    def w(*a, **k):
        t = time.perf_counter(); r = f(*a, **k); T[name] = T.get(name, 0) + time.perf_counter() - t; return r
    return w
par.decode_span = timed("last_decode", par.decode_span)
par._receive = timed("receive", par._receive)
par.merge = timed("merge", par.merge)
par._in_parts = timed("in_parts", par._in_parts)
par.header_of = timed("header", par.header_of)
import tpscope.trace.run_folder as rf
rf._read_raw = timed("read_raw", rf._read_raw)
rf.load_rank_file = timed("load_rank_file", rf.load_rank_file)
import tpscope.metrics.analysis as an
an.analyze_run = timed("analyze_run", an.analyze_run)
import tpscope.jsonable as J
J.dumps = timed("dumps", J.dumps)
t0 = time.perf_counter()
from tpscope.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(["analyze", sys.argv[1], "--json", "--no-cache", "--workers", sys.argv[2]])
print(sys.argv[2], "total", round(time.perf_counter() - t0, 3), {k: round(v, 3) for k, v in T.items()})

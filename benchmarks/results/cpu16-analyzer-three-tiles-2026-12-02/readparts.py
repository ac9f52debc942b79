"""Where reading one file in parts spends its time (timers around parallel.py's pieces).

python3 readparts.py RUN_FOLDER WORKERS
"""

import contextlib
import io
import sys
import time

import tpscope.jsonable as jsonable
import tpscope.metrics.analysis as analysis
import tpscope.trace.read.parallel as par
import tpscope.trace.run_folder as rf

SPENT: dict[str, float] = {}


def timed(name, f):
    def wrapper(*a, **k):
        t = time.perf_counter()
        result = f(*a, **k)
        SPENT[name] = SPENT.get(name, 0) + time.perf_counter() - t
        return result

    return wrapper


par.decode_span = timed("last_decode", par.decode_span)
par._receive = timed("receive", par._receive)
par.merge = timed("merge", par.merge)
par._in_parts = timed("in_parts", par._in_parts)
par.header_of = timed("header", par.header_of)
rf._read_raw = timed("read_raw", rf._read_raw)
rf.load_rank_file = timed("load_rank_file", rf.load_rank_file)
analysis.analyze_run = timed("analyze_run", analysis.analyze_run)
jsonable.dumps = timed("dumps", jsonable.dumps)
t0 = time.perf_counter()
from tpscope.cli import main  # noqa: E402 - after the timers are in place

with contextlib.redirect_stdout(io.StringIO()):
    main(["analyze", sys.argv[1], "--json", "--no-cache", "--workers", sys.argv[2]])
total = round(time.perf_counter() - t0, 3)
print(sys.argv[2], "total", total, {k: round(v, 3) for k, v in SPENT.items()})

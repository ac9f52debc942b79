"""One fresh-process timing of `tpscope analyze --json`.
python3 var.py RUN WORKERS INFLATE_MIN_WORKERS WALKS(raw|pool|here) [CHUNK_MIB]"""

import time

t0 = time.perf_counter()
import contextlib  # noqa: E402 - after the clock starts
import io  # noqa: E402 - after the clock starts
import sys  # noqa: E402 - after the clock starts

import tpscope.metrics as metrics  # noqa: E402 - after the clock starts
import tpscope.metrics.critical_path as cp  # noqa: E402 - after the clock starts
import tpscope.trace.read.parallel as par  # noqa: E402 - after the clock starts
import tpscope.trace.read.strategy as strategy  # noqa: E402 - after the clock starts
import tpscope.trace.run_folder as rf  # noqa: E402 - after the clock starts
from tpscope.cli import main  # noqa: E402 - after the clock starts

strategy.INFLATE_MIN_WORKERS = int(sys.argv[3])
if sys.argv[4] == "pool":
    sys.path.insert(0, ".wd")
    import forked_pool

    cp.map_forked = forked_pool.map_forked
elif sys.argv[4] == "here":
    cp.PARALLEL_MIN_WORKERS = 10**6
if len(sys.argv) > 5:
    import rapidgzip

    cs = int(float(sys.argv[5]) * 2**20)
    real_cls = rapidgzip.RapidgzipFile
    rapidgzip.RapidgzipFile = lambda fh, parallelization: real_cls(
        fh, parallelization=parallelization, chunk_size=cs
    )
spent = {"imports": round(time.perf_counter() - t0, 3)}


def timed(mod, name):
    f = getattr(mod, name)

    def w(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            spent[name] = round(spent.get(name, 0) + time.perf_counter() - t, 3)

    setattr(mod, name, w)


timed(par, "_inflate_whole")
timed(rf, "_read_raw")
timed(cp, "map_forked")
timed(metrics, "analyze_run")
with contextlib.redirect_stdout(io.StringIO()):
    main(["analyze", sys.argv[1], "--json", "--no-cache", "--workers", sys.argv[2]])
print(*sys.argv[2:], "total", round(time.perf_counter() - t0, 3), spent, flush=True)

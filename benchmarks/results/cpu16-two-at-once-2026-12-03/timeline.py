"""One fresh-process timeline of `tpscope analyze --json` (stdout to /dev/null): python3 timeline.py RUN WORKERS [TAG]
Prints one JSON line: seconds from the interpreter's first line, per stage (start, end), and the forked
walks' and parts' own spans (from their stderr lines)."""

import time

t0 = time.perf_counter()
import contextlib  # noqa: E401,E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import tpscope.jsonable as jsonable  # noqa: E402
import tpscope.metrics as metrics  # noqa: E402
import tpscope.metrics.analysis as analysis  # noqa: E402
import tpscope.metrics.critical_path as cp  # noqa: E402
import tpscope.report.analyze_command as ac  # noqa: E402
import tpscope.trace.read.parallel as par  # noqa: E402
import tpscope.trace.run_folder as rf  # noqa: E402
from tpscope.cli import main  # noqa: E402

ev = {"imports": (0.0, round(time.perf_counter() - t0, 4))}
log = os.open(os.environ.get("TL_LOG", "/tmp/tl.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)


def timed(mod, name, child=False):
    f = getattr(mod, name)

    def w(*a, **k):
        t = time.perf_counter() - t0
        try:
            return f(*a, **k)
        finally:
            u = time.perf_counter() - t0
            if child or os.getpid() != parent:
                os.write(log, f"{name} {os.getpid()} {t:.4f} {u:.4f}\n".encode())
            else:
                ev.setdefault(name, []).append((round(t, 4), round(u, 4)))

    setattr(mod, name, w)


parent = os.getpid()
for mod, name in [
    (rf, "_read_raw"),
    (par, "_in_parts"),
    (par, "_fork_parts"),
    (par, "decode_span"),
    (par, "read_pickled"),
    (par, "merge"),
    (par, "header_of"),
    (rf, "assemble"),
    (rf, "compact_rank"),
    (metrics, "analyze_run"),
    (analysis, "_besides_paths"),
    (cp.CriticalPaths, "__init__"),
    (cp.CriticalPaths, "results"),
    (cp, "_written_path"),
    (cp, "records_body"),
    (cp._Segments, "_expanded"),
    (cp._Segments, "arrays"),
    (cp.SharedTexts, "read"),
    (cp, "records_enclosed"),
    (cp.Forked, "results"),
    (cp, "walk_step"),
    (cp, "summarize_path"),
    (cp, "segment_records"),
    (cp, "step_plan"),
    (cp, "path_graph"),
    (cp._Segments, "_send"),
    (cp.PathGraph, "rank"),
    (cp, "rank_graph"),
    (jsonable, "records_text"),
    (analysis, "json_fields"),
    (jsonable, "dumps_pieces"),
    (ac, "write_stdout"),
    (ac, "json_pieces"),
]:
    timed(mod, name)
open(os.environ.get("TL_LOG", "/tmp/tl.log"), "w").close()
if os.environ.get("TL_SHARE"):
    par.PARALLEL_GUNZIP_SHARE = float(os.environ["TL_SHARE"])
if os.environ.get("TL_STEP"):
    par.INFLATE_STEP_BYTES = int(os.environ["TL_STEP"])
out = open(os.devnull, "w")
with contextlib.redirect_stdout(out):
    main(["analyze", sys.argv[1], "--json", "--no-cache", "--workers", sys.argv[2]])
    sys.stdout.flush()
ev["total"] = (0.0, round(time.perf_counter() - t0, 4))
kids = [line.split() for line in open(os.environ.get("TL_LOG", "/tmp/tl.log")).read().splitlines()]
for name, _pid, a, b in kids:
    ev.setdefault("child:" + name, []).append((float(a), float(b)))
print(
    json.dumps(
        {
            "share": os.environ.get("TL_SHARE"),
            "step": os.environ.get("TL_STEP"),
            "tag": sys.argv[3] if len(sys.argv) > 3 else "",
            "workers": sys.argv[2],
            "ev": ev,
        }
    ),
    flush=True,
)

"""Analyzer speed and memory, tpscope against HTA, side by side in one run.

    python3 benchmarks/analyzer_speed.py --out benchmarks/results/analyzer_speed.json

`--sources A,B,C` tiles each of several runs (the first rank of each) to every size: the sample
runs of this repository and a foreign trace (`tests/data/real/...`) read differently (arguments per
event, layout), and each should be measured.

Traces are made by tiling a real sample run in time (`tile_trace.py`: real names and
arguments, a handful of steps). Every measurement runs in a fresh process that reports its wall
time, its CPU time and peak resident memory (its own and its worker processes'); the numbers are printed as a
Markdown table and written as JSON with the machine, versions and the exact command.

- tpscope: `tpscope analyze RUN --json --no-cache` end to end (decoding, every metric including
  the critical path and contention), with every core; and the same folder again from the cache.
- HTA: `TraceAnalysis(trace_dir=RUN)` then `get_comm_comp_overlap()`.

On a shared machine, `--repeat N` runs each one-rank measurement N times, tpscope (every core),
tpscope with one worker and HTA interleaved (tpscope, one worker, HTA, tpscope ...) so that all see
the same load, and reports the medians (every run is kept in the JSON, with the load average before and after). tpscope's modules
are byte-compiled first, as an installed package's are (`compile_sources`). These timed runs
are not sampled for memory (the sampler would take CPU time from tpscope's two processes on a
2-core machine); each tool's peak memory comes from one more, sampled, run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from tile_trace import tile_run  # noqa: E402

MEASURE = r"""
import json, sys, time, logging
t0 = time.perf_counter()
{body}
print(json.dumps({{"wall_s": time.perf_counter() - t0}}))
"""
TPSCOPE = """
from tpscope.cli import main
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["analyze", {run!r}, "--json"] + {extra!r})
assert rc == 0
"""
HTA = """
logging.disable(logging.WARNING)
import warnings; warnings.simplefilter("ignore")
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir={run!r}).get_comm_comp_overlap(visualize=False)
"""


def _tree_pss_mb(proc) -> float:
    """Proportional set size of a process and its children: shared pages counted once."""
    import psutil

    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total / 2**20


SAMPLE_S = 0.1  # reading a process's smaps holds its memory map's lock: sampled every 10 ms, the
# sampler slowed an allocating process several times over on this shared machine


def measure(
    body: str,
    env: dict | None = None,
    timeout: float = 1800,
    sample_memory: bool = True,
    prefix: list[str] | None = None,
) -> dict:
    """Run `body` in a fresh interpreter; its wall time, the CPU time of its process tree (user +
    system, the reaped children included) and the peak PSS of the tree, sampled every SAMPLE_S.
    Without `sample_memory`, no sampling (peak None): on 2 cores the sampler takes CPU time from
    a program that keeps both busy, so timed runs are not sampled. `prefix` runs the interpreter
    through a command (`taskset -c 0,1`)."""
    import psutil

    code = MEASURE.format(body=body)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [*(prefix or []), sys.executable, "-c", code],
            stdout=out,
            stderr=err,
            text=True,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )
        ps = psutil.Process(proc.pid)
        peak = 0.0
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            try:
                if sample_memory:
                    peak = max(peak, _tree_pss_mb(ps))
            except psutil.NoSuchProcess:
                pass
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("timed out")
            time.sleep(SAMPLE_S)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(err.read()[-2000:])
        result = json.loads(out.read().strip().splitlines()[-1])
    result["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 2)
    result["peak_pss_mb"] = round(peak, 1) if sample_memory else None
    return result


def median_of(runs: list[dict], memory: dict) -> dict:
    """The median wall time and CPU time of repeated unsampled runs, the peak memory of a
    separate sampled run, and the runs themselves."""
    return {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "cpu_s")} | {
        "peak_pss_mb": memory["peak_pss_mb"],
        "runs": runs,
        "memory_run": memory,
    }


def count_events(folder: Path) -> int:
    import gzip

    total = 0
    for f in folder.glob("*.json.gz"):
        total += len(json.load(gzip.open(f))["traceEvents"])
    return total


def _first_rank(src: Path, folder: Path) -> Path:
    """A folder holding only the first trace file of `src` (a rank of a real run, whatever the
    others are)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    first = sorted(
        p
        for p in src.iterdir()
        if p.name.endswith((".json", ".json.gz")) and p.name != "tpscope_run.json"
    )[0]
    (folder / first.name).symlink_to(first.resolve())
    return folder


def compile_sources() -> None:
    """Byte-compile tpscope's modules and numpy's (which both tools import) before any timed run,
    as pip does when it installs a package (HTA's modules, installed so, are compiled): a source
    checkout, or a numpy installed without its byte-code, where PYTHONDONTWRITEBYTECODE is set
    would otherwise compile every module in every run (tpscope's: 0.13 s on the 2-core machine,
    about 0.6 s on the 16-core one; numpy's: 0.22 s there). A folder this user cannot write is
    left as it is."""
    import compileall

    import numpy

    compileall.compile_dir(ROOT / "tpscope", quiet=1)
    compileall.compile_dir(Path(numpy.__file__).parent, quiet=2)


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--sources",
        default=str(ROOT / "sample_traces" / "h200x2-shm-chunked"),
        help="run folders to tile, comma-separated (each: its first rank, at every --sizes)",
    )
    p.add_argument(
        "--sizes", default="100000,300000,1000000,3000000", help="events per rank, one rank"
    )
    p.add_argument(
        "--hta-max", type=int, default=1_000_000, help="largest one-rank size to run HTA on"
    )
    p.add_argument("--multi", default="8x330000", help="RANKSxEVENTS for the many-rank comparison")
    p.add_argument(
        "--pool-ranks", type=int, default=64, help="generated ranks for the pool run (0: skip)"
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="one-rank runs of tpscope and HTA, interleaved (medians)",
    )
    p.add_argument("--multi-skip", action="store_true", help="leave out the many-rank comparison")
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()

    compile_sources()
    work = Path(tempfile.mkdtemp(prefix="tpscope-bench-"))
    cache = work / "cache"
    env = {"TPSCOPE_CACHE_DIR": str(cache)}
    rows = []
    try:
        sources = [Path(x) for x in a.sources.split(",")]
        source = sources[0]
        for src, size in [(x, int(s)) for x in sources for s in a.sizes.split(",")]:
            run = work / f"r1-{size}"
            tile_run(_first_rank(src, work / "first-rank"), run, size, ranks=1)
            events = count_events(run)
            load_before = os.getloadavg()[0]
            mb = sum(f.stat().st_size for f in run.iterdir()) / 2**20
            row = {
                "case": f"{src.name}: 1 rank, {events:,} events",
                "source": _shown(src),
                "ranks": 1,
                "events": events,
                "gz_mb": round(mb, 1),
            }
            fresh, one, hta = [], [], []
            tpscope = TPSCOPE.format(run=str(run), extra=["--no-cache"])
            one_core = TPSCOPE.format(run=str(run), extra=["--no-cache", "--workers", "1"])
            hta_body = HTA.format(run=str(run))
            for _ in range(a.repeat):  # interleaved: all see the machine's load of the moment
                fresh.append(measure(tpscope, env, sample_memory=False))
                if a.repeat > 1:
                    one.append(measure(one_core, env, sample_memory=False))
                if size <= a.hta_max:
                    hta.append(measure(hta_body, sample_memory=False))
            row["tpscope"] = median_of(fresh, measure(tpscope, env))
            if hta:
                row["hta"] = median_of(hta, measure(hta_body))
            measure(TPSCOPE.format(run=str(run), extra=[]), env)  # fill the cache
            row["tpscope_cached"] = measure(TPSCOPE.format(run=str(run), extra=[]), env)
            row["tpscope_one_core"] = (
                median_of(one, measure(one_core, env)) if one else measure(one_core, env)
            )
            row["load_average"] = [load_before, os.getloadavg()[0]]
            rows.append(row)
            print(json.dumps(row), flush=True)
            shutil.rmtree(run)
        n_ranks, per_rank = (int(x) for x in a.multi.split("x"))
        if not a.multi_skip:
            run = work / f"r{n_ranks}"
            tile_run(source, run, per_rank, ranks=n_ranks)
            events = count_events(run)
            row = {
                "case": f"{n_ranks} ranks, {events:,} events",
                "ranks": n_ranks,
                "events": events,
            }
            row["tpscope"] = measure(TPSCOPE.format(run=str(run), extra=["--no-cache"]), env)
            row["tpscope_one_core"] = measure(
                TPSCOPE.format(run=str(run), extra=["--no-cache", "--workers", "1"]), env
            )
            row["hta"] = measure(HTA.format(run=str(run)))
            rows.append(row)
            print(json.dumps(row), flush=True)
            shutil.rmtree(run)
        if a.pool_ranks:
            run = work / f"r{a.pool_ranks}"
            tile_run(source, run, 20_000, ranks=a.pool_ranks)
            events = count_events(run)
            row = {
                "case": f"{a.pool_ranks} ranks, {events:,} events",
                "ranks": a.pool_ranks,
                "events": events,
            }
            row["tpscope"] = measure(TPSCOPE.format(run=str(run), extra=["--no-cache"]), env)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(
        "| case | tpscope s (all cores) | tpscope s (1 core) | cached s | HTA s | HTA / tpscope | tpscope MB | HTA MB | tpscope / HTA memory |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        t, h = r["tpscope"], r.get("hta")
        one, cached = r.get("tpscope_one_core"), r.get("tpscope_cached")
        cells = [
            r["case"],
            f"{t['wall_s']:.2f}",
            f"{one['wall_s']:.2f}" if one else "-",
            f"{cached['wall_s']:.2f}" if cached else "-",
            f"{h['wall_s']:.1f}" if h else "-",
            f"{h['wall_s'] / t['wall_s']:.1f}x" if h else "-",
            f"{t['peak_pss_mb']:.0f}",
            f"{h['peak_pss_mb']:.0f}" if h else "-",
            f"{t['peak_pss_mb'] / h['peak_pss_mb']:.2f}" if h else "-",
        ]
        print("| " + " | ".join(cells) + " |")
    if a.out:
        import hta
        import msgspec
        import numpy

        doc = {
            "command": "python3 "
            + " ".join(
                [
                    str(Path(sys.argv[0]).relative_to(ROOT))
                    if Path(sys.argv[0]).is_absolute()
                    else sys.argv[0],
                    *sys.argv[1:],
                ]
            ),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": {
                "cores": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
            },
            "versions": {
                "numpy": numpy.__version__,
                "msgspec": msgspec.__version__,
                "hta": getattr(hta, "__version__", "traceinsight 0.6.1"),
            },
            "source": ",".join(_shown(x) for x in sources),
            "rows": rows,
        }
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""Thousands of ranks: `tpscope analyze --engine ray` on a folder tiled from real H200 ranks.

    # a local Ray cluster of this machine's cores, then the benchmark against it
    ray start --head --num-cpus=2 --include-dashboard=false --disable-usage-stats
    PYTHONPATH=. python3 benchmarks/ray_scale.py --ranks 1024 --events 100000 \
        --address auto --out benchmarks/results/ray_scale_1024.json
    PYTHONPATH=. python3 benchmarks/ray_scale.py --ranks 16 --events 20000 --address auto   # quick check

The folder: every rank file is one of the real ranks of `sample_traces/h200x2-shm-chunked`, tiled
in time to about `--events` events (`tile_trace.py`), under its own rank id, with the clock of
its host (8 ranks a host) offset by a normal draw of 200 µs sigma (`baseTimeNanoseconds`), as
hosts synchronized by NTP/PTP are. Each source rank is tiled and gzipped once and the files are
written as three gzip members (the header with the rank, the shared events, the keys after
them), so that 1,024 files take seconds to write, not an hour.

Measured: the map's wall time (Ray tasks, one CPU each, `--concurrency` at a time), the
reduce's (`analyze_run` on the driver), the driver's peak RSS over the map and the reduce (Linux's
VmHWM, started over after the folder is written; getrusage elsewhere), every worker
process's peak RSS (psutil, sampled every 50 ms while the map runs: the workers are this
machine's), the size of the map results (pickled `RankTrace`) against the files, and with
`--compare-local` the same analysis through the local process pool, checked equal.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pickle
import platform
import random
import resource
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from tile_trace import tile_document  # noqa: E402

SOURCE = ROOT / "sample_traces" / "h200x2-shm-chunked"
RANKS_PER_HOST = 8
HOST_SKEW_SIGMA_NS = 200_000


def write_folder(dst: Path, ranks: int, events: int, seed: int = 0, source: Path = SOURCE) -> dict:
    """The tiled run folder (see the module docstring); returns what was written."""
    dst.mkdir(parents=True, exist_ok=True)
    sources = sorted(p for p in source.glob("*.json.gz"))
    bodies, heads, bases, counts = [], [], [], []
    for p in sources:
        doc = json.load(gzip.open(p))
        copies = max(1, -(-events // len(doc["traceEvents"])))
        tiled = tile_document(doc, copies, steps=5)
        evs = tiled.pop("traceEvents")
        counts.append(len(evs))
        bases.append(int(tiled.pop("baseTimeNanoseconds", 0) or 0))
        body = ",\n  ".join(json.dumps(e) for e in evs)
        bodies.append(gzip.compress(body.encode(), compresslevel=1))
        heads.append(tiled)
    rng = random.Random(seed)
    host_skew = [int(rng.gauss(0, HOST_SKEW_SIGMA_NS)) for _ in range(-(-ranks // RANKS_PER_HOST))]
    total_bytes = total_events = 0
    for rank in range(ranks):
        k = rank % len(sources)
        head = dict(heads[k])
        head["distributedInfo"] = {
            **(head.get("distributedInfo") or {}),
            "rank": rank,
            "world_size": ranks,
        }
        prefix = json.dumps(head)[:-1] + ',\n  "traceEvents": [\n  '
        suffix = (
            f'\n  ],\n  "baseTimeNanoseconds": {bases[k] + host_skew[rank // RANKS_PER_HOST]}\n}}\n'
        )
        path = dst / f"rank{rank}.tiled.pt.trace.json.gz"
        with path.open("wb") as fh:
            fh.write(gzip.compress(prefix.encode(), compresslevel=1))
            fh.write(bodies[k])
            fh.write(gzip.compress(suffix.encode(), compresslevel=1))
        total_bytes += path.stat().st_size
        total_events += counts[k]
    return {
        "ranks": ranks,
        "events_total": total_events,
        "events_per_rank": counts,
        "gz_bytes_total": total_bytes,
        "host_skew_sigma_ns": HOST_SKEW_SIGMA_NS,
    }


class WorkerMemory:
    """Peak RSS of every Ray worker process on this machine (its command line holds `marker`),
    sampled in a thread."""

    def __init__(self, marker: str = "default_worker.py", period_s: float = 0.05) -> None:
        self.marker = marker
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period_s,), daemon=True)

    def _run(self, period_s: float) -> None:
        import psutil

        while not self._stop.is_set():
            # a worker renames itself
            procs = [
                p
                for p in psutil.process_iter(["cmdline"])
                if self.marker in " ".join(p.info["cmdline"] or [])
                or (p.info["cmdline"] or [""])[0].startswith("ray::")
            ]
            for p in procs:
                try:
                    rss = p.memory_info().rss
                except psutil.Error:
                    continue
                self.peak[p.pid] = max(self.peak.get(p.pid, 0), rss)
            self._stop.wait(period_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def rss_mb() -> float:
    """This process's peak RSS since `reset_peak` (Linux's VmHWM), else since it started."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak() -> None:
    """Start the peak RSS over from the current RSS (Linux), so that writing the folder, or an
    earlier concurrency, does not count in the next run's figure."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--events", type=int, default=100_000, help="events per rank file (about)")
    p.add_argument("--folder", type=Path, default=Path("/tmp/tpscope-ray-scale"))
    p.add_argument("--source", type=Path, default=SOURCE, help="the real run folder to tile")
    p.add_argument(
        "--engine",
        choices=("ray", "local"),
        default="ray",
        help="local: the same measurements through the local process pool (no Ray)",
    )
    p.add_argument("--address", default=None, help="Ray cluster (default: start a local one)")
    p.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[2],
        help="tasks at a time, one run each (e.g. 1 2: how time falls with workers)",
    )
    p.add_argument(
        "--compare-local", action="store_true", help="also the local pool, checked equal"
    )
    p.add_argument("--out", type=Path)
    a = p.parse_args()

    from tpscope.metrics import analyze_run, as_json
    from tpscope.trace import run_folder
    from tpscope.trace.compact import PackedRank
    from tpscope.trace.read import parallel

    t0 = time.perf_counter()
    folder = a.folder / f"{a.source.name}-r{a.ranks}-e{a.events}"
    written = write_folder(folder, a.ranks, a.events, source=a.source)
    result = {
        "command": " ".join(sys.argv),
        "machine": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "engine": a.engine,
        "folder": written,
        "write_s": time.perf_counter() - t0,
        "runs": [],
    }
    print(json.dumps(result["folder"] | {"write_s": round(result["write_s"], 1)}), flush=True)
    if a.engine == "ray":
        import ray

        from tpscope.trace.ray_engine import map_ray

        # on a loaded machine the raylet may miss ray.init's fixed 30 s wait
        for attempt in range(5):
            try:
                ray.init(
                    address=a.address,
                    include_dashboard=False,
                    logging_level="ERROR",
                    log_to_driver=False,
                )
                break
            except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception on that timeout
                print(f"ray.init failed ({str(exc)[:80]}), attempt {attempt + 1} of 5", flush=True)
                ray.shutdown()
        else:
            raise SystemExit("no local Ray cluster came up")
        result["ray_init_attempts"] = attempt + 1
        cluster_cpus = int(ray.cluster_resources().get("CPU", 1))
        result["ray"] = ray.__version__
    else:
        cluster_cpus = os.cpu_count() or 1
    files = run_folder.find_trace_files(folder)
    jobs = [(f, i, 1) for i, f in enumerate(files)]
    analysis = None
    for conc in a.concurrency:
        reset_peak()
        before = rss_mb()
        t = time.perf_counter()
        if a.engine == "ray":
            with WorkerMemory() as mem:
                results = map_ray(
                    run_folder._load_one_shared,
                    jobs,
                    progress=None,
                    cpus_per_task=cluster_cpus / max(1, conc),
                )
            workers_mb = sorted(v / 2**20 for v in mem.peak.values())
        else:  # no sampling thread here: the pool forks only from a single-threaded process
            results = parallel.map_files(run_folder._load_one, jobs, conc)
            children_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            workers_mb = [children_mb] if conc > 1 else []  # the largest reaped worker's peak
        map_s = time.perf_counter() - t
        packed = sum(len(r.data) for r in results if isinstance(r, PackedRank))
        driver_after_map = rss_mb()
        t = time.perf_counter()
        run = run_folder.reduce_ranks(folder, files, results)
        del results
        analysis = analyze_run(run)
        reduce_s = time.perf_counter() - t
        unpacked = sum(len(pickle.dumps(r, protocol=5)) for r in run.ranks)
        row = {
            "concurrency": conc,
            "map_s": map_s,
            "reduce_s": reduce_s,
            "total_s": map_s + reduce_s,
            "driver_peak_rss_mb": rss_mb(),
            "driver_rss_before_mb": before,
            "driver_peak_rss_after_map_mb": driver_after_map,
            "worker_peak_rss_mb": workers_mb,
            "map_results_bytes": packed,
            "map_results_over_gz": packed / written["gz_bytes_total"],
            "unpacked_bytes": unpacked,
        }
        result["runs"].append(row)
        print(
            json.dumps(
                {
                    k: (round(v, 2) if isinstance(v, float) else v)
                    for k, v in row.items()
                    if k != "worker_peak_rss_mb"
                }
                | {
                    "workers": len(workers_mb),
                    "worker_peak_rss_mb_max": round(max(workers_mb, default=0), 1),
                }
            ),
            flush=True,
        )
        del run
    if a.engine == "ray":
        ray.shutdown()
    if a.compare_local:
        t = time.perf_counter()
        local = analyze_run(run_folder.load_run(folder, workers=cluster_cpus))
        result["local_total_s"] = time.perf_counter() - t
        result["local_equal"] = as_json(local) == as_json(analysis)
        print(
            json.dumps(
                {"local_total_s": round(result["local_total_s"], 1), "equal": result["local_equal"]}
            )
        )
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

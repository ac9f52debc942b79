"""tpscope against HTA on 1 M-event tiles of several runs, by core count and by reading strategy.

    python3 benchmarks/reader_scaling.py --out reader_scaling.json

Each source run's first rank is tiled to `--events` events (`tile_trace.py`). Per tile, in rounds
(one of each per round, so that all see the machine's load of the moment; every other round in the
reverse order, so that none always runs right after HTA): `tpscope analyze
--json --no-cache` with every core, with `--workers 1`, on two cores (`taskset`, `--workers 2`),
and with every core or two but the file streamed (threads) instead of read in forked parts
(`read/strategy.py` forced); HTA (`TraceAnalysis` + `get_comm_comp_overlap`) in the first
`--hta-rounds` rounds. Then one more run of tpscope (every core) and of HTA sampled for peak
memory (`analyzer_speed.measure`). Medians are reported; every run is kept in the JSON. tpscope's
modules are byte-compiled first (`analyzer_speed.compile_sources`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from analyzer_speed import HTA, _first_rank, _shown, compile_sources, measure  # noqa: E402
from tile_trace import tile_run  # noqa: E402

TPSCOPE = """
from tpscope.trace.read import strategy
if {stream!r}:
    strategy.SPLIT_MIN_BYTES = 1 << 62
from tpscope.cli import main
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["analyze", {run!r}, "--json", "--no-cache"] + {extra!r})
assert rc == 0
"""
DEFAULT_SOURCES = ",".join(
    str(ROOT / p)
    for p in (
        "sample_traces/h200x2-shm-chunked",
        "sample_traces/h200x2-nvlink-none",
        "tests/data/real/tracelens-b200-eager-rank0of8",
    )
)


def variants(run: str, cores: int, only: str | None = None) -> dict[str, tuple[str, list[str]]]:
    """name -> (python code, command prefix) of each tpscope measurement (`only`: the short
    names of those wanted, comma-separated; "all" is every core)."""
    two = ["taskset", "-c", "0,1"] if cores > 2 and shutil.which("taskset") else []
    every = {
        f"all_{cores}_cores": (TPSCOPE.format(run=run, extra=[], stream=False), []),
        "one_worker": (TPSCOPE.format(run=run, extra=["--workers", "1"], stream=False), []),
        "two_cores": (TPSCOPE.format(run=run, extra=["--workers", "2"], stream=False), two),
        f"all_{cores}_cores_streamed": (TPSCOPE.format(run=run, extra=[], stream=True), []),
        "two_cores_streamed": (
            TPSCOPE.format(run=run, extra=["--workers", "2"], stream=True),
            two,
        ),
    }
    if only is None:
        return every
    wanted = {w.strip().replace("all", f"all_{cores}_cores", 1) for w in only.split(",")}
    unknown = wanted - set(every)
    if unknown:
        raise SystemExit(f"reader_scaling: no variant {', '.join(sorted(unknown))}")
    return {name: v for name, v in every.items() if name in wanted}


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sources", default=DEFAULT_SOURCES, help="run folders, comma-separated")
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--hta-rounds", type=int, default=1)
    p.add_argument("--no-memory", action="store_true", help="leave out the sampled runs")
    p.add_argument(
        "--hta-sampled",
        action="store_true",
        help="sample HTA's timed runs for memory (no extra HTA run; the sampler's cost is small "
        "beside HTA's single busy core on a many-core machine)",
    )
    p.add_argument(
        "--variants",
        default=None,
        help="only these tpscope measurements, comma-separated (all, one_worker, two_cores, "
        "all_streamed, two_cores_streamed; default: every one)",
    )
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    cores = len(os.sched_getaffinity(0))
    compile_sources()
    work = Path(tempfile.mkdtemp(prefix="tpscope-scaling-"))
    env = {"TPSCOPE_CACHE_DIR": str(work / "cache")}
    rows = []
    try:
        for src in [Path(x) for x in a.sources.split(",")]:
            run = work / "run"
            shutil.rmtree(run, ignore_errors=True)
            tile_run(_first_rank(src, work / "first-rank"), run, a.events, ranks=1)
            text_mb = sum(f.stat().st_size for f in run.iterdir()) / 2**20
            runs: dict[str, list[dict]] = {}
            for k in range(a.rounds):
                measured = list(variants(str(run), cores, a.variants).items())
                # every other round the other way round: no variant always runs right after HTA
                for name, (code, prefix) in measured[:: -1 if k % 2 else 1]:
                    runs.setdefault(name, []).append(
                        measure(code, env, sample_memory=False, prefix=prefix)
                    )
                if k < a.hta_rounds:
                    runs.setdefault("hta", []).append(
                        measure(HTA.format(run=str(run)), sample_memory=a.hta_sampled)
                    )
            row = {
                "source": _shown(src),
                "gz_mb": round(text_mb, 1),
                "median_wall_s": {
                    n: statistics.median(r["wall_s"] for r in v) for n, v in runs.items()
                },
                "runs": runs,
            }
            if not a.no_memory:
                code, _ = variants(str(run), cores)[f"all_{cores}_cores"]
                hta = (
                    max(r["peak_pss_mb"] for r in runs["hta"])
                    if a.hta_sampled
                    else measure(HTA.format(run=str(run)))["peak_pss_mb"]
                )
                row["peak_pss_mb"] = {"tpscope": measure(code, env)["peak_pss_mb"], "hta": hta}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
            if a.out:  # after each tile: what is measured stays if a later one is cut short
                _write(a.out, rows, cores)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _write(out: Path, rows: list[dict], cores: int) -> None:
    import platform

    doc = {
        "command": "python3 benchmarks/reader_scaling.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {"cores": cores, "platform": platform.platform()},
        "python": platform.python_version(),
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""python3 memab.py RUN ROUNDS: interleaved runs of `tpscope analyze --json --no-cache` with every core: the parts
forked once the text is whole (default), forked as it lands (8 MiB steps), forked as it lands with rapidgzip on 8
threads (sampled for peak PSS), and one worker (not sampled). One JSON line per run."""

import json
import sys

sys.path.insert(0, "benchmarks")
from analyzer_speed import measure  # noqa: E402

run, rounds = sys.argv[1], int(sys.argv[2])
BODY = """
import tpscope.trace.read.parallel as par
if {variant!r} in ("as_it_lands", "as_it_lands_8_threads"):
    par.INFLATE_STEP_BYTES = 8 << 20
if {variant!r} == "as_it_lands_8_threads":
    class Eight(par._Inflater):
        def __init__(self, path, size, threads):
            super().__init__(path, size, 8)
    par._Inflater = Eight
from tpscope.cli import main
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["analyze", {run!r}, "--json", "--no-cache"] + {extra!r})
assert rc == 0
"""
for k in range(rounds):
    for variant in ("whole_first", "as_it_lands", "as_it_lands_8_threads", "one_worker"):
        extra = ["--workers", "1"] if variant == "one_worker" else []
        r = measure(
            BODY.format(run=run, variant=variant, extra=extra),
            {"TPSCOPE_CACHE_DIR": "/tmp/memab-cache"},
            sample_memory=variant != "one_worker",
        )
        print(
            json.dumps(
                {
                    "run": run,
                    "round": k,
                    "variant": variant,
                    "wall_s": round(r["wall_s"], 3),
                    "peak_pss_mb": r["peak_pss_mb"],
                }
            ),
            flush=True,
        )

"""torchrun in a process of its own, with its failure report turned into data.

`python -m tpscope.fusion.launch.supervisor REPORT TORCHRUN_ARGS...` runs what `python -m
torch.distributed.run TORCHRUN_ARGS...` runs. When a rank fails, torchrun stops the others (SIGTERM)
and reports the failure as a logging line per rank and a ChildFailedError traceback; here its
agent's logging is quiet and the failed ranks go to REPORT as JSON ({rank, local_rank, pid,
exitcode, timestamp} each, exitcode < 0 being a signal), which `launch.describe_failure` turns into
one line. Exit status: 0, 1 when a rank failed, 128 + N when stopped by signal N (its workers
stopped first). It gets SIGTERM when the launcher dies, however it died.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys

from tpscope.fusion.launch.lifetime import (
    LAUNCHER_PID_ENV,
    OUT_DIR_ENV,
    die_with_parent,
    parent_is_gone,
)


def main(argv: list[str]) -> int:
    report, torchrun_args = argv[0], argv[1:]
    # `tpscope run` dying (even by SIGKILL) is a SIGTERM here: torchrun then stops the workers
    die_with_parent(signal.SIGTERM)
    if parent_is_gone(os.environ.get(LAUNCHER_PID_ENV)):
        return 128 + signal.SIGTERM
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    # torchrun's per-rank "failed", "closing signal" and banner lines
    logging.disable(logging.ERROR)
    try:
        run(parse_args(torchrun_args))
    except SignalException as exc:  # torchrun stopped its workers on SIGTERM/SIGINT
        out_dir = os.environ.get(OUT_DIR_ENV)
        if out_dir:  # marked here too: when the launcher died, no one else will
            from tpscope.fusion.launch.out_dir import mark_incomplete

            mark_incomplete(
                out_dir,
                f"stopped by {signal.Signals(exc.sigval).name}: the launcher was "
                "stopped or died; torchrun stopped every worker",
            )
        return 128 + int(exc.sigval)
    except ChildFailedError as exc:
        failures = [
            {
                "rank": int(rank),
                "local_rank": f.local_rank,
                "pid": f.pid,
                "exitcode": f.exitcode,
                "timestamp": f.timestamp,
            }
            for rank, f in exc.failures.items()
        ]
        with open(report, "w", encoding="utf-8") as fh:
            json.dump(failures, fh)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

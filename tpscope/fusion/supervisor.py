"""torchrun in a process of its own, with its failure report turned into data.

`python -m tpscope.fusion.supervisor REPORT TORCHRUN_ARGS...` runs what `python -m
torch.distributed.run TORCHRUN_ARGS...` runs. When a rank fails, torchrun stops the others (SIGTERM)
and reports the failure as a logging line per rank and a ChildFailedError traceback; here its
agent's logging is quiet and the failed ranks go to REPORT as JSON ({rank, local_rank, pid,
exitcode, timestamp} each, exitcode < 0 being a signal), which `launch.describe_failure` turns into
one line. Exit status: 0, or 1 when a rank failed.
"""

from __future__ import annotations

import json
import logging
import sys


def main(argv: list[str]) -> int:
    report, torchrun_args = argv[0], argv[1:]
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    logging.disable(logging.ERROR)  # torchrun's per-rank "failed", "closing signal" and banner lines
    try:
        run(parse_args(torchrun_args))
    except ChildFailedError as exc:
        failures = [{"rank": int(rank), "local_rank": f.local_rank, "pid": f.pid, "exitcode": f.exitcode,
                     "timestamp": f.timestamp} for rank, f in exc.failures.items()]
        with open(report, "w", encoding="utf-8") as fh:
            json.dump(failures, fh)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

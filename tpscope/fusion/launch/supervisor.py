"""torchrun in a process of its own, with its failure report turned into data.

`python -m tpscope.fusion.launch.supervisor REPORT TORCHRUN_ARGS...` runs what `python -m
torch.distributed.run TORCHRUN_ARGS...` runs. When a rank fails, torchrun stops the others (SIGTERM)
and reports the failure as a logging line per rank and a ChildFailedError traceback; here its
agent's logging is quiet and the failed ranks go to REPORT as JSON ({rank, local_rank, pid,
exitcode, timestamp} each, exitcode < 0 being a signal), which `launch.describe_failure` turns into
one line. Exit status: 0, 1 when a rank failed, 128 + N when stopped by signal N (its workers
stopped first). It gets SIGTERM when the launcher dies, however it died.

Across nodes, a rendezvous that fails (its port taken by another program) or that no node answers
within the launcher's timeout ends here, before any worker starts: REPORT then holds
`{"error": LINE}` (the endpoint and the problem in one line) and the exit status is 2.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading

from tpscope.fusion.launch.lifetime import (
    LAUNCHER_PID_ENV,
    OUT_DIR_ENV,
    RDZV_ENDPOINT_ENV,
    RDZV_TIMEOUT_ENV,
    die_with_parent,
    parent_is_gone,
)

RDZV_ERROR_EXIT = 2


def _write(report: str, doc: object) -> None:
    with open(report, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)


def _one_line(exc: BaseException) -> str:
    """The first line of what went wrong: the inner error when torch wraps one."""
    inner = exc.__cause__ or exc
    text = str(inner).strip().splitlines()
    return text[0] if text else type(inner).__name__


def rendezvous_deadline(report: str, endpoint: str, timeout_s: float) -> threading.Timer:
    """Give up, in one line naming `endpoint`, when no worker has started `timeout_s` seconds from
    now (the rendezvous never completed: no other node, or an endpoint that never answers). The
    workers' start (torchrun's `_start_workers`, called once the rendezvous is done) stops it."""
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

    def give_up() -> None:
        _write(
            report,
            {
                "error": f"rendezvous at {endpoint}: no answer within {timeout_s:g} s "
                "(--rdzv-timeout-s); is every node's launcher started, and is the endpoint "
                "reachable from this node?"
            },
        )
        os._exit(RDZV_ERROR_EXIT)  # no worker has started: nothing else to stop

    timer = threading.Timer(timeout_s, give_up)
    timer.daemon = True
    start_workers = LocalElasticAgent._start_workers

    def started(self, worker_group):
        timer.cancel()
        return start_workers(self, worker_group)

    LocalElasticAgent._start_workers = started
    timer.start()
    return timer


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
    endpoint = os.environ.get(RDZV_ENDPOINT_ENV)
    if endpoint and os.environ.get(RDZV_TIMEOUT_ENV):
        rendezvous_deadline(report, endpoint, float(os.environ[RDZV_TIMEOUT_ENV]))
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
        _write(report, failures)
        return 1
    except Exception as exc:  # torchrun's agent failed before any worker ran: the rendezvous
        where = f"rendezvous at {endpoint}" if endpoint else "torchrun"
        _write(report, {"error": f"{where}: {_one_line(exc)}"})
        return RDZV_ERROR_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

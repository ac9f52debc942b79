"""Independent pieces of an analysis over forked processes: every result in order, each task run
once, in several processes only when asked for and safe."""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from tpscope.metrics.forked import map_forked


def _task(shared: np.ndarray):
    """A task that reads what this process built before forking and says where it ran (after a
    moment, so that the other workers take the next tasks)."""

    def task(k: int):
        time.sleep(0.05)
        return k, int(shared[k : k + 10].sum()), os.getpid()

    return task


def test_results_come_back_in_order_from_several_processes():
    shared = np.arange(1000)
    done = map_forked(_task(shared), 7, 3)
    assert [(k, s) for k, s, _ in done] == [(k, sum(range(k, k + 10))) for k in range(7)]
    pids = {pid for _, _, pid in done}
    assert len(pids) >= 2 and os.getpid() in pids  # this process took its share


def test_more_workers_than_tasks_fork_one_process_per_task():
    shared = np.arange(100)
    done = map_forked(_task(shared), 4, 9)
    assert [(k, s) for k, s, _ in done] == [(k, sum(range(k, k + 10))) for k in range(4)]
    pids = {pid for _, _, pid in done}
    assert len(pids) >= 2 and os.getpid() not in pids  # which worker takes which: the pool's


def test_one_worker_or_a_running_thread_keeps_every_task_here():
    shared = np.arange(100)
    assert {pid for _, _, pid in map_forked(_task(shared), 5, 1)} == {os.getpid()}
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert {pid for _, _, pid in map_forked(_task(shared), 5, 4)} == {os.getpid()}
    finally:
        stop.set()
        thread.join()

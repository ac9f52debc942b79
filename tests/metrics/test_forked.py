"""Independent pieces of an analysis over forked processes: every result in order, each task run
once, in several processes only when asked for and safe."""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import pytest

from tpscope.metrics.forked import Forked, ForkedCall, SharedTexts, map_forked


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


def test_a_failing_task_or_a_worker_that_dies_is_an_error_here():
    def fails(k: int):
        if k == 4:  # a forked worker's (this process takes 0 and 3)
            raise ValueError("bad step 4")
        return k

    def dies(k: int):
        if k == 2:
            os._exit(1)
        return k

    for task, message in ((fails, "ValueError: bad step 4"), (dies, "ended without")):
        try:
            map_forked(task, 5, 3)
        except RuntimeError as exc:
            assert message in str(exc)
        else:
            raise AssertionError("no error")


def test_each_worker_sends_its_results_through_its_own_process_once():
    """Every task runs exactly once over all processes (a task ran twice would append twice)."""
    done = map_forked(lambda k: (k, os.getpid()), 11, 4)
    assert [k for k, _ in done] == list(range(11))
    by_pid: dict[int, list[int]] = {}
    for k, pid in done:
        by_pid.setdefault(pid, []).append(k)
    assert len(by_pid) == 4 and by_pid[os.getpid()] == [0, 4, 8]


def test_workers_find_numpys_masked_arrays_loaded_before_they_are_forked():
    """np.unique, np.isin and np.median import numpy.ma on first use: loaded once before the
    fork, no worker loads it again (a fresh interpreter, where nothing has loaded it yet)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tpscope.metrics.forked import map_forked\n"
        "assert 'numpy.ma' not in sys.modules\n"
        "print(map_forked(lambda k: 'numpy.ma' in sys.modules, 3, 4))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[True, True, True]"


def test_this_process_works_while_the_workers_walk_then_gathers_them():
    """`Forked` begins the workers when made: they finish while this process sleeps as long as
    each of them takes, so gathering afterwards takes almost nothing."""
    with Forked(lambda k: time.sleep(0.3) or (k, os.getpid()), 3, 4) as forked:
        time.sleep(0.6)  # this process's own work, longer than any worker's task
        start = time.perf_counter()
        done = forked.results()
        gathered_s = time.perf_counter() - start
    assert [k for k, _ in done] == [0, 1, 2] and os.getpid() not in {p for _, p in done}
    assert gathered_s < 0.2  # the workers ran beside this process's work, not after it


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, ended but not yet reaped by whoever adopted it,
    does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False  # reaped since
    except OSError:
        return True  # no /proc: os.kill's answer


def test_leaving_before_gathering_ends_the_workers():
    forked = Forked(lambda k: time.sleep(30), 2, 3)
    pids = list(forked._procs)
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    start = time.perf_counter()
    with forked:
        pass  # an error before the results are asked for
    assert not any(_alive(p) for p in pids)  # killed and reaped
    assert time.perf_counter() - start < 5  # not left to sleep their 30 s


def test_a_worker_forks_workers_of_its_own():
    """A task may map over forked processes itself (a path's segments written in slices by the
    worker that walked it): the tasks' tasks run in processes of their own."""

    def inner(k: int):
        return k * 10, os.getpid()

    def outer(k: int):
        return k, os.getpid(), map_forked(inner, 3, 3)

    done = map_forked(outer, 2, 2)
    assert [k for k, _, _ in done] == [0, 1]
    for _, pid, inner_done in done:
        assert [v for v, _ in inner_done] == [0, 10, 20]
        assert len({p for _, p in inner_done}) == 3 and pid in {p for _, p in inner_done}


def test_a_forked_call_runs_beside_this_process_and_its_value_comes_back():
    """`ForkedCall` runs its task in a process of its own while this one works, and its value
    (large: through memory, not a pipe) is taken once it is done."""
    shared = np.arange(2_000_000)
    call = ForkedCall(lambda: (os.getpid(), shared * 2, time.sleep(0.3)))
    time.sleep(0.5)  # this process's own work, longer than the task
    assert call.done()
    start = time.perf_counter()
    pid, doubled, _ = call.result()
    assert time.perf_counter() - start < 0.2  # it ran beside this process, not after it
    assert pid != os.getpid() and np.array_equal(doubled, np.arange(2_000_000) * 2)


def test_a_forked_call_that_fails_is_an_error_here_and_one_never_taken_is_ended():
    def fails():
        raise ValueError("bad stretch")

    with pytest.raises(RuntimeError, match="ValueError: bad stretch"):
        ForkedCall(fails).result()
    slow = ForkedCall(lambda: time.sleep(30))
    pid = slow._pid
    assert _alive(pid) and not slow.done()
    slow.close()  # an error left the walk: the process is not wanted
    assert not _alive(pid)


def test_a_forked_call_runs_here_while_a_thread_runs():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        call = ForkedCall(os.getpid)
        assert call.done() and call.result() == os.getpid()
    finally:
        stop.set()
        thread.join()


def test_shared_texts_written_by_forked_processes_are_read_here():
    texts = ["", "a" * 3_000_000, "é€ and \u2028 ascii", '{"k": [1, 2]}']
    with SharedTexts(len(texts)) as shared:
        pids = map_forked(lambda k: shared.write(k, texts[k]) or os.getpid(), 4, 4)
        assert pids[0] == os.getpid() and os.getpid() not in pids[1:]  # three written elsewhere
        assert [shared.read(k) for k in range(4)] == texts


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_end_when_the_analyzing_process_is_killed():
    """An analysis killed while its workers walk (SIGKILL: no clean-up runs) leaves none running."""
    import signal
    import subprocess

    code = (
        "import os, sys, time\n"
        "from tpscope.metrics.forked import Forked\n"
        "forked = Forked(lambda k: time.sleep(60), 3, 4)\n"
        "print(*forked._procs, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 3 and all(_alive(p) for p in pids)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)

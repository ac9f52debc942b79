"""One rank's graph for the critical path, built in one thread and in two (`rank_graph`'s pieces,
host names beside the rest), fifteen times each in one process: python3 rank_graph_threads.py RUN
Prints per Python switch interval the median and fastest seconds of each."""

import sys
import threading
import time
from pathlib import Path

import numpy as np

from tpscope.metrics import critical_path as cp
from tpscope.metrics import host_names as hn
from tpscope.trace import run_folder as rf

path = sorted(Path(sys.argv[1]).glob("*.json*"))[0]
r = rf.load_rank_file(path, workers=1)


def rest():
    g = r.gpu
    start, end = g.start_ns, g.end_ns
    _, launch_call = cp.cpu_threads(r, g, end, 0, start)
    lane_prev = cp.lane_predecessors(g.lane, start)
    event_pred = cp.stream_wait_predecessors(g, r.waits, end)
    other_prev = cp.other_lane_predecessors(g.lane, start, end)
    ready = np.where(lane_prev >= 0, end[np.maximum(lane_prev, 0)], -1)
    holder = cp.resource_holders(g.lane, start, end, ready)
    return [
        cp._ints(x) for x in (start, end, launch_call, lane_prev, event_pred, other_prev, holder)
    ]


def serial():
    hn.host_names(r, 0)
    rest()


def threaded():
    t = threading.Thread(target=lambda: hn.host_names(r, 0))
    t.start()
    rest()
    t.join()


for interval in (0.005, 0.0005, 0.0001):
    sys.setswitchinterval(interval)
    for name, build in (("one thread", serial), ("two threads", threaded)):
        times = []
        for _ in range(15):
            t = time.perf_counter()
            build()
            times.append(time.perf_counter() - t)
        print(
            f"switch interval {interval}: {name}: median {np.median(times):.4f} s, fastest {min(times):.4f} s"
        )
